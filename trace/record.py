"""The trace: the one record that the simulator writes, the checkers judge,
the store keeps and the reports draw (``docs/cli.md``, "The trace and
its hash").

A trace is a header and an ordered list of steps. A step is one request sent
to the target (possibly asked to crash at a failpoint) or one crash between
requests; restarts are the ``hello`` requests that follow a crash. After each
step the trace records what was observed, as changes only, so a trace grows
linearly with its run:

- ``events``: the durable events the step appended, in append order;
- ``pending`` / ``transcript``: for each session whose pending inbox or
  transcript changed, its whole new content;
- ``calls``: every open model call, when the set of open calls changed.

These are plain frozen values on the hot path; :func:`step_wire` gives the
canonical JSON form used for hashing, files and the database.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from ..model import Call, Crashed, Err, Event, Ok, Op, Reply
from ..model.frozen import fast_init

Phase = Literal["safety", "liveness"]
StepKind = Literal["request", "crash"]


@fast_init
@dataclass(frozen=True, slots=True)
class PendingView:
    """One row of ``pending``, as the protocol shows it."""

    input: str
    type: str
    delivery: str | None
    admitted_seq: int
    time: int


@fast_init
@dataclass(frozen=True, slots=True)
class MessageView:
    """One entry of ``messages``, as the protocol shows it."""

    id: str
    type: str
    seq: int
    time: int
    copied_from: str | None = None


@fast_init
@dataclass(frozen=True, slots=True)
class Observed:
    """What changed in the target after one step (see the module docstring)."""

    events: tuple[Event, ...] = ()
    pending: tuple[tuple[str, tuple[PendingView, ...]], ...] = ()
    transcript: tuple[tuple[str, tuple[MessageView, ...]], ...] = ()
    calls: tuple[Call, ...] | None = None


NOTHING = Observed()

# A concurrent group's requests are recorded as consecutive steps, along the
# order the group took effect (issue 19): each one's decision label says so,
# naming the index of the group's first step and the race it was aimed at,
# and whether the target's runner still had work when the step's observation
# ends ("busy": the next request of the group came before the runner was
# done; only the group as a whole ends quiescent).
GROUP = "group"


# A kill mid-group (issue 19): a member in flight whose effect the order found
# places (it took effect, up to a crash point or whole) is a step of its own
# with the reply ``Crashed(UNSEEN)``: the target never said what it answered,
# and the process did not die there. It is not a crash: the group's kill is a
# step of its own (kind "crash", no request), after the group's last member;
# then the restart. A member the order leaves out took no effect: no step.
UNSEEN = "unseen"


def unseen(reply: Reply | None) -> bool:
    """A group member's reply that nobody saw (:data:`UNSEEN`)."""
    return isinstance(reply, Crashed) and reply.point == UNSEEN


class GroupMark(NamedTuple):
    first: int  # the index of the group's first step
    busy: bool  # the runner still had work after this step


def group_label(first: int, race: str, busy: bool = False) -> str:
    """The decision label of a step of the group whose first step is ``first``."""
    return f"{GROUP} {first}{' busy' if busy else ''}: {race}"


def group_of(decision: str) -> GroupMark | None:
    """What a step's decision label says of its group, or None (not in one)."""
    if not decision.startswith(GROUP + " "):
        return None
    head, _, _ = decision[len(GROUP) + 1 :].partition(":")
    first, _, busy = head.partition(" ")
    return GroupMark(int(first), busy == "busy") if first.isdigit() else None


@fast_init
@dataclass(frozen=True, slots=True)
class Step:
    """One step of a run: its cause, what was sent, what came back, and what
    was observed after it. ``reply`` is ``None`` for a crash step."""

    index: int
    phase: Phase
    kind: StepKind
    decision: str
    request: Op | None
    crash_at: str | None
    reply: Reply | None
    observed: Observed


@dataclass(frozen=True, slots=True)
class TraceHeader:
    """What a trace's hash covers besides its steps."""

    seed: int | None
    policy: str
    target: str
    hello: dict[str, Any]
    version: str
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Trace:
    header: TraceHeader
    steps: tuple[Step, ...]


# --- canonical JSON ----------------------------------------------------------


def reply_wire(reply: Reply | None) -> dict[str, Any] | None:
    if reply is None:
        return None
    if isinstance(reply, Ok):
        return {"ok": True, "result": reply.result}
    if isinstance(reply, Err):
        return {"ok": False, "error": reply.code}  # messages are free text: not compared
    assert isinstance(reply, Crashed)
    return {"unknown": reply.point}


def observed_wire(observed: Observed) -> dict[str, Any]:
    wire: dict[str, Any] = {}
    if observed.events:
        wire["events"] = [dict(e.to_wire(), session=e.session) for e in observed.events]
    if observed.pending:
        wire["pending"] = {s: [_view(r) for r in rows] for s, rows in observed.pending}
    if observed.transcript:
        wire["transcript"] = {s: [_view(m) for m in msgs] for s, msgs in observed.transcript}
    if observed.calls is not None:
        wire["calls"] = [c.to_wire() for c in observed.calls]
    return wire


def _view(value: PendingView | MessageView) -> dict[str, Any]:
    fields: tuple[str, ...] = value.__slots__
    return {k: getattr(value, k) for k in fields if getattr(value, k) is not None}


def step_wire(step: Step) -> dict[str, Any]:
    """The canonical JSON-ready form of one step (no timings, no stderr)."""
    request = step.request.to_wire() if step.request is not None else None
    if request is not None and step.crash_at is not None:
        request["crash_at"] = step.crash_at
    return {
        "index": step.index,
        "phase": step.phase,
        "kind": step.kind,
        "decision": step.decision,
        "request": request,
        "reply": reply_wire(step.reply),
        "observed": observed_wire(step.observed),
    }


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def trace_hash(trace: Trace) -> str:
    """SHA-256 over the canonical encoding of the header and every step."""
    digest = hashlib.sha256()
    h = trace.header
    digest.update(canonical({"policy": h.policy, "hello": h.hello, "version": h.version}).encode())
    for step in trace.steps:
        digest.update(b"\n")
        digest.update(canonical(step_wire(step)).encode())
    return digest.hexdigest()
