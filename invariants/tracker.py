"""What the checkers know: every session rebuilt, step by step, from what the
trace observed.

Theory of operation. The tracker folds each step's durable events into a
per-session *shadow* (pending rows, visible messages, the barrier, the
staged revert) using only the adapter protocol's rules, and keeps the last
observed ``pending`` and ``messages`` views and the open calls beside it.
Checkers compare the two, and judge each step against the shadow as it was
just before each event. All state is per session or per input ID, updated
only for what a step touched, so checking costs time linear in the trace.

It also keeps the few volatile facts of a drain that the protocol lets a
harness see: whether the last answered step asked for a continuation (a
``tool`` answer on a non-final step), the step index of the last call, a
wake rung while the session was busy (the doorbell), and synthetic steers
admitted while a step was open. These are reset whenever the session is
seen idle (no open call once a request has quiesced), on interrupt, and on
any crash, because none of them survives the end of an execution.

Tolerance: an event's ``data`` is read only where the spec names the field
(``type``/``delivery`` of an admission, ``reason`` of a compaction event,
``message``/``to`` of a revert, ``messages``/``parent_seq`` of a fork) and
each has a fallback from the request or the views, since adapters map
their native payloads and may omit them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from operator import attrgetter
from types import MappingProxyType
from typing import Any

from ..model.ops import (
    Answer,
    Compact,
    CrashOp,
    Create,
    Fork,
    Hello,
    Interrupt,
    Op,
    Prompt,
    RevertStage,
    Synthetic,
    payload_text,
)
from ..model.policy import Policy
from ..model.values import Call, Crashed, Err, Event, Ok, canonical_json
from ..trace.record import GROUP, GroupMark, MessageView, PendingView, Step, group_of, unseen

EXEC_TYPES = frozenset({"execution_started", "promoted", "step_started", "compaction_started"})
TERMINALS = frozenset({"execution_succeeded", "execution_failed", "execution_interrupted"})
CONFLICT = {
    "user": "prompt_conflict",
    "synthetic": "synthetic_conflict",
    "compaction": "compaction_conflict",
}


@dataclass(slots=True)
class Row:
    """A pending row of the shadow: one admission."""

    input: str
    session: str
    type: str  # user | synthetic | compaction
    delivery: str | None
    seq: int  # the admitting event's seq (admitted_seq)
    time: int  # the admitting event's time
    step: int  # the trace step of the admission


@dataclass(slots=True)
class Msg:
    """A visible message of the shadow: a promoted input or a fork's copy."""

    id: str
    type: str
    seq: int
    time: int | None
    step: int
    row: Row | None  # the admission it came from; None for a fork's copy
    copied_from: str | None = None


@dataclass(slots=True)
class Life:
    """One lifecycle of an input ID: from its admission until a committed
    revert discards it or (a barrier) its compaction ends or fails."""

    row: Row
    state: str = "pending"  # pending | visible | reverted | consumed
    promotions: int = 0
    promoted_step: int | None = None
    ended_step: int | None = None
    receipt: dict[str, Any] | None = None
    receipt_step: int | None = None
    payload: str | None = None  # the canonical payload the admitting request sent
    delivery: str | None = None  # the delivery it asked for, after the policy's rule
    acked_step: int | None = None

    def copy(self) -> Life:
        return Life(
            self.row,
            self.state,
            self.promotions,
            self.promoted_step,
            self.ended_step,
            self.receipt,
            self.receipt_step,
            self.payload,
            self.delivery,
            self.acked_step,
        )


@dataclass(slots=True)
class Owner:
    """Whom an ID belongs to: its session and kind (or a fork's copy), and
    the trace step of its first admission or copy. ``freed``: a committed
    revert truncated it under ``ended_ids = "freed_by_revert"``, so it
    belongs to no one until its next admission."""

    session: str
    type: str
    copied: bool = False
    step: int = -1
    freed: bool = False


