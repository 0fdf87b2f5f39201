"""A kill mid-group in the swarm workload (``--concurrency N`` on the
model): a group member carries ``after_admit`` at the seed's failpoint rate;
the member whose admission reaches it dies there and is recorded as a
failpoint's step (``Crashed``), after the members placed before it; the
members never placed took no effect; then the run restarts. The checkers
judge it: the model holds, and a row acknowledged before the kill and lost
at the restart is caught. (A lockstep target does not serve group kills
yet: its members in flight have no trace step; the SQLite inbox's kills
mid-group are judged by the search, tests/test_sqlite_group_kill.py.)
"""

from __future__ import annotations

from inboxsim.invariants import check_trace
from inboxsim.model import G4, Crashed
from inboxsim.sim.run import RunOptions, run_seed
from inboxsim.trace.record import Step, group_of

from .invariant_traces import edit, pv

OPTIONS = RunOptions(ops=40, concurrency=4)


def _kills(steps: tuple[Step, ...]) -> list[Step]:
    """The group members that died (a group's step with a failpoint's reply)."""
    return [s for s in steps if group_of(s.decision) and isinstance(s.reply, Crashed)]


def test_the_model_holds_kills_mid_group_and_a_seed_replays() -> None:
    kills = 0
    for seed in range(30):
        result = run_seed(seed, G4, OPTIONS)
        assert not result.violations, (seed, result.violations)
        for step in _kills(result.trace.steps):
            kills += 1
            assert isinstance(step.reply, Crashed) and step.crash_at == "after_admit"
            assert result.trace.steps[step.index + 1].decision == "restart"
    assert kills >= 4, "the workload sent no kill mid-group: nothing was tested"
    assert run_seed(23, G4, OPTIONS).trace_hash == run_seed(23, G4, OPTIONS).trace_hash


def test_a_row_admitted_before_the_kill_and_lost_at_the_restart_is_caught() -> None:
    trace = run_seed(23, G4, OPTIONS).trace
    (kill,) = _kills(trace.steps)  # step 20: in-10's admission died; in-9's completed before
    before = trace.steps[kill.index - 1]
    assert [e.input for e in before.observed.events if e.type == "admitted"] == ["in-9"]
    assert check_trace(trace, G4, False) == []
    shown = dict(kill.observed.pending)["f1"]
    assert [r.input for r in shown] == ["in-9", "in-10"]
    lost = edit(trace, kill.index, pending={"f1": [pv("in-10", seq=12, time=24)]})
    found = {v.invariant for v in check_trace(lost, G4, False)}
    assert "durability" in found, found
