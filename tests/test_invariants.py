"""Every invariant, on a small hand-built trace that satisfies it (it stays
quiet, and was exercised) and one that violates it (it fires, naming the
steps that prove it).

Each case plays a short scenario on the model, then plants one fault by
editing one step of the trace (see ``invariant_traces``). Step 0 is always
``hello``; the comment on each ``play`` line gives the steps that matter.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from inboxsim.invariants import REGISTRY, Monitor, Violation, check_trace
from inboxsim.model import G4, PRESETS
from inboxsim.model.values import Call
from inboxsim.trace.record import GroupMark, Trace, group_of

from .invariant_traces import (
    Ops,
    calls_at,
    edit,
    err,
    ev,
    events,
    mv,
    ok,
    play,
    play_group,
    pv,
    receipt,
    renumber,
    view,
)

Case = tuple[Trace, Trace, tuple[int, ...]]
CASES: dict[str, tuple[str, Callable[[], Case], bool]] = {}
"""Case name -> (invariant, case, liveness). An invariant whose statement
has several parts has a case per part, named ``invariant/part``."""


def case(
    invariant: str, liveness: bool = False, part: str | None = None
) -> Callable[[Callable[[], Case]], Callable[[], Case]]:
    def register(fn: Callable[[], Case]) -> Callable[[], Case]:
        assert invariant in REGISTRY, invariant
        name = invariant if part is None else f"{invariant}/{part}"
        assert name not in CASES, name
        CASES[name] = (invariant, fn, liveness)
        return fn

    return register


def judge(trace: Trace, invariant: str, liveness: bool) -> list[Violation]:
    return check_trace(trace, G4, liveness, only_expected=False, invariants=[invariant])


# --- the durable log -------------------------------------------------------------


@case("seq-contiguous")
def _seq() -> Case:
    o = Ops()
    good = play(
        o.create(), o.prompt(x="m1")
    )  # 2: admitted 0, execution_started 1, promoted 2, step 3
    evs = events(good, 2)
    return good, edit(good, 2, events=evs[:2] + renumber(evs[2:], 3)), (2,)


@case("seq-contiguous", part="fork-gap")
def _seq_fork_gap() -> Case:
    o = Ops()
    good = play(
        o.create(), o.prompt(x="m1"), "answer:stop", o.fork("s1", "f1"), o.prompt("f1", "n1")
    )  # 4: forked at seq 0 with parent_seq 5; 5: n1 admitted at seq 6
    evs = events(good, 5)
    return good, edit(good, 5, events=renumber(evs, 7)), (4, 5)


@case("replay-matches-views")
def _replay() -> Case:
    o = Ops()
    good = play(o.create(), o.prompt(x="m1", resume=False))  # 2: pending [m1]
    ghost = view(good, 2, "pending") + (pv("ghost", seq=0, time=2),)
    return good, edit(good, 2, pending={"s1": ghost}), (2,)


@case("replay-starts-nothing")
def _restart() -> Case:
    o = Ops()
    good = play(o.create(), o.prompt(x="m1", resume=False), "kill")  # 3: kill; 4: restart
    woken = Call("call-9", "s1", "step", 1, False, (), 9)
    return good, edit(good, 3, calls=[woken]), (3,)


@case("replay-starts-nothing", part="hello")
def _restart_hello() -> Case:
    o = Ops()
    good = play(o.create(), o.prompt(x="m1", resume=False), "kill")  # 4: restart hello
    return good, edit(good, 4, events=[ev("s1", 1, "execution_started", 5)]), (4,)


@case("durability")
def _durability() -> Case:
    o = Ops()
    good = play(
        o.create(), o.prompt(x="m1", resume=False), "kill"
    )  # 2: m1 pending; 3: kill; 4: restart
    return good, edit(good, 3, pending={"s1": ()}, keep=5), (2, 3)


@case("error-changes-nothing")
def _error() -> Case:
    o = Ops()
    good = play(
        o.create(), o.prompt(x="m1", resume=False), o.prompt(x="m1", text="b", resume=False)
    )
    # 3: prompt_conflict
    return good, edit(good, 3, pending={"s1": ()}), (3,)


# --- admission and retries -------------------------------------------------------------


@case("admission-fresh-id")
def _fresh() -> Case:
    o = Ops()
    good = play(
        o.create(), o.prompt(x="m1", resume=False), o.prompt(x="m1", resume=False)
    )  # 3: exact retry
    again = ev("s1", 1, "admitted", 3, "m1", type="user", delivery="steer", data={"text": "a"})
    return good, edit(good, 3, events=[again]), (2, 3)


@case("admission-projects-row")
def _projects() -> Case:
    o = Ops()
    good = play(o.create(), o.prompt(x="m1", resume=False))  # 2: admitted m1 at seq 0, time 2
    return good, edit(good, 2, pending={"s1": (pv("m1", seq=0, time=99),)}), (2,)


@case("receipt-reflects-request")
def _receipt() -> Case:
    o = Ops()
    good = play(o.create(), o.prompt(x="m1", delivery="queue", resume=False))
    return good, edit(good, 2, reply=ok({**receipt(good, 2), "delivery": "steer"})), (2,)


@case("omitted-id-new-input")
def _omitted() -> Case:
    o = Ops()
    good = play(
        o.create(), o.prompt(x="m1", resume=False), o.prompt(resume=False)
    )  # 3: a new input
    return good, edit(good, 3, reply=ok(receipt(good, 2)), events=[], pending={}), (2, 3)


@case("admission-before-wake")
def _before_wake() -> Case:
    o = Ops()
    good = play(
        o.create(), o.prompt(x="m1")
    )  # 2: admitted 0, execution_started 1, promoted 2, step 3
    evs = events(good, 2)
    return good, edit(good, 2, events=renumber([evs[1], evs[0]] + evs[2:], 0)), (2,)


@case("retry-silent")
def _silent() -> Case:
    o = Ops()
    good = play(
        o.create(), o.prompt(x="m1", resume=False), o.prompt(x="m1", resume=False)
    )  # 3: exact retry
    return good, edit(good, 3, reply=err("prompt_conflict")), (2, 3)


@case("retry-same-receipt")
def _same_receipt() -> Case:
    o = Ops()
    good = play(
        o.create(), o.prompt(x="m1", resume=False), o.prompt(x="m1", resume=False)
    )  # 3: exact retry
    return good, edit(good, 3, reply=ok({**receipt(good, 3), "time": 99})), (2, 3)


@case("concurrent-retry")
def _concurrent_retry() -> Case:
    o = Ops()
    twin = o.prompt(x="m1", resume=False)
    good = play_group([o.create()], [twin, twin, twin], [2, 0, 1])  # 2, 3, 4: one group
    return good, edit(good, 3, reply=ok({**receipt(good, 2), "time": 99})), (2, 3)


@case("concurrent-retry", part="one-admission")
def _concurrent_retry_one_admission() -> Case:
    o = Ops()
    twin = o.prompt(x="m1", resume=False)
    good = play_group([o.create()], [twin, twin], [1, 0])  # 2: m1 admitted at seq 0; 3: retry
    return good, edit(good, 3, events=[ev("s1", 1, "admitted", input="m1")]), (2, 3)


@case("conflict-rejected")
def _conflict() -> Case:
    o = Ops()
    good = play(
        o.create(), o.prompt(x="m1", resume=False), o.prompt(x="m1", text="b", resume=False)
    )
    # 3: prompt_conflict
    return good, edit(good, 3, reply=ok(receipt(good, 2))), (2, 3)


@case("id-namespace")
def _namespace() -> Case:
    o = Ops()
    good = play(
        o.create("s1"),
        o.create("s2"),
        o.prompt("s1", "m1", resume=False),
        o.prompt("s2", "m1", resume=False),
    )  # 3: m1 in s1; 4: prompt_conflict
    return good, edit(good, 4, reply=ok({**receipt(good, 3), "session": "s2"})), (3, 4)


# --- promotion ---------------------------------------------------------------------


@case("promotion-after-admission")
def _after_admission() -> Case:
    o = Ops()
    good = play(
        o.create(), o.prompt(x="m1")
    )  # 2: admitted 0, execution_started 1, promoted 2, step 3
    evs = events(good, 2)
    planted = evs[:3] + [ev("s1", 3, "promoted", 2, "ghost")] + renumber(evs[3:], 4)
    return good, edit(good, 2, events=planted), (2,)


@case("promoted-once")
def _once() -> Case:
    o = Ops()
    good = play(
        o.create(), o.prompt(x="m1"), "answer:tool"
    )  # 2: m1 promoted; 3: step_ended 4, step 5
    evs = events(good, 3)
    planted = evs[:1] + [ev("s1", 5, "promoted", 3, "m1")] + renumber(evs[1:], 6)
    return good, edit(good, 3, events=planted), (2, 3)


@case("promotion-atomic")
def _atomic() -> Case:
    o = Ops()
    good = play(o.create(), o.prompt(x="m1"))  # 2: m1 promoted at seq 2
    return good, edit(good, 2, transcript={"s1": ()}), (2,)


@case("promotion-at-boundary")
def _at_boundary() -> Case:
    o = Ops()
    good = play(
        o.create(), o.prompt(x="m1"), o.prompt(x="m2")
    )  # 2: call open; 3: m2 admitted at seq 4
    planted = events(good, 3) + [ev("s1", 5, "promoted", 3, "m2")]
    shown = view(good, 2, "transcript") + (mv("m2", seq=5, time=3),)
    return good, edit(good, 3, events=planted, pending={"s1": ()}, transcript={"s1": shown}), (3,)


@case("steer-batch")
def _steer_batch() -> Case:
    o = Ops()
    good = play(
        o.create(), o.prompt(x="m1", resume=False), o.prompt(x="m2", resume=False), o.resume()
    )
    # 4: execution_started 2, promoted m1 3, promoted m2 4, step 5
    evs = events(good, 4)
    return good, edit(good, 4, events=evs[:2] + renumber(evs[3:], 4)), (3, 4)


def _two_queued() -> Trace:
    o = Ops()
    return play(
        o.create(),
        o.prompt(x="q1", delivery="queue", resume=False),
        o.prompt(x="q2", delivery="queue", resume=False),
        o.resume(),
    )
    # 4: execution_started 2, promoted q1 3, step 4


@case("idle-boundary")
def _idle() -> Case:
    good = _two_queued()
    evs = events(good, 4)
    return good, edit(good, 4, events=evs[:1] + renumber(evs[2:], 3)), (2, 4)


@case("queue-fifo")
def _fifo() -> Case:
    good = _two_queued()
    evs = events(good, 4)
    return (
        good,
        edit(good, 4, events=[evs[0], dataclasses.replace(evs[1], input="q2"), evs[2]]),
        (2, 3, 4),
    )


@case("queue-waits-for-idle")
def _waits() -> Case:
    o = Ops()
    good = play(o.create(), o.prompt(x="m1"), o.prompt(x="q1", delivery="queue"), "answer:tool")
    # 3: q1 admitted; 4: step_ended 5, step 6 (a continuation, q1 waits)
    evs = events(good, 4)
    planted = evs[:1] + [ev("s1", 6, "promoted", 4, "q1")] + renumber(evs[1:], 7)
    return good, edit(good, 4, events=planted), (3, 4)


@case("shared-admission-order")
def _order() -> Case:
    o = Ops()
    good = play(
        o.create(), o.synthetic(x="b1", resume=False), o.prompt(x="m1", resume=False), o.resume()
    )
    # 4: execution_started 2, promoted b1 3, promoted m1 4, step 5
    evs = events(good, 4)
    swapped = [
        evs[0],
        dataclasses.replace(evs[2], seq=3),
        dataclasses.replace(evs[1], seq=4),
        evs[3],
    ]
    return good, edit(good, 4, events=swapped), (2, 3, 4)


@case("shared-admission-order", part="busy-group-member")
def _order_busy() -> Case:
    """The boundary's order is judged on a group member the runner was still
    busy after (the boundary quiescence checks are not)."""
    o = Ops()
    prefix = [o.create(), o.synthetic(x="b1", resume=False), o.prompt(x="m1", resume=False)]
    good = play_group(
        prefix, [o.resume(), o.prompt(x="x2", resume=False)], [0, 1, 1, 1, 1], "resume"
    )
    # 4 (busy: x2's admission came before the step opened): execution_started 2,
    # promoted b1 3, promoted m1 4
    assert group_of(good.steps[4].decision) == GroupMark(4, True)
    evs = events(good, 4)
    swapped = [evs[0], dataclasses.replace(evs[2], seq=3), dataclasses.replace(evs[1], seq=4)]
    return good, edit(good, 4, events=swapped), (2, 3, 4)


@case("background-completion")
def _background() -> Case:
    o = Ops()
    good = play(o.create(), o.prompt(x="m1"), o.synthetic(x="b1"), "answer:stop")
    # 3: b1 admitted while call-1 runs; 4: step_ended 5, promoted b1 6, step 7
    evs = events(good, 4)
    return good, edit(good, 4, events=evs[:1] + renumber(evs[2:], 6)), (3, 4)


@case("step-allowance")
def _allowance() -> Case:
    o = Ops()
    good = play(o.create(), o.prompt(x="m1"))  # 2: call-1, step 1
    call = calls_at(good, 2)[0]
    return good, edit(good, 2, calls=[dataclasses.replace(call, step=2)]), (2,)


# --- the transcript ------------------------------------------------------------------


@case("pending-not-history")
def _not_history() -> Case:
    o = Ops()
    good = play(o.create(), o.prompt(x="m1"))  # 2: m1 promoted
    return good, edit(good, 2, pending={"s1": (pv("m1", seq=0, time=2),)}), (2,)


def _two_promoted() -> Trace:
    o = Ops()
    return play(
        o.create(), o.prompt(x="m1", resume=False), o.prompt(x="m2", resume=False), o.resume()
    )
    # 4: transcript [m1, m2]


@case("transcript-order")
def _transcript_order() -> Case:
    good = _two_promoted()
    shown = view(good, 4, "transcript")
    return good, edit(good, 4, transcript={"s1": (shown[1], shown[0])}), (4,)


@case("monotonic-visible-time")
def _monotonic() -> Case:
    good = _two_promoted()
    a, b = view(good, 4, "transcript")
    return (
        good,
        edit(good, 4, transcript={"s1": (a, dataclasses.replace(b, time=a.time - 1))}),
        (4,),
    )


@case("call-context")
def _context() -> Case:
    o = Ops()
    good = play(o.create(), o.prompt(x="m1"))  # 2: call-1 with context [m1]
    call = calls_at(good, 2)[0]
    return good, edit(good, 2, calls=[dataclasses.replace(call, context=())]), (2,)


# --- the compaction barrier ------------------------------------------------------------


def _barrier_and_prompt() -> Trace:
    o = Ops()
    return play(o.create(), o.compact(x="c1"), o.prompt(x="m1"))
    # 2: compaction_admitted 0, execution_started 1, compaction_started 2; 3: m1 admitted at seq 3


@case("single-barrier")
def _single_barrier() -> Case:
    o = Ops()
    good = play(o.create(), o.compact(x="c1"), o.compact(x="c2"))  # 3: coalesces into c1
    return good, edit(good, 3, events=[ev("s1", 3, "compaction_admitted", 3, "c2")]), (2, 3)


@case("barrier-blocks-promotion")
def _blocks() -> Case:
    good = _barrier_and_prompt()
    return good, edit(good, 3, events=events(good, 3) + [ev("s1", 4, "promoted", 3, "m1")]), (2, 3)


@case("barrier-holds-later-input")
def _holds_later() -> Case:
    good = _barrier_and_prompt()
    return good, edit(good, 3, events=events(good, 3) + [ev("s1", 4, "promoted", 3, "m1")]), (2, 3)


@case("barrier-lifetime")
def _lifetime() -> Case:
    o = Ops()
    good = play(
        o.create(), o.compact(x="c1"), "answer:stop"
    )  # 3: compaction_ended 3, execution_succeeded 4
    evs = [e for e in events(good, 3) if e.type != "compaction_ended"]
    return good, edit(good, 3, events=renumber(evs, 3)), (2, 3)


@case("barrier-coalesces")
def _coalesces() -> Case:
    o = Ops()
    good = play(o.create(), o.compact(x="c1"), o.compact(x="c2"))  # 3: returns c1
    return good, edit(good, 3, reply=ok({**receipt(good, 3), "input": "c2"})), (2, 3)


# --- wakes, drains, executions -------------------------------------------------------------


@case("wake-on-admission")
def _wake() -> Case:
    o = Ops()
    good = play(o.create(), o.prompt(x="m1"))  # 2: admitted, and the wake runs a step
    planted = edit(
        good,
        2,
        events=events(good, 2)[:1],
        pending={"s1": (pv("m1", seq=0, time=2),)},
        transcript={},
        calls=None,
    )
    return good, planted, (2,)


@case("lazy-wake")
def _lazy() -> Case:
    o = Ops()
    good = play(o.create(), o.resume())  # 2: a forced drain makes one call
    return good, edit(good, 2, events=[], calls=None), (2,)


@case("single-execution")
def _single_execution() -> Case:
    o = Ops()
    good = play(o.create(), o.prompt(x="m1"), o.resume())  # 3: resume joins call-1
    call = calls_at(good, 2)[0]
    return good, edit(good, 3, calls=[call, dataclasses.replace(call, call="call-x")]), (3,)


@case("execution-lifecycle")
def _lifecycle() -> Case:
    o = Ops()
    good = play(o.create(), o.prompt(x="m1"), "answer:stop")  # 3: step_ended, execution_succeeded
    return good, edit(good, 3, events=events(good, 3)[:1]), (2, 3)


@case("wake-follow-up")
def _follow_up() -> Case:
    o = Ops()
    good = play(o.create(), o.prompt(x="m1"), o.prompt(x="m2"), "answer:error")
    # 3: m2 rings the doorbell; 4: step_failed, execution_failed, then a follow-up execution
    planted = edit(
        good,
        4,
        events=events(good, 4)[:2],
        pending={"s1": view(good, 3, "pending")},
        transcript={},
        calls=[],
    )
    return good, planted, (3, 4)


@case("wake-follow-up", part="drain-goes-on")
def _follow_up_goes_on() -> Case:
    o = Ops()
    good = play(o.create(), o.prompt(x="m1"), o.prompt(x="m2", delivery="queue"), "answer:stop")
    # 3: m2 queued, rings the doorbell; 4: step_ended 5, promoted m2 6, step_started 7
    settled = [events(good, 4)[0], ev("s1", 6, "execution_succeeded", 4)]
    planted = edit(
        good, 4, events=settled, pending={"s1": view(good, 3, "pending")}, transcript={}, calls=[]
    )
    return good, planted, (3, 4)


@case("wake-follow-up", part="no-extra-drain")
def _follow_up_lazy() -> Case:
    o = Ops()
    good = play(o.create(), o.prompt(x="m1"), "answer:stop")  # 3: step_ended 4, succeeded 5
    extra = [events(good, 3)[0], ev("s1", 5, "step_started", 3, final=False, step=2)]
    opened = Call("call-2", "s1", "step", 2, False, ("m1",), 2)
    return good, edit(good, 3, events=extra, calls=[opened]), (3,)


@case("sessions-independent")
def _independent() -> Case:
    o = Ops()
    good = play(
        o.create("s1"),
        o.create("s2"),
        o.prompt("s2", "m2", resume=False),
        o.prompt("s1", "m1"),
    )  # 3: m2 pending in s2; 4: m1 wakes s1 only
    planted = events(good, 4) + [ev("s2", 1, "execution_started", 4)]
    return good, edit(good, 4, events=planted), (4,)


@case("work-needs-a-wake")
def _needs_wake() -> Case:
    o = Ops()
    good = play(o.create(), o.prompt(x="m1"), o.prompt(x="m2"), o.interrupt(), o.stage("s1", "m1"))
    # 3: m2 rings the doorbell; 4: interrupt (seqs 5, 6), m2 stays pending; 5: revert_staged 7
    planted = events(good, 5) + [ev("s1", 8, "execution_started", 5)]
    return good, edit(good, 5, events=planted), (5,)


@case("compaction-error-continues")
def _compaction_error() -> Case:
    o = Ops()
    good = play(o.create(), o.compact(x="c1"), o.prompt(x="m1"), "answer:error")
    # 2: barrier c1 and its compaction call; 3: m1 held back; 4: compaction_failed, m1 promoted
    failed = events(good, 4)[:1] + [ev("s1", 5, "execution_failed", 4, error="model call failed")]
    planted = edit(
        good,
        4,
        events=failed,
        pending={"s1": (pv("m1", seq=3, time=3),)},
        transcript={},
        calls=[],
    )
    return good, planted, (2, 4)


@case("interrupt-keeps-input")
def _interrupt() -> Case:
    o = Ops()
    good = play(o.create(), o.prompt(x="m1"), o.prompt(x="m2", delivery="queue"), o.interrupt())
    # 3: m2 pending; 4: interrupt
    return good, edit(good, 4, pending={"s1": ()}), (4,)


@case("interrupt-keeps-input", part="barrier")
def _interrupt_barrier() -> Case:
    o = Ops()
    good = play(o.create(), o.prompt(x="m1"), o.compact(x="c1"), o.interrupt())
    # 3: barrier c1 waits behind the running step; 4: interrupt (seqs 5, 6), c1 stays
    evs = events(good, 4)
    cancelled = evs[:1] + [ev("s1", 6, "compaction_failed", 4, "c1", reason="manual")]
    planted = edit(good, 4, events=cancelled + renumber(evs[1:], 7), pending={"s1": ()})
    return good, planted, (3, 4)


@case("idle-interrupt-noop")
def _idle_interrupt() -> Case:
    o = Ops()
    good = play(o.create(), o.interrupt())  # 2: interrupted false
    return good, edit(good, 2, reply=ok({"interrupted": True})), (2,)


# --- fork and revert -------------------------------------------------------------------


@case("fork-no-pending")
def _fork_pending() -> Case:
    o = Ops()
    good = play(
        o.create(),
        o.prompt(x="m1"),
        "answer:stop",
        o.prompt(x="m2", resume=False),
        o.fork("s1", "f1"),
    )  # 4: m2 pending; 5: fork
    return good, edit(good, 5, pending={"f1": (pv("m2", seq=5, time=4),)}), (5,)


def _two_answered() -> list[object]:
    o = Ops()
    return [o, o.create(), o.prompt(x="m1"), "answer:stop", o.prompt(x="m2"), "answer:stop"]
    # 2: m1 promoted; 4: m2 promoted; both steps answered


@case("fork-cutoff")
def _fork_cutoff() -> Case:
    o, *ops = _two_answered()
    assert isinstance(o, Ops)
    good = play(*ops, o.fork("s1", "f1", before="m2"))  # type: ignore[arg-type]  # 6: copies m1 only
    m2 = view(good, 6, "transcript")[1]
    copies = view(good, 6, "transcript", "f1") + (
        mv("copy-x", seq=m2.seq, time=m2.time, copied_from="m2"),
    )
    return good, edit(good, 6, transcript={"f1": copies}), (6,)


@case("revert-truncates")
def _truncates() -> Case:
    o, *ops = _two_answered()
    assert isinstance(o, Ops)
    good = play(*ops, o.stage("s1", "m2"), o.commit())  # type: ignore[arg-type]  # 7: commit cuts m2
    return good, edit(good, 7, transcript={"s1": view(good, 6, "transcript")}), (7,)


@case("prompt-commits-revert")
def _commits_first() -> Case:
    o, *ops = _two_answered()
    assert isinstance(o, Ops)
    good = play(*ops, o.stage("s1", "m2"), o.prompt(x="m3"))  # type: ignore[arg-type]
    # 6: staged; 7: revert_committed, admitted m3, ...
    evs = events(good, 7)
    return good, edit(good, 7, events=renumber(evs[1:], evs[0].seq)), (6, 7)


# --- liveness ------------------------------------------------------------------------


@case("live-all-promoted", liveness=True)
def _live_promoted() -> Case:
    o = Ops()
    good = play(o.create(), o.prompt(x="m1", resume=False), o.resume(), "answer:stop")
    p = Ops()
    return good, play(p.create(), p.prompt(x="m1", resume=False)), (2,)


@case("live-no-stranded-input", liveness=True)
def _live_stranded() -> Case:
    o = Ops()
    good = play(o.create(), o.prompt(x="m1", resume=False), o.resume(), "answer:stop")
    p = Ops()
    return good, play(p.create(), p.prompt(x="m1", resume=False)), (2,)


@case("live-barriers-consumed", liveness=True)
def _live_barriers() -> Case:
    o = Ops()
    good = play(o.create(), o.compact(x="c1"), "answer:stop")
    p = Ops()
    return good, play(p.create(), p.compact(x="c1")), (2,)


# --- the tests -------------------------------------------------------------------------


def test_every_invariant_has_a_case() -> None:
    assert sorted({invariant for invariant, _, _ in CASES.values()}) == sorted(REGISTRY)
    assert set(REGISTRY) <= set(CASES)  # each one's first case is named by the id alone


@pytest.mark.parametrize("name", sorted(CASES))
def test_quiet_on_a_satisfying_trace(name: str) -> None:
    invariant, fn, liveness = CASES[name]
    good, _, _ = fn()
    monitor = Monitor(G4, good.header.hello)
    found = [v for step in good.steps for v in monitor.feed(step)] + monitor.finish(liveness)
    assert found == []  # the scenario breaks nothing under g4
    assert invariant in monitor.exercised


@pytest.mark.parametrize("name", sorted(CASES))
def test_fires_on_a_violating_trace(name: str) -> None:
    invariant, fn, liveness = CASES[name]
    _, bad, steps = fn()
    found = judge(bad, invariant, liveness)
    assert found, f"{invariant} stayed quiet on its violating trace"
    assert {v.invariant for v in found} == {invariant}
    assert found[0].steps == steps, found[0]
    # Said in the inbox's words, not as a bare assertion.
    message = found[0].message
    assert len(message.split()) >= 8 and "assert" not in message.lower()


# --- the revert rules under OpenCode 1.18.33's policy (g2) ---------------------------------

G2 = PRESETS["g2"]


def _quiet(trace: Trace, invariant: str) -> None:
    monitor = Monitor(G2, trace.header.hello, invariants=[invariant])
    assert [v for step in trace.steps for v in monitor.feed(step)] + monitor.finish(False) == []
    assert invariant in monitor.exercised


def test_under_g2_a_committed_revert_keeps_its_boundary() -> None:
    o, *ops = _two_answered()
    assert isinstance(o, Ops)
    good = play(*ops, o.stage("s1", "m2"), o.commit(), policy=G2)  # type: ignore[arg-type]
    assert [m.id for m in view(good, 7, "transcript")] == ["m1", "m2"]  # 7: commit keeps m2
    _quiet(good, "revert-truncates")
    assert check_trace(good, G4, False, invariants=["revert-truncates"])  # g4 wants m2 gone
    # The g4 cut on a g2 run: the boundary disappeared.
    bad = edit(good, 7, transcript={"s1": view(good, 7, "transcript")[:1]})
    found = check_trace(bad, G2, False, invariants=["revert-truncates"])
    assert [v.steps for v in found] == [(7,)]
    assert "[m2], before the cut, disappeared" in found[0].message


def test_under_g2_a_prompt_leaves_a_staged_revert_staged() -> None:
    o, *ops = _two_answered()
    assert isinstance(o, Ops)
    good = play(*ops, o.stage("s1", "m2"), o.prompt(x="m3"), policy=G2)  # type: ignore[arg-type]
    # 6: staged; 7: admitted m3 and promoted, no revert_committed
    assert "revert_committed" not in {e.type for e in events(good, 7)}
    _quiet(good, "prompt-commits-revert")
    assert check_trace(good, G4, False, invariants=["prompt-commits-revert"])  # g4 wants a commit
    evs = events(good, 7)
    committed = ev("s1", evs[0].seq, "revert_committed", time=evs[0].time, to="m2")
    bad = edit(good, 7, events=[committed, *renumber(evs, evs[0].seq + 1)])
    found = check_trace(bad, G2, False, invariants=["prompt-commits-revert"])
    assert [v.steps for v in found] == [(6, 7)]
    assert "leaves a staged revert staged" in found[0].message
