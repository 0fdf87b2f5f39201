"""Small hand-built traces for the invariant tests.

A scenario is a handful of operations played on the model (so the trace is
consistent end to end); a violating trace is that scenario with one step
edited by hand to plant exactly the fault an invariant must catch.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from inboxsim.model import (
    G4,
    Compact,
    Create,
    Err,
    Event,
    Fork,
    Interrupt,
    Ok,
    Op,
    Policy,
    Prompt,
    Resume,
    RevertCommit,
    RevertStage,
    Synthetic,
)
from inboxsim.model.values import Call, canonical_json
from inboxsim.targets.target import ModelTarget
from inboxsim.trace.record import MessageView, Observed, PendingView, Step, Trace, group_label

from .invariant_driver import run_script


class Ops:
    """Operation builders with an automatic, increasing ``now``."""

    def __init__(self, step: int = 1) -> None:
        self.now = 0
        self.step = step

    def t(self) -> int:
        self.now += self.step
        return self.now

    def create(self, s: str = "s1") -> Create:
        return Create(self.t(), session=s)

    def prompt(self, s: str = "s1", x: str | None = None, text: str = "a", **kw: Any) -> Prompt:
        return Prompt(self.t(), session=s, input=x, text=text, **kw)

    def synthetic(
        self, s: str = "s1", x: str | None = None, text: str = "a", **kw: Any
    ) -> Synthetic:
        return Synthetic(self.t(), session=s, input=x, text=text, **kw)

    def compact(self, s: str = "s1", x: str | None = None) -> Compact:
        return Compact(self.t(), session=s, input=x)

    def resume(self, s: str = "s1") -> Resume:
        return Resume(self.t(), session=s)

    def interrupt(self, s: str = "s1") -> Interrupt:
        return Interrupt(self.t(), session=s)

    def fork(self, s: str, child: str, before: str | None = None) -> Fork:
        return Fork(self.t(), session=s, child=child, before=before)

    def stage(self, s: str, message: str) -> RevertStage:
        return RevertStage(self.t(), session=s, message=message)

    def commit(self, s: str = "s1") -> RevertCommit:
        return RevertCommit(self.t(), session=s)


def play(*items: Op | str | tuple[Op, str], policy: Policy = G4, step_limit: int = 3) -> Trace:
    """A scenario's trace: step 0 is ``hello``, then one step per item."""
    return run_script(policy, items, step_limit).trace()


def play_group(
    prefix: list[Op], members: list[Op], schedule: list[int], race: str = "retry.exact"
) -> Trace:
    """``play(*prefix)``, then ``members`` as one concurrent group served by
    the model under ``schedule``: one step per member, along the order it
    took (``ModelTarget.group_steps``), labelled as a group."""
    base = play(*prefix)
    target = ModelTarget(G4, 3)
    for step in base.steps:
        assert step.request is not None
        target.request(step.request)
    got = target.group_steps(list(members), schedule).members
    first = len(base.steps)
    steps = [
        Step(
            first + k,
            "safety",
            "request",
            group_label(first, race, m.busy),
            members[m.position],
            None,
            m.reply,
            m.observed,
        )
        for k, m in enumerate(got)
    ]
    return Trace(base.header, base.steps + tuple(steps))


def ev(
    session: str, seq: int, type_: str, time: int = 0, input: str | None = None, **data: Any
) -> Event:
    return Event(session, seq, type_, time, input, canonical_json(data))


def pv(
    input: str, type_: str = "user", delivery: str | None = "steer", seq: int = 0, time: int = 0
) -> PendingView:
    return PendingView(input, type_, delivery, seq, time)


def mv(
    id_: str, type_: str = "user", seq: int = 0, time: int = 0, copied_from: str | None = None
) -> MessageView:
    return MessageView(id_, type_, seq, time, copied_from)


_KEEP: Any = object()


def edit(
    trace: Trace,
    index: int,
    *,
    reply: Any = _KEEP,
    events: Any = _KEEP,
    pending: Any = _KEEP,
    transcript: Any = _KEEP,
    calls: Any = _KEEP,
    keep: int | None = None,
) -> Trace:
    """The trace with step ``index`` changed; ``keep`` cuts the trace after
    that many steps (default: right after the edited step)."""
    step = trace.steps[index]
    obs = step.observed
    changes: dict[str, Any] = {}
    if events is not _KEEP:
        changes["events"] = tuple(events)
    if pending is not _KEEP:
        changes["pending"] = tuple((s, tuple(rows)) for s, rows in pending.items())
    if transcript is not _KEEP:
        changes["transcript"] = tuple((s, tuple(msgs)) for s, msgs in transcript.items())
    if calls is not _KEEP:
        changes["calls"] = None if calls is None else tuple(calls)
    new_step = dataclasses.replace(
        step,
        observed=dataclasses.replace(obs, **changes),
        reply=step.reply if reply is _KEEP else reply,
    )
    steps = list(trace.steps)
    steps[index] = new_step
    cut = index + 1 if keep is None else keep
    return Trace(trace.header, tuple(steps[:cut]))


def cut(trace: Trace, n: int) -> Trace:
    return Trace(trace.header, trace.steps[:n])


def events(trace: Trace, index: int) -> list[Event]:
    return list(trace.steps[index].observed.events)


def renumber(evs: list[Event], first: int) -> list[Event]:
    """The same events with consecutive seqs from ``first`` (per session)."""
    return [dataclasses.replace(e, seq=first + i) for i, e in enumerate(evs)]


def view(trace: Trace, index: int, which: str, session: str = "s1") -> tuple[Any, ...]:
    """The last ``pending``/``transcript`` view of a session up to a step."""
    for step in reversed(trace.steps[: index + 1]):
        views: tuple[tuple[str, tuple[Any, ...]], ...] = getattr(step.observed, which)
        for sid, rows in views:
            if sid == session:
                return rows
    return ()


def calls_at(trace: Trace, index: int) -> tuple[Call, ...]:
    for step in reversed(trace.steps[: index + 1]):
        if step.observed.calls is not None:
            return step.observed.calls
    return ()


def receipt(trace: Trace, index: int) -> dict[str, Any]:
    reply = trace.steps[index].reply
    assert isinstance(reply, Ok), reply
    return dict(reply.result)


def ok(result: dict[str, Any]) -> Ok:
    return Ok(result)


def err(code: str) -> Err:
    return Err(code, "planted")


def show(trace: Trace) -> str:
    """A readable dump, for writing scenarios."""
    import json

    from inboxsim.trace.record import step_wire

    return "\n".join(json.dumps(step_wire(s)) for s in trace.steps)


__all__ = [
    "Ops",
    "Observed",
    "Step",
    "calls_at",
    "cut",
    "edit",
    "err",
    "ev",
    "events",
    "mv",
    "ok",
    "play",
    "pv",
    "receipt",
    "renumber",
    "show",
    "view",
]
