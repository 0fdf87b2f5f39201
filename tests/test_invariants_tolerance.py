"""The checkers judge from observations only, and tolerate what the adapter
protocol lets implementations do differently.

An implementation may emit no execution or step events, number its log
its own way, and carry less in an event's payload than the model does. The
invariants needing what it does not show are then not exercised; none is
violated for it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from inboxsim.invariants import Monitor, check_trace
from inboxsim.model import G4, CrashOp, Fork, Ok
from inboxsim.model.values import Event
from inboxsim.trace.record import Step, Trace
from tests.invariant_driver import random_run
from tests.invariant_traces import Ops, play

SILENT_TYPES = frozenset(
    {
        "execution_started",
        "execution_succeeded",
        "execution_failed",
        "execution_interrupted",
        "step_started",
        "step_ended",
        "step_failed",
    }
)


def as_quiet_adapter(trace: Trace) -> Trace:
    """The trace as a terser implementation would show it: no execution or
    step events, its own (still contiguous) seq numbering, and event
    payloads stripped to ``{}``."""
    seqs: dict[str, dict[int, int]] = {}

    def renumber(session: str, old: int) -> int:
        return seqs.get(session, {}).get(old, old)

    steps: list[Step] = []
    for step in trace.steps:
        events: list[Event] = []
        for e in step.observed.events:
            if e.type in SILENT_TYPES:
                continue
            table = seqs.setdefault(e.session, {})
            table[e.seq] = len(table)
            events.append(dataclasses.replace(e, seq=table[e.seq], data="{}"))
        pending = tuple(
            (
                s,
                tuple(
                    dataclasses.replace(r, admitted_seq=renumber(s, r.admitted_seq)) for r in rows
                ),
            )
            for s, rows in step.observed.pending
        )
        transcript = tuple(
            (s, tuple(dataclasses.replace(m, seq=renumber(s, m.seq)) for m in msgs))
            for s, msgs in step.observed.transcript
        )
        reply = step.reply
        if isinstance(reply, Ok) and "admitted_seq" in reply.result:
            result: dict[str, Any] = dict(reply.result)
            result["admitted_seq"] = renumber(result["session"], result["admitted_seq"])
            reply = Ok(result)
        observed = dataclasses.replace(
            step.observed, events=tuple(events), pending=pending, transcript=transcript
        )
        steps.append(dataclasses.replace(step, observed=observed, reply=reply))
    return Trace(trace.header, tuple(steps))


def test_a_terse_adapter_breaks_nothing_and_skips_what_it_cannot_show() -> None:
    judged = 0
    exercised: set[str] = set()
    for seed in range(600):
        run = random_run(G4, seed, 40)
        if any(isinstance(s.request, Fork) for s in run.steps):
            continue  # a fork's copies keep the parent's numbering: not renumbered here
        trace = as_quiet_adapter(run.trace())
        monitor = Monitor(G4, trace.header.hello)
        found = [v for step in trace.steps for v in monitor.feed(step)] + monitor.finish(True)
        assert not found, f"seed {seed}: {found[0]}"
        exercised |= monitor.exercised
        judged += 1
    assert judged > 100
    assert "execution-lifecycle" not in exercised  # nothing to judge it on
    for still in ("step-allowance", "steer-batch", "wake-follow-up", "promotion-at-boundary"):
        assert still in exercised  # judged from calls and views instead


def test_the_crash_operation_ends_executions_without_terminal_events() -> None:
    o = Ops()
    trace = play(o.create(), o.prompt(x="m1"), CrashOp(o.t()), o.resume(), "answer:stop")
    assert check_trace(trace, G4, True) == []


def chatty(trace: Trace) -> Trace:
    """The trace with every session's views reported on every step, changed
    or not (an adapter that always re-reads them)."""
    pending: dict[str, Any] = {}
    transcript: dict[str, Any] = {}
    steps: list[Step] = []
    for step in trace.steps:
        pending.update(step.observed.pending)
        transcript.update(step.observed.transcript)
        observed = dataclasses.replace(
            step.observed,
            pending=tuple(sorted(pending.items())),
            transcript=tuple(sorted(transcript.items())),
        )
        steps.append(dataclasses.replace(step, observed=observed))
    return Trace(trace.header, tuple(steps))


def first_of_each(found: list[Any]) -> dict[str, Any]:
    first: dict[str, Any] = {}
    for v in found:
        first.setdefault(v.invariant, v)
    return first


def test_views_reported_again_unchanged_change_no_verdict() -> None:
    """Re-reporting a wrong view re-judges it (so a violation may repeat),
    but the same invariants fail, first at the same steps, in the same words."""
    for seed in range(150):
        policy = G4 if seed % 2 else dataclasses.replace(G4, visible_time="admission")
        trace = random_run(policy, seed, 40).trace()
        plain = check_trace(trace, G4, True, only_expected=False)
        again = check_trace(chatty(trace), G4, True, only_expected=False)
        assert first_of_each(again) == first_of_each(plain), seed
        assert (not plain) == (not again)
