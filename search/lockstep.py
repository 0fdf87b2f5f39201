"""Lockstep conformance: drive the reference model and a target with the same
requests and stop at the first observable difference
(``docs/cli.md``, "Lockstep: what conformance compares").

:class:`LockstepTarget` is itself a :class:`~.target.Target`: the simulator,
the scenario runner or the explorer drive it exactly as they drive one
target. Each request goes to the model and to the target; their replies and
observations are normalized and compared; the first difference raises
:class:`Divergence`. Otherwise the **target's** reply and observation are
returned, so that the caller's view, its next requests and the invariant
checkers all work on the target's own trace.

Normalizations (the contract's list, implemented here and nowhere else):

- **IDs.** An ID the harness sent (a session, an input, a fork child) is
  compared as it is. Any other ID is the implementation's (an omitted input's
  ID, a barrier's, a call's): each side numbers them ``gen:1``, ``gen:2``, …
  by order of first appearance in the compared values, which are walked in the
  same order on both sides (reply, then each compared session's pending rows
  and transcript in sorted session order, then the open calls). A fork's
  copied message is named by its session and its ``copied_from`` root
  (``copy:<session>:<root>``). A request that names an ID the target
  generated (``answer``'s call, a revert or fork boundary, a retry of a
  generated input ID) is translated to the model's ID of the same name before
  the model sees it.
- **Sequence numbers** (``admitted_seq``, ``seq``) are dropped: the lists
  they order are compared in order.
- **Times** become their rank among the distinct times that side has shown
  so far in compared values (pending rows and visible messages), so only
  their order within each side counts (the contract's "times compare only by
  order within each side"). Receipt times are not compared across sides.
- **Replies**: success or error code (or the failpoint a crash happened at);
  for receipts ``input``, ``session``, ``type``, ``data``, ``delivery``. The
  exact-retry rule is checked on each side against itself: when the model
  answers with the receipt it gave earlier for the same input (it judged an
  exact retry, or a barrier request coalesced), the target's receipt must equal,
  field for field and raw, the receipt the target gave for that input before.
  ``hello`` results are not compared (names and feature lists differ by
  design); ``log`` results are not compared (events, below); ``messages``,
  ``pending`` and ``calls`` results are normalized like the observations.
- **Pending inbox**: per session, (input, type, delivery, time rank) in order.
- **Transcript**: per session, user and synthetic messages only, (id, type,
  time rank, copied_from) in order.
- **Open calls**: (call, session, kind, step, final, context), oldest first;
  the context keeps only messages the side has shown as user or synthetic
  (IDs it never showed are kept, so an invented ID still diverges). When the
  target's ``hello`` reports a step allowance other than the one sent,
  ``final`` is not compared and ``allowance`` is recorded as not testable.

**Events are not compared**, neither payloads nor types: the contract does
not list them among the compared things, and the protocol says event types an
implementation does not emit are judged per adapter ("the harness judges what
an adapter reports"). They stay in the target's trace, where every invariant
is judged; a difference only in events is the checkers' to find.

**Features.** The ``hello`` reply returned to the caller is the target's, with
its ``features`` narrowed to those both sides list (in the target's order),
so a caller that chooses operations from ``hello`` skips on both sides what
either side lacks. :meth:`LockstepTarget.features` gives that set,
:func:`needs` what an operation requires, :meth:`LockstepTarget.testable` /
:meth:`LockstepTarget.skip` let a caller skip and record an operation as not
testable; sending one anyway raises :class:`NotTestable` (recorded too).
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import HarnessError
from ..invariants import Monitor
from ..model import Call, Crashed, Err, Event, Hello, Ok, Op, Reply
from ..scenarios.runner import MonitorFactory, run_scenario
from ..sim.workload import NO_METADATA
from ..targets.group import GroupSteps, Member, member_reply
from ..targets.target import ModelTarget, Target, group_members, observe
from ..trace.decode import call_from_wire, message_from_wire, pending_from_wire
from ..trace.record import (
    NOTHING,
    UNSEEN,
    MessageView,
    Observed,
    PendingView,
    observed_wire,
    reply_wire,
)
from . import compare
from .groups import history, moves_of, renamed
from .history import Msg, Row, Shown
from .linearize import Legal, linearize

VISIBLE = ("user", "synthetic")
# The hello feature each operation needs (docs/protocol.md, "Features").
OP_FEATURE = {
    "synthetic": "synthetic",
    "compact": "compaction",
    "fork": "fork",
    "revert_stage": "revert",
    "revert_clear": "revert",
    "revert_commit": "revert",
    "resume": "resume",
    "interrupt": "interrupt",
    "crash": "crash_op",
}
# A target's concurrent groups (and the pause points that schedule them) are
# judged by the linearizability search against the model in process, not by a
# model op: the model's hello does not list them, and they are tested all the same.
JUDGED_BY_THE_SEARCH = ("group", "pause_points")
REFERENCES = ("input", "message", "before", "call")  # request fields that may carry a generated ID


def needs(op: Op | str, crash_at: str | None = None) -> tuple[str, ...]:
    """The ``hello`` features an operation needs (``failpoints`` for a ``crash_at``)."""
    name = op if isinstance(op, str) else op.OP
    out = [OP_FEATURE[name]] if name in OP_FEATURE else []
    if crash_at is not None:
        out.append("failpoints")
    return tuple(out)


class NotTestable(HarnessError):
    """An operation was sent that one side's ``hello`` features do not allow."""


