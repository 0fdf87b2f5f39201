"""The explorer's sound merge key: what the model and the invariant monitor
will read in the future, and nothing else of the path that led there.

Theory of operation. Two search paths may be merged (only one of them
expanded) when every continuation gets the same verdicts on both. The
model's future reads the fold of each session's log (pending rows,
transcript, staged revert, the next seq), the volatile runs and the ID
index; the monitor's future reads the tracker's shadows and lifecycles (the
receipts the client was given, what was promoted and acknowledged) and each
checker's own memory. The key writes all of it under one renaming, keeping
only what a future comparison can tell apart:

- **Sessions, one segment each.** Everything about one session, in the
  model and in the monitor, is written into that session's *segment*: its
  fold, next seq, pool IDs used and run; every ID it owns in the model's
  index (an ID whose lifecycle ended is in no fold, and its owner decides
  how a reuse is judged); its shadow, and the tracker's and the checkers'
  entries for its IDs, calls and itself. A segment names nothing of other
  sessions: an ID another session owns is written as a reference that the
  global part resolves. Segments are sorted by their digest, which is the
  session symmetry (worlds that differ only by session names get one key),
  and a whole segment, finished and digested, is cached by the identity of
  what it is written from (:class:`KeyCache`: the session's log and run,
  its shadow, its entries in the tracker's tables and the checkers'
  memory): siblings in the search share every session but one.
- **IDs** (pool, generated ``in-``/``cmp-``/``copy-`` and ``call-`` IDs) are
  named by first appearance within their owner's segment (an ID that only
  the index holds, by its number); checkers and the model compare IDs for
  equality only. An ID no session owns (a call's) is named where it
  appears, and the global part records any such ID that two segments name.
- **Times** are replaced by their dense rank among the times of the same
  segment, in the model and the monitor together: checkers compare times
  (``<``, ``==``) within a session and never do arithmetic on them, and
  every later request carries a larger ``now``. Ranking per session is what
  collapses interleavings of two sessions' operations.
- **Seqs** likewise; the one seq arithmetic (seq-contiguous: the next
  event's seq is the previous plus one) is kept exactly as each session's
  gap between its next seq and the tracker's last seen seq.
- **Calls' opening order** is ranked within the segment: a session's own
  calls (its open one, the one a continuation answered) keep their order.
  The order between two sessions' calls is left out: the model reads it
  only to list open calls oldest first, and no checker's verdict depends on
  the order of that list (``tracker.open`` is keyed by session; a message
  may name the first call listed, a verdict never does).
- **Trace step indexes** are evidence in violation messages, and are
  otherwise only compared with the current step's index, which is larger
  than any of them: the ones whose presence a checker tests (an
  acknowledgement, a rung doorbell, an open execution) are kept as "some
  earlier step", ``None`` as it is; the evidence-only ones (the last crash,
  where an input was admitted, promoted or its lifecycle ended) are left
  out. Event counts are capped at 2 (the checkers ask only whether a session
  has 0 or 1 events).
- **The global part**: what hello said (step limit, features), whether the
  target has shown execution and step events at all, the cross-session
  references, and whatever the writers below do not know. The writers are
  per class and know each attribute by name; an object whose attributes are
  not the ones they know, a checker's memory they do not know, or a
  non-empty value that is empty between steps, is written in full by the
  reflective writer (:class:`_Full`), with every int as it is: a checker
  that grows new memory makes the key finer (fewer merges), never unsound.

What else is left out: the caches and bookkeeping of the monitor (dispatch
tables, the exercised set, the policy, the enabled set, which are the same
for a whole search) and the checkers' ``step_scoped`` attributes (dead
between steps), which decide no later verdict. Dicts that are only looked
up (lifecycles, owners, calls by ID) are written in canonical ID order;
every other sequence keeps its order (a session's pending rows are in
admission order).

``tests/test_canon.py`` checks the claim directly on small bounds: over every
path without merging, any two paths with one key have the same one-step
futures (the same verdicts and the same child keys): a bisimulation, so
merging by this key loses no violation within the bound.
"""

from __future__ import annotations

import hashlib
import marshal
import re
from collections.abc import Callable
from itertools import permutations, product
from typing import Any

from ..model import State
from ..model.store import SessionLog

_POOL = re.compile(r"s\d+\.i(\d+)\Z")
_GENERATED = re.compile(r"(?:in|cmp|copy|call)-(\d+)\Z")


def _raw_order(x: str) -> tuple[int, int, str]:
    """The order of IDs that no fold names (ended ones): pool IDs by number
    (a session takes them lowest first), generated ones by number (within
    one session, the order it generated them), anything else by text."""
    m = _POOL.match(x)
    if m:
        return (0, int(m.group(1)), x)
    m = _GENERATED.match(x)
    if m:
        return (1, int(m.group(1)), x)
    return (2, 0, x)


def digest_of(tokens: tuple[Any, ...] | list[Any]) -> bytes:
    """A 128-bit digest of tokens, by their ``marshal`` form: canonical for
    the plain values a key is made of, as their ``repr`` is, and some 2.5x
    cheaper to write. Version 2, because from version 3 on ``marshal``
    writes a value seen twice as a reference to its first copy and an
    interned string apart, so that equal tokens built from other objects
    could write other bytes. A token ``marshal`` cannot write (a subclass
    of a plain type) sends the whole to its ``repr``, marked apart (no
    ``marshal`` form starts with a zero byte)."""
    try:
        text = marshal.dumps(tokens, 2)
    except ValueError:
        text = b"\0" + repr(tokens).encode()
    return hashlib.blake2b(text, digest_size=16).digest()


