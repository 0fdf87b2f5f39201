"""The explorer's sound merge key: what the model and the invariant monitor
will read in the future, and nothing else of the path that led there.

Theory of operation. Two search paths may be merged (only one of them
expanded) when every continuation gets the same verdicts on both. The
model's future reads the fold of each session's log (pending rows,
transcript, staged revert, the next seq) and the volatile runs; the
monitor's future reads the tracker's shadows and lifecycles (the receipts
the client was given, what was promoted and acknowledged) and each
checker's own memory. :func:`merge_key` serializes both into one flat
tuple under one renaming, keeping only what a future comparison can tell
apart:

- **IDs** (pool, generated ``in-``/``cmp-``/``copy-`` and ``call-`` IDs) are
  renamed by first appearance; checkers and the model compare IDs for
  equality only. **Sessions** are ordered by their model folds (symmetry);
  sessions whose folds tie are tried in every order and the least key is
  taken, so worlds that differ only by session names get one key.
- **Times** are replaced by their dense rank among the times of the same
  session, in the model and the monitor together: checkers compare times
  (``<``, ``==``) within a session and never do arithmetic on them, and
  every later request carries a larger ``now``. Ranking per session is what
  collapses interleavings of two sessions' operations.
- **Seqs** likewise, with the model's next seq ranked among them; the one
  seq arithmetic (seq-contiguous: the next event's seq is the previous plus
  one) is kept exactly as each session's gap between its next seq and the
  tracker's last seen seq.
- **Trace step indexes** are evidence in violation messages, and are
  otherwise only compared with the current step's index, which is larger
  than any of them: the ones whose presence a checker tests (an
  acknowledgement, a rung doorbell, an open execution) are kept as "some
  earlier step", with ``None`` and the ``-1`` sentinel as they are; the
  evidence-only ones (the last crash, where an input was admitted or
  promoted) are left out.
- **Call opening order** is ranked; event counts are capped at 2 (the
  checkers ask only whether a session has 0 or 1 events).
- The model's **ID index** (whom every ID ever admitted belongs to) is
  written after the sessions: an ID whose lifecycle ended is in no fold,
  and its owner decides how a reuse is judged.
- Every other value is kept as it is, and an attribute this module does not
  know is serialized in full: a checker that grows new memory makes the key
  finer (fewer merges), never unsound. Iteration order is kept wherever it
  may carry meaning (a session's pending rows are in admission order); dicts
  keyed by sessions are walked in canonical session order.

What else is left out: the caches and bookkeeping of the monitor (dispatch
tables, the exercised set, the policy, the shared environment) and the
checkers' ``step_scoped`` attributes (dead between steps), which decide no
later verdict. Dicts that are only looked up (lifecycles and owners by ID)
are walked in canonical ID order.

``tests/test_canon.py`` checks the claim directly on small bounds: over every
path without merging, any two paths with one key have the same one-step
futures (the same verdicts and the same child keys): a bisimulation, so
merging by this key loses no violation within the bound.
"""

from __future__ import annotations

import hashlib
import re
from itertools import groupby, permutations, product
from typing import Any

from ..model import State
from ..model.store import SessionLog

_ID = re.compile(r"(?:s\d+\.i\d+|(?:in|cmp|copy|call)-\d+)\Z")

TIME, SEQ, STEP, ORDER, COUNT = "time", "seq", "step", "order", "count"

_ROLES: dict[str, Any] = {
    "time": TIME,
    "seq": SEQ,
    "admitted_seq": SEQ,
    "last_seq": SEQ,
    "fork_floor": SEQ,
    "fork_seq": SEQ,
    "next_seq": SEQ,
    "step": STEP,
    "doorbell": STEP,  # SessionShadow: the step that rang; Run: a bool, kept as it is
    "acked_step": STEP,
    "settled_at": STEP,
    "open_since": STEP,
    "cont": STEP,  # SessionShadow: (step index, call); Run: a bool
    "bg": STEP,  # input -> (row, step index)
    "floors": (SEQ, STEP),  # child -> (floor seq, fork step)
    "opened": ORDER,
    "n_events": COUNT,
}
"""The role of an int by the name of the attribute (or dict key) holding it;
a tuple gives roles by position. Applies to ints nested in the value, until
an object with its own attributes is reached."""

_RAW_STEP = frozenset({"Call", "Run"})
"""Classes whose ``step`` is the model's step count (compared with ``+ 1``
by the allowance checker), not a trace index: kept as it is."""