# --- the divergence -----------------------------------------------------------


def _group_reply(outcome: dict[str, Any] | None) -> Reply:
    if outcome is None or outcome.get("unknown"):
        return Crashed(UNSEEN)
    return member_reply(outcome)


def _said(outcome: dict[str, Any] | None, labels: dict[str, str]) -> str:
    """A group member's reply for the nondeterminism check: generated IDs by
    their lockstep label, error messages left out (free text)."""
    if outcome is None or outcome.get("unknown"):
        return json.dumps({"unknown": "group"})
    said = {k: outcome[k] for k in ("ok", "result", "error") if k in outcome}
    if isinstance(said.get("error"), dict):
        said["error"] = said["error"].get("code")
    result = said.get("result")
    if isinstance(result, dict) and isinstance(result.get("input"), str):
        said["result"] = {**result, "input": labels.get(result["input"], result["input"])}
    return json.dumps(said, sort_keys=True, default=str)


def _place(theirs: Iterable[Event], ours: Sequence[Iterable[Event]]) -> list[list[Event]]:
    """The target's events of a group, placed on its members: the search
    matched the folded events one for one, in order per session (and the
    runner's too, where the target logs them alike: ``linearize``), so each
    goes to the member the model's order gives its match; every other event
    goes with the matched event before it (before any, with the first member
    the order gives events there), which keeps each session's seqs in order
    along the members."""
    mine: dict[str, list[tuple[int, Event]]] = {}  # session -> (member, event), in order
    for k, events in enumerate(ours):
        for e in events:
            mine.setdefault(e.session, []).append((k, e))
    placed: list[list[Event]] = [[] for _ in ours]
    for sid, events in _events_by_session(theirs).items():
        ordered = mine.get(sid, [])
        matched = _matched(events, [e for _, e in ordered])
        owners = [k for k, e in ordered if matched(e)]
        # Before the first matched event: the first member the order gives
        # anything there (a drain started before the group's admissions).
        owner = ordered[0][0] if ordered else (owners[0] if owners else len(placed) - 1)
        n = 0
        for e in events:
            if matched(e) and n < len(owners):
                owner = owners[n]
                n += 1
            placed[owner].append(e)
    return placed


def _matched(theirs: Sequence[Event], ours: Sequence[Event]) -> Callable[[Event], bool]:
    """Which events the search matched in a session: with the runner's, when
    both sides show the same sequence of them."""

    def both(e: Event) -> bool:
        return compare.folded(e) or e.type in compare.RUNNER

    if [e.type for e in theirs if both(e)] == [e.type for e in ours if both(e)]:
        return both
    return compare.folded


