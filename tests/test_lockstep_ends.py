"""Lockstep carries every legal end of a group (issue 19, seed 151 of
``conformance --target sqlite --concurrency 4 --group-kills``).

Orders legal for a group may leave the model in states no observation of the
group tells apart: a prompt's wake taken before an interrupt (dropped with
the execution) or after it (ringing the successor's doorbell). Only a later
step shows which: a failed call starts a follow-up drain after a rung
doorbell, not otherwise. Lockstep compares each later step from every legal
end carried (``lockstep.Carried``), drops those the step cannot follow, and
diverges only when none can; the checkers, judging the target's trace along
the order found, cannot tell either, so a doorbell kept for that reason
allows the follow-up drain without owing it (``SessionShadow.doorbell_kept``).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from inboxsim.conformance.command_lines import target_command
from inboxsim.conformance.seeds import SeedRun, seed_item
from inboxsim.invariants import check_trace
from inboxsim.model import G4, Answer, Create, Err, Hello, Interrupt, Ok, Op, Prompt, Reply
from inboxsim.search.lockstep import Carried, LockstepTarget, distinct
from inboxsim.targets.target import ModelTarget
from inboxsim.trace.record import Observed, Step, Trace

from .invariant_traces import Ops, ev, play_group, pv


class Grouping(ModelTarget):
    """The model as a target that serves groups under the schedule sent."""

    def request(self, op: Op, crash_at: str | None = None) -> tuple[Reply, Observed]:
        reply, obs = super().request(op, crash_at)
        if isinstance(op, Hello) and isinstance(reply, Ok):
            reply = Ok({**reply.result, "features": [*reply.result["features"], "group"]})
        return reply, obs


def _wake_before_the_interrupt() -> LockstepTarget:
    """s1 runs call-1 over m1; then a group: a steer x1, a queued x2 and an
    interrupt. The target takes x2's wake before the interrupt (the doorbell
    it rings goes with the execution), x1's after it (the successor's
    start); the search finds first the order taking both wakes after the
    interrupt, where the later one rings the successor's doorbell."""
    lock = LockstepTarget(ModelTarget(G4, 3), Grouping(G4, 3))
    lock.request(Hello(0, step_limit=3))
    lock.request(Create(1, session="s1"))
    lock.request(Prompt(2, session="s1", input="m1", text="a"))
    ops: list[Op] = [
        Prompt(3, session="s1", input="x1", text="a"),
        Prompt(3, session="s1", input="x2", text="b", delivery="queue"),
        Interrupt(3, session="s1"),
    ]
    # x1, x2, then a wake (x2's: it rings call-1's doorbell), the interrupt
    assert lock.group_steps(ops, [0, 0, 1, 0]).failure is None
    return lock


def test_a_later_step_picks_the_legal_end_the_target_took() -> None:
    lock = _wake_before_the_interrupt()
    assert isinstance(lock.model, ModelTarget) and isinstance(lock.target, ModelTarget)
    assert lock.model.state.runs["s1"].doorbell, "the order found first rang the doorbell"
    assert not lock.target.state.runs["s1"].doorbell
    assert len(lock.others) == 1  # the order whose wake the interrupt dropped
    call = lock.target.state.runs["s1"].call.call
    # the call fails: no follow-up drain (x2 stays pending), as the target's end says
    reply, observed = lock.request(Answer(4, call=call, finish="error"))
    assert isinstance(reply, Ok)
    assert [e.type for e in observed.events] == ["step_failed", "execution_failed"]
    assert not lock.others and not lock.model.state.runs  # the end that followed, alone
    reply, _ = lock.request(Answer(5, call=call, finish="stop"))
    assert isinstance(reply, Err)  # compared on from it: the call is closed on both sides