def fingerprint(key: tuple[Any, ...]) -> bytes:
    """A 128-bit digest of a key, what the search keeps per visited key (as
    TLC keeps fingerprints): a key is a few kilobytes of tuples, a digest 16
    bytes. Two of a million keys collide with probability about 1e-27."""
    return digest_of(key)


# --- one session's segment ----------------------------------------------------------


class _Segment:
    """One session's tokens, with its local names and the positions of the
    values ranked at the end (times, seqs, calls' opening order)."""

    __slots__ = (
        "sid",
        "owners",
        "out",
        "names",
        "times",
        "seqs",
        "orders",
        "foreign",
        "loose",
        "deps",
        "looked",
    )

    def __init__(self, sid: str, owners: Any) -> None:
        self.sid = sid
        self.owners = owners  # the model's ID index
        self.out: list[Any] = []
        self.names: dict[str, int] = {}
        self.times: list[int] = []
        self.seqs: list[int] = []
        self.orders: list[int] = []
        self.foreign: list[str] = []  # IDs another session owns, by reference number
        self.loose: dict[str, int] = {}  # IDs no session owns, named here
        self.deps: list[tuple[str, Any]] = []  # (ID, its index entry) the tokens rely on
        self.looked: list[tuple[str, Any]] = []  # (ID, its index entry) each lookup found

    # values

    def name(self, x: str | None) -> Any:
        """An ID's token: its local name, a reference to another session's
        owner, or None (the writers put it in place themselves: one call
        per ID, not one per token)."""
        if x is None:
            return None
        n = self.names.get(x)
        if n is not None:
            return n
        o = self.owners.get(x)
        self.looked.append((x, o))
        if o is not None and o.session != self.sid:
            foreign = self.foreign
            if x not in foreign:
                foreign.append(x)
            return ("f", foreign.index(x))
        n = self.names[x] = len(self.names)
        if o is None:
            self.loose[x] = n
        return n

    def ident(self, x: str | None) -> None:
        """An ID: its local name, a reference to another session's, or None."""
        self.out.append(self.name(x))

    def session(self, sid: str | None) -> None:
        self.out.append(_session(self.sid, sid))

    def time(self, v: int | None) -> None:
        if type(v) is int:
            self.times.append(len(self.out))
        self.out.append(v)

    def seq(self, v: int | None) -> None:
        if type(v) is int:
            self.seqs.append(len(self.out))
        self.out.append(v)

    def step(self, v: int | None) -> None:
        """A trace step index: "earlier than the current step", or None."""
        self.out.append(_step(v))

    def finish(self) -> list[Any]:
        out = self.out
        for positions in (self.times, self.seqs, self.orders):
            if positions:
                rank = {v: i for i, v in enumerate(sorted({out[p] for p in positions}))}
                for p in positions:
                    out[p] = rank[out[p]]
        return out

    def owned_in_order(self, items: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
        """Entries keyed by ID, in canonical ID order: named IDs by name, then
        the others by :func:`_raw_order`."""
        names = self.names
        return sorted(
            items,
            key=lambda kv: (
                (0, names[kv[0]], "") if kv[0] in names else (1, *_raw_order(kv[0])[:2], kv[0])
            ),
        )

    # model objects (each written by one ``extend``, its times and seqs
    # marked by their offsets: a call per object, not one per token)

    def receipt(self, r: Any) -> None:
        out = self.out
        if r is None:
            out.append(None)
            return
        at = len(out)
        seq, time = r.admitted_seq, r.time
        out.extend(
            (
                self.name(r.input),
                _session(self.sid, r.session),
                r.type,
                r.data,
                r.delivery,
                seq,
                time,
            )
        )
        if type(seq) is int:
            self.seqs.append(at + 5)
        if type(time) is int:
            self.times.append(at + 6)

    def message(self, m: Any) -> None:
        out = self.out
        at = len(out)
        seq, time = m.seq, m.time
        out.extend((self.name(m.id), m.type, seq, time, m.data, self.name(m.copied_from)))
        if type(seq) is int:
            self.seqs.append(at + 2)
        if type(time) is int:
            self.times.append(at + 3)
        self.receipt(m.receipt)

    def call(self, c: Any) -> None:
        out = self.out
        if c is None:
            out.append(None)
            return
        context = c.context
        out.extend(
            (
                self.name(c.call),
                _session(self.sid, c.session),
                c.kind,
                c.step,
                c.final,
                len(context),
            )
        )
        for x in context:
            out.append(self.name(x))
        self.orders.append(len(out))
        out.append(c.opened)

    def run(self, run: Any) -> None:
        if run is None:
            self.out.append(None)
            return
        self.out.append("run")
        self.call(run.call)
        self.out.extend((run.phase, run.forced, run.step, run.cont, run.doorbell))


def _session(mine: str, sid: str | None) -> Any:
    """A session's token in the segment of ``mine``: itself, None, or another
    session by name (resolved in the global part)."""
    if sid == mine:
        return "@"
    return None if sid is None else ("S", sid)


def _step(v: int | None) -> Any:
    """A trace step index's token: "earlier than the current step", or None."""
    return None if v is None else ("<" if v >= 0 else v)


_MODEL_SLOTS = {
    "SessionLog": ("id", "events", "next_seq", "pending", "transcript", "revert", "fork_seq"),
    "Receipt": ("input", "session", "type", "data", "delivery", "admitted_seq", "time"),
    "Message": ("id", "type", "seq", "time", "data", "copied_from", "receipt"),
    "Call": ("call", "session", "kind", "step", "final", "context", "opened"),
    "Run": ("call", "phase", "forced", "step", "cont", "doorbell"),
    "Owner": ("session", "type", "copied", "freed"),
}
"""The model's classes the segment writer knows, with their fields (checked
by ``tests/test_canon.py`` against the classes)."""


def _model_half(state: State, log: SessionLog, owned: list[tuple[str, Any]]) -> _Segment:
    """One session as the model reads it: its fold, next seq, pool IDs used,
    run, and the index entries of every ID it owns (the events are history:
    the fold is what the model reads of them)."""
    seg = _Segment(log.id, state.store.owners)
    out = seg.out
    out.append(len(log.pending))
    for r in log.pending:
        seg.receipt(r)
    out.append(len(log.transcript))
    for m in log.transcript:
        seg.message(m)
    seg.ident(log.revert)
    seg.seq(log.fork_seq)
    seg.seq(log.next_seq)
    prefix = log.id + ".i"
    # The session's pool IDs the index holds, whoever owns them now (a freed
    # ID may be owned by another session since): the next fresh one is the
    # lowest the index lacks. Such an entry changes only with this log or
    # with an owned entry (``deps``), so a cached segment stays true.
    out.append(len([x for x in seg.owners if x.startswith(prefix)]))
    seg.run(state.runs.get(log.id))
    # Whom every ID belongs to, for good: the model judges a reuse of an ID
    # whose lifecycle ended by it, and no fold shows such an ID.
    ordered = seg.owned_in_order(owned)
    out.append(len(ordered))
    for x, o in ordered:
        seg.ident(x)
        out.extend((o.type, o.copied, o.freed))
    seg.deps = [*owned, *((x, seg.owners.get(x)) for x in seg.foreign)]
    return seg


# --- the monitor's half of a segment --------------------------------------------------

_SHADOW_SLOTS = (
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
_ROW_SLOTS = ("input", "session", "type", "delivery", "seq", "time", "step")
_MSG_SLOTS = ("id", "type", "seq", "time", "step", "row", "copied_from")
_LIFE_SLOTS = (
    "row",
    "state",
    "promotions",
    "promoted_step",
    "ended_step",
    "receipt",
    "receipt_step",
    "payload",
    "delivery",
    "acked_step",
)
_TRACKER_OWNER_SLOTS = ("session", "type", "copied", "step", "freed")
# The tracker's attributes (invariants/tracker.py) by how the key writes them:
# what the tracker knows of the whole target, in the global part (:func:`_facts`);
# its tables by ID and by session, into the segments (:func:`_monitor_halves`);
# the policy (the same for a whole search), the evidence-only step indexes and
# the copy-on-write bookkeeping (which objects it may change in place), left
# out (module docstring). Whatever else a tracker holds (it learnt
# something the writers were not told of) is written in full on its own, read
# from the tracker itself: finer, never unsound, and cheap (when such an
# attribute sent the whole monitor to the reflective writer instead, explore
# g4 at depth 3 took over 5 minutes).
_TRACKER_FACTS = ("step_limit", "features", "emits_exec", "emits_steps", "busy")
_TRACKER_TABLES = ("sessions", "owners", "namespace", "lives", "open", "calls_by_id", "open_count")
_TRACKER_LEFT_OUT = ("policy", "last_crash", "last_index", "mine", "mine_lives")
_TRACKER_WRITTEN = frozenset((*_TRACKER_FACTS, *_TRACKER_TABLES, *_TRACKER_LEFT_OUT))
_MONITOR_SLOTS = {
    "SessionShadow": _SHADOW_SLOTS,
    "Row": _ROW_SLOTS,
    "Msg": _MSG_SLOTS,
    "Life": _LIFE_SLOTS,
    "Owner": _TRACKER_OWNER_SLOTS,
    "PendingView": ("input", "type", "delivery", "admitted_seq", "time"),
    "MessageView": ("id", "type", "seq", "time", "copied_from"),
}
"""The monitor's classes the segment writer knows (checked by the tests)."""

_CHECKER_BASE = frozenset({"env", "t", "policy"})
_BY_SESSION = {("LifecycleChecker", "open_since"), ("ForkChecker", "floors")}
"""Checker memory keyed by session: written into that session's segment."""
_AT_SESSION = {("NotHistoryChecker", "pending_at"), ("NotHistoryChecker", "visible_at")}
"""Checker memory mapping an ID to the session that shows it."""
_EMPTY_BETWEEN_STEPS = {
    ("ProjectionChecker", "fresh"),
    ("AtomicChecker", "todo"),
    ("BarrierEventChecker", "settled_at"),
    ("BarrierEventChecker", "touched"),
    ("RevertChecker", "cuts"),
    ("RevertChecker", "committed"),
    ("RevertChecker", "admitted_first"),
}
"""Checker memory that each step empties before it ends: nothing when empty,
written in full otherwise."""
_IDLE_OUTSIDE_GROUPS: dict[tuple[str, str], Any] = {
    ("ConcurrentRetryChecker", "group"): -1,
    ("ConcurrentRetryChecker", "inputs"): set(),
    ("ConcurrentRetryChecker", "replies"): {},
    ("ConcurrentRetryChecker", "admitted"): {},
}
"""Checker memory of a concurrent group, holding these values (the checker's
own initial ones) until a group starts, which no explorer path does: nothing
when equal to them, written in full otherwise. (Written in full on every key,
they were a tenth of the key's cost.)"""


def _row(seg: _Segment, r: Any) -> None:
    out = seg.out
    if r is None:
        out.append(None)
        return
    at = len(out)
    seq, time, step = r.seq, r.time, r.step
    out.extend(
        (
            seg.name(r.input),
            _session(seg.sid, r.session),
            r.type,
            r.delivery,
            seq,
            time,
            None if step is None else ("<" if step >= 0 else step),  # _step, a call less a row
        )
    )
    if type(seq) is int:
        seg.seqs.append(at + 4)
    if type(time) is int:
        seg.times.append(at + 5)


def _msg(seg: _Segment, m: Any) -> None:
    out = seg.out
    at = len(out)
    seq, time, step = m.seq, m.time, m.step
    # _step written out: a call less a message
    out.extend(
        (seg.name(m.id), m.type, seq, time, None if step is None else ("<" if step >= 0 else step))
    )
    if type(seq) is int:
        seg.seqs.append(at + 2)
    if type(time) is int:
        seg.times.append(at + 3)
    _row(seg, m.row)
    out.append(seg.name(m.copied_from))


def _views(seg: _Segment, pending: Any, transcript: Any) -> None:
    out = seg.out
    name, seqs, times = seg.name, seg.seqs, seg.times
    out.append(len(pending))
    for v in pending:
        at = len(out)
        seq, time = v.admitted_seq, v.time
        out.extend((name(v.input), v.type, v.delivery, seq, time))
        if type(seq) is int:
            seqs.append(at + 3)
        if type(time) is int:
            times.append(at + 4)
    out.append(len(transcript))
    for v in transcript:
        at = len(out)
        seq, time = v.seq, v.time
        out.extend((name(v.id), v.type, seq, time, name(v.copied_from)))
        if type(seq) is int:
            seqs.append(at + 2)
        if type(time) is int:
            times.append(at + 3)


def _shadow(seg: _Segment, sh: Any) -> None:
    """A session's shadow; the evidence-only step indexes (last event, the
    execution's start, the staged revert's step, creation) are left out."""
    out = seg.out
    name = seg.name
    at = len(out)
    seqs = (sh.last_seq, sh.fork_seq, sh.fork_floor)
    pending = sh.pending
    out.extend(
        ("shadow", min(sh.n_events, 2), seqs[0], sh.first_forked, seqs[1], seqs[2], len(pending))
    )
    for offset, v in ((2, seqs[0]), (4, seqs[1]), (5, seqs[2])):
        if type(v) is int:
            seg.seqs.append(at + offset)
    for x, r in pending.items():
        out.append(name(x))
        _row(seg, r)
    _row(seg, sh.barrier)
    out.append(len(sh.visible))
    for x, m in sh.visible.items():
        out.append(name(x))
        _msg(seg, m)
    out.append(name(sh.staged))
    _views(seg, sh.view_pending, sh.view_transcript)
    out.append(sh.exec_open)
    cont = sh.cont
    if cont is None:
        out.append(None)
    else:
        out.append(_step(cont[0]))
        seg.call(cont[1])
    # the model's step count (compared with + 1), the doorbell, kept or not
    out.extend((sh.last_step, _step(sh.doorbell), sh.doorbell_kept, len(sh.bg)))
    for x, (r, step) in sh.bg.items():
        out.append(name(x))
        _row(seg, r)
        out.append(_step(step))


_RECEIPT_ROLES: dict[str, Callable[[_Segment, Any], None]] = {
    "input": _Segment.ident,
    "session": _Segment.session,
    "admitted_seq": _Segment.seq,
    "time": _Segment.time,
}
_RECEIPT_TYPES = {"input": str, "session": str, "admitted_seq": int, "time": int}


def _life(seg: _Segment, life: Any) -> None:
    """A lifecycle; where it was promoted, ended and got its receipt are
    evidence only."""
    out = seg.out
    _row(seg, life.row)
    receipt = life.receipt
    if receipt is None:
        out.extend((life.state, life.promotions, None))
    else:
        out.extend((life.state, life.promotions, len(receipt)))
        for k, v in receipt.items():
            out.append(k)
            write = _RECEIPT_ROLES.get(k)
            if write is not None and (v is None or type(v) is _RECEIPT_TYPES[k]):
                write(seg, v)
            else:
                out.append(repr(v))  # the payload (parsed JSON): compared whole
    out.extend((life.payload, life.delivery, _step(life.acked_step)))


def _tracker_owner(seg: _Segment, o: Any) -> None:
    seg.out.extend((_session(seg.sid, o.session), o.type, o.copied, o.freed, _step(o.step)))


def _id_entries(seg: _Segment, tag: str, items: list[tuple[str, Any]], write: Any) -> None:
    out = seg.out
    out.extend((tag, len(items)))
    if not items:
        return
    for x, v in seg.owned_in_order(items) if len(items) > 1 else items:
        out.append(seg.name(x))
        write(seg, v)


# --- the reflective writer, for what the segment writers do not know ------------------


class _Full:
    """Writes any value in full: ints, strings, None, bools and floats as
    they are (IDs and sessions through ``name``), containers by content, an
    object by class name and attributes. Exact, so never unsound."""

    def __init__(self, name: Callable[[str], Any]) -> None:
        self.tokens: list[Any] = []
        self.name = name

    def value(self, v: Any, skip: frozenset[str] = frozenset()) -> None:
        t = type(v)
        out = self.tokens
        if t is str:
            out.append(self.name(v))
        elif v is None or t is int or t is bool or t is float:
            out.append(v)
        elif t is tuple or t is list:
            out.append(("[", len(v)))
            for x in v:
                self.value(x)
        elif t is dict:
            out.append(("{:", len(v)))
            for k, x in v.items():
                self.value(k)
                self.value(x)
        elif t is set or t is frozenset:
            members = []
            for x in v:
                sub = _Full(self.name)
                sub.value(x)
                members.append(repr(sub.tokens))
            out.append(("{", len(v), tuple(sorted(members))))
        else:
            out.append(type(v).__name__)
            for n in _attributes(v):
                if n not in skip:
                    out.append(n)
                    self.value(getattr(v, n, None))


def _attributes(o: Any) -> list[str]:
    if hasattr(o, "__dict__"):
        return sorted(vars(o))
    names: list[str] = []
    for klass in reversed(type(o).__mro__):
        declared = klass.__dict__.get("__slots__", ())
        names.extend((declared,) if isinstance(declared, str) else declared)
    return [n for n in names if n != "__weakref__"]


_KNOWN: dict[tuple[str, ...], dict[type, bool]] = {}


def _known(o: Any, slots: tuple[str, ...]) -> bool:
    """Has this object exactly the attributes its writer knows? (Asked once
    per class: the writers' classes are slotted.)"""
    cls = type(o)
    answers = _answers(slots)
    found = answers.get(cls)
    if found is None:
        found = answers[cls] = tuple(_attributes(o)) == slots
    return found


def _answers(slots: tuple[str, ...]) -> dict[type, bool]:
    """What :func:`_known` answered so far for these attributes, by class:
    a table's entries are checked by one lookup each (``answers.get(type(o))
    or _known(o, slots)``). Taken once per attribute tuple (below), not per
    key: finding it hashes the whole tuple."""
    answers = _KNOWN.get(slots)
    if answers is None:
        answers = _KNOWN[slots] = {}
    return answers


_SHADOW_KNOWN = _answers(_SHADOW_SLOTS)
_LIFE_KNOWN = _answers(_LIFE_SLOTS)
_ROW_KNOWN = _answers(_ROW_SLOTS)
_TRACKER_OWNER_KNOWN = _answers(_TRACKER_OWNER_SLOTS)


# How the key writes a checker's memory, per attribute (:func:`_memory_plan`).
_SKIP, _EMPTY, _SESSIONS, _AT, _WHOLE, _IDLE = range(6)
_Plan = tuple[tuple[str, int, Any], ...]
"""A checker class's memory plan: each attribute, its role, and its idle
value (``_IDLE_OUTSIDE_GROUPS``) or None."""
_PLANS: dict[type, tuple[int, _Plan]] = {}


class _Lineup:
    """The memory of a monitor's checkers by how the key writes it
    (:func:`_memory_plan`), each attribute as (the checker's position, its
    name, [its idle value,] what it is written as in full): the plans of
    every checker with memory between steps, merged by role, so that a key
    runs one short loop per role. Only the checkers with memory are in it
    (8 of 33; the others have nothing but the base's and step-scoped
    attributes): a checker without memory never grows any (the monitor
    shares such a checker between its copies on the same rule,
    ``Checker.stateless``, and ``tests/test_canon.py`` checks that it stays
    so). Made again if a checker's class or number of attributes is not the
    one it was made from (:meth:`memory`). An attribute's checker is named
    by its place among the checkers with memory."""

    __slots__ = ("sizes", "empty", "idle", "sessions", "at", "whole")

    def __init__(self, checkers: list[Any]) -> None:
        sizes = []
        roles: dict[int, list[tuple[Any, ...]]] = {
            role: [] for role in (_EMPTY, _IDLE, _SESSIONS, _AT, _WHOLE)
        }
        for i, c in enumerate(checkers):
            plan = _memory_plan(c)
            if not plan:
                continue
            sizes.append((i, type(c), len(vars(c))))
            i = len(sizes) - 1
            for n, role, idle in plan:
                what = f"{type(c).__name__}.{n}"
                roles[role].append((i, n, idle, what) if role == _IDLE else (i, n, what))
        self.sizes = tuple(sizes)
        self.empty = tuple(roles[_EMPTY])
        self.idle = tuple(roles[_IDLE])
        self.sessions = tuple(roles[_SESSIONS])
        self.at = tuple(roles[_AT])
        self.whole = tuple(roles[_WHOLE])

    def memory(self, checkers: list[Any]) -> list[dict[str, Any]] | None:
        """The memory of each checker it names, or None if one is not of the
        class or number of attributes it was made from."""
        found = []
        for i, cls, size in self.sizes:
            c = checkers[i]
            memory = c.__dict__
            if type(c) is not cls or len(memory) != size:
                return None
            found.append(memory)
        return found


_STATEFUL: dict[tuple[type, ...], _Lineup] = {}
"""The :class:`_Lineup` of a monitor, by its checkers' classes."""


def _memory_plan(c: Any) -> _Plan:
    """A checker's memory attributes and how each is written: left out
    (the base's, and ``step_scoped``), nothing when empty
    (``_EMPTY_BETWEEN_STEPS``), by session, at session, or in full. The same
    for every checker of a class with the same attributes, so computed once
    per class (again if its number of attributes changed: a checker sets
    all of them in ``__init__``)."""
    cls = type(c)
    memory = vars(c)
    name = cls.__name__
    scoped = getattr(cls, "step_scoped", ())
    plan = []
    for n in memory:
        if n in _CHECKER_BASE or n in scoped:
            continue
        what = (name, n)
        role = _WHOLE
        idle = None
        if what in _EMPTY_BETWEEN_STEPS:
            role = _EMPTY
        elif what in _BY_SESSION:
            role = _SESSIONS
        elif what in _AT_SESSION:
            role = _AT
        elif what in _IDLE_OUTSIDE_GROUPS:
            role = _IDLE
            idle = _IDLE_OUTSIDE_GROUPS[what]
        plan.append((n, role, idle))
    _PLANS[cls] = (len(memory), tuple(plan))
    return tuple(plan)


# --- the key --------------------------------------------------------------------------


class Key:
    """A state's merge key, its digest, and the renaming it was written
    under: each session's rank and its local names (the explorer names
    actions by them). ``tied``: two segments are equal, so the ranks of
    those sessions are one choice among equals."""

    __slots__ = ("digest", "ranks", "names", "tied", "tokens")

    def __init__(
        self,
        digest: bytes,
        ranks: dict[str, int],
        names: dict[str, dict[str, int]],
        tied: bool,
        tokens: tuple[Any, ...] | None,
    ) -> None:
        self.digest = digest
        self.ranks = ranks
        self.names = names
        self.tied = tied
        self.tokens = tokens


SegmentCache = dict[tuple[int, ...], tuple[list[Any], _Segment, list[Any], bytes, list[Any]]]


class KeyCache:
    """What :func:`compute` may reuse between the keys of one search's
    neighbouring states (a node's children share every session but one):
    each session's segment, finished and digested, by the identity of
    everything it is written from (:func:`compute` lists it). Sound because
    what the key reads of those objects never changes in place: the model's
    logs and runs are values, and the tracker copies a shadow or lifecycle
    before it changes one (copy on write, ``invariants/tracker.py``). An
    entry holds its objects, so that no other object can take their
    identities, and checks the index entries its IDs were looked up in."""

    __slots__ = ("segments",)

    def __init__(self) -> None:
        self.segments: SegmentCache = {}


def compute(
    state: State, monitor: Any, cache: KeyCache | None = None, keep_tokens: bool = False
) -> Key:
    """The merge key of a state and its monitor (module docstring)."""
    logs = state.store.sessions
    owners = state.store.owners
    tracker = getattr(monitor, "tracker", None)
    unknown: set[str] = set()
    if tracker is not None:
        attributes = vars(tracker).keys()
        if attributes != _TRACKER_WRITTEN:  # the usual case is cheaper to test than to subtract
            unknown = attributes - _TRACKER_WRITTEN
        if type(tracker).__name__ != "Tracker" or len(attributes) - len(unknown) != len(
            _TRACKER_WRITTEN
        ):
            tracker = None  # not the tracker the writers know: written in full
    shadows = tracker.sessions if tracker is not None else {}
    sids = sorted(logs.keys() | shadows.keys())
    full: list[tuple[str, Any]] = []  # (what, value) written in full in the global part
    parts: _MonitorParts | None = None
    if tracker is not None:
        parts = _monitor_parts(monitor, tracker, frozenset(sids), full)
        for n in sorted(unknown):
            full.append((f"tracker.{n}", getattr(tracker, n)))
    elif monitor is not None:
        full.append(("monitor", monitor))
    if tracker is not None and getattr(monitor, "_finished", None) is not None:
        full.append(("finished", monitor._finished))
    if cache is not None and tracker is not None:
        tracker.share()  # what the cache holds by identity is never changed in place
    segments: dict[str, _Segment] = {}
    finished: dict[str, list[Any]] = {}
    digests: dict[str, bytes] = {}
    owned: dict[str, list[tuple[str, Any]]] | None = None
    runs = state.runs
    opened, counts = (tracker.open, tracker.open_count) if tracker is not None else ({}, {})
    for sid in sids:
        log = logs.get(sid)
        slot: tuple[int, ...] | None = None
        if cache is not None and parts is not None:
            # Everything the segment is written from, besides the index entries its
            # IDs are looked up in: its log and run, its shadow, its open call and
            # count, and its entries in the tracker's ID tables and the checkers'
            # memory (:func:`_monitor_parts`).
            refs = [log, runs.get(sid), shadows.get(sid), opened.get(sid), counts.get(sid)]
            for table in parts:
                entries = table.get(sid)
                if entries is None:
                    refs.append(0)
                else:
                    refs.append(len(entries))
                    for entry in entries:
                        refs.extend(entry)
            slot = tuple(map(id, refs))
            hit = cache.segments.get(slot)
            if hit is not None:
                for x, o in hit[4]:
                    if owners.get(x) is not o:
                        break
                else:
                    segments[sid], finished[sid], digests[sid] = hit[1], hit[2], hit[3]
                    continue
        if log is None:
            seg = _Segment(sid, owners)
            seg.out.append("no log")
        else:
            if owned is None:
                owned = {}
                for x, o in owners.items():
                    owned.setdefault(o.session, []).append((x, o))
            seg = _model_half(state, log, owned.get(sid, []))
        if parts is not None:
            written = len(full)
            _monitor_half(seg, sid, log, tracker, parts, full)
            if len(full) != written:
                slot = None  # it wrote into the global part: not cached
        segments[sid] = seg
        written_out = finished[sid] = seg.finish()
        digests[sid] = digest_of(written_out)
        if slot is not None and cache is not None:
            deps = [*seg.deps, *seg.looked]
            cache.segments[slot] = (refs, seg, written_out, digests[sid], deps)
    order = sorted(sids, key=digests.__getitem__)
    tied = len(set(digests.values())) != len(order)
    head = _facts(tracker)
    best: tuple[Any, ...] | None = None
    best_ranks: dict[str, int] = {}
    if not tied:  # one order of sessions: the digests'
        best_ranks = {sid: k for k, sid in enumerate(order)}
        best = _references(segments, best_ranks, full)
    else:
        groups: list[list[str]] = []
        for sid in order:
            if groups and digests[groups[-1][0]] == digests[sid]:
                groups[-1].append(sid)
            else:
                groups.append([sid])
        for choice in product(*(permutations(g) for g in groups)):
            ranks = {sid: k for k, sid in enumerate(sid for group in choice for sid in group)}
            tail = _references(segments, ranks, full)
            if best is None or repr(tail) < repr(best):
                best, best_ranks = tail, ranks
            if not tail:
                break  # nothing names a session's rank: the order of tied sessions is moot
    assert best is not None
    body = (head, best, tuple(digests[s] for s in order))
    names = {sid: seg.names for sid, seg in segments.items()}
    tokens = None
    if keep_tokens:
        tokens = (head, best, tuple(tuple(finished[s]) for s in order))
    return Key(digest_of(body), best_ranks, names, tied, tokens)


_SORTED_FEATURES: list[Any] = [None, ()]
"""The last set of features :func:`_facts` sorted (a copy), and its sorted tuple."""


def _facts(tracker: Any) -> tuple[Any, ...]:
    """What the tracker knows of the whole target: hello's step limit and
    features, whether it has shown execution and step events at all, and
    whether the last step left the runner busy (a concurrent group's member)."""
    if tracker is None:
        return ()
    features = tracker.features
    if type(features) is set:
        # A search's features are hello's, the same for every key: sorted once
        # per set of them (equal sets sort alike).
        last = _SORTED_FEATURES
        if features != last[0]:
            last[:] = [set(features), tuple(sorted(features))]
        features = last[1]
    # _TRACKER_FACTS, in its order (spelled out: this runs once per key)
    return (tracker.step_limit, features, tracker.emits_exec, tracker.emits_steps, tracker.busy)


def _references(
    segments: dict[str, _Segment], ranks: dict[str, int], full: list[tuple[str, Any]]
) -> tuple[Any, ...]:
    """What ties sessions together under one session order: IDs a segment
    mentions and another session owns, unowned IDs two segments name, and
    what is written in full. Empty in a world where sessions share nothing."""
    if not full:  # most keys: nothing foreign, and at most one segment names unowned IDs
        loose_in = 0
        for seg in segments.values():
            if seg.foreign:
                break
            if seg.loose:
                loose_in += 1
        else:
            if loose_in < 2:
                return ()
    out: list[Any] = []
    named: dict[str, tuple[int, int]] = {}  # an owned ID -> (its session's rank, local name)
    if full or any(seg.foreign for seg in segments.values()):
        for sid, seg in segments.items():
            for x, n in seg.names.items():
                if x not in seg.loose:
                    named[x] = (ranks[sid], n)
    for sid in sorted(segments, key=ranks.__getitem__):
        seg = segments[sid]
        if seg.foreign:
            out.append(("foreign", ranks[sid], tuple(named.get(x, x) for x in seg.foreign)))
    loose: dict[str, list[tuple[int, int]]] = {}
    for sid, seg in segments.items():
        for x, n in seg.loose.items():
            loose.setdefault(x, []).append((ranks[sid], n))
    shared = sorted(tuple(sorted(v)) for v in loose.values() if len(v) > 1)
    if shared:
        out.append(("loose", tuple(shared)))
    if full:
        generated: dict[str, Any] = {}

        def name(text: str) -> Any:
            if text in ranks:
                return ("S", ranks[text])
            hit = named.get(text)
            if hit is not None:
                return hit
            if _POOL.match(text) or _GENERATED.match(text):
                return generated.setdefault(text, ("g", len(generated)))
            return text

        writer = _Full(name)
        for what, value in full:
            writer.tokens.append(what)
            writer.value(value, _FULL_SKIP)
        out.append(tuple(writer.tokens))
    return tuple(out)


# The monitor's dispatch tables (caches of bound methods, rebuilt on demand:
# invariants/monitor.py) are not state; walking them would reach every
# checker again through its bound methods.
_FULL_SKIP = frozenset(
    {
        "_begin",
        "_end",
        "_end_async",
        "_events",
        "_env",
        "env",
        "t",
        "policy",
        "enabled",
        "exercised",
    }
)


_Entries = dict[str, list[tuple[Any, ...]]]
_MonitorParts = tuple[_Entries, _Entries, _Entries, _Entries, _Entries, _Entries]
"""The tracker's and the checkers' entries by session: owners, namespace,
lifecycles, calls by ID, checker memory by session and at session."""


def _monitor_parts(
    monitor: Any, tracker: Any, segments: frozenset[str], full: list[tuple[str, Any]]
) -> _MonitorParts:
    """The tracker's ID tables and the checkers' memory, each session's
    entries apart (:func:`_monitor_half` writes them into its segment);
    what the writers do not know, into ``full``."""
    lives: _Entries = {}
    life_known, row_known = _LIFE_KNOWN, _ROW_KNOWN
    for x, life in tracker.lives.items():
        row = life.row
        if (
            (life_known.get(type(life)) or _known(life, _LIFE_SLOTS))
            and (row_known.get(type(row)) or _known(row, _ROW_SLOTS))
            and row.session in segments
        ):
            lives.setdefault(row.session, []).append((x, life))
        else:
            full.append(("life", (x, life)))
    owners: _Entries = {}
    namespace: _Entries = {}
    owner_known = _TRACKER_OWNER_KNOWN
    for table, by, what in (
        (tracker.owners, owners, "owner"),
        (tracker.namespace, namespace, "namespace"),
    ):
        for x, o in table.items():
            if (owner_known.get(type(o)) or _known(o, _TRACKER_OWNER_SLOTS)) and (
                o.session in segments
            ):
                by.setdefault(o.session, []).append((x, o))
            else:
                full.append((what, (x, o)))
    calls: _Entries = {}
    for x, c in tracker.calls_by_id.items():
        if c.session in segments:
            calls.setdefault(c.session, []).append((x, c))
        else:
            full.append(("call", (x, c)))
    for sid in tracker.open:
        if sid not in segments:
            full.append(("open", (sid, tracker.open[sid])))
    for sid in tracker.open_count:
        if sid not in segments:
            full.append(("open_count", (sid, tracker.open_count[sid])))
    by_session: _Entries = {}
    at_session: _Entries = {}
    checkers = monitor.checkers
    kinds = tuple(map(type, checkers))
    lineup = _STATEFUL.get(kinds)
    memory = None if lineup is None else lineup.memory(checkers)
    if lineup is None or memory is None:
        lineup = _STATEFUL[kinds] = _Lineup(checkers)
        memory = lineup.memory(checkers)
        assert memory is not None
    for i, n, what in lineup.empty:
        v = memory[i][n]
        if v:
            full.append((what, v))
    for i, n, idle, what in lineup.idle:
        v = memory[i][n]
        if type(v) is not type(idle) or v != idle:
            full.append((what, v))
    for i, n, what in lineup.sessions:
        v = memory[i][n]
        if type(v) is dict and segments.issuperset(v):
            for k, x in v.items():
                entries = by_session.get(k)
                if entries is None:
                    entries = by_session[k] = []
                entries.append((n, x))
        else:
            full.append((what, v))
    for i, n, what in lineup.at:
        v = memory[i][n]
        if type(v) is dict and segments.issuperset(v.values()):
            for x, k in v.items():
                entries = at_session.get(k)
                if entries is None:
                    entries = at_session[k] = []
                entries.append((n, x, None))
        else:
            full.append((what, v))
    for i, n, what in lineup.whole:
        full.append((what, memory[i][n]))
    return owners, namespace, lives, calls, by_session, at_session


def _monitor_half(
    seg: _Segment,
    sid: str,
    log: SessionLog | None,
    tracker: Any,
    parts: _MonitorParts,
    full: list[tuple[str, Any]],
) -> None:
    """A session's part of the tracker and the checkers, into its segment."""
    owners, namespace, lives, calls, by_session, at_session = parts
    out = seg.out
    out.append("monitor")
    sh = tracker.sessions.get(sid)
    # seq-contiguous's arithmetic, exactly
    out.append(None if log is None else log.next_seq - (sh.last_seq if sh is not None else -1))
    if sh is None:
        out.append(None)
    elif _SHADOW_KNOWN.get(type(sh)) or _known(sh, _SHADOW_SLOTS):
        _shadow(seg, sh)
    else:
        out.append("shadow in full")
        full.append((f"shadow {sid}", sh))  # pragma: no cover - a changed tracker
    _id_entries(seg, "owners", owners.get(sid, []), _tracker_owner)
    _id_entries(seg, "namespace", namespace.get(sid, []), _tracker_owner)
    _id_entries(seg, "lives", lives.get(sid, []), _life)
    out.append("open")
    seg.call(tracker.open.get(sid))
    out.append(tracker.open_count.get(sid))
    _id_entries(seg, "calls", calls.get(sid, []), _Segment.call)
    mine = by_session.get(sid)
    if mine:
        for n, x in sorted(mine, key=lambda e: e[0]):
            out.append(n)
            if n == "open_since":
                seg.step(x)
            elif n == "floors" and type(x) is tuple and len(x) == 2:
                seg.seq(x[0])
                seg.step(x[1])
            else:
                out.append(repr(x))
    shown = at_session.get(sid)
    if shown:
        for n in sorted({e[0] for e in shown}):
            out.append(n)
            xs = [(x, None) for m, x, _ in shown if m == n]
            _id_entries(seg, "at", xs, lambda s, v: None)


# --- the public forms ------------------------------------------------------------------


def merge_key(state: State, monitor: Any) -> tuple[Any, ...]:
    """The key under which the explorer merges search paths (module
    docstring), as tokens: the global part and the sorted segments. Two
    states have equal merge keys exactly when :func:`compute` gives them
    one digest (up to digest collisions)."""
    key = compute(state, monitor, keep_tokens=True)
    assert key.tokens is not None
    return key.tokens
