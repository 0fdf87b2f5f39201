"""A kill mid-group in the swarm workload (``--concurrency N`` on the
model): a group member carries a failpoint it can reach (``after_admit``,
``mid_promotion``, ``after_promotion``) at the seed's failpoint rate. A
member whose admission reaches it dies there and is recorded as a
failpoint's step (``Crashed``), after the members placed before it; a runner
transition that reaches it leaves its events up to the failpoint to the step
of the request it works for, and the kill is a step of its own (kind
``crash``, no request); the members never placed took no effect; then the
run restarts. The checkers judge it: the model holds, and a row acknowledged
before the kill and lost at the restart is caught. (The SQLite inbox's kills
mid-group, through lockstep: tests/test_sqlite_group_kill.py.)
"""

from __future__ import annotations

from dataclasses import replace

from inboxsim.invariants import check_trace
from inboxsim.model import G4, Crashed
from inboxsim.sim.run import RunOptions, run_seed
from inboxsim.trace.record import UNSEEN, Step, Trace, group_of, unseen

from .invariant_traces import edit, pv

OPTIONS = RunOptions(ops=40, concurrency=4)


def _kills(steps: tuple[Step, ...]) -> list[Step]:
    """The group members that died (a group's step with a failpoint's reply)."""
    return [s for s in steps if group_of(s.decision) and isinstance(s.reply, Crashed)]


def _runner_kills(steps: tuple[Step, ...]) -> list[Step]:
    """The kills of a group's runner transitions: the group's own crash step."""
    return [s for s in steps if group_of(s.decision) and s.kind == "crash"]


def test_the_model_holds_kills_mid_group_and_a_seed_replays() -> None:
    admit = runner = 0
    for seed in range(30):
        result = run_seed(seed, G4, OPTIONS)
        assert not result.violations, (seed, result.violations)
        for step in _kills(result.trace.steps):
            admit += 1
            assert isinstance(step.reply, Crashed) and step.crash_at == "after_admit"
            assert result.trace.steps[step.index + 1].decision == "restart"
        for step in _runner_kills(result.trace.steps):
            runner += 1
            assert step.request is None and not step.observed.events
            assert result.trace.steps[step.index + 1].decision == "restart"
    assert admit >= 1 and runner >= 2, "the workload sent no kill mid-group: nothing was tested"
    assert run_seed(23, G4, OPTIONS).trace_hash == run_seed(23, G4, OPTIONS).trace_hash


def test_a_row_admitted_before_a_runner_kill_and_lost_at_the_restart_is_caught() -> None:
    trace = run_seed(23, G4, OPTIONS).trace
    # step 20: in-10 admitted, then the runner promoted in-9 and died at
    # mid_promotion (its call never opened); step 21 is the kill
    (kill,) = _runner_kills(trace.steps)
    before = trace.steps[kill.index - 1]
    assert [(e.type, e.input) for e in before.observed.events] == [
        ("admitted", "in-10"),
        ("promoted", "in-9"),
    ]
    assert check_trace(trace, G4, False) == []
    lost = edit(trace, kill.index, pending={"f1": []})
    found = {v.invariant for v in check_trace(lost, G4, False)}
    assert "durability" in found, found


def test_a_row_admitted_before_a_member_died_and_lost_at_the_restart_is_caught() -> None:
    trace = run_seed(53, G4, OPTIONS).trace
    (kill,) = _kills(trace.steps)  # step 9: u1's admission died at after_admit
    assert kill.crash_at == "after_admit"
    assert check_trace(trace, G4, False) == []
    shown = dict(kill.observed.pending)["s1"]
    assert [r.input for r in shown] == ["u1", "in-1"]
    lost = edit(trace, kill.index, pending={"s1": [pv("u1", "synthetic", seq=3, time=8)]})
    found = {v.invariant for v in check_trace(lost, G4, False)}
    assert "durability" in found, found


def _unseen(trace: Trace, indexes: range) -> Trace:
    """The trace as a target that died with the group's members in flight
    shows it: their replies never came back (``UNSEEN``)."""
    steps = list(trace.steps)
    for i in indexes:
        steps[i] = replace(steps[i], reply=Crashed(UNSEEN))
    return Trace(trace.header, tuple(steps))


def test_members_whose_replies_nobody_saw_are_judged_by_what_they_did() -> None:
    """Seed 23's group as the SQLite inbox shows it: both prompts in flight at
    the kill, their replies unseen. Not a crash each (the kill is its own
    step), not an error: the trace holds; and the row the second one admitted,
    lost at the restart, is caught."""
    trace = run_seed(23, G4, OPTIONS).trace
    (kill,) = _runner_kills(trace.steps)
    members = range(kill.index - 2, kill.index)
    assert all(group_of(trace.steps[i].decision) for i in members)
    shown = _unseen(trace, members)
    assert all(unseen(shown.steps[i].reply) for i in members)
    assert check_trace(shown, G4, False) == []
    lost = edit(shown, kill.index, pending={"f1": []})
    found = {v.invariant for v in check_trace(lost, G4, False)}
    assert "durability" in found, found
