"""The scenario library, its loader, runner and renderer, and ``inboxsim run``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from inboxsim.cli import main
from inboxsim.errors import HarnessError
from inboxsim.model import PRESETS
from inboxsim.scenarios.load import LoadedScenario, library_paths, load_scenario, load_text
from inboxsim.scenarios.render import write_scenario
from inboxsim.scenarios.runner import default_monitor, run_scenario
from inboxsim.sim.trace import step_wire

LIBRARY = library_paths()
IDS = [p.stem for p in LIBRARY]
MONITOR = default_monitor()


def _load(path: Path) -> LoadedScenario:
    return load_scenario(path)


def _text(body: str, header: str = 'name = "t"\nsource = "test"\n') -> str:
    return header + body


# --- the library -----------------------------------------------------------------


def test_library_has_at_least_25_uniquely_named_scenarios() -> None:
    names = [_load(p).name for p in LIBRARY]
    assert len(names) >= 25
    assert len(set(names)) == len(names)
    assert names == IDS, "each file is named after its scenario"


@pytest.mark.parametrize("path", LIBRARY, ids=IDS)
def test_library_scenario_passes_on_its_policy(path: Path) -> None:
    result = run_scenario(_load(path))
    assert result.passed, "\n".join(map(str, result.failures))
    assert result.invariants_checked and MONITOR is not None


@pytest.mark.parametrize("path", LIBRARY, ids=IDS)
def test_library_scenario_fails_exactly_under_its_breaking_policies(path: Path) -> None:
    # Exactly: a policy that breaks the scenario but is not listed is a
    # finding the file should record, and a listed one that passes is a claim
    # the library cannot back.
    loaded = _load(path)
    breaking = {name for name, policy in PRESETS.items() if not run_scenario(loaded, policy).passed}
    assert breaking == set(loaded.scenario.breaks_under)


@pytest.mark.parametrize("path", LIBRARY, ids=IDS)
def test_library_scenario_can_fail(path: Path) -> None:
    scenario = _load(path).scenario
    assert can_fail(scenario.breaks_under, scenario.planted_bug), (
        "a scenario that cannot fail is not a test"
    )
    assert scenario.source.strip()


def can_fail(breaks_under: list[str], planted_bug: object) -> bool:
    return bool(breaks_under) or planted_bug is not None


def test_can_fail_rule_rejects_a_scenario_with_neither() -> None:
    loaded = load_text(_text('[[step]]\nop = "create"\nsession = "s1"\n'))
    assert not can_fail(loaded.scenario.breaks_under, loaded.scenario.planted_bug)


def test_every_missing_and_unknown_field_is_named_with_its_file() -> None:
    """Was "name: missing required field (and 1 more)"."""
    with pytest.raises(HarnessError) as caught:
        load_text('[[step]]\nop = "create"\nsession = "s1"\n', "bad.toml")
    assert str(caught.value) == "bad.toml: missing required fields: name, source"
    text = 'nmae = "x"\nstep_limit = "a"\n[[step]]\nop = "create"\nsession = "s1"\nbogus = 2\n'
    with pytest.raises(HarnessError) as caught:
        load_text(text, "bad.toml")
    assert str(caught.value) == (
        "bad.toml: missing required fields: name, source; unknown fields: step 1 (bogus) "
        "(line 6), nmae (line 1) (not part of the scenario format); step_limit (line 2): "
        "Input should be a valid integer, got 'a'"
    )


def test_planted_bug_needs_a_reason() -> None:
    with pytest.raises(HarnessError, match=r"planted_bug.reason: missing required field"):
        load_text(_text('planted_bug = { name = "x" }\n[[step]]\nop = "create"\nsession = "s1"\n'))


# --- malformed files: the file, the line or field, what was expected ------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            'name = "t"\n[[step]]\nop = "create"\nsession = "s1"\n',
            r"bad\.toml: source: missing required field",
        ),
        (
            _text('step_limit = "4"\n[[step]]\nop = "create"\nsession = "s1"\n'),
            r"bad\.toml:3: step_limit: Input should be a valid integer, got '4'",
        ),
        (
            _text('[[step]]\nop = "create"\nsession = "s1"\n\n[[step]]\nop = "promt"\n'),
            r"bad\.toml:8: step 2 \(op\): unknown op 'promt'; expected one of create, prompt",
        ),
        ('name = "t"\nsource = "x\n', r"bad\.toml: not valid TOML: .*\(at line 2, column \d+\)"),
        (
            _text('[[step]]\nop = "prompt"\nsession = "s1"\ntext = "a"\nchild = "f1"\n'),
            r"bad\.toml:7: step 1 \(child\): op 'prompt' has no field 'child'",
        ),
        (
            _text('[[step]]\nop = "prompt"\nsession = "s1"\ntext = "a"\nexpect_pending = "m1"\n'),
            r"bad\.toml:7: step 1 \(expect_pending\): Input should be a valid list",
        ),
        (_text('[[step]]\nop = "answer"\nfinish = "stop"\n'), r"names its call by 'session'"),
        (_text('[[step]]\nop = "prompt"\nsession = "s1"\n'), r"op 'prompt' needs 'text'"),
        (
            _text('[[step]]\nop = "create"\nsession = "s1"\nbogus = 1\n'),
            r"step 1 \(bogus\): unknown field",
        ),
        (
            _text('breaks_under = ["g9"]\n[[step]]\nop = "create"\nsession = "s1"\n'),
            r"'g9' is not a policy preset",
        ),
        (
            _text('policy = "g9"\n[[step]]\nop = "create"\nsession = "s1"\n'),
            r"policy: unknown policy 'g9'",
        ),
        (
            _text('[[step]]\nop = "create"\nsession = "s1"\nexpect_error = "oops"\n'),
            r"'oops' is not one of",
        ),
        (
            _text(
                '[[step]]\nop = "create"\nsession = "s1"\nnow = 5\n[[step]]\nkill = true\nnow = 3\n'
            ),
            r"goes back",
        ),
        (
            _text('[[step]]\nop = "create"\nsession = "s1"\nexpect_same_receipt_as = 1\n'),
            r"must name an earlier op step",
        ),
    ],
    ids=[
        "missing-field",
        "wrong-type",
        "unknown-op",
        "bad-toml",
        "stray-field",
        "wrong-expectation-type",
        "answer-without-call",
        "missing-op-field",
        "unknown-key",
        "unknown-breaking-policy",
        "unknown-policy",
        "unknown-error-code",
        "time-backwards",
        "receipt-ref-forward",
    ],
)
def test_malformed_file_is_a_one_line_harness_error_exit_2(
    body: str, expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(HarnessError, match=expected):
        load_scenario(path)
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("inboxsim: error: ") and "bad.toml" in err[0]


def test_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(tmp_path / "nope.toml")]) == 2
    assert "cannot read scenario file" in capsys.readouterr().err


def test_run_without_files_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run"]) == 2
    assert "--library" in capsys.readouterr().err


def test_unknown_override_policy_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--library", "--policy", "nope"]) == 2
    assert "unknown policy 'nope'" in capsys.readouterr().err


# --- the runner --------------------------------------------------------------------


def test_failures_name_their_step() -> None:
    loaded = load_text(
        _text(
            '[[step]]\nop = "create"\nsession = "s1"\n'
            '[[step]]\nop = "prompt"\nsession = "s1"\ninput = "m1"\ntext = "a"\nresume = false\n'
            'expect_pending = ["m2"]\nexpect_events = ["promoted"]\n'
            '[[step]]\nop = "prompt"\nsession = "s1"\ninput = "m1"\ntext = "b"\nexpect_ok = true\n'
        )
    )
    result = run_scenario(loaded)
    assert not result.passed
    assert [f.step for f in result.failures] == [2, 2, 3]
    assert "expected pending ['m2'] in s1, got ['m1']" in str(result.failures[0])
    assert "expected success, got error prompt_conflict" in str(result.failures[2])


def test_answer_without_open_call_fails_at_that_step_and_stops() -> None:
    loaded = load_text(
        _text(
            '[[step]]\nop = "create"\nsession = "s1"\n'
            '[[step]]\nop = "answer"\nsession = "s1"\nfinish = "stop"\n'
            '[[step]]\nop = "resume"\nsession = "s1"\n'
        )
    )
    result = run_scenario(loaded)
    assert [str(f) for f in result.failures] == ["step 2: answer: session 's1' has no open call"]
    assert result.steps_run == 2


def test_stale_call_is_sent_literally() -> None:
    loaded = load_text(
        _text(
            '[[step]]\nop = "answer"\ncall = "call-0"\nfinish = "stop"\n'
            'expect_error = "invalid_request"\n'
        )
    )
    assert run_scenario(loaded).passed


def test_trace_records_decisions_and_restarts() -> None:
    result = run_scenario(_load(next(p for p in LIBRARY if p.stem == "crash-keeps-inbox")))
    decisions = [s.decision for s in result.trace.steps]
    assert decisions[0] == "hello"
    assert "scenario step 5" in decisions and "scenario step 5 restart" in decisions
    kill = result.trace.steps[decisions.index("scenario step 5")]
    assert kill.kind == "crash" and kill.request is None
    assert {s.phase for s in result.trace.steps} == {"safety"}


def test_run_is_deterministic() -> None:
    loaded = _load(LIBRARY[0])
    assert run_scenario(loaded).trace_hash == run_scenario(loaded).trace_hash


def test_expect_violation_passes_only_when_that_invariant_is_violated() -> None:
    loaded = load_text(
        _text('expect_violation = "no-such-invariant"\n[[step]]\nop = "create"\nsession = "s1"\n')
    )
    result = run_scenario(loaded)
    assert [f.invariant for f in result.failures] == ["no-such-invariant"]


def test_expect_violation_without_checkers_is_a_failure() -> None:
    loaded = load_text(_text('expect_violation = "x"\n[[step]]\nop = "create"\nsession = "s1"\n'))
    result = run_scenario(loaded, monitor=False)
    assert not result.passed and "not available" in str(result.failures[0])


# --- the command -------------------------------------------------------------------


def test_run_library_exits_0_with_a_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--library"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["scenario", "policy", "steps", "result"]
    assert out[-1].startswith(f"{len(LIBRARY)} passed, 0 failed")


def test_run_policy_override_fails_with_exit_1_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    path = next(p for p in LIBRARY if p.stem == "seed-retry")
    assert main(["run", str(path), "--policy", "g5", "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["failed"] == 1 and doc["policy_override"] == "g5"
    (scenario,) = doc["scenarios"]
    assert scenario["policy"] == "g5" and not scenario["passed"]
    assert scenario["failures"][0]["step"] == 4
    assert "prompt_conflict" in scenario["failures"][0]["message"]


# --- rendering traces back to scenarios ------------------------------------------------


@pytest.mark.parametrize("path", LIBRARY, ids=IDS)
def test_render_load_run_round_trip_keeps_the_trace_hash(path: Path) -> None:
    loaded = _load(path)
    first = run_scenario(loaded)
    text = write_scenario(
        first.trace.steps,
        first.policy,
        name=loaded.name,
        step_limit=loaded.scenario.step_limit,
        planted_bug=("round-trip", "rendered for the test"),
    )
    second = run_scenario(load_text(text, "rendered.toml"))
    assert second.trace_hash == first.trace_hash


def test_render_maps_generated_ids_copies_and_calls() -> None:
    loaded = load_text(
        _text(
            '[[step]]\nop = "create"\nsession = "s1"\n'
            '[[step]]\nop = "prompt"\nsession = "s1"\ntext = "a"\n'
            '[[step]]\nop = "answer"\nsession = "s1"\nfinish = "stop"\n'
            '[[step]]\nop = "fork"\nsession = "s1"\nchild = "f1"\n'
            '[[step]]\nop = "revert_stage"\nsession = "f1"\nmessage = "copy:gen:1"\n'
            "expect_ok = true\n"
            '[[step]]\nop = "revert_stage"\nsession = "s1"\nmessage = "gen:1"\n'
            '[[step]]\nop = "prompt"\nsession = "f1"\ntext = "b"\nresume = false\n'
            "[[step]]\nkill = true\nnow = 20\n"
            '[[step]]\nop = "fork"\nsession = "f1"\nchild = "f2"\nbefore = "gen:2"\n'
            'expect_error = "message_not_found"\n'
        )
    )
    first = run_scenario(loaded)
    assert first.passed, first.failures
    text = write_scenario(first.trace.steps, "g4")
    assert 'message = "gen:1"' in text and 'message = "copy:gen:1"' in text
    assert "kill = true\nnow = 20" in text
    assert 'op = "answer"\nsession = "s1"' in text and "call-" not in text
    second = run_scenario(load_text(text))
    assert second.trace_hash == first.trace_hash


def test_render_writes_copies_symbolically() -> None:
    loaded = load_text(
        _text(
            '[[step]]\nop = "create"\nsession = "s1"\n'
            '[[step]]\nop = "prompt"\nsession = "s1"\ninput = "m1"\ntext = "a"\n'
            '[[step]]\nop = "answer"\nsession = "s1"\nfinish = "stop"\n'
            '[[step]]\nop = "fork"\nsession = "s1"\nchild = "f1"\n'
            '[[step]]\nop = "revert_stage"\nsession = "f1"\nmessage = "copy:m1"\nexpect_ok = true\n'
        )
    )
    first = run_scenario(loaded)
    assert first.passed, first.failures
    text = write_scenario(first.trace.steps, "g4")
    assert 'message = "copy:m1"' in text
    assert run_scenario(load_text(text)).trace_hash == first.trace_hash


class _NoChecks:
    exercised: set[str] = set()

    def __init__(self, policy: object, hello: object) -> None:
        pass

    def feed(self, step: object) -> list[object]:
        return []

    def finish(self, liveness: bool) -> list[object]:
        return []


@pytest.mark.parametrize("seed", range(0, 40))
def test_simulator_traces_round_trip_through_scenario_files(seed: int) -> None:
    # Swarm runs reach generated IDs, fork copies, stale answers, failpoints and
    # kills: rerunning the rendered file must send the same requests and see
    # the same replies and observations (decision labels differ by design).
    from inboxsim.sim.rng import seeded
    from inboxsim.sim.run import RunOptions, run

    policy = PRESETS["g4"]
    original = run(
        policy,
        RunOptions(ops=60),
        seeded(seed),
        seed=seed,
        monitor=_NoChecks,
        violation=lambda *a: None,
    )
    text = write_scenario(original.trace.steps, policy)
    rerun = run_scenario(load_text(text, f"seed-{seed}.toml"), monitor=False)

    def essence(steps: tuple[object, ...]) -> list[dict[str, object]]:
        out = []
        for step in steps:
            wire = step_wire(step)  # type: ignore[arg-type]
            del wire["decision"], wire["phase"]
            out.append(wire)
        return out

    assert essence(rerun.trace.steps) == essence(original.trace.steps)


# --- run --adapter: the library against a process ----------------------------------

_REPO = Path(__file__).resolve().parent.parent


def _cli_run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "inboxsim.cli", "run", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=_REPO,
    )


def test_run_against_the_sqlite_adapter_passes_and_a_mutant_fails() -> None:
    sqlite = f"{sys.executable} impls/sqlite_inbox/adapter.py"
    files = ["scenarios/library/interrupt-keeps-pending.toml", "scenarios/library/seed-queue.toml"]
    held = _cli_run(*files, "--adapter", sqlite)
    assert held.returncode == 0, held.stdout + held.stderr
    broken = _cli_run(*files, "--adapter", f"{sqlite} --mutant interrupt-clears-inbox")
    assert broken.returncode == 1 and "interrupt-keeps-pending" in broken.stdout


def test_run_reports_an_adapter_protocol_error_as_a_failed_scenario() -> None:
    bad = f"{sys.executable} tests/adapters/bad_json.py"
    done = _cli_run("scenarios/library/seed-send.toml", "--adapter", bad, "--adapter-timeout", "5")
    assert done.returncode == 1
    assert "protocol error" in done.stdout and "not valid JSON" in done.stdout