class SessionShadow:
    """One session as the checkers know it."""

    __slots__ = (
        "id",
        "n_events",
        "last_seq",
        "last_event_step",
        "first_forked",
        "fork_seq",
        "fork_floor",
        "pending",
        "barrier",
        "visible",
        "staged",
        "staged_step",
        "view_pending",
        "view_transcript",
        "exec_open",
        "exec_step",
        "cont",
        "last_step",
        "doorbell",
        "doorbell_kept",
        "bg",
        "created_step",
    )

    def __init__(self, sid: str, step: int) -> None:
        self.id = sid
        self.created_step = step
        self.n_events = 0
        self.last_seq = -1
        self.last_event_step = -1
        self.first_forked = False
        self.fork_seq: int | None = None  # the forked event's parent_seq (its cutoff), if named
        self.fork_floor: int | None = None  # the child's next seq must exceed this
        self.pending: dict[str, Row] = {}  # admission order
        self.barrier: Row | None = None
        self.visible: dict[str, Msg] = {}  # transcript order
        self.staged: str | None = None
        self.staged_step = -1
        self.view_pending: tuple[PendingView, ...] = ()
        self.view_transcript: tuple[MessageView, ...] = ()
        self.exec_open = False
        self.exec_step = -1
        # volatile drain facts (see the module docstring)
        self.cont: tuple[int, Call] | None = None
        self.last_step: int | None = None
        self.doorbell: int | None = None
        # The doorbell was kept across an interrupt in a busy group only
        # because the trace cannot show whether a wake rang it after the
        # interrupt: a follow-up drain at a failure is then allowed, not owed.
        self.doorbell_kept = False
        self.bg: dict[str, tuple[Row, int]] = {}  # background steers: row and the step admitting it

    def copy(self) -> SessionShadow:
        """A copy that changes independently: the dicts are copied, their
        rows and messages shared (a row or message never changes once made)."""
        sh = SessionShadow.__new__(SessionShadow)
        sh.id = self.id
        sh.created_step = self.created_step
        sh.n_events = self.n_events
        sh.last_seq = self.last_seq
        sh.last_event_step = self.last_event_step
        sh.first_forked = self.first_forked
        sh.fork_seq = self.fork_seq
        sh.fork_floor = self.fork_floor
        sh.pending = self.pending.copy()
        sh.barrier = self.barrier
        sh.visible = self.visible.copy()
        sh.staged = self.staged
        sh.staged_step = self.staged_step
        sh.view_pending = self.view_pending
        sh.view_transcript = self.view_transcript
        sh.exec_open = self.exec_open
        sh.exec_step = self.exec_step
        sh.cont = self.cont
        sh.last_step = self.last_step
        sh.doorbell = self.doorbell
        sh.doorbell_kept = self.doorbell_kept
        sh.bg = self.bg.copy()
        return sh


_new_ctx = object.__new__

INPUT_OF = attrgetter("input")
"""A pending row's (or a pending view's) input ID: mapped over a view, no
Python frame per entry (the checkers read the views after every step that
moves one)."""

NONE: Any = MappingProxyType({})
"""The empty container a ``StepCtx`` holds until the step moves something
into it: read-only, so a write that forgot to make its own fails at once."""


class StepCtx:
    """Facts about one step, gathered while the tracker applies it (made by
    :meth:`Tracker.begin`, field by field)."""

    __slots__ = (
        "index",
        "step",
        "op",
        "reply",
        "ok",
        "err",
        "crashed",
        "unseen",
        "crash_point",
        "session",
        "answered",
        "finish",
        "calls_before",
        "calls_changed",
        "new_calls",
        "by_session",
        "promoted",
        "p0",
        "admitted",
        "view_changes",
        "sessions_moved",
        "at_wake",
        "exec_started",
        "fork_from_view",
        "result",
        "collisions",
        "group",
        "runner_busy",
        "busy_before",
    )

    index: int
    step: Step
    op: Op | None
    reply: Any
    # A kill between requests, a failpoint, or the ``crash`` operation
    # (feature crash_op): volatile state is gone in each case.
    # A group member killed in flight whose reply nobody saw (``UNSEEN``)
    # is neither: not ok, not an error, not a crash (the kill is its own step).
    ok: bool
    err: bool
    crashed: bool
    unseen: bool
    crash_point: str | None
    result: dict[str, Any]  # an answer's result ({} for any other reply)
    session: str | None
    answered: Call | None  # the call an answer (not refused) answered
    finish: str | None
    calls_before: dict[str, Call]  # session -> open call, at the start
    calls_changed: bool
    # What the step moved, filled by the tracker as it applies the step.
    # Each starts as the one shared empty (read-only: ``NONE``) and is
    # made when the tracker first adds to it (never emptied again): most
    # steps move little, and these ten containers were most of a step's
    # own cost.
    new_calls: list[Call]
    by_session: dict[str, list[Event]]
    promoted: dict[str, list[tuple[Event, Row | None]]]
    p0: dict[str, list[Row]]  # pending rows when the boundary read the inbox
    admitted: dict[str, tuple[Event, Row]]  # fresh admissions of this step
    view_changes: list[tuple[str, str, tuple[Any, ...], tuple[Any, ...]]]
    # The sessions whose log or views moved (by_session's, then those of
    # view_changes, in that order), once the views are applied.
    sessions_moved: set[str]
    # The pending count when the session's work in this step began (its
    # first execution event), for each session that started work.
    at_wake: dict[str, int]
    exec_started: dict[str, int]
    fork_from_view: set[str]
    collisions: list[tuple[str, str]]  # (copy id, the session already holding it)
    # A member of a concurrent group after which the target's runner still
    # had work (trace.record.group_of): its observation is not quiescent,
    # so what the runner does next (a wake's execution, a boundary's call,
    # an idle session's end) is not yet due; the group's end is.
    group: GroupMark | None  # its group, read by the checkers of groups
    runner_busy: bool
    # The step before was such a member: this one did not start quiescent,
    # so a session without an open call may still be mid-execution.
    busy_before: bool

    def new_step_call(self, session: str) -> Call | None:
        for c in self.new_calls:
            if c.session == session and c.kind == "step":
                return c
        return None


_PARSED: dict[str, Mapping[str, Any]] = {}
_PARSED_MOST = 4096