def _data(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _by_id(
    pending: dict[str, tuple[PendingView, ...]],
    transcript: dict[str, tuple[MessageView, ...]],
    side: Side,
    events: Iterable[Event],
) -> tuple[dict[str, PendingView], dict[str, MessageView]]:
    """The target's own pending rows and messages by ID as of a group's
    member: its views before the group, the admissions ``events`` (the
    target's events placed on the members up to this one) show (a row
    admitted and promoted within the group shows only in its event), and
    its views after the group where they hold the same lifecycle. An ID
    admitted again within the group (a committed revert ended its earlier
    lifecycle) is its old row before the member that re-admitted it and its
    new row from there on."""
    rows: dict[str, PendingView] = {}
    msgs: dict[str, MessageView] = {}
    rows.update((r.input, r) for view in pending.values() for r in view)
    promoted: set[str] = set()
    for e in events:
        if e.type in ("admitted", "compaction_admitted") and e.input:
            data = _data(e.data)
            kind = "compaction" if e.type == "compaction_admitted" else data.get("type", "user")
            rows[e.input] = PendingView(e.input, kind, data.get("delivery"), e.seq, e.time)
        elif e.type == "promoted" and e.input:
            promoted.add(e.input)
    for rows_after in side.pending.values():
        for r in rows_after:
            old = rows.get(r.input)
            if old is None or old.admitted_seq == r.admitted_seq:
                rows[r.input] = r
    msgs.update((m.id, m) for msgs_before in transcript.values() for m in msgs_before)
    for msgs_after in side.transcript.values():
        msgs.update((m.id, m) for m in msgs_after if m.id in promoted or m.id not in msgs)
    return rows, msgs


def _events_by_session(events: Iterable[Any]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for e in events:
        out.setdefault(e.session, []).append(e)
    return out


@dataclass(eq=False)
class Divergence(Exception):
    """The first difference between the model and the target.

    ``step`` is the lockstep step index (0 = the first request), ``request`` the
    request (``None`` for a kill), ``where`` the compared part that differs
    (``reply``, ``retry receipt``, ``pending s1``, ``transcript s1``, ``calls``),
    ``model``/``target`` the normalized values, ``model_raw``/``target_raw``
    what each side gave (reply and observation as JSON), ``history`` the
    requests that led there (one line each).
    """

    step: int
    request: dict[str, Any] | None
    where: str
    model: Any
    target: Any
    model_raw: dict[str, Any] = field(default_factory=dict)
    target_raw: dict[str, Any] = field(default_factory=dict)
    history: tuple[str, ...] = ()
    target_name: str = "target"
    model_name: str = "model"
    # each side's whole views after the step (pending, transcript, open calls), raw
    model_views: dict[str, Any] = field(default_factory=dict)
    target_views: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.render()

    @property
    def summary(self) -> str:
        what = _request_line(self.request)
        return f"divergence at step {self.step} ({what}): {self.where} differs"

    def render(self, history: int = 8) -> str:
        """Readable text: the steps that led here, then model and target side by side."""
        lines = [self.summary]
        if self.history:
            shown = self.history[-history:]
            lines.append("steps that led there:")
            if len(self.history) > len(shown):
                lines.append(f"  … {len(self.history) - len(shown)} earlier steps")
            lines.extend("  " + h for h in shown)
        lines.append(f"{self.where}, normalized:")
        lines.extend(side_by_side(self.model, self.target, self.model_name, self.target_name))
        lines.append("raw (reply and observation of this step):")
        lines.extend(
            side_by_side(self.model_raw, self.target_raw, self.model_name, self.target_name)
        )
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "request": self.request,
            "where": self.where,
            "model": self.model,
            "target": self.target,
            "model_raw": self.model_raw,
            "target_raw": self.target_raw,
            "history": list(self.history),
            "model_name": self.model_name,
            "target_name": self.target_name,
            "model_views": self.model_views,
            "target_views": self.target_views,
        }


class NotLinearizable(Divergence):
    """A concurrent group no order of the model explains: the group, the
    orders tried and why each failed (``linearize``'s explanation)."""

    def __init__(self, group: Any, verdict: Any, lock: LockstepTarget) -> None:
        requests = [r.op.to_wire() for r in group.requests]
        super().__init__(
            lock.steps - 1,
            {"op": "group", "requests": requests},
            "group not linearizable",
            None,
            None,
            history=tuple(lock.history[-lock._keep :]),
            target_name=lock.target.name,
            model_name=lock.model.name,
        )
        self.explanation = verdict.explain(group)

    def render(self, history: int = 8) -> str:
        lines = [self.summary]
        if self.history:
            lines.append("steps that led there:")
            lines.extend("  " + h for h in self.history[-history:])
        lines.append(self.explanation)
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "explanation": self.explanation}


