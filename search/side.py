"""One side of a lockstep run (the model's or the target's) in normalized
form: :class:`Side` keeps what the side has shown and names its generated IDs
and times as the contract's normalizations say (the list is in
:mod:`.lockstep`'s docstring); :class:`.lockstep.LockstepTarget` compares two."""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from typing import Any

from ..model import Call, Crashed, Err, Op, Reply
from ..trace.decode import call_from_wire, message_from_wire, pending_from_wire
from ..trace.record import MessageView, Observed, PendingView, observed_wire

VISIBLE = ("user", "synthetic")


class Side:
    """What one side has shown, and its IDs and times in normalized form."""

    def __init__(self, harness: set[str]) -> None:
        self.harness = harness  # shared: the IDs the harness sent
        self.label: dict[str, str] = {}  # raw generated ID -> label
        self.raw: dict[str, str] = {}  # label -> raw ID
        self.generated = 0
        self.times: list[int] = []  # distinct, sorted
        self.pending: dict[str, tuple[PendingView, ...]] = {}
        self.transcript: dict[str, tuple[MessageView, ...]] = {}
        self.calls: tuple[Call, ...] = ()
        self.kinds: dict[str, str] = {}  # message id -> type, as shown
        self.receipts: dict[str, dict[str, Any]] = {}  # input label -> last raw receipt
        self.features: tuple[str, ...] = ()
        self.step_limit: int | None = None

    def copy(self) -> Side:
        """A copy that changes independently (the harness's IDs stay shared;
        the views, rows and receipts it holds are never changed in place)."""
        other = Side(self.harness)
        other.label, other.raw = dict(self.label), dict(self.raw)
        other.generated = self.generated
        other.times = list(self.times)
        other.pending, other.transcript = dict(self.pending), dict(self.transcript)
        other.calls = self.calls
        other.kinds, other.receipts = dict(self.kinds), dict(self.receipts)
        other.features, other.step_limit = self.features, self.step_limit
        return other

    # IDs
    def id(self, ident: str | None, copy_of: str | None = None, session: str = "") -> str | None:
        if ident is None:
            return None
        known = self.label.get(ident)
        if known is not None:
            return known
        if copy_of is None and ident in self.harness:
            return ident
        if copy_of is not None:
            name = f"copy:{session}:{self.id(copy_of)}"
        else:
            self.generated += 1
            name = f"gen:{self.generated}"
        self.label[ident] = name
        self.raw.setdefault(name, ident)
        return name

    # times
    def seen_time(self, t: int) -> None:
        i = bisect.bisect_left(self.times, t)
        if i == len(self.times) or self.times[i] != t:
            self.times.insert(i, t)

    def time(self, t: int) -> int:
        return bisect.bisect_left(self.times, t)

    # views
    def views(self) -> dict[str, Any]:
        """Everything this side has shown, as the protocol shows it: each
        session's pending rows and transcript, and the open calls."""
        pending, transcript = tuple(self.pending.items()), tuple(self.transcript.items())
        wire = observed_wire(Observed((), pending, transcript, self.calls))
        return {
            "pending": wire.get("pending", {}),
            "transcript": wire.get("transcript", {}),
            "calls": wire.get("calls", []),
        }

    def absorb(self, observed: Observed) -> set[str]:
        touched: set[str] = set()
        for sid, rows in observed.pending:
            self.pending[sid] = rows
            touched.add(sid)
            for r in rows:
                self.seen_time(r.time)
        for sid, msgs in observed.transcript:
            self.transcript[sid] = msgs
            touched.add(sid)
            for m in msgs:
                self.kinds[m.id] = m.type
                if m.type in VISIBLE:
                    self.seen_time(m.time)
        if observed.calls is not None:
            self.calls = observed.calls
        return touched

    def norm_pending(self, rows: Iterable[PendingView]) -> list[list[Any]]:
        rows = list(rows)
        for r in rows:
            self.seen_time(r.time)
        return [[self.id(r.input), r.type, r.delivery, self.time(r.time)] for r in rows]

    def norm_transcript(self, sid: str, msgs: Iterable[MessageView]) -> list[list[Any]]:
        out = []
        for m in msgs:
            self.kinds[m.id] = m.type
            if m.type not in VISIBLE:
                continue
            self.seen_time(m.time)
            name = self.id(m.id, m.copied_from, sid)
            root = self.id(m.copied_from) if m.copied_from is not None else None
            out.append([name, m.type, self.time(m.time)] + ([root] if root else []))
        return out

    def norm_calls(self, calls: Iterable[Call], final: bool = True) -> list[dict[str, Any]]:
        out = []
        for c in calls:
            doc = {
                "call": self.id(c.call),
                "session": c.session,
                "kind": c.kind,
                "step": c.step,
                "context": [self.id(m) for m in c.context if self.kinds.get(m, "user") in VISIBLE],
            }
            if final:
                doc["final"] = c.final
            out.append(doc)
        return out

    def norm_reply(self, op: Op | None, reply: Reply | None, final: bool) -> Any:
        if reply is None:
            return None
        if isinstance(reply, Err):
            return {"error": reply.code}
        if isinstance(reply, Crashed):
            return {"crashed": reply.point}
        result = reply.result
        name = op.OP if op is not None else ""
        if name == "hello":
            return {"ok": True}
        if name == "log":
            return {"ok": True, "events": "(not compared)"}
        if "data" in result and "type" in result and "input" in result:
            return {
                "receipt": {
                    "input": self.id(result["input"]),
                    "session": result.get("session"),
                    "type": result["type"],
                    "data": result["data"],
                    "delivery": result.get("delivery"),
                }
            }
        if name == "pending":
            rows = [pending_from_wire(r) for r in result.get("pending", ())]
            return {"pending": self.norm_pending(rows)}
        if name == "messages":
            sid = getattr(op, "session", "")
            msgs = [message_from_wire(m) for m in result.get("messages", ())]
            return {"messages": self.norm_transcript(sid, msgs)}
        if name == "calls":
            calls = [call_from_wire(c, 0) for c in result.get("calls", ())]
            return {"calls": self.norm_calls(calls, final)}
        return {"ok": result}