_SKIP = frozenset(
    {"_begin", "_end", "_events", "_env", "env", "t", "policy", "enabled", "exercised", "found"}
    | {"last_crash", "last_index", "last_event_step", "exec_step", "created_step"}
    | {"staged_step", "receipt_step", "promoted_step", "ended_step"}
)
"""Attributes that decide no verdict: the monitor's dispatch caches, shared
references walked once (the tracker), bookkeeping, and the tracker's
evidence-only step indexes (named in violation messages, never compared)."""

_UNORDERED = frozenset({"lives", "owners", "namespace", "calls_by_id", "pending_at", "visible_at"})
"""Dicts keyed by input or call ID that are only looked up (never iterated
in an order that decides a verdict): walked sorted by canonical ID. Every
other dict keeps its order (a session's pending rows are in admission
order)."""

_EARLIER = "<"  # a trace step index: some step before the current one

_PLANS: dict[type, tuple[str, Any, tuple[tuple[str, Any, bool], ...]]] = {}


def _plan(cls: type) -> tuple[str, Any, tuple[tuple[str, Any, bool], ...]]:
    """How to write an object of a slotted class: its name, where its
    session is, and per attribute (name, role, is-unordered-dict)."""
    plan = _PLANS.get(cls)
    if plan is None:
        slots: list[str] = []
        for klass in reversed(cls.__mro__):
            declared = klass.__dict__.get("__slots__", ())
            slots.extend((declared,) if isinstance(declared, str) else declared)
        fields = tuple(_attribute(cls, n) for n in slots if n not in _SKIP and n != "__weakref__")
        plan = _PLANS[cls] = (cls.__name__, _session_attr(cls, slots), fields)
    return plan


def _attribute(cls: type, name: str) -> tuple[str, Any, bool]:
    role = None if name == "step" and cls.__name__ in _RAW_STEP else _ROLES.get(name)
    return (name, role, name in _UNORDERED)


def _session_attr(cls: type, names: list[str] | tuple[str, ...]) -> str | None:
    """The attribute naming the session whose times and seqs an object
    holds: ``session``; a shadow's or log's ``id``; a lifecycle's or
    message's admission ``row``."""
    if "session" in names:
        return "session"
    if cls.__name__ in ("SessionShadow", "SessionLog"):
        return "id"
    if "row" in names:
        return "row"
    return None


class _Writer:
    """One serialization: flat tokens, with ranked values fixed up at the end."""

    def __init__(self, sessions: dict[str, int]) -> None:
        self.tokens: list[Any] = []
        self.sessions = sessions
        self.names: dict[str, int] = {}
        # positions of ranked values, by (role, session): times and seqs are
        # ranked per session (no checker compares them across sessions, so
        # interleavings of two sessions' steps collapse), call order globally
        self.ranked: dict[tuple[str, str | None], list[int]] = {}
        self.session: str | None = None

    def name(self, text: str) -> Any:
        k = self.sessions.get(text)
        if k is not None:
            return ("s", k)
        if _ID.match(text):
            n = self.names.get(text)
            if n is None:
                n = self.names[text] = len(self.names)
            return ("id", n)
        return text

    def value(self, v: Any, role: Any = None) -> None:
        t = type(v)
        out = self.tokens
        if t is str:
            out.append(self.name(v))
        elif t is int:
            if role is None:
                out.append(v)
            elif role is STEP:
                out.append(_EARLIER if v >= 0 else v)
            elif role is COUNT:
                out.append(min(v, 2))
            elif type(role) is str:
                scope = None if role is ORDER else self.session
                self.ranked.setdefault((role, scope), []).append(len(out))
                out.append(v)
            else:
                out.append(v)
        elif v is None or t is bool or t is float:
            out.append(v)
        elif t is tuple or t is list:
            out.append(("[", len(v)))
            if type(role) is tuple and len(role) == len(v):
                for x, r in zip(v, role, strict=True):
                    self.value(x, r)
            else:
                for x in v:
                    self.value(x, role)
        elif t is dict:
            self.mapping(v, role, False)
        elif t is set or t is frozenset:
            names = sorted((repr(self._peek(x)), x) for x in v)
            out.append(("{", len(v)))
            for _, x in names:
                self.value(x, role)
        else:
            self.obj(v)

    def _peek(self, x: Any) -> Any:
        """How a set member or dict key will be written, for sorting."""
        if type(x) is str:
            k = self.sessions.get(x)
            if k is not None:
                return ("s", k)
            n = self.names.get(x)
            return ("id", n) if n is not None else (1, x)
        return x

    def mapping(self, d: dict[Any, Any], role: Any, unordered: bool) -> None:
        items = list(d.items())
        if len(items) > 1:
            if all(type(k) is str and k in self.sessions for k, _ in items):
                items.sort(key=lambda kv: self.sessions[kv[0]])
            elif unordered:
                items.sort(key=lambda kv: repr(self._peek(kv[0])))
        self.tokens.append(("{:", len(items)))
        outer = self.session
        for k, v in items:
            self.value(k)
            if role is None and type(k) is str:  # a receipt: roles by key
                if k == "session" and type(v) is str:
                    self.session = v  # its times and seqs are that session's
                self.value(v, _ROLES.get(k))
            else:
                self.value(v, role)
        self.session = outer

    def obj(self, o: Any) -> None:
        out = self.tokens
        cls = type(o)
        if hasattr(o, "__dict__"):  # a checker or the tracker: attributes as they are now
            name, where = cls.__name__, _session_attr(cls, tuple(vars(o)))
            scoped = getattr(cls, "step_scoped", ())
            fields = tuple(
                _attribute(cls, n) for n in sorted(vars(o)) if n not in _SKIP and n not in scoped
            )
        else:
            name, where, fields = _plan(cls)
        out.append(name)
        outer = self.session
        if where is not None:
            sid = getattr(o, where, None)
            if where == "row":
                sid = getattr(sid, "session", None)
            if type(sid) is str:
                self.session = sid
        for n, role, unordered in fields:
            v = getattr(o, n, None)
            if type(v) is dict:
                self.mapping(v, role, unordered)
            else:
                self.value(v, role)
        self.session = outer

    def finish(self) -> tuple[Any, ...]:
        out = self.tokens
        for _, positions in sorted(self.ranked.items(), key=lambda kv: repr(kv[0])):
            rank = {v: i for i, v in enumerate(sorted({out[p] for p in positions}))}
            for p in positions:
                out[p] = rank[out[p]]
        return tuple(out)


