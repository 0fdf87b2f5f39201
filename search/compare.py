"""Comparing the model with the target under a growing match of IDs, seqs
and times (``docs/cli.md``, "Lockstep: what conformance compares").

The lockstep maps the IDs an implementation generates by order of
appearance; in a concurrent group there is no such order (two prompts
without IDs may have been admitted either way round), so here the mapping is
part of the search: a :class:`Match` is a partial bijection from the model's
IDs generated during the group to the target's, built as replies and
observations are compared and kept only as long as no comparison contradicts
it. IDs known before the group (the harness's own, and generated ones the
caller mapped in ``Group.ids``) are fixed. Sequence numbers compare only by
the order they impose: per session, model seqs and target seqs must be
order-isomorphic (each model seq stands for one target seq, in the same
order). Times compare by order too, weakly: a target may stamp one model
``now`` with several clock readings, never in the opposite order.

Every comparison returns the extended match or raises :class:`Mismatch`
naming, in one line, what differed.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from typing import Any

from ..model import Call, Err, Event, Ok, Op
from ..model.values import EVENT_TYPES, canonical_json
from .history import Msg, Returned, Row, Unknown, call_from_wire, msg_from_wire, row_from_wire

# The events the projector folds into pending rows and the transcript: the
# log's inbox history. Runner events are left out: implementations differ in
# which they write (docs/protocol.md, "Receipts, messages and events").
FOLDED = frozenset(
    {
        "admitted",
        "promoted",
        "compaction_admitted",
        "compaction_ended",
        "compaction_failed",
        "revert_staged",
        "revert_cleared",
        "revert_committed",
        "forked",
    }
)


# The runner's events (every other type the protocol lists). Not compared;
# where a target logs them, the search prefers an order that places them
# where the target did (``linearize.py``), so that the checkers, which judge
# the target's events along the order found, see each where it happened.
RUNNER = frozenset(EVENT_TYPES) - FOLDED


def folded(event: Event) -> bool:
    """Is this one of the log's inbox history? (A compaction the agent ran by
    itself, ``reason: "auto"``, settles no barrier: it is not.)"""
    if event.type not in FOLDED:
        return False
    return not event.type.startswith("compaction_") or '"reason":"auto"' not in event.data


class Mismatch(Exception):
    """The model and the target differ; the message says where and how."""


class Match:
    """IDs, seqs and times matched so far (see the module docstring). Immutable:
    each extension returns a new match sharing what did not change."""

    __slots__ = ("fixed", "fixed_back", "ids", "back", "seqs", "times", "_key")

    def __init__(
        self,
        fixed: Mapping[str, str],
        fixed_back: Mapping[str, str],
        ids: Mapping[str, str],
        back: Mapping[str, str],
        seqs: Mapping[str, tuple[tuple[int, int], ...]],
        times: tuple[tuple[int, int, int], ...],
    ) -> None:
        self.fixed = fixed  # model ID -> target ID, known before the group
        self.fixed_back = fixed_back
        self.ids = ids  # model ID generated in the group -> target ID
        self.back = back
        self.seqs = seqs  # session -> (model seq, target seq), sorted
        self.times = times  # (model time, lowest, highest target time), sorted
        self._key: tuple[Any, ...] | None = None

    @classmethod
    def start(cls, known: set[str], given: Mapping[str, str]) -> Match:
        """``known``: IDs that stand for themselves unless ``given`` maps them."""
        fixed = {x: x for x in known}
        fixed.update(given)
        back = {t: m for m, t in fixed.items()}
        if len(back) != len(fixed):
            raise ValueError("the given ID map sends two model IDs to one target ID")
        return cls(fixed, back, {}, {}, {}, ())

    def key(self) -> tuple[Any, ...]:
        """A hashable value equal for equal matches (the memo key's part)."""
        if self._key is None:
            self._key = (
                frozenset(self.ids.items()),
                tuple(sorted(self.seqs.items())),
                self.times,
            )
        return self._key

    def _with(self, **changes: Any) -> Match:
        parts = {name: getattr(self, name) for name in Match.__slots__ if name != "_key"}
        parts.update(changes)
        return Match(**parts)

    # --- the three kinds of value ----------------------------------------------------

    def id(self, model: str | None, target: str | None, what: str) -> Match:
        if model is None or target is None:
            if model != target:
                raise Mismatch(f"{what}: model {model}, target {target}")
            return self
        bound = self.fixed.get(model) or self.ids.get(model)
        if bound is not None:
            if bound != target and bound == model:
                raise Mismatch(f"{what}: model {model}, target {target}")
            if bound != target:
                raise Mismatch(f"{what}: model {model} is {bound} on the target, not {target}")
            return self
        owner = self.fixed_back.get(target) or self.back.get(target)
        if owner is not None:
            raise Mismatch(f"{what}: target {target} is already model {owner}, not {model}")
        return self._with(ids={**self.ids, model: target}, back={**self.back, target: model})

    def seq(self, session: str, model: int, target: int, what: str) -> Match:
        pairs = self.seqs.get(session, ())
        i = bisect_left(pairs, (model, -1))
        if i < len(pairs) and pairs[i][0] == model:
            if pairs[i][1] != target:
                raise Mismatch(
                    f"{what}: model seq {model} is target seq {pairs[i][1]} elsewhere, not {target}"
                )
            return self
        below = pairs[i - 1] if i > 0 else None
        above = pairs[i] if i < len(pairs) else None
        if (below is not None and target <= below[1]) or (above is not None and target >= above[1]):
            other = below if below is not None and target <= below[1] else above
            assert other is not None
            raise Mismatch(
                f"{what}: seq order differs in {session}: model {other[0]} vs {model}, "
                f"target {other[1]} vs {target}"
            )
        seqs = {**self.seqs, session: pairs[:i] + ((model, target),) + pairs[i:]}
        return self._with(seqs=seqs)

    def time(self, model: int, target: int, what: str) -> Match:
        times = self.times
        i = bisect_left(times, (model, -1, -1))
        same = i < len(times) and times[i][0] == model
        below = times[i - 1] if i > 0 else None
        above = times[i + 1 if same else i] if (i + 1 if same else i) < len(times) else None
        if (below is not None and target < below[2]) or (above is not None and target > above[1]):
            raise Mismatch(f"{what}: time order differs: model {model}, target {target}")
        if same:
            _, lo, hi = times[i]
            if lo <= target <= hi:
                return self
            entry = (model, min(lo, target), max(hi, target))
            return self._with(times=times[:i] + (entry,) + times[i + 1 :])
        return self._with(times=times[:i] + ((model, target, target),) + times[i:])


# --- replies ----------------------------------------------------------------------


def reply(op: Op, model: Ok | Err, target: Returned, m: Match, what: str) -> Match:
    """A request's reply: success or error code, and the result normalized."""
    if isinstance(target, Unknown):
        return m
    if isinstance(model, Err) or isinstance(target, Err):
        if not (isinstance(model, Err) and isinstance(target, Err) and model.code == target.code):
            raise Mismatch(f"{what}: model {said(model)}, target {said(target)}")
        return m
    a, b = model.result, target.result
    session = getattr(op, "session", "")
    if op.OP in ("hello", "log"):  # not compared, as in lockstep
        return m
    if op.OP in ("prompt", "synthetic", "compact"):
        return receipt(a, b, m, what)
    if op.OP == "pending":
        rows_a = [row_from_wire(r) for r in a["pending"]]
        return pending(session, rows_a, [row_from_wire(r) for r in b["pending"]], m, what)
    if op.OP == "messages":
        msgs_a = [msg_from_wire(x) for x in a["messages"]]
        return transcript(session, msgs_a, [msg_from_wire(x) for x in b["messages"]], m, what)
    if op.OP == "calls":
        calls_a = [call_from_wire(c) for c in a["calls"]]
        calls_b = [call_from_wire(c) for c in b["calls"]]
        if len(calls_a) != len(calls_b):
            raise Mismatch(f"{what}: model {len(calls_a)} open calls, target {len(calls_b)}")
        for x, y in zip(calls_a, calls_b, strict=True):
            m = call(x, y, m, what)
        return m
    if a != b:
        raise Mismatch(f"{what}: model {said(model)}, target {said(target)}")
    return m


def receipt(a: Mapping[str, Any], b: Mapping[str, Any], m: Match, what: str) -> Match:
    session = a["session"]
    for name in ("session", "type", "delivery"):
        if a.get(name) != b.get(name):
            raise Mismatch(f"{what}: receipt {name} model {a.get(name)}, target {b.get(name)}")
    if canonical_json(a.get("data")) != canonical_json(b.get("data")):
        raise Mismatch(f"{what}: receipt data model {a.get('data')}, target {b.get('data')}")
    m = m.id(a["input"], b.get("input"), f"{what}: receipt input")
    m = m.seq(session, a["admitted_seq"], b["admitted_seq"], f"{what}: receipt admitted_seq")
    return m.time(a["time"], b["time"], f"{what}: receipt time")


# --- observations -------------------------------------------------------------------


def pending(session: str, a: Sequence[Row], b: Sequence[Row], m: Match, what: str) -> Match:
    if len(a) != len(b):
        raise Mismatch(
            f"{what}: model {_ids(r.input for r in a)}, target {_ids(r.input for r in b)}"
        )
    for x, y in zip(a, b, strict=True):
        if (x.type, x.delivery) != (y.type, y.delivery):
            raise Mismatch(
                f"{what}: {x.input} is {x.type}/{x.delivery} in the model, "
                f"{y.input} {y.type}/{y.delivery} on the target"
            )
        m = m.id(x.input, y.input, what)
        m = m.seq(session, x.admitted_seq, y.admitted_seq, what)
        m = m.time(x.time, y.time, what)
    return m


def transcript(session: str, a: Sequence[Msg], b: Sequence[Msg], m: Match, what: str) -> Match:
    if len(a) != len(b):
        raise Mismatch(f"{what}: model {_ids(x.id for x in a)}, target {_ids(y.id for y in b)}")
    for x, y in zip(a, b, strict=True):
        if x.type != y.type:
            raise Mismatch(
                f"{what}: {x.id} is {x.type} in the model, {y.id} {y.type} on the target"
            )
        m = m.id(x.copied_from, y.copied_from, f"{what}: copied_from")
        m = m.id(x.id, y.id, what)
        m = m.seq(session, x.seq, y.seq, what)
        m = m.time(x.time, y.time, what)
    return m


def call(a: Call | None, b: Call | None, m: Match, what: str) -> Match:
    if a is None or b is None:
        if a is not b:
            raise Mismatch(f"{what}: model {said_call(a)}, target {said_call(b)}")
        return m
    shape_a = (a.session, a.kind, a.step, a.final, len(a.context))
    shape_b = (b.session, b.kind, b.step, b.final, len(b.context))
    if shape_a != shape_b:
        raise Mismatch(f"{what}: model {said_call(a)}, target {said_call(b)}")
    m = m.id(a.call, b.call, f"{what}: call")
    for x, y in zip(a.context, b.context, strict=True):
        m = m.id(x, y, f"{what}: context")
    return m


def events(session: str, a: Sequence[Event], b: Sequence[Event], m: Match, what: str) -> Match:
    """The log's folded events, in order (runner events are not compared)."""
    a = [e for e in a if folded(e)]
    b = [e for e in b if folded(e)]
    if [e.type for e in a] != [e.type for e in b]:
        raise Mismatch(f"{what}: model {_events(a)}, target {_events(b)}")
    for x, y in zip(a, b, strict=True):
        m = event(session, x, y, m, what)
    return m


def payload(event: Event) -> str | None:
    """An ``admitted`` event's payload (its data's ``data``, docs/protocol.md),
    as canonical JSON; None for another event, or a log that does not write
    the payload in that form (implementations may not: it is not compared,
    only preferred, ``linearize.py``)."""
    if event.type != "admitted":
        return None
    try:
        data = json.loads(event.data)
    except (TypeError, ValueError):
        return None
    if not isinstance(data, dict) or "data" not in data:
        return None
    return canonical_json(data["data"])


def same_payload(a: Event, b: Event, what: str) -> None:
    """The model's admission ``a`` logged the payload the target's ``b`` did
    (where the target logs one)."""
    theirs = payload(b)
    if theirs is not None and payload(a) != theirs:
        raise Mismatch(f"{what}: {a.input} admitted with payload {payload(a)}, target {theirs}")


def event(session: str, a: Event, b: Event | None, m: Match, what: str) -> Match:
    """One folded event against the target's at the same place (``None``:
    the target's log has no more)."""
    if b is None or a.type != b.type:
        theirs = "nothing more" if b is None else _events([b])
        raise Mismatch(f"{what}: model {_events([a])}, target {theirs} at that place")
    m = m.id(a.input, b.input, f"{what}: {a.type}")
    return m.seq(session, a.seq, b.seq, f"{what}: {a.type}")


# --- words ----------------------------------------------------------------------------


def said(reply: Ok | Err | Unknown) -> str:
    if isinstance(reply, Err):
        return reply.code
    if isinstance(reply, Unknown):
        return str(reply)
    result = reply.result
    if {"input", "type", "data"} <= set(result):
        return f"receipt {result['input']} ({result['type']}, {result.get('delivery')})"
    return canonical_json(result) if len(canonical_json(result)) < 60 else "a result"


def said_call(c: Call | None) -> str:
    if c is None:
        return "no open call"
    return f"{c.kind} call step {c.step}{' final' if c.final else ''} [{', '.join(c.context)}]"


def _ids(ids: Any) -> str:
    return "[" + ", ".join(ids) + "]"


def _events(evs: Sequence[Event]) -> str:
    return "[" + ", ".join(f"{e.type}:{e.input}" if e.input else e.type for e in evs) + "]"