def parse(data: str | dict[str, Any] | None) -> Mapping[str, Any]:
    """An event's data as a dict, whatever form the target gave it. Read
    only: a text's dict is parsed once and shared (event data repeats: the
    same few admission and step payloads, read by several checkers)."""
    if not data:
        return {}
    if isinstance(data, dict):
        return data
    found = _PARSED.get(data)
    if found is None:
        try:
            value = json.loads(data)
        except ValueError:
            value = None
        found = value if isinstance(value, dict) else {}
        if len(_PARSED) >= _PARSED_MOST:
            _PARSED.clear()  # a bound on memory; what a text parses to never changes
        _PARSED[data] = found
    return found


def same_json(a: Any, b: Any) -> bool:
    """``canonical_json(a) == canonical_json(b)``, without encoding either
    when they are the same plain structure (what a retry's receipt and its
    original almost always are)."""
    return _same_plain(a, b) or canonical_json(a) == canonical_json(b)


def _same_plain(a: Any, b: Any) -> bool:
    """True only if ``a`` and ``b`` surely have the same canonical text: the
    same types all the way down, string keys, equal strings, ints, bools and
    nulls. False says nothing (floats, other keys: ask the canonical text)."""
    kind = type(a)
    if kind is not type(b):
        return False
    if kind in _SCALARS:
        return bool(a == b)
    if kind is dict:
        if len(a) != len(b):
            return False
        for k, v in a.items():
            if type(k) is not str or k not in b:
                return False
            w = b[k]
            # a scalar value compared here, not in a call of its own (most are)
            if type(v) in _SCALARS:
                if type(v) is not type(w) or v != w:
                    return False
            elif not _same_plain(v, w):
                return False
        return True
    if kind is list:
        if len(a) != len(b):
            return False
        for x, y in zip(a, b, strict=True):
            if not _same_plain(x, y):
                return False
        return True
    return False


_SCALARS = frozenset({str, int, bool, type(None)})
"""The types whose values :func:`_same_plain` compares with ``==``."""


def request_kind(op: Op | None) -> str | None:
    """The kind of input an admitting request makes (None: it admits none)."""
    return _KINDS.get(type(op))


_KINDS: dict[type, str] = {Prompt: "user", Synthetic: "synthetic", Compact: "compaction"}


