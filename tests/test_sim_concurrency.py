"""Concurrent seeds on the model (``--concurrency N``): swarm-chosen race
groups, interleaved by a schedule drawn from the seed, recorded along the
order they took and judged by the checkers; a seed replays with its hash."""

from __future__ import annotations

import pytest

from inboxsim.model import G4, Create, Err, Interrupt, Prompt, Synthetic
from inboxsim.sim.run import RunOptions, run_decisions, run_seed
from inboxsim.sim.swarm import RACES
from inboxsim.targets.target import ModelTarget
from inboxsim.trace.record import group_label, group_of

CONCURRENT = RunOptions(ops=60, only_expected=True, concurrency=4)


def groups(result: object) -> dict[int, list[str]]:
    """The first step of each group -> its steps' labels."""
    out: dict[int, list[str]] = {}
    for step in result.trace.steps:  # type: ignore[attr-defined]
        mark = group_of(step.decision)
        if mark is not None:
            out.setdefault(mark.first, []).append(step.decision)
    return out


def test_a_group_label_says_its_group_and_whether_the_runner_was_busy() -> None:
    assert group_of(group_label(7, "retry.exact")) == (7, False)
    assert group_of(group_label(12, "steer.answer", busy=True)) == (12, True)
    assert group_of("retry.unknown") is None
    assert group_of("group x: y") is None


@pytest.mark.parametrize("seed", range(3))
def test_a_concurrent_seed_replays_with_the_same_hash(seed: int) -> None:
    first = run_seed(seed, G4, CONCURRENT)
    again = run_seed(seed, G4, CONCURRENT)
    assert first.trace_hash == again.trace_hash
    assert run_decisions(first.decisions, G4, CONCURRENT).trace_hash == first.trace_hash
    assert first.options["concurrency"] == 4
    assert first.swarm["races"]["concurrency"] == 4


def test_concurrency_is_part_of_the_hash_and_one_is_the_sequential_run() -> None:
    sequential = run_seed(3, G4, RunOptions(ops=60, only_expected=True))
    assert run_seed(3, G4, RunOptions(ops=60, only_expected=True, concurrency=1)).trace_hash == (
        sequential.trace_hash
    )
    assert "concurrency" not in sequential.options and "races" not in sequential.swarm
    assert not groups(sequential)
    assert run_seed(3, G4, CONCURRENT).trace_hash != sequential.trace_hash


def test_concurrent_seeds_send_every_race_and_hold_on_the_model() -> None:
    seen: set[str] = set()
    sizes: set[int] = set()
    for seed in range(30):
        result = run_seed(seed, G4, CONCURRENT)
        assert not result.violations, (seed, result.violations[0])
        for labels in groups(result).values():
            sizes.add(len(labels))
            seen.add(labels[0].split(": ", 1)[1])
    assert seen == set(RACES)
    assert {2, 3, 4} <= sizes  # a group killed mid-way records fewer: the members placed


def test_a_group_is_recorded_along_its_order_each_drain_with_its_request() -> None:
    target = ModelTarget(G4, 4)
    target.request(Create(1, session="s1"))
    target.request(Create(1, session="s2"))
    ops = [
        Prompt(5, session="s1", input="a", text="t"),
        Prompt(5, session="s2", input="b", text="t"),
        Synthetic(5, session="s1", input="c", text="done"),
    ]
    # Both prompts first, then s1's drain starts, then the notice, then the rest.
    members, pauses = target.group_steps(ops, [0, 0, 0, 1])[:2]
    assert [m.position for m in members] == [0, 1, 2]
    # s1's drain is charged to s1's requests, never to s2's prompt.
    assert {e.session for e in members[1].observed.events} == {"s2"}
    assert not target.state.work  # the group ends quiescent
    assert members[-1].busy is False
    assert len(pauses) > len(ops)  # the runner's transitions were decisions too


def test_a_failed_member_is_not_charged_with_the_runner_work_of_others() -> None:
    """Seed 313 (100 operations): a group of an answer, a prompt, an
    interrupt of the then idle session and a conflicting prompt; the
    prompt's wake starts an execution after the interrupt. Charged to the
    prompt, the interrupt would meet that execution (another reply); so it
    went to the latest request in the order, the conflict, whose step then
    showed an execution it did not start. It goes to the latest request
    that did not fail (the interrupt): the conflict's step shows nothing."""
    result = run_seed(313, G4, RunOptions(ops=100, concurrency=4))
    assert not result.violations
    members = [s for s in result.trace.steps if group_of(s.decision)]
    failed = [s for s in members if isinstance(s.reply, Err)]
    assert failed, "the seed no longer sends a failing member: nothing was tested"
    assert [s.index for s in failed if s.observed.events] == []
    started = [s for s in members if any(e.type == "execution_started" for e in s.observed.events)]
    assert any(isinstance(s.request, Interrupt) for s in started)