def _pretty(value: Any, indent: str = "", width: int = 56) -> list[str]:
    """JSON over lines, a value that fits in ``width`` characters on one line."""
    flat = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    rows = (
        isinstance(value, list)
        and len(value) > 1
        and all(isinstance(v, (dict, list)) for v in value)
    )  # a list of rows: one per line, so that the marks point at the row
    if (len(flat) <= width and not rows) or not isinstance(value, (dict, list)) or not value:
        return [indent + flat]
    inner = indent + "  "
    if isinstance(value, dict):
        items: list[list[str]] = []
        for k in sorted(value):
            sub = _pretty(value[k], inner, width)
            key = json.dumps(k, ensure_ascii=False) + ": "
            items.append([inner + key + sub[0].lstrip(), *sub[1:]])
        open_, close = "{", "}"
    else:
        items = [_pretty(v, inner, width) for v in value]
        open_, close = "[", "]"
    out = [indent + open_]
    for i, item in enumerate(items):
        out.extend(item[:-1])
        out.append(item[-1] + ("," if i < len(items) - 1 else ""))
    out.append(indent + close)
    return out


def side_by_side(left: Any, right: Any, left_name: str, right_name: str) -> list[str]:
    """Two JSON renderings in columns; ``!`` marks the lines that differ."""
    a, b = _pretty(left), _pretty(right)
    width = max([len(left_name), *map(len, a)]) + 2
    out = [f"    {left_name.ljust(width)}| {right_name}"]
    for i in range(max(len(a), len(b))):
        x = a[i] if i < len(a) else ""
        y = b[i] if i < len(b) else ""
        mark = "  " if x == y else "! "
        out.append(f"  {mark}{x.ljust(width)}| {y}")
    return out


def _request_line(request: dict[str, Any] | None) -> str:
    if request is None:
        return "kill"
    return " ".join(
        f"{k}={json.dumps(v, ensure_ascii=False)}" if k != "op" else str(v)
        for k, v in request.items()
    )


# --- one side's normalizer ----------------------------------------------------


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


# --- the lockstep target -------------------------------------------------------