class Tracker:
    """The shared, incrementally maintained knowledge of the run."""

    def __init__(self, policy: Policy, hello: dict[str, Any]) -> None:
        self.policy = policy
        self.step_limit: int | None = hello.get("step_limit")
        self.features: set[str] = set(hello.get("features", ()))
        self.sessions: dict[str, SessionShadow] = {}
        self.owners: dict[str, Owner] = {}  # live IDs (pending or visible)
        self.namespace: dict[str, Owner] = {}  # every ID ever admitted or copied, for good
        self.lives: dict[str, Life] = {}
        self.open: dict[str, Call] = {}  # session -> its open call
        self.calls_by_id: dict[str, Call] = {}
        self.open_count: dict[str, int] = {}
        self.emits_exec = False
        self.emits_steps = False
        self.last_crash = -1
        self.last_index = -1
        self.busy = False  # the last step was a group member after which the runner had work
        # Copy on write: the shadows and lifecycles this tracker made or
        # copied since it was last cloned, the only ones it may change in
        # place (every other one may be shared with a clone).
        self.mine: set[str] = set()
        self.mine_lives: set[str] = set()

    def clone(self) -> Tracker:
        """A copy that changes independently (the explorer judges each child
        of a search node on its own copy). Copy on write: the shadows and
        lifecycles are shared with the original until either changes one
        (:meth:`writable`, :meth:`writable_life` copy it first), so a
        session the next step does not touch keeps its objects, and the
        merge key's cache (``search/canon.py``) knows it unchanged by their
        identity. The ID tables are copied (small; changed in place); the
        call tables and the features are shared (only ever replaced whole);
        what they hold never changes once made (rows, messages, owners,
        calls, views)."""
        t = Tracker.__new__(Tracker)
        state = self.__dict__.copy()  # given whole: cheaper than filling the new one's
        state["sessions"] = self.sessions.copy()
        state["owners"] = self.owners.copy()
        state["namespace"] = self.namespace.copy()
        state["lives"] = self.lives.copy()
        state["mine"] = set()
        state["mine_lives"] = set()
        t.__dict__ = state
        self.share()
        return t

    def __getstate__(self) -> dict[str, Any]:
        """Pickled and deep-copied without the copy-on-write bookkeeping: the
        copy holds objects of its own, and may copy them once more."""
        return {n: v for n, v in self.__dict__.items() if n not in ("mine", "mine_lives")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.mine = set()
        self.mine_lives = set()

    def share(self) -> None:
        """From now on, copy every shadow and lifecycle before changing it
        (as after a :meth:`clone`): the merge key's cache holds them by
        identity."""
        if self.mine:
            self.mine = set()
        if self.mine_lives:
            self.mine_lives = set()

    def writable(self, sid: str, step: int) -> SessionShadow:
        """The session's shadow to change in place (made if new, copied
        first if it may be shared with a clone)."""
        if sid in self.mine:
            return self.sessions[sid]
        sh = self.sessions.get(sid)
        sh = self.sessions[sid] = SessionShadow(sid, step) if sh is None else sh.copy()
        self.mine.add(sid)
        return sh

    def writable_life(self, x: str) -> Life | None:
        """The lifecycle of ``x`` to change in place (copied first if it may
        be shared with a clone), or None."""
        life = self.lives.get(x)
        if life is not None and x not in self.mine_lives:
            life = self.lives[x] = life.copy()
            self.mine_lives.add(x)
        return life

    # --- requests, as the protocol defines them -------------------------

    def payload(self, op: Op) -> str:
        if isinstance(op, (Prompt, Synthetic)):
            return payload_text(op)
        return "{}"

    def delivery(self, op: Op) -> str | None:
        """The delivery a request asks for, after the policy's rule for
        synthetic input (candidate B has no synthetic delivery)."""
        if isinstance(op, Compact):
            return None
        d = getattr(op, "delivery", None) or "steer"
        if isinstance(op, Synthetic) and self.policy.synthetic_delivery == "always_steer":
            return "steer"
        return d

    def owned_by(self, x: str, op: Op) -> tuple[Owner | None, Owner | None]:
        """Whom ``x`` belongs to as the request is judged: its live owner, and
        its owner for good (its first, or a freed one where ``ended_ids =
        "freed_by_revert"`` freed it).

        A prompt that arrives under a staged revert is judged as if the
        revert were committed just before it (protocol; ``staged_revert_prompt
        = "commits"``): an ID the revert would discard has no live owner, and
        its owner for good is freed as a committed revert would free it.
        (One look at the staged revert for both.)"""
        live = self.owners.get(x)
        first = self.namespace.get(x)
        if live is None or not self._staged_discards(x, live, op):
            return live, first
        if (
            first is not None
            and not first.freed
            and not first.copied
            and self.policy.ended_ids == "freed_by_revert"
        ):
            first = _freed(first)
        return None, first

    def _staged_discards(self, x: str, o: Owner, op: Op) -> bool:
        """Whether the staged revert a prompt commits first discards ``x``."""
        if not isinstance(op, Prompt) or o.session != op.session:
            return False
        if self.policy.staged_revert_prompt != "commits":
            return False
        sh = self.sessions.get(op.session)
        if sh is None or sh.staged is None:
            return False
        boundary = sh.visible.get(sh.staged)
        if boundary is None:
            return False
        cut = self.policy.revert_cut(boundary.seq)
        m = sh.visible.get(x)
        if m is not None and m.seq >= cut:
            return True
        r = sh.pending.get(x)
        return r is not None and r.type != "compaction" and r.seq >= cut

    def admission_kind(self, ctx: StepCtx, ev: Event) -> str:
        """The kind an ``admitted`` or ``compaction_admitted`` event admits:
        the event's ``type`` if it names one, else the step's own request's."""
        if ev.type == "compaction_admitted":
            return "compaction"
        kind = parse(ev.data).get("type")
        if isinstance(kind, str):
            return kind
        op = ctx.op
        if (
            isinstance(op, (Prompt, Synthetic))
            and op.session == ev.session
            and op.input in (None, ev.input)
        ):
            return request_kind(op) or "user"
        return "user"

    def wakes(self, ctx: StepCtx, staged_at_start: str | None) -> bool:
        """Does this (successful) admitting request wake its session?"""
        op = ctx.op
        if isinstance(op, Prompt):
            return op.resume is not False
        if isinstance(op, Synthetic):
            return op.resume is not False and staged_at_start is None
        return isinstance(op, Compact)

    def continuation(self, ctx: StepCtx, session: str) -> tuple[int, Call] | None:
        """The tool answer the session's next boundary continues, if any."""
        a = ctx.answered
        if a is not None and a.session == session and a.kind == "step":
            return (ctx.index, a) if ctx.finish == "tool" and not a.final else None
        sh = self.sessions.get(session)
        return sh.cont if sh is not None else None

    def session(self, sid: str, step: int) -> SessionShadow:
        sh = self.sessions.get(sid)
        if sh is None:
            sh = self.sessions[sid] = SessionShadow(sid, step)
            self.mine.add(sid)
        return sh

    def promotable(self, rows: list[Row] | Any) -> list[Row]:
        """User and synthetic rows a boundary may promote: not held back by
        a barrier under the policy's ``barrier_blocks`` rule."""
        barrier = None
        for r in rows:
            if r.type == "compaction":
                barrier = r
                break
        if barrier is None:
            return list(rows)  # no compaction row among them
        if self.policy.barrier_blocks == "all":
            return []
        return [r for r in rows if r.type != "compaction" and r.seq < barrier.seq]

    # --- the step ------------------------------------------------------------

    def begin(self, step: Step) -> StepCtx:
        calls = self.open
        killed = step.kind == "crash"
        if killed:
            # A kill between requests: the process died before anything the
            # step shows happened, so its events (if any) are the restart's,
            # with no call open and no execution running.
            calls = {}
            self._close_executions(step.index)
        # Made field by field here, not by a constructor: one Python call
        # less on every step. (One type test per reply kind.)
        ctx = _new_ctx(StepCtx)
        ctx.index = i = step.index
        ctx.step = step
        op = ctx.op = step.request
        reply = ctx.reply = step.reply
        if isinstance(reply, Ok):
            ctx.ok, ctx.err, ctx.unseen = True, False, False
            ctx.crashed = killed or isinstance(op, CrashOp)
            ctx.crash_point = None
            ctx.result = reply.result
        elif isinstance(reply, Crashed):
            ctx.ok = ctx.err = False
            ctx.unseen = missing = unseen(reply)
            ctx.crashed = killed or not missing
            ctx.crash_point = None if missing else reply.point
            ctx.result = {}
        else:
            ctx.ok, ctx.unseen, ctx.crashed, ctx.crash_point = False, False, killed, None
            ctx.err = isinstance(reply, Err)
            ctx.result = {}
        ctx.session = getattr(op, "session", None) or None
        if isinstance(op, Answer) and not ctx.err:
            ctx.answered = self.calls_by_id.get(op.call)
            ctx.finish = op.finish
        else:
            ctx.answered = ctx.finish = None
        ctx.calls_before = calls
        ctx.calls_changed = False
        ctx.new_calls = ctx.by_session = ctx.promoted = ctx.p0 = ctx.admitted = NONE
        ctx.view_changes = ctx.sessions_moved = ctx.at_wake = ctx.exec_started = NONE
        ctx.fork_from_view = ctx.collisions = NONE
        # (Most steps are in no group: their label does not even start so.)
        decision = step.decision
        mark = group_of(decision) if decision.startswith(GROUP) else None
        ctx.group = mark
        ctx.runner_busy = busy = mark is not None and mark.busy
        ctx.busy_before, self.busy = self.busy, busy
        self.last_index = i
        return ctx

    def apply(self, ctx: StepCtx, ev: Event, sh: SessionShadow) -> None:
        """Fold one durable event into its session's shadow ``sh`` (the
        session's :meth:`writable` shadow)."""
        sid = ev.session
        by_session = ctx.by_session
        if not by_session:
            by_session = ctx.by_session = {}
        bucket = by_session.get(sid)
        if bucket is None:
            bucket = by_session[sid] = []
        bucket.append(ev)
        kind = ev.type
        if kind in EXEC_TYPES:
            if sid not in ctx.at_wake:
                if not ctx.at_wake:
                    ctx.at_wake = {}
                ctx.at_wake[sid] = len(sh.pending)
            if kind in ("promoted", "step_started") and sid not in ctx.p0:
                if not ctx.p0:
                    ctx.p0 = {}
                ctx.p0[sid] = list(sh.pending.values())
        handler = _APPLY.get(kind)
        if handler is not None:
            handler(self, ctx, ev, sh)
        sh.n_events += 1
        sh.last_seq = ev.seq
        sh.last_event_step = ctx.index

    def observe(self, ctx: StepCtx) -> None:
        """Apply the step's views and open calls (after its events). Nothing
        to do on a step that moved nothing and was not answered with a result
        (``Monitor.feed`` does not call it there)."""
        step = ctx.step
        op = ctx.op
        i = ctx.index
        if ctx.ok:
            if isinstance(op, (Create, Fork)):
                self.session(op.child if isinstance(op, Fork) else op.session, i)
            elif isinstance(op, Hello):
                self.step_limit = ctx.result.get("step_limit", self.step_limit)
                self.features = set(ctx.result.get("features", self.features))
        observed = step.observed
        if observed.pending or observed.transcript:
            ctx.view_changes = []
            ctx.sessions_moved = set(ctx.by_session)
        elif ctx.by_session:
            ctx.sessions_moved = set(ctx.by_session)
        for sid, rows in observed.pending:
            sh = self.session(sid, i)
            ctx.view_changes.append((sid, "pending", sh.view_pending, rows))
            ctx.sessions_moved.add(sid)
            if rows != sh.view_pending:  # an equal view is kept: the shadow stays shared
                self.writable(sid, i).view_pending = rows
        for sid, msgs in observed.transcript:
            sh = self.session(sid, i)
            ctx.view_changes.append((sid, "transcript", sh.view_transcript, msgs))
            ctx.sessions_moved.add(sid)
            if msgs != sh.view_transcript or sid in ctx.fork_from_view:
                sh = self.writable(sid, i)
                sh.view_transcript = msgs
            if sid in ctx.fork_from_view:
                self._copies_from_view(ctx, sh, msgs)
        if observed.calls is not None or ctx.crashed:
            calls = observed.calls if observed.calls is not None else ()
            before = self.calls_by_id
            by_id: dict[str, Call] = {}
            opened: dict[str, Call] = {}
            count: dict[str, int] = {}
            new_calls = []
            for c in calls:
                by_id[c.call] = c
                opened[c.session] = c
                count[c.session] = count.get(c.session, 0) + 1
                if c.call not in before:
                    new_calls.append(c)
            if new_calls:
                ctx.new_calls = new_calls
            self.calls_by_id, self.open, self.open_count = by_id, opened, count
            ctx.calls_changed = True
        if ctx.crashed:
            self.last_crash = i
            self._close_executions(i)
        for c in ctx.new_calls:
            if c.kind == "step" and c.session not in ctx.p0:
                calling = self.sessions.get(c.session)
                if not ctx.p0:
                    ctx.p0 = {}
                ctx.p0[c.session] = list(calling.pending.values()) if calling else []

    def settle(self, ctx: StepCtx) -> None:
        """Update the volatile drain facts once every checker saw the step.
        Nothing to do on a step that moved nothing, was not answered with a
        result and answered no call (``Monitor.feed`` does not call it there)."""
        op = ctx.op
        if not (
            ctx.crashed
            or ctx.calls_changed
            or ctx.by_session
            or ctx.answered is not None
            or (ctx.ok and isinstance(op, _SETTLES))
        ):
            # Nothing it tracks moved (most steps of a sweep: a read, a refused
            # request, a resume that joined its call): no call opened or closed
            # (so no session went idle), no event, no answer, and no admission
            # or interrupt answered, whose receipt, doorbell or reset is kept.
            return
        i = ctx.index
        if ctx.crashed:
            for each in self.sessions:
                self._reset_drain(each, i)
            return
        if ctx.ok and isinstance(op, (Prompt, Synthetic, Compact)):
            # The first receipt seen for a lifecycle is its original receipt.
            acked = ctx.result.get("input") or ""
            life = self.lives.get(acked)
            if (
                life is not None
                and life.row.session == ctx.session
                and (life.receipt is None or life.acked_step is None)
            ):
                life = self.writable_life(acked)
                assert life is not None
                if life.receipt is None:
                    life.receipt = dict(ctx.result)
                    life.receipt_step = i
                if life.acked_step is None:
                    life.acked_step = i
        a = ctx.answered
        if a is not None and a.session in self.sessions and a.kind == "step":
            cont = self.continuation(ctx, a.session)
            if cont != self.sessions[a.session].cont:
                self.writable(a.session, i).cont = cont
            if ctx.finish == "error":
                self._reset_drain(a.session, i)
        sid = ctx.session
        # An interrupt ends the execution before any call the step shows opened:
        # a successor's (spec 3.7), or in a group the runner's work after it.
        if ctx.ok and op is not None and op.OP == "interrupt" and sid in self.sessions:
            rung = self.sessions[sid].doorbell
            self._reset_drain(sid, i)
            if rung is not None and ctx.busy_before and self._wakes_left(ctx, sid):
                # In a group whose runner was busy before this member, a wake
                # an earlier member recorded may be taken after the interrupt
                # (admission, then wake: spec 3.6) and ring the successor's
                # doorbell (spec 3.7); the trace cannot show which, so it is kept,
                # as one that may or may not ring.
                sh = self.writable(sid, i)
                sh.doorbell = rung
                sh.doorbell_kept = True
        for c in ctx.new_calls:
            if c.session in self.sessions and c.kind == "step":
                opened = self.writable(c.session, i)
                opened.last_step = c.step
                opened.cont = None
                opened.bg.clear()
        # A wake rung while the session's execution runs: with a call open, or
        # mid-drain in a concurrent group (the step before left the runner busy).
        during = sid in ctx.calls_before or ctx.busy_before
        if ctx.ok and sid is not None and during and sid in self.sessions:
            sh = self.sessions[sid]
            if isinstance(op, (Prompt, Synthetic, Compact)):
                staged = sh.staged if isinstance(op, Synthetic) else None
                if self.wakes(ctx, staged) and (sh.doorbell is None or sh.doorbell_kept):
                    sh = self.writable(sid, i)
                    sh.doorbell_kept = False  # rung now, whatever was kept
                    if sh.doorbell is None:
                        sh.doorbell = i
                running = ctx.calls_before.get(sid)
                if isinstance(op, Synthetic) and running is not None and running.kind == "step":
                    for x, (_, row) in ctx.admitted.items():
                        if row.session == sid and row.delivery == "steer":
                            self.writable(sid, i).bg[x] = (row, i)
        # A session with no open call once the request quiesced is idle: its
        # execution is over, and so is everything volatile about it. (A group
        # member after which the runner had work did not quiesce.)
        if not ctx.runner_busy:
            still_open, before = self.open, ctx.calls_before
            for s in before:
                if s not in still_open and s in self.sessions:
                    self._reset_drain(s, i)
            for s in ctx.by_session:
                if s not in before and s not in still_open and s in self.sessions:
                    self._reset_drain(s, i)

    def _wakes_left(self, ctx: StepCtx, sid: str) -> bool:
        """May a wake of this group's earlier members still ring after an
        interrupt? Each admission of theirs took one. Where the step shows a
        successor start, one wake started it: another must be left (seed 526
        of conformance --concurrency 4: one admission, whose wake started the
        successor, and no follow-up owed)."""
        mark = ctx.group
        if mark is None or not ctx.exec_started.get(sid):
            return True
        admitted = sum(
            1
            for life in self.lives.values()
            if life.row.session == sid and mark.first <= life.row.step < ctx.index
        )
        return admitted > 1

    def _reset_drain(self, sid: str, step: int) -> None:
        """Forget the session's volatile drain facts (copying its shadow
        first only if it holds any)."""
        sh = self.sessions[sid]
        if sh.cont is None and sh.last_step is None and sh.doorbell is None and not sh.bg:
            return
        sh = self.writable(sid, step)
        sh.cont = None
        sh.last_step = None
        sh.doorbell = None
        sh.doorbell_kept = False
        if sh.bg:
            sh.bg.clear()

    def _close_executions(self, step: int) -> None:
        """A crash: no execution runs any more."""
        for sid, sh in self.sessions.items():
            if sh.exec_open:
                self.writable(sid, step).exec_open = False

    # --- helpers for the appliers ------------------------------------------

    def _copies_from_view(
        self, ctx: StepCtx, sh: SessionShadow, msgs: tuple[MessageView, ...]
    ) -> None:
        for m in msgs:
            if m.copied_from is not None and m.id not in sh.visible:
                sh.visible[m.id] = Msg(m.id, m.type, m.seq, m.time, ctx.index, None, m.copied_from)
                self._own_copy(ctx, sh.id, m.id, m.type)
                if sh.fork_floor is None or m.seq > sh.fork_floor:
                    sh.fork_floor = m.seq

    def _own_copy(self, ctx: StepCtx, session: str, mid: str, kind: str) -> None:
        held = self.namespace.get(mid)
        if held is not None:
            if not ctx.collisions:
                ctx.collisions = []
            ctx.collisions.append((mid, held.session))
        else:
            self.namespace[mid] = Owner(session, kind, True, ctx.index)
        self.owners[mid] = Owner(session, kind, True, ctx.index)

    def _end_life(self, x: str, session: str, state: str, step: int) -> None:
        o = self.owners.get(x)
        if o is not None and o.session == session:
            del self.owners[x]
        life = self.lives.get(x)
        if (
            life is not None
            and life.row.session == session
            and life.state in ("pending", "visible")
        ):
            life = self.writable_life(x)
            assert life is not None
            life.state = state
            life.ended_step = step
            if state == "reverted" and self.policy.ended_ids == "freed_by_revert":
                self.namespace[x] = _freed(self.namespace[x])

    def _own(self, x: str, owner: Owner) -> None:
        """An admission: ``x`` is live, and owned for good unless it already
        was (a re-admission in its own session and kind) and is not freed."""
        self.owners[x] = owner
        first = self.namespace.get(x)
        if first is None or first.freed:
            self.namespace[x] = owner


_SETTLES = (Prompt, Synthetic, Compact, Interrupt)
"""The requests whose answer alone changes what ``Tracker.settle`` keeps: an
admission's receipt and the doorbell it rings, an interrupt's reset."""


def _freed(owner: Owner) -> Owner:
    return Owner(owner.session, owner.type, owner.copied, owner.step, True)


# --- appliers: one per event type the protocol gives meaning to ------------


def _admitted(t: Tracker, ctx: StepCtx, ev: Event, sh: SessionShadow) -> None:
    x = ev.input or ""
    data = parse(ev.data)
    op = ctx.op
    # Is this the admission the step's own request asked for? Then the
    # request fills in what an adapter's event payload may leave out.
    mine: Prompt | Synthetic | None = None
    if isinstance(op, (Prompt, Synthetic)) and op.session == sh.id and op.input in (None, x):
        mine = op
    kind = t.admission_kind(ctx, ev)
    delivery = data["delivery"] if "delivery" in data else (t.delivery(mine) if mine else None)
    row = Row(x, sh.id, kind, delivery, ev.seq, ev.time, ctx.index)
    sh.pending[x] = row
    t._own(x, Owner(sh.id, kind, False, ctx.index))
    life = Life(row)
    if mine is not None:
        life.payload = t.payload(mine)
        life.delivery = t.delivery(mine)
    t.lives[x] = life
    t.mine_lives.add(x)
    if not ctx.admitted:
        ctx.admitted = {}
    ctx.admitted[x] = (ev, row)


def _compaction_admitted(t: Tracker, ctx: StepCtx, ev: Event, sh: SessionShadow) -> None:
    x = ev.input or ""
    row = Row(x, sh.id, "compaction", None, ev.seq, ev.time, ctx.index)
    sh.pending[x] = row
    if sh.barrier is None:
        sh.barrier = row
    t._own(x, Owner(sh.id, "compaction", False, ctx.index))
    t.lives[x] = Life(row, payload="{}")
    t.mine_lives.add(x)
    if not ctx.admitted:
        ctx.admitted = {}
    ctx.admitted[x] = (ev, row)


def _promoted(t: Tracker, ctx: StepCtx, ev: Event, sh: SessionShadow) -> None:
    x = ev.input or ""
    row = sh.pending.get(x)
    if row is not None and row.type == "compaction":
        row = None  # a barrier never becomes a message
    elif row is not None:
        del sh.pending[x]
    life = t.lives.get(x)
    if x not in sh.visible:
        kind = row.type if row else (life.row.type if life else "user")
        sh.visible[x] = Msg(x, kind, ev.seq, ev.time, ctx.index, row)
    if life is not None and life.row.session == sh.id and life.state in ("pending", "visible"):
        life = t.writable_life(x)
        assert life is not None
        life.promotions += 1
        if row is not None:
            life.state = "visible"
            life.promoted_step = ctx.index
    promoted = ctx.promoted
    if not promoted:
        promoted = ctx.promoted = {}
    batch = promoted.get(sh.id)
    if batch is None:
        batch = promoted[sh.id] = []
    batch.append((ev, row))


def _compaction_settled(t: Tracker, ctx: StepCtx, ev: Event, sh: SessionShadow) -> None:
    if parse(ev.data).get("reason") == "auto":
        return  # an automatic compaction never settles the manual barrier
    b = sh.barrier
    if b is None or (ev.input is not None and ev.input != b.input):
        return
    del sh.pending[b.input]
    sh.barrier = next((r for r in sh.pending.values() if r.type == "compaction"), None)
    t._end_life(b.input, sh.id, "consumed", ctx.index)


def _revert_staged(t: Tracker, ctx: StepCtx, ev: Event, sh: SessionShadow) -> None:
    op = ctx.op
    message = parse(ev.data).get("message")
    if message is None and isinstance(op, RevertStage):
        message = op.message
    sh.staged = message
    sh.staged_step = ctx.index


def _revert_cleared(t: Tracker, ctx: StepCtx, ev: Event, sh: SessionShadow) -> None:
    sh.staged = None


def _revert_committed(t: Tracker, ctx: StepCtx, ev: Event, sh: SessionShadow) -> None:
    to = parse(ev.data).get("to") or sh.staged
    sh.staged = None
    boundary = sh.visible.get(to or "")
    if boundary is None:
        return
    cut = t.policy.revert_cut(boundary.seq)
    kept: dict[str, Msg] = {}
    for k, m in sh.visible.items():
        if m.seq < cut:
            kept[k] = m
        else:
            t._end_life(k, sh.id, "reverted", ctx.index)
    sh.visible = kept
    for k, r in list(sh.pending.items()):
        if r.type != "compaction" and r.seq >= cut:
            del sh.pending[k]
            t._end_life(k, sh.id, "reverted", ctx.index)


def _forked(t: Tracker, ctx: StepCtx, ev: Event, sh: SessionShadow) -> None:
    data = parse(ev.data)
    if sh.n_events == 0 and ev.seq == 0:
        sh.first_forked = True
    floor = data.get("parent_seq", data.get("parentSeq"))
    sh.fork_seq = sh.fork_floor = floor if isinstance(floor, int) else None
    messages = data.get("messages")
    if not isinstance(messages, list):
        if not ctx.fork_from_view:
            ctx.fork_from_view = set()
        ctx.fork_from_view.add(sh.id)
        return
    for m in messages:
        mid = m.get("id")
        seq = m.get("seq", -1)
        sh.visible[mid] = Msg(
            mid, m.get("type", "user"), seq, m.get("time"), ctx.index, None, m.get("copied_from")
        )
        t._own_copy(ctx, sh.id, mid, m.get("type", "user"))
        if sh.fork_floor is None or seq > sh.fork_floor:
            sh.fork_floor = seq


def _execution_started(t: Tracker, ctx: StepCtx, ev: Event, sh: SessionShadow) -> None:
    t.emits_exec = True
    sh.exec_open = True
    sh.exec_step = ctx.index
    if not ctx.exec_started:
        ctx.exec_started = {}
    ctx.exec_started[sh.id] = ctx.exec_started.get(sh.id, 0) + 1


def _execution_ended(t: Tracker, ctx: StepCtx, ev: Event, sh: SessionShadow) -> None:
    t.emits_exec = True
    sh.exec_open = False


def _step_started(t: Tracker, ctx: StepCtx, ev: Event, sh: SessionShadow) -> None:
    t.emits_steps = True


_APPLY = {
    "admitted": _admitted,
    "compaction_admitted": _compaction_admitted,
    "promoted": _promoted,
    "compaction_ended": _compaction_settled,
    "compaction_failed": _compaction_settled,
    "revert_staged": _revert_staged,
    "revert_cleared": _revert_cleared,
    "revert_committed": _revert_committed,
    "forked": _forked,
    "execution_started": _execution_started,
    "execution_succeeded": _execution_ended,
    "execution_failed": _execution_ended,
    "execution_interrupted": _execution_ended,
    "step_started": _step_started,
}


__all__ = [
    "CONFLICT",
    "EXEC_TYPES",
    "TERMINALS",
    "Life",
    "Msg",
    "Owner",
    "Row",
    "SessionShadow",
    "StepCtx",
    "Tracker",
    "parse",
    "request_kind",
    "same_json",
]
