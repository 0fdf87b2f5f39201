"""A concurrent group as the checker reads it: what was sent, what came back,
and what the target showed once the group was over.

A :class:`Group` is the model's state before the group (quiescent, as the
lockstep left it), the group's requests with the adapter's monotonic invoke
and completion times and each one's outcome (a reply, an error, or
:class:`Unknown` when a kill took the implementation while it was in flight),
and the quiescent observations per session (:class:`Shown`): pending rows,
transcript, the open call, and optionally the session's log events appended
during the group. Requests are in the model's terms: an ID the target
generated before the group (a call to answer, an omitted input's ID) is
translated by the caller, and ``ids`` says which model ID stands for which
target ID, so that the checker can match what the target shows. The
``*_from_wire`` helpers build these values from protocol results.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..model import Call, Err, Event, Ok, Op, State
from ..model.values import canonical_json


@dataclass(frozen=True, slots=True)
class Unknown:
    """No reply: the implementation died with the request in flight."""

    def __str__(self) -> str:
        return "unknown (killed)"


Returned = Ok | Err | Unknown


@dataclass(frozen=True, slots=True)
class Request:
    """One request of the group: the operation, when the adapter issued it
    and saw its outcome (monotonic, any unit), and the outcome."""

    op: Op
    invoked: float
    completed: float | None  # None: no outcome came back
    returned: Returned


@dataclass(frozen=True, slots=True)
class Row:
    """One ``pending`` row as the protocol shows it."""

    input: str
    type: str
    delivery: str | None
    admitted_seq: int
    time: int


@dataclass(frozen=True, slots=True)
class Msg:
    """One ``messages`` entry as the protocol shows it (user and synthetic
    messages; the caller leaves out assistant messages, as lockstep does)."""

    id: str
    type: str
    seq: int
    time: int
    copied_from: str | None = None


@dataclass(frozen=True, slots=True)
class Shown:
    """What the target showed of one session once the group was over.

    ``events`` are the session's log events appended during the group (the
    ``log`` op with ``after`` the last seq before it), or ``None`` when the
    log was not read; a session the group created shows its whole log.
    ``more_calls`` are open calls the session shows besides ``call``: no
    order of the model gives a second one, so the checker judges any illegal
    (they are kept, not refused, so that the verdict can say so)."""

    pending: tuple[Row, ...] = ()
    transcript: tuple[Msg, ...] = ()
    call: Call | None = None
    events: tuple[Event, ...] | None = None
    more_calls: tuple[Call, ...] = ()


@dataclass(frozen=True, slots=True)
class Group:
    """A concurrent group and what the target showed; see the module docstring."""

    before: State
    requests: tuple[Request, ...]
    after: Mapping[str, Shown]
    killed: bool = False
    ids: Mapping[str, str] = field(default_factory=dict)  # model ID -> target ID


# --- from the protocol's wire form --------------------------------------------------


def returned_from_wire(response: Mapping[str, Any] | None) -> Returned:
    """A protocol response (``{"ok": ..., "result"|"error": ...}``), or None."""
    if response is None:
        return Unknown()
    if response.get("ok"):
        return Ok(dict(response.get("result", {})))
    error = response.get("error", {})
    return Err(str(error.get("code")), str(error.get("message", "")))


def row_from_wire(row: Mapping[str, Any]) -> Row:
    return Row(row["input"], row["type"], row.get("delivery"), row["admitted_seq"], row["time"])


def msg_from_wire(msg: Mapping[str, Any]) -> Msg:
    return Msg(msg["id"], msg["type"], msg["seq"], msg["time"], msg.get("copied_from"))


def call_from_wire(call: Mapping[str, Any]) -> Call:
    return Call(
        call["call"],
        call["session"],
        call["kind"],
        call["step"],
        call["final"],
        tuple(call["context"]),
        0,
    )


def event_from_wire(session: str, event: Mapping[str, Any]) -> Event:
    return Event(
        session,
        event["seq"],
        event["type"],
        event["time"],
        event.get("input"),
        canonical_json(event.get("data", {})),
    )


def shown_from_wire(
    session: str,
    pending: Sequence[Mapping[str, Any]],
    messages: Sequence[Mapping[str, Any]],
    calls: Sequence[Mapping[str, Any]],
    log: Sequence[Mapping[str, Any]] | None = None,
) -> Shown:
    """One session's observation from ``pending``, ``messages``, ``calls``
    (every open call: the session's are picked; a second one goes to
    ``more_calls``, for the checker to judge) and optionally ``log`` results."""
    mine = [call_from_wire(c) for c in calls if c["session"] == session]
    return Shown(
        tuple(row_from_wire(r) for r in pending),
        tuple(msg_from_wire(m) for m in messages),
        mine[0] if mine else None,
        None if log is None else tuple(event_from_wire(session, e) for e in log),
        tuple(mine[1:]),
    )
