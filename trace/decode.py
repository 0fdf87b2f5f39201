"""The wire form read back: the one decoder of replies, observations, open calls,
pending rows and transcript messages, the reverse of :func:`.record.step_wire`.

The store reads stored traces through it, the adapter target reads an
adapter's answers through it and lockstep normalises both sides through it, so
that a call or a pending row means the same thing wherever it came from. Two
things the wire form leaves out, and why that is safe:

- an error reply's message (free text, never compared or judged): read back as "";
- an open call's global opening order (``Call.opened``, used only by the model
  to answer oldest first): the caller numbers it (the store from the order
  calls first appear, the adapter target from when it first saw the call open).
"""

from __future__ import annotations

from typing import Any

from ..model import Call, Crashed, Err, Event, Ok
from ..model.values import encode_json
from .record import MessageView, Observed, PendingView


def reply_from_wire(wire: dict[str, Any] | None) -> Ok | Err | Crashed | None:
    if wire is None:
        return None
    if "unknown" in wire:
        return Crashed(wire["unknown"])
    if wire.get("ok"):
        return Ok(wire["result"])
    return Err(wire["error"], "")


def call_from_wire(wire: dict[str, Any], opened: int) -> Call:
    """One open call (``calls`` query or stored observation); ``opened`` is its
    opening order, which the wire form does not carry."""
    return Call(
        wire["call"],
        wire["session"],
        wire["kind"],
        wire["step"],
        wire["final"],
        tuple(wire["context"]),
        opened,
    )


def pending_from_wire(wire: dict[str, Any]) -> PendingView:
    return PendingView(
        wire["input"], wire["type"], wire.get("delivery"), wire["admitted_seq"], wire["time"]
    )


def message_from_wire(wire: dict[str, Any]) -> MessageView:
    return MessageView(wire["id"], wire["type"], wire["seq"], wire["time"], wire.get("copied_from"))


def observed_from_wire(wire: dict[str, Any], opened: dict[str, int]) -> Observed:
    """``opened`` maps call IDs to their opening order, filled as calls appear."""
    events = tuple(
        Event(e["session"], e["seq"], e["type"], e["time"], e.get("input"), encode_json(e["data"]))
        for e in wire.get("events", ())
    )
    pending = tuple(
        (s, tuple(pending_from_wire(r) for r in rows))
        for s, rows in wire.get("pending", {}).items()
    )
    transcript = tuple(
        (s, tuple(message_from_wire(m) for m in msgs))
        for s, msgs in wire.get("transcript", {}).items()
    )
    calls = None
    if "calls" in wire:
        calls = tuple(
            call_from_wire(c, opened.setdefault(c["call"], len(opened))) for c in wire["calls"]
        )
    return Observed(events, pending, transcript, calls)