def _session_orders(state: State) -> list[dict[str, int]]:
    """The canonical session orders: sessions sorted by their model folds;
    sessions whose folds tie are tried in every order (the key takes the
    least), so that worlds differing only by session names get one key."""
    from .explore import _fold_form  # the model's fold of one session, names local

    calls = {c.call: i for i, c in enumerate(state.open_calls())}
    logs = state.store.sessions
    forms = sorted((repr(_fold_form(state, logs[sid], calls)), sid) for sid in sorted(logs))
    groups = [[sid for _, sid in g] for _, g in groupby(forms, key=lambda f: f[0])]
    orders = []
    for choice in product(*(permutations(g) for g in groups)):
        flat = [sid for group in choice for sid in group]
        orders.append({sid: k for k, sid in enumerate(flat)})
    return orders


def _model(w: _Writer, state: State, log: SessionLog) -> None:
    """One session as the model reads it: its fold, next seq and run."""
    from .explore import pool_used

    w.session = log.id
    w.value(log.pending)
    w.value(log.transcript)
    w.value(log.revert)
    w.value(log.fork_seq, SEQ)
    w.value(log.next_seq, SEQ)
    w.value(pool_used(state, log.id))
    w.value(state.runs.get(log.id))
    w.session = None


def _key(state: State, monitor: Any, sessions: dict[str, int]) -> tuple[Any, ...]:
    w = _Writer(sessions)
    logs = state.store.sessions
    ordered = sorted(logs, key=sessions.__getitem__)
    for sid in ordered:
        _model(w, state, logs[sid])
    # Whom every ID belongs to, for good: the model judges a reuse of an ID
    # whose lifecycle ended by it, and no session's fold shows such an ID.
    w.mapping(dict(state.store.owners), None, True)
    tracker = getattr(monitor, "tracker", None)
    if tracker is None:  # another monitor: all of its attributes, as they are
        w.obj(monitor)
        return w.finish()
    for sid in ordered:  # seq-contiguous's arithmetic, exactly
        shadow = tracker.sessions.get(sid)
        w.value(logs[sid].next_seq - (shadow.last_seq if shadow is not None else -1))
    w.obj(tracker)
    for checker in monitor.checkers:
        w.obj(checker)
    return w.finish()


def merge_key(state: State, monitor: Any) -> tuple[Any, ...]:
    """The key under which the explorer merges search paths (module docstring)."""
    orders = _session_orders(state)
    if len(orders) == 1:
        return _key(state, monitor, orders[0])
    return min((_key(state, monitor, order) for order in orders), key=repr)


def fingerprint(key: tuple[Any, ...]) -> bytes:
    """A 128-bit digest of a key, what the search keeps per visited key (as
    TLC keeps fingerprints): a key is a few kilobytes of tuples, a digest 16
    bytes. Two of a million keys collide with probability about 1e-27."""
    return hashlib.blake2b(repr(key).encode(), digest_size=16).digest()
