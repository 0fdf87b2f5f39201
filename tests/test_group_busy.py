"""The busy label of a concurrent group's members in lockstep conformance
(``search/lockstep.py``, ``trace.record.group_label``): a member is busy where
the runner is mid-work after it along the order found, which the checkers read
as "not a quiescent observation" (``invariants/tracker.py``: a wake admitted
after a busy member rings the doorbell of a running execution). The model's
order says where its runner is; the target's events placed on the members say
whether the target's trace is there too (``placement.abreast``): where they
lag the order, the member stays busy.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from inboxsim.conformance.command_lines import target_command
from inboxsim.conformance.lockstep_targets import LockstepTargets
from inboxsim.model import G4, Err, Event
from inboxsim.search.placement import abreast
from inboxsim.sim.run import RunOptions, RunResult, run_seed
from inboxsim.trace.record import group_of


def _event(session: str, kind: str, seq: int) -> Event:
    return Event(session, seq, kind, 0, None, "{}")


def test_abreast_compares_each_sessions_event_types_in_order() -> None:
    ended = [_event("s1", "step_ended", 1), _event("s1", "execution_succeeded", 2)]
    assert abreast(ended, ended)
    assert abreast([], [])
    # the target logged the execution's end later than the order found
    assert not abreast(ended[:1], ended)
    # another session's events do not make up for it
    assert not abreast([*ended[:1], _event("s2", "execution_succeeded", 1)], ended)


def _lockstep_seed(seed: int, folder: Path) -> RunResult:
    argv = target_command(None, "sqlite", None, 10.0)[0]
    lock = LockstepTargets(argv, 10.0, folder, "sqlite", False, True)
    try:
        options = RunOptions(ops=40, only_expected=True, concurrency=4)
        return run_seed(seed, G4, options, target=lock)
    finally:
        lock.close()


# Seeds of conformance --target sqlite --concurrency 4 --group-kills that were
# wake-follow-up false alarms while every member but a group's last was labelled
# busy: 352, a group led by a conflicting prompt (an error, nothing shown on
# either side), so the synthetic after it looked admitted during an execution
# and owed a follow-up drain at the next failure; 997, an interrupt labelled
# busy kept a doorbell rung two groups before (a new execution had started
# since), owed at a failure ten steps later.
@pytest.mark.parametrize("seed", [352, 997])
def test_the_correct_inbox_holds_with_members_busy_only_where_the_runner_is(
    tmp_path: Path, seed: int
) -> None:
    result = _lockstep_seed(seed, tmp_path)
    assert not result.violations, result.violations
    if seed == 352:  # group 39: a conflicting prompt, then a synthetic
        error, synthetic = result.trace.steps[39:41]
        assert isinstance(error.reply, Err) and not error.observed.events
        assert [group_of(s.decision) for s in (error, synthetic)] == [
            group_of("group 39: prompt.notice")
        ] * 2  # neither busy: the runner was idle after the error, and the group ended