class LockstepTarget:
    """The model and a target driven together (see the module docstring)."""

    def __init__(
        self, model: Target, target: Target, *, history: int = 200, free: bool = False
    ) -> None:
        self.model = model
        self.target = target
        self.name = f"lockstep({target.name} vs {model.name})"
        self.harness: set[str] = set()
        self.m = Side(self.harness)
        self.t = Side(self.harness)
        self.steps = 0
        self.history: list[str] = []
        self._keep = history
        self.not_testable: dict[str, str] = {}  # feature (or rule) -> why
        self.skipped: list[str] = []  # requests skipped as not testable
        self._final = True  # compare calls' final flag (the allowance is testable)
        # The target's replies in order (canonical JSON), for the rerun that
        # tells a nondeterministic target from a failing one.
        self.replies: list[str] = []
        # Groups run free (no schedule: the target's threads interleave as they
        # will) even where the target has pause points.
        self.free = free
        self._hello_seen = False

    # --- features ---------------------------------------------------------

    def features(self) -> frozenset[str]:
        """The features both sides listed in their last ``hello`` (empty before one)."""
        return frozenset(self.m.features) & frozenset(self.t.features)

    def testable(self, op: Op | str, crash_at: str | None = None) -> bool:
        """Can this request be sent to both sides? (Before any ``hello``: yes.)"""
        if not self._hello_seen:
            return True
        have = self.features()
        return all(f in have for f in needs(op, crash_at)) and not self._refused_metadata(op)

    def _refused_metadata(self, op: Op | str) -> bool:
        """A request with metadata to a target whose hello lists ``no_metadata``."""
        return NO_METADATA in self.t.features and bool(getattr(op, "metadata", None))

    def skip(self, op: Op | str, crash_at: str | None = None) -> str:
        """Record a request as not testable, and return why (for the caller's report)."""
        name = op if isinstance(op, str) else op.OP
        missing = [f for f in needs(op, crash_at) if f not in self.features()]
        reasons = [f"{f} not in the {self._lacking(f)}'s hello features" for f in missing]
        if self._refused_metadata(op):
            missing.append("metadata")
            reasons.append("it carries metadata and the target's hello lists no_metadata")
        why = f"{name}{' crash_at=' + crash_at if crash_at else ''}: " + ", ".join(reasons)
        for f in missing:
            self.not_testable.setdefault(f, why)
        self.skipped.append(why)
        return why

    def _lacking(self, feature: str) -> str:
        return "target" if feature not in self.t.features else "model"

    # --- the Target protocol ----------------------------------------------

    def request(self, op: Op, crash_at: str | None = None) -> tuple[Reply, Observed]:
        if not self.testable(op, crash_at):
            raise NotTestable(self.skip(op, crash_at))
        wire = op.to_wire()
        if crash_at is not None:
            wire["crash_at"] = crash_at
        self._remember_harness_ids(op)
        model_op = self._translate(op)
        m_reply, m_obs = self.model.request(model_op, crash_at)
        t_reply, t_obs = self.target.request(op, crash_at)
        if not isinstance(op, Hello):  # a hello names the implementation: not compared
            said = self.t.norm_reply(op, t_reply, self._final)
            self.replies.append(json.dumps(said, sort_keys=True, default=str))
        if isinstance(op, Hello):
            t_reply = self._hello(op, m_reply, t_reply)
        self._compare(op, wire, m_reply, m_obs, t_reply, t_obs)
        return t_reply, t_obs

    @property
    def group_kills(self) -> bool:
        """A kill mid-group is sent where the target serves groups and failpoints."""
        return "group" in self.t.features and "failpoints" in self.features()

    def group_steps(
        self, ops: list[Op], schedule: list[int], crash_at: Sequence[str | None] = ()
    ) -> GroupSteps:
        """A concurrent group (issue 19): sent to the target as one ``group``
        (with the schedule, used where it has pause points), judged by the
        linearizability search from the model's state (``linearize.py``), and
        returned as trace steps along the order found: the target's replies,
        each with the target's own events the order places there, and the
        target's views after the last. With no
        legal order, the steps follow the group's order, the last carrying the
        target's observation, and the failure is a :class:`NotLinearizable`."""
        model = self.model
        if not isinstance(model, ModelTarget):
            raise HarnessError("a concurrent group needs the reference model in process")
        for op in ops:
            if not self.testable(op):
                raise NotTestable(self.skip(op))
            self._remember_harness_ids(op)
        if "group" not in self.t.features:
            raise NotTestable(f"group: not in the target's hello features ({self.target.name})")
        model_ops = [self._translate(op) for op in ops]
        sent = None if self.free else schedule
        more = (list(crash_at),) if any(crash_at) else ()
        served, t_obs = self.target.group(list(ops), sent, *more)  # type: ignore[attr-defined]
        killed = served.killed or any(o is None or o.get("unknown") for o in served.outcomes)
        before = model.state
        pending_before, transcript_before = dict(self.t.pending), dict(self.t.transcript)
        self.t.absorb(t_obs)
        touched = {e.session for e in t_obs.events} | {s for s, _ in t_obs.pending}
        touched |= {s for s, _ in t_obs.transcript} | set(before.store.sessions)
        after = {
            sid: Shown(
                tuple(
                    Row(r.input, r.type, r.delivery, r.admitted_seq, r.time)
                    for r in self.t.pending.get(sid, ())
                ),
                tuple(
                    Msg(m.id, m.type, m.seq, m.time, m.copied_from)
                    for m in self.t.transcript.get(sid, ())
                ),
                next((c for c in self.t.calls if c.session == sid), None),
                tuple(e for e in t_obs.events if e.session == sid),
            )
            for sid in sorted(touched)
            if sid in self.t.pending or sid in self.t.transcript
        }
        ids = {m: t for name, t in self.t.raw.items() if (m := self.m.raw.get(name)) is not None}
        group = history(before, model_ops, served.outcomes, after, ids, killed)
        verdict = linearize(group)
        replies = [_group_reply(o) for o in served.outcomes]
        self.steps += 1
        if not isinstance(verdict, Legal):
            self.replies.extend(_said(o, self.t.label) for o in served.outcomes)
            # No order places anything: the group's order, everything the
            # target showed on its first success (so the checkers see every
            # admission with the replies after it), the runner busy until the last.
            carrier = next((i for i, r in enumerate(replies) if isinstance(r, Ok)), 0)
            members = [
                Member(i, reply, self._shown(t_obs) if i == carrier else NOTHING, i < len(ops) - 1)
                for i, reply in enumerate(replies)
            ]
            return GroupSteps(members, served.pauses, NotLinearizable(group, verdict, self))
        order = moves_of(verdict)
        now = max(op.now for op in ops)
        steps, state = group_members(before, model_ops, order, now, busy_end=killed)
        model.state = verdict.state if killed else state
        for m_id, t_id in verdict.ids.items():  # both sides name the new IDs alike from now on
            if t_id not in self.t.label and m_id not in self.m.label:
                self.m.id(m_id)
                self.t.id(t_id)
        self.replies.extend(_said(o, self.t.label) for o in served.outcomes)
        m_obs = observe(before, model.state, tuple(e for s in steps for e in s.observed.events))
        self.m.absorb(m_obs)
        # The target shows nothing between a group's requests: each member
        # carries the target's own events, cut where the model's order puts
        # each folded event (the search matched those one for one, in order);
        # the last carries the rest and the target's views after the group
        # (with a kill, the model's: the kill's own step shows the target's);
        # every member before it is busy (the target's runner may lag the
        # model's order: not a quiescent observation).
        placed = _place(t_obs.events, [m.observed.events for m in steps])
        names = {**ids, **verdict.ids}
        members = []
        so_far: list[Event] = []
        for k, member in enumerate(steps):
            so_far.extend(placed[k])
            if k == len(steps) - 1 and not killed:  # the target's own views after the group
                obs = self._shown(Observed(tuple(placed[k])))
            else:  # the model's, each row and message as the target shows it
                rows, msgs = _by_id(pending_before, transcript_before, self.t, so_far)
                shown = renamed(member.observed, names)
                obs = Observed(
                    tuple(placed[k]),
                    tuple(
                        (sid, tuple(rows.get(r.input, r) for r in view))
                        for sid, view in shown.pending
                    ),
                    tuple(
                        (sid, tuple(msgs.get(x.id, x) for x in view))
                        for sid, view in shown.transcript
                    ),
                    shown.calls,
                )
            members.append(
                Member(
                    member.position,
                    replies[member.position],
                    obs,
                    member.busy or k < len(steps) - 1,
                )
            )
        if killed:  # the kill's own step: what the restarted target shows
            return GroupSteps(members, served.pauses, kill=self._shown(NOTHING))
        return GroupSteps(members, served.pauses)

    def _shown(self, observed: Observed) -> Observed:
        """``observed``'s events with every view the target shows now."""
        return Observed(
            observed.events,
            tuple((sid, self.t.pending[sid]) for sid in sorted(self.t.pending)),
            tuple((sid, self.t.transcript[sid]) for sid in sorted(self.t.transcript)),
            self.t.calls,
        )

    def kill(self) -> Observed:
        m_obs = self.model.kill()
        t_obs = self.target.kill()
        self._compare(None, None, None, m_obs, None, t_obs)
        return t_obs

    def close(self) -> None:
        try:
            self.target.close()
        finally:
            self.model.close()

    # --- requests ---------------------------------------------------------------

    def _remember_harness_ids(self, op: Op) -> None:
        for attr in ("session", "child", "input"):
            value = getattr(op, attr, None)
            if isinstance(value, str) and value not in self.t.label:
                self.harness.add(value)

    def _translate(self, op: Op) -> Op:
        """The request as the model must see it: target-generated IDs -> the model's."""
        changes = {}
        for attr in REFERENCES:
            value = getattr(op, attr, None)
            if not isinstance(value, str):
                continue
            name = self.t.label.get(value)
            if name is None:
                continue
            raw = self.m.raw.get(name)
            if raw is not None and raw != value:
                changes[attr] = raw
        return replace(op, **changes) if changes else op  # type: ignore[arg-type]

    def model_op(self, op: Op) -> Op:
        """``op`` as the model names it: what a scenario file of the run says."""
        return self._translate(op)

    def _hello(self, op: Hello, m_reply: Reply, t_reply: Reply) -> Reply:
        self._hello_seen = True
        if isinstance(m_reply, Ok):
            self.m.features = tuple(m_reply.result.get("features", ()))
        if not isinstance(t_reply, Ok):
            return t_reply
        result = t_reply.result
        self.t.features = tuple(result.get("features", ()))
        self.t.step_limit = result.get("step_limit")
        if op.step_limit is not None and self.t.step_limit != op.step_limit:
            self._final = False
            self.not_testable.setdefault(
                "allowance",
                f"the target reports step_limit {self.t.step_limit}, "
                f"the harness sent {op.step_limit}",
            )
        for f in self.t.features:
            if f == NO_METADATA:
                # A restriction, not a feature: the workload sends neither side metadata.
                self.not_testable.setdefault(
                    "metadata", "the target's hello lists no_metadata: its prompts take none"
                )
            elif f not in self.m.features and f not in JUDGED_BY_THE_SEARCH:
                self.not_testable.setdefault(f, f"{f} not in the model's hello features")
        for f in self.m.features:
            if f not in self.t.features:
                self.not_testable.setdefault(f, f"{f} not in the target's hello features")
        both = [f for f in self.t.features if f in self.m.features or f == NO_METADATA]
        return Ok({**result, "features": both})

    # --- comparing ----------------------------------------------------------------

    def _compare(
        self,
        op: Op | None,
        wire: dict[str, Any] | None,
        m_reply: Reply | None,
        m_obs: Observed,
        t_reply: Reply | None,
        t_obs: Observed,
    ) -> None:
        step = self.steps
        self.steps += 1
        line = f"{step}: {_request_line(wire)}"

        def diverge(where: str, mv: Any, tv: Any) -> Divergence:
            return Divergence(
                step,
                wire,
                where,
                mv,
                tv,
                _raw(m_reply, m_obs),
                _raw(t_reply, t_obs),
                tuple(self.history),
                self.target.name,
                self.model.name,
                self.m.views(),
                self.t.views(),
            )

        touched = self.m.absorb(m_obs) | self.t.absorb(t_obs)
        if op is None or isinstance(op, Hello):  # a (re)start: compare everything
            touched |= set(self.m.pending) | set(self.t.pending)
            touched |= set(self.m.transcript) | set(self.t.transcript)
        # reply first: generated IDs are named by order of appearance
        mr = self.m.norm_reply(op, m_reply, self._final)
        tr = self.t.norm_reply(op, t_reply, self._final)
        if mr != tr:
            raise diverge("reply", mr, tr)
        if isinstance(m_reply, Ok) and isinstance(t_reply, Ok) and isinstance(mr, dict):
            receipt = mr.get("receipt")
            if receipt is not None:
                key = receipt["input"]
                m_before = self.m.receipts.get(key)
                t_before = self.t.receipts.get(key)
                if m_before == m_reply.result and t_before is not None:
                    if t_reply.result != t_before:
                        raise diverge(
                            "retry receipt (an exact retry must return the original "
                            "receipt field for field, on the target's own side)",
                            {"original": m_before, "retry": m_reply.result},
                            {"original": t_before, "retry": t_reply.result},
                        )
                self.m.receipts[key] = m_reply.result
                self.t.receipts[key] = t_reply.result
        for sid in sorted(touched):
            mp = self.m.norm_pending(self.m.pending.get(sid, ()))
            tp = self.t.norm_pending(self.t.pending.get(sid, ()))
            if mp != tp:
                raise diverge(f"pending {sid}", mp, tp)
            mt = self.m.norm_transcript(sid, self.m.transcript.get(sid, ()))
            tt = self.t.norm_transcript(sid, self.t.transcript.get(sid, ()))
            if mt != tt:
                raise diverge(f"transcript {sid}", mt, tt)
        if m_obs.calls is not None or t_obs.calls is not None or op is None:
            mc = self.m.norm_calls(self.m.calls, self._final)
            tc = self.t.norm_calls(self.t.calls, self._final)
            if mc != tc:
                raise diverge("calls", mc, tc)
        self.history.append(line)
        if len(self.history) > self._keep:
            del self.history[0]


