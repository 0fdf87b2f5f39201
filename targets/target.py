"""Targets: what the simulator drives: the reference model in process
(:class:`ModelTarget`) or an implementation's adapter process behind the same
interface (``targets/adapter.py``, ``docs/protocol.md``).

A target takes one request at a time (optionally asked to crash at a
failpoint) and returns the reply and what changed, as an
:class:`~inboxsim.trace.record.Observed`. ``kill`` is a crash between requests.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from ..model import Call, Hello, Op, Policy, Reply, State, apply, initial_state
from ..model.store import SessionLog
from ..trace.record import MessageView, Observed, PendingView
from .group import GroupReply, serve_group


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
        now_open = tuple(after.open_calls())
        if now_open != tuple(before.open_calls()):
            calls = now_open
    return Observed(tuple(events), tuple(pending), tuple(transcript), calls)


class ModelTarget:
    """The reference model as a target: exact observations, free crashes."""

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

    def kill(self) -> Observed:
        before = self.state
        self.state = before.crashed()
        return observe(before, self.state, ())

    def close(self) -> None:
        pass


def hello_op(now: int, step_limit: int) -> Hello:
    return Hello(now, step_limit=step_limit)
