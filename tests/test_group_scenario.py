"""The scenario file's ``group`` step (docs/scenarios.md, "Concurrent groups"):
it validates with one clear line, replays on the model, on the model adapter
and on the SQLite inbox (``inboxsim run FILE --target sqlite``, a planted race
bug caught by a fixed schedule and not without it), replays to the same hash,
and a failing group found by the driver is written as a minimal file that
fails again.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from inboxsim.commands.run import adapter_factory, run_all
from inboxsim.conformance.command_lines import target_command
from inboxsim.errors import HarnessError
from inboxsim.model import G4, Create, Prompt, Synthetic
from inboxsim.scenarios.load import load_text
from inboxsim.search.group_scenario import Recorder, run_group_scenario, scenario_text
from inboxsim.search.group_shrink import shrink, write_group_repro
from inboxsim.search.groups import GroupDriver
from inboxsim.targets.target import ModelTarget
from tests.group_scenario_helpers import RACE, RACING, SwappedReceipts, retries

# --- the schema -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("resume = false }", "resume = false, now = 3 }"), "takes no 'now'"),
        (("schedule =", "expect_ok = true\nschedule ="), "op 'group' has no field 'expect_ok'"),
        (
            ("resume = false },\n]", "resume = false, crash_at = 'after_admit' },\n]"),
            None,  # one failpoint is fine
        ),
        (
            ("resume = false }", "resume = false, crash_at = 'after_admit' }"),
            "at most one member with 'crash_at'",
        ),
        (('op = "group"', 'op = "prompt"'), "'requests' and 'schedule' belong to"),
        (('session = "s1"\n', 'session = "s1"\nexpect_ok = true\n'), "takes no expectations"),
        (("schedule = [", "schedule = [-1, "), "non-negative"),
    ],
)
def test_a_group_step_validates_with_one_clear_line(
    change: tuple[str, str], message: str | None
) -> None:
    text = retries(RACING).replace(*change)
    assert text != retries(RACING)
    if message is None:
        load_text(text)
        return
    with pytest.raises(HarnessError) as caught:
        load_text(text, "f.toml")
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_a_group_needs_members() -> None:
    text = retries(RACING).split("requests")[0] + "requests = []\n"
    with pytest.raises(HarnessError, match="needs 'requests'"):
        load_text(text)


# --- replay -----------------------------------------------------------------------------


def test_a_group_file_replays_on_the_model_to_the_same_hash() -> None:
    loaded = load_text(retries(RACING))
    first, again = run_group_scenario(loaded), run_group_scenario(loaded)
    assert first.passed and first.steps_run == 2
    assert first.trace_hash == again.trace_hash
    other = run_group_scenario(load_text(retries([0, 0, 0])))
    assert other.passed and other.trace_hash != first.trace_hash  # another interleaving


def sqlite(tmp_path: Path, mutant: str | None, monkeypatch: pytest.MonkeyPatch) -> Any:
    if mutant is not None:
        monkeypatch.setenv("INBOXSIM_MUTANT", mutant)
    argv = target_command(None, "sqlite", None, 10)[0]
    work = tmp_path / (mutant or "correct")
    work.mkdir()
    return adapter_factory(shlex.join(argv), 10, work)


def test_the_sqlite_inbox_replays_a_racing_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "race.toml"
    path.write_text(retries(RACING))
    loaded = load_text(path.read_text(), str(path))
    correct, _ = run_all(
        [loaded], None, progress=False, target_factory=sqlite(tmp_path, None, monkeypatch)
    )
    assert correct[0].passed, correct[0].failures
    serial = load_text(retries([0, 0, 0, 0]))  # one retry runs whole before the other
    buggy = sqlite(tmp_path, RACE, monkeypatch)
    assert run_group_scenario(serial, G4, buggy).passed
    caught = run_group_scenario(loaded, G4, buggy)
    assert not caught.passed
    why = caught.failures[0].message
    assert caught.failures[0].step == 2 and why.startswith("not linearizable")
    assert "r1's reply: model receipt a (user, steer), target internal" in why
    assert "the target's interleaving: r1 start, r0 start, r0 begin, r1 begin" in why


def test_a_kill_inside_a_group_replays_through_the_model_adapter(tmp_path: Path) -> None:
    text = (
        retries(RACING)
        .replace("resume = false },\n]", "resume = false, crash_at = 'after_admit' },\n]")
        .replace("resume = false", "resume = true")
    )
    text += '\n[[step]]\nop = "prompt"\nsession = "s1"\ninput = "b"\ntext = "t"\n'
    argv = [sys.executable, "-m", "inboxsim.targets.model_adapter", "--no-fsync", "--groups"]
    (tmp_path / "w").mkdir()
    factory = adapter_factory(shlex.join(argv), 10, tmp_path / "w")
    result = run_group_scenario(load_text(text), G4, factory)
    assert result.passed, result.failures
    assert result.steps_run == 3


# --- writing and shrinking ---------------------------------------------------------------


def test_the_recorder_writes_answers_by_session_and_groups_as_tables() -> None:
    recorder = Recorder(GroupDriver(ModelTarget(G4, 4), G4, 4))
    recorder.run([Create(1, session="s1")])
    recorder.run([Prompt(2, session="s1", input="a", text="a")])
    call = recorder.driver.state.open_calls()[0].call
    from inboxsim.model import Answer

    recorder.run(
        [Answer(7, call=call, finish="stop"), Synthetic(7, session="s1", text="n")], [1, 0]
    )
    recorder.kill()
    text = scenario_text(recorder.tables, "g4", 4)
    assert '{ op = "answer", session = "s1", finish = "stop" }' in text
    assert 'now = 7\nop = "group"\nschedule = [1, 0]' in text
    assert "kill = true" in text
    assert run_group_scenario(load_text(text)).passed


def test_shrink_drops_steps_members_and_schedule_tails() -> None:
    tables = [
        {"op": "create", "now": 1, "session": "s1"},
        {"op": "create", "now": 2, "session": "s2"},
        {
            "op": "group",
            "now": 3,
            "schedule": [5, 6, 7, 8],
            "requests": [{"op": "calls"}, {"op": "log", "session": "s1"}, {"op": "calls"}],
        },
    ]
    tried: list[list[dict[str, Any]]] = []

    def fails(t: list[dict[str, Any]]) -> bool:  # needs s1's create and the log member
        tried.append(t)
        return any(x.get("session") == "s1" and x["op"] == "create" for x in t) and any(
            m.get("op") == "log" for x in t for m in x.get("requests", [x])
        )

    assert shrink(tables, fails) == [tables[0], {"op": "log", "now": 3, "session": "s1"}]
    assert all(t and t[-1]["now"] == 3 for t in tried)  # the failing step is never deleted
    assert tried[0] == tables[2:]  # earlier steps first, the biggest cut first


def test_shrink_finds_two_earlier_steps_apart_and_keeps_within_its_attempts() -> None:
    tables = [{"op": "create", "now": k, "session": f"s{k}"} for k in range(9)]
    calls = 0

    def fails(t: list[dict[str, Any]]) -> bool:  # needs the steps 3 and 8
        nonlocal calls
        calls += 1
        return [3, 8] == [x["now"] for x in t if x["now"] in (3, 8)]

    assert [t["now"] for t in shrink(tables, fails)] == [3, 8]
    calls = 0
    assert len(shrink(tables, fails, attempts=3)) > 2 and calls == 3


def swapped(policy: Any, step_limit: int) -> SwappedReceipts:
    return SwappedReceipts(policy, step_limit)


def test_a_failing_group_is_written_as_a_minimal_file_that_fails_again(tmp_path: Path) -> None:
    recorder = Recorder(GroupDriver(swapped(G4, 4), G4, 4))
    recorder.run([Create(1, session="s1")])
    recorder.run([Create(2, session="s2")])
    recorder.run([Prompt(3, session="s2", input="z", text="z")])
    ops = [Prompt(5, session="s1", input=x, text=x, resume=False) for x in ("a", "b", "c")]
    assert not recorder.run(ops, [2, 0, 1]).legal
    path = write_group_repro(recorder, G4, 4, swapped, tmp_path / "repro.toml")
    loaded = load_text(path.read_text(), str(path))
    steps = loaded.scenario.step
    assert [s.op for s in steps] == ["create", "group"]  # s2's steps dropped
    assert steps[1].requests is not None and len(steps[1].requests) == 2  # one member dropped
    assert path.read_text().startswith("# not linearizable")
    assert not run_group_scenario(loaded, G4, swapped).passed
    assert run_group_scenario(loaded).passed  # the model itself is fine with it


def test_run_replays_a_group_file_on_a_shipped_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from inboxsim.cli import main

    path = tmp_path / "race.toml"
    path.write_text(retries(RACING))
    assert main(["run", str(path), "--target", "sqlite"]) == 0
    monkeypatch.setenv("INBOXSIM_MUTANT", RACE)
    assert main(["run", str(path), "--target", "sqlite"]) == 1
    assert "racing-retries: step 2: not linearizable" in capsys.readouterr().out
    assert main(["run", str(path), "--target", "nowhere"]) == 2


def test_a_target_without_groups_cannot_replay_a_group_file(tmp_path: Path) -> None:
    """A run that could not test is not a pass: one line, exit 2."""
    argv = [sys.executable, "-m", "inboxsim.targets.model_adapter", "--no-fsync"]  # no --groups
    (tmp_path / "w").mkdir()
    factory = adapter_factory(shlex.join(argv), 10, tmp_path / "w")
    with pytest.raises(
        HarnessError, match=r"f\.toml: step 2: .* does not list the feature 'group'"
    ):
        run_group_scenario(load_text(retries(RACING), "f.toml"), G4, factory)


def test_the_step_by_step_runner_refuses_a_group_file_in_one_line() -> None:
    from inboxsim.scenarios.runner import run_scenario

    with pytest.raises(HarnessError, match="f.toml: a scenario with a group step is judged by"):
        run_scenario(load_text(retries(RACING), "f.toml"))


def test_a_race_found_on_the_sqlite_inbox_shrinks_to_a_file_run_replays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The planted check-then-insert retry race, found in a group of four
    after unrelated steps, is written as the create and the two racing
    retries; `inboxsim run FILE --target sqlite` fails on it with the bug
    and passes without."""
    factory = sqlite(tmp_path, RACE, monkeypatch)
    target = factory(G4, 4)
    try:
        recorder = Recorder(GroupDriver(target, G4, 4))
        recorder.run([Create(1, session="s1")])
        recorder.run([Create(2, session="s2")])
        recorder.run([Prompt(3, session="s2", input="z", text="z")])
        retry = Prompt(4, session="s1", input="a", text="t", resume=False)
        ops = [
            retry,
            Synthetic(4, session="s2", text="n"),
            retry,
            Prompt(4, session="s1", text="u"),
        ]
        schedule = [79, 32, 94, 45, 88, 94, 83, 67, 3, 59, 99, 31, 83, 6, 20, 14, 47, 60, 31, 48]
        assert not recorder.run(ops, schedule).legal
    finally:
        target.close()
    path = write_group_repro(recorder, G4, 4, factory, tmp_path / "repro.toml")
    steps = load_text(path.read_text()).scenario.step
    assert [s.op for s in steps] == ["create", "group"]
    assert steps[1].requests is not None and len(steps[1].requests) == 2
    from inboxsim.cli import main

    assert main(["run", str(path), "--target", "sqlite"]) == 1
    monkeypatch.delenv("INBOXSIM_MUTANT")
    assert main(["run", str(path), "--target", "sqlite"]) == 0