def _raw(reply: Reply | None, observed: Observed) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    if reply is not None:
        doc["reply"] = reply_wire(reply)
    obs = observed_wire(observed)
    obs.pop("events", None)  # not compared; kept in the trace
    if obs:
        doc["observed"] = obs
    return doc


# --- driving a lockstep run -------------------------------------------------------


@dataclass
class LockstepResult:
    """What a lockstep drive found: a divergence, or none."""

    name: str
    steps: int
    divergence: Divergence | None = None
    failures: tuple[str, ...] = ()  # the scenario's expectation failures / violations
    not_testable: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return self.divergence is None and not self.failures


def run_scenarios_lockstep(
    scenarios: Sequence[Any],
    make_model: Any,
    make_target: Any,
    monitor: MonitorFactory | None = Monitor,
    policy: Any = None,
) -> list[LockstepResult]:
    """Run each scenario with a fresh :class:`LockstepTarget` (``make_model(policy,
    step_limit)``, ``make_target(policy, step_limit)``), under its file's policy
    or ``policy``; a divergence is caught and reported, the scenario's own
    failures too."""
    import time

    out = []
    for loaded in scenarios:
        started = time.perf_counter()
        holder: list[LockstepTarget] = []

        def factory(
            policy: Any, step_limit: int, holder: list[LockstepTarget] = holder
        ) -> LockstepTarget:
            lock = LockstepTarget(make_model(policy, step_limit), make_target(policy, step_limit))
            holder.append(lock)
            return lock

        name = loaded.scenario.name
        try:
            result = run_scenario(loaded, policy, target_factory=factory, monitor=monitor)
        except Divergence as div:
            if holder:
                holder[0].close()
            out.append(
                LockstepResult(
                    name,
                    div.step + 1,
                    div,
                    (),
                    dict(holder[0].not_testable) if holder else {},
                    time.perf_counter() - started,
                )
            )
            continue
        lock = holder[0]
        out.append(
            LockstepResult(
                name,
                lock.steps,
                None,
                tuple(str(f) for f in result.failures),
                dict(lock.not_testable),
                time.perf_counter() - started,
            )
        )
    return out


__all__ = [
    "Divergence",
    "LockstepResult",
    "LockstepTarget",
    "NotTestable",
    "Side",
    "needs",
    "run_scenarios_lockstep",
    "side_by_side",
]