def test_ends_alike_in_all_a_comparison_reads_are_carried_as_one() -> None:
    lock = _wake_before_the_interrupt()
    assert isinstance(lock.model, ModelTarget)
    state = lock.model.state
    here = Carried(state, lock.m, lock.t)
    (other,) = lock.others  # its doorbell differs: kept apart
    assert distinct([here, other]) == [here, other]
    # the same state with another ID counter and its log's events in another
    # order: nothing lockstep compares tells them apart
    log = state.store.sessions["s1"]
    shuffled = replace(log, events=log.events[::-1])
    store = replace(state.store, sessions={**state.store.sessions, "s1": shuffled})
    alike = Carried(replace(state, counter=state.counter + 5, store=store), lock.m, lock.t)
    assert distinct([here, alike]) == [here]
    # which payload a message holds is read (a later reuse of its ID conflicts or not)
    first, *rest = log.transcript
    other_text = replace(log, transcript=(replace(first, data='{"text":"z"}'), *rest))
    store = replace(state.store, sessions={**state.store.sessions, "s1": other_text})
    apart = Carried(replace(state, store=store), lock.m, lock.t)
    assert distinct([here, apart]) == [here, apart]


def _then(trace: Trace, op: Op, reply: Reply, observed: Observed) -> Trace:
    step = Step(len(trace.steps), "safety", "request", op.OP, op, None, reply, observed)
    return Trace(trace.header, trace.steps + (step,))


def test_a_doorbell_an_interrupt_in_a_busy_group_kept_allows_a_follow_up_and_owes_none() -> None:
    o = Ops()
    prefix = [o.create(), o.prompt(x="m1")]
    members = [o.prompt(x="x1"), o.prompt(x="x2", delivery="queue"), o.interrupt()]
    grouped = play_group(prefix, members, [], "interrupt.answer")
    # 3, 4: x1, x2 admitted (busy: their wakes not yet taken); 5: the interrupt
    # (seqs 6, 7), then a successor: execution_started 8, promoted x1 9,
    # step_started 10 over call-2; x2 pending. Did x2's wake ring its doorbell?
    assert grouped.steps[5].observed.calls is not None
    (call,) = grouped.steps[5].observed.calls
    failed = Observed(
        (
            ev("s1", 11, "step_failed", 6, error="model call failed", step=1),
            ev("s1", 12, "execution_failed", 6, error="model call failed"),
        ),
        (),
        (),
        (),
    )
    trace = _then(grouped, Answer(6, call=call.call, finish="error"), Ok({}), failed)
    assert check_trace(trace, G4, False) == []
    # A wake certainly rung during the successor (a prompt alone while call-2
    # runs) owes the follow-up drain all the same.
    woken = Observed(
        (ev("s1", 11, "admitted", 6, "x3", type="user", delivery="steer"),),
        (("s1", (pv("x2", delivery="queue", seq=5, time=4), pv("x3", seq=11, time=6))),),
        (),
        None,
    )
    trace = _then(grouped, o.prompt(x="x3"), Ok({"input": "x3"}), woken)
    failed = Observed(
        (
            ev("s1", 12, "step_failed", 7, error="model call failed", step=1),
            ev("s1", 13, "execution_failed", 7, error="model call failed"),
        ),
        (),
        (),
        (),
    )
    trace = _then(trace, Answer(7, call=call.call, finish="error"), Ok({}), failed)
    found = {v.invariant for v in check_trace(trace, G4, False)}
    assert "wake-follow-up" in found, found


def test_the_correct_inbox_holds_seed_151_with_kills_mid_group(tmp_path: Path) -> None:
    """Seed 151 with group kills on: a group's interrupt, two prompts' wakes
    on either side of it; the search's first order rang the successor's
    doorbell, the SQLite inbox's did not, and its next failed call started
    no follow-up drain (lockstep diverged, then wake-follow-up fired)."""
    argv = target_command(None, "sqlite", None, 10.0)[0]
    run = SeedRun(argv, G4, "g4", 40, 10.0, "sqlite", concurrency=4, group_kills=True)
    outcome = seed_item(run, 151, tmp_path)
    assert outcome.item.verdict == "held", outcome.item.detail
