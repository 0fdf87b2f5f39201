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
from inboxsim.scenarios.load import (
    LoadedScenario,
    library_key,
    library_paths,
    load_scenario,
    load_text,
    select_library,
)
from inboxsim.scenarios.render import write_scenario
from inboxsim.scenarios.runner import default_monitor, run_scenario
from inboxsim.trace.record import step_wire

LIBRARY = library_paths()
IDS = [p.stem for p in LIBRARY]
TOPICS = (
    "admission",
    "retry",
    "promotion",
    "barrier",
    "interrupt",
    "crash",
    "fork",
    "revert",
    "synthetic",
    "wake",
)
MONITOR = default_monitor()


def _load(path: Path) -> LoadedScenario:
    return load_scenario(path)


def _text(body: str, header: str = 'name = "t"\nsource = "test"\n') -> str:
    return header + body


# --- the library -----------------------------------------------------------------


def test_library_has_over_100_uniquely_named_scenarios_in_topic_folders() -> None:
    names = [_load(p).name for p in LIBRARY]
    assert len(names) > 100
    assert len(set(names)) == len(names)
    assert names == IDS, "each file is named after its scenario"
    topics = {library_key(p).partition("/")[0] for p in LIBRARY}
    assert topics == set(TOPICS), "every scenario sits in one topic folder"


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
    own = loaded.scenario.policy
    breaking = {
        name
        for name, policy in PRESETS.items()
        if not run_scenario(loaded, None if name == own else policy).passed
    }
    assert breaking == set(loaded.scenario.breaks_under)


@pytest.mark.parametrize("path", LIBRARY, ids=IDS)
def test_library_scenario_names_its_breaker(path: Path) -> None:
    # A scenario that cannot fail is not a test: tests/test_breakers.py runs it
    # against this breaker and checks it fails at the named step.
    scenario = _load(path).scenario
    assert scenario.breaker is not None, "a library scenario names its breaker"
    assert scenario.source.strip()


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (
            'breaker = { name = "queue-batch", step = 2, reason = "r" }\n',
            r"breaker.step = 2: the scenario has 1 steps",
        ),
        (
            'breaker = { name = "g5", step = 1, reason = "r" }\n',
            r"preset 'g5' must be listed in breaks_under",
        ),
        ('breaker = { name = "x", step = 1 }\n', r"breaker.reason: missing required field"),
        (
            '[[carries]]\ntest = "t"\nsection = "6.1"\nkind = "analog"\n',
            r"an analog citation needs a note saying what it does differently",
        ),
        ('[[carries]]\ntest = "t"\nsection = "7.1"\n', r"carries\[0\].section"),
    ],
)
def test_breaker_and_citations_are_checked(header: str, expected: str) -> None:
    with pytest.raises(HarnessError, match=expected):
        load_text(_text(header + '[[step]]\nop = "create"\nsession = "s1"\n'))


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
    result = run_scenario(loaded, monitor=None)
    assert not result.passed and "not available" in str(result.failures[0])


# --- the command -------------------------------------------------------------------


def test_run_library_exits_0_with_a_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--library"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["scenario", "policy", "steps", "result"]
    assert out[-1].startswith(f"{len(LIBRARY)} passed, 0 failed")


def test_selectors_name_a_scenario_a_topic_folder_or_a_glob() -> None:
    keys = lambda paths: [library_key(p) for p in paths]  # noqa: E731
    assert keys(select_library(["queue-fifo"])) == ["promotion/queue-fifo"]
    barrier = keys(select_library(["barrier"]))
    assert barrier and all(k.startswith("barrier/") for k in barrier)
    assert keys(select_library(["barrier/"])) == barrier
    assert keys(select_library(["retry/seed-*"])) == ["retry/seed-retry"]
    seeds = keys(select_library(["seed-*", "seed-send"]))  # each file once, in library order
    assert seeds == sorted(seeds, key=lambda k: keys(LIBRARY).index(k)) and len(seeds) >= 5
    with pytest.raises(HarnessError, match=r"no library scenario matches 'nope'.*topic folder"):
        select_library(["nope"])


def test_run_takes_a_folder_a_glob_and_library_selectors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from inboxsim.commands.run import expand

    folder = tmp_path / "mine" / "deep"
    folder.mkdir(parents=True)
    for name in ("a", "b"):
        text = _load(next(p for p in LIBRARY if p.stem == "seed-send")).origin
        (folder / f"{name}.toml").write_text(Path(text).read_text(), encoding="utf-8")
    assert expand(str(tmp_path / "mine")) == [str(folder / "a.toml"), str(folder / "b.toml")]
    assert expand(str(tmp_path / "mine" / "**" / "b.toml")) == [str(folder / "b.toml")]
    assert [Path(p).stem for p in expand("interrupt")] == [
        p.stem for p in LIBRARY if library_key(p).startswith("interrupt/")
    ]
    assert main(["run", "wake/forced-*", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [s["name"] for s in doc["scenarios"]] == ["forced-resume"]
    assert main(["run", "no-such-thing"]) == 2
    assert "no such scenario file or folder; no library scenario matches" in (
        capsys.readouterr().err
    )
    assert main(["run", str(tmp_path / "missing.toml")]) == 2


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
    policy = loaded.scenario.policy  # a preset, or a policy file beside the scenario
    if policy.endswith(".toml"):
        policy = str((path.parent / policy).resolve())
    text = write_scenario(
        first.trace.steps,
        policy,
        name=loaded.name,
        step_limit=loaded.scenario.step_limit,
        breaker=("round-trip", 1, "rendered for the test"),
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
    rerun = run_scenario(load_text(text, f"seed-{seed}.toml"), monitor=None)

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
    files = [
        "scenarios/library/interrupt/interrupt-keeps-pending.toml",
        "scenarios/library/promotion/seed-queue.toml",
    ]
    held = _cli_run(*files, "--adapter", sqlite)
    assert held.returncode == 0, held.stdout + held.stderr
    broken = _cli_run(*files, "--adapter", f"{sqlite} --mutant interrupt-clears-inbox")
    assert broken.returncode == 1 and "interrupt-keeps-pending" in broken.stdout


def test_run_reports_an_adapter_protocol_error_as_a_failed_scenario() -> None:
    bad = f"{sys.executable} tests/adapters/bad_json.py"
    done = _cli_run(
        "scenarios/library/promotion/seed-send.toml", "--adapter", bad, "--adapter-timeout", "5"
    )
    assert done.returncode == 1
    assert "protocol error" in done.stdout and "not valid JSON" in done.stdout
