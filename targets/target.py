"""Targets: what the simulator drives: the reference model in process
(:class:`ModelTarget`) or an implementation's adapter process behind the same
interface (``targets/adapter.py``, ``docs/protocol.md``).

A target takes one request at a time (optionally asked to crash at a
failpoint) and returns the reply and what changed, as an
:class:`~inboxsim.trace.record.Observed`. ``kill`` is a crash between requests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Protocol

from ..model import (
    Call,
    Crashed,
    Err,
    Event,
    Hello,
    Op,
    Policy,
    Reply,
    RunnerStep,
    State,
    advance,
    apply,
    enabled,
    initial_state,
    request,
)
from ..model.store import SessionLog
from ..trace.record import NOTHING, MessageView, Observed, PendingView
from .group import Cut, GroupReply, GroupSteps, Member, member_reply, serve_group


class Target(Protocol):
    name: str

    def request(self, op: Op, crash_at: str | None = None) -> tuple[Reply, Observed]: ...

    def kill(self) -> Observed: ...

    def close(self) -> None: ...


def pending_view(log: SessionLog) -> tuple[PendingView, ...]:
    return tuple(
        PendingView(r.input, r.type, r.delivery, r.admitted_seq, r.time) for r in log.pending
    )


def transcript_view(log: SessionLog) -> tuple[MessageView, ...]:
    return tuple(MessageView(m.id, m.type, m.seq, m.time, m.copied_from) for m in log.transcript)


def observe(before: State, after: State, events: tuple[Any, ...]) -> Observed:
    """What changed between two model states, in trace form."""
    pending: list[tuple[str, tuple[PendingView, ...]]] = []
    transcript: list[tuple[str, tuple[MessageView, ...]]] = []
    old, new = before.store.sessions, after.store.sessions
    if old is not new:
        for sid in sorted(new):
            log, prior = new[sid], old.get(sid)
            if prior is log:
                continue
            if prior is None or prior.pending != log.pending:
                pending.append((sid, pending_view(log)))
            if prior is None or prior.transcript != log.transcript:
                transcript.append((sid, transcript_view(log)))
    calls: tuple[Call, ...] | None = None
    if before.runs is not after.runs:
        now_open = after.open_calls()
        if now_open != before.open_calls():
            calls = tuple(now_open)
    if not events and not pending and not transcript and calls is None:
        return NOTHING  # most steps change nothing: one shared value
    return Observed(tuple(events), tuple(pending), tuple(transcript), calls)


class ModelTarget:
    """The reference model as a target: exact observations, free crashes."""

    group_kills = True  # group_steps takes a member's crash_at (a kill mid-group)

    def __init__(self, policy: Policy, step_limit: int) -> None:
        self.name = f"model:{policy.name}"
        self.state = initial_state(policy, step_limit)

    def request(self, op: Op, crash_at: str | None = None) -> tuple[Reply, Observed]:
        before = self.state
        outcome = apply(before, op, crash_at)
        self.state = outcome.state
        return outcome.reply, observe(before, outcome.state, outcome.events)

    def group(
        self, ops: list[Op], schedule: list[int], crash_at: Sequence[str | None] = ()
    ) -> tuple[GroupReply, Observed]:
        """A concurrent group under the schedule, killed where a member's
        failpoint is reached (``group.py``). The model stays up to answer the
        members in flight as unknown, as an adapter in front of a server does."""
        before = self.state
        served = serve_group(before, ops, list(range(1, len(ops) + 1)), schedule, crash_at)
        self.state = served.state
        reply = GroupReply(list(served.outcomes), served.pauses, served.killed)
        return reply, observe(before, served.state, served.events)

    def group_steps(
        self, ops: list[Op], schedule: list[int], crash_at: Sequence[str | None] = ()
    ) -> GroupSteps:
        """A concurrent group under the schedule, as trace steps
        (:func:`group_members`), and the pauses passed. Killed at a member's
        failpoint (``after_admit``: in the member's own effect), the members
        placed before it are steps as usual and the dying member's step is the
        ``crash``, a failpoint's step as when sent alone; the members never
        placed took no effect. Killed inside a runner transition
        (``mid_promotion``, ``after_promotion``), the transition's events up
        to the failpoint go to the step of the request it works for (as any
        runner transition's do) and the kill is a step of its own (``kill``)."""
        start = self.state
        served = serve_group(start, ops, list(range(1, len(ops) + 1)), schedule, crash_at)
        moves = served.moves[:-1] if served.killed else served.moves
        order: list[int | RunnerStep | Cut] = []
        for m in moves:
            move = m.request if m.step is None else m.step
            assert move is not None
            order.append(move)
        point = next((p for p in crash_at if p is not None), "")
        died = served.moves[-1] if served.killed else None
        if died is not None and died.step is not None:
            order.append(Cut(died.step, point))
        now = max(op.now for op in ops)
        replies = [member_reply(o) if "ok" in o else Crashed("group") for o in served.outcomes]
        members, state = group_members(start, ops, order, now, replies, busy_end=served.killed)
        self.state = served.state
        if died is None:
            return GroupSteps(members, served.pauses)
        if died.request is None:  # a runner transition died: the kill's own step
            return GroupSteps(members, served.pauses, kill=observe(state, served.state, ()))
        crashed = observe(state, served.state, request(state, ops[died.request], point).events)
        return GroupSteps(
            members, served.pauses, crash=Member(died.request, Crashed(point), crashed)
        )

    def kill(self) -> Observed:
        before = self.state
        self.state = before.crashed()
        return observe(before, self.state, ())

    def close(self) -> None:
        pass


def group_members(
    start: State,
    ops: Sequence[Op],
    order: Sequence[int | RunnerStep | Cut],
    now: int,
    replies: Sequence[Reply] | None = None,
    busy_end: bool = False,
) -> tuple[list[Member], State]:
    """A group that took effect in ``order`` (each request's own transition,
    by index into ``ops``, and the runner's transitions) as trace steps, one
    per request, and the model's state after them.

    A trace step is a request and what its target did after it, so each
    runner transition goes into a request's step: that of the latest request
    of its session that changed something (appended events), rather than the
    latest request of all, because a step then shows what its request set
    going, the way a sequential one does: an error, an exact retry or a
    request on another session is not charged with a drain it did not start.
    This moves a runner transition before requests that come after it in
    ``order``, which is an equally legal order when they commute with it; the
    order is replayed through the model to make sure (every reply as in
    ``replies``); where it is not, to the latest request that did not fail
    (only errors move after it, so an error's step does not show the
    runner's events when that order replays too); and where that is not
    either, the steps follow ``order`` itself.
    A step after which the runner still has work is ``busy``; ``busy_end``:
    the order stops at a kill, so the runner may still have work at its end."""
    for attribute in ("session", "answered", "order"):
        members = _along(start, ops, order, replies, now, attribute, busy_end)
        if members is not None:
            return members
    raise AssertionError("a group's own order does not replay through the model")


ANSWERED = "\0answered"  # ``_along``'s key of the latest request that did not fail


def _along(
    start: State,
    ops: Sequence[Op],
    order: Sequence[int | RunnerStep | Cut],
    replies: Sequence[Reply] | None,
    now: int,
    attribute: str,
    busy_end: bool = False,
) -> tuple[list[Member], State] | None:
    placed: list[int] = []  # request indexes, in order
    runs: dict[
        int, list[RunnerStep | Cut]
    ] = {}  # position in placed -> runner transitions after it
    latest: dict[str, int] = {}  # session -> position of its latest request that changed something
    state = start
    for move in order:
        if isinstance(move, int):
            placed.append(move)
            runs[len(placed) - 1] = []
            out = request(state, ops[move])
            if not isinstance(out.reply, Err):
                latest[ANSWERED] = len(placed) - 1  # the latest request that did not fail
            if out.state != state:  # it changed something: its own session's work at least
                changed = {e.session for e in out.events}
                changed.add(getattr(ops[move], "session", None) or "")
                for sid in changed:
                    latest[sid] = len(placed) - 1
            state = out.state
        else:
            state = _advance(state, move, now)[0]
            mine = move.step.session if isinstance(move, Cut) else move.session
            key = {"session": mine, "answered": ANSWERED}.get(attribute)
            at = latest.get(key, len(placed) - 1) if key is not None else len(placed) - 1
            runs[at].append(move)
    members: list[Member] = []
    state = start
    for k, i in enumerate(placed):
        before = state
        out = request(state, ops[i])
        if replies is not None and out.reply != replies[i]:
            return None
        state, events = out.state, list(out.events)
        for step in runs[k]:
            if (step.step if isinstance(step, Cut) else step) not in enabled(state):
                return None
            state, appended = _advance(state, step, now)
            events.extend(appended)
        members.append(Member(i, out.reply, observe(before, state, tuple(events)), state.busy))
    if state.busy and not busy_end:
        return None
    return members, state


def _advance(state: State, move: RunnerStep | Cut, now: int) -> tuple[State, tuple[Event, ...]]:
    """One runner transition; a :class:`Cut` one stops at its failpoint with
    the process still up (the kill is a step of its own): the durable state
    so far, and the runner's work as it was, so the step's views show the
    promotions and no call closed yet."""
    if not isinstance(move, Cut):
        after = advance(state, move, now)
        return after.state, after.events
    after = advance(state, move.step, now, move.point)
    if after.crashed is None:
        raise ValueError(f"{move.step} never reaches {move.point}")
    dying = replace(after.state, runs=state.runs, work=state.work, wakes=state.wakes)
    return dying, after.events


def hello_op(now: int, step_limit: int) -> Hello:
    return Hello(now, step_limit=step_limit)
