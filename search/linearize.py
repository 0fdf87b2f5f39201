"""Is a concurrent group linearizable against the reference model?

What is checked. A group (``history.py``) is legal when some *order* of its
requests' own transitions and the runner's transitions (the model's
fine-grained form, ``model/apply.py``), consistent with real time (a request
that completed before another was invoked comes first), gives every reply the
target gave and, once the runner is quiescent, every observation it showed
after the group: per session the pending rows, the transcript, the open call
and, when the log was read, the log's folded events in order (``compare.py``
says how IDs, seqs and times are normalized). A kill ends the order: the
state is then crashed (volatile state dropped) and compared as the restarted
target showed it. A request whose outcome is :class:`~.history.Unknown` (it
was in flight when the implementation died) took no effect, or took effect
with any reply: it is placed in the order, or left out. Since a kill may land
between any two transitions, "took effect up to a crash point" is covered:
``after_admit`` is the kill right after the request, ``mid_promotion`` after
a boundary's first promotion, ``after_promotion`` before its call opens.
Requests completed before the kill are placed before it; a request without a
completion precedes nothing.

The search is Wing and Gong's: a depth-first walk that extends a partial
order by one move at a time, trying at each node every runner transition the
model enables and every request whose real-time predecessors are placed; a
request's reply is compared as soon as it is placed, so a wrong order dies
early; when the target's log was read, each folded event the model appends
must be the target's next one in that session, so a wrong order dies at its
first wrong event rather than at the end. The IDs the implementation
generated (an omitted input's ID, call IDs, copies) are matched as part of
the walk (``compare.Match``), never by order of appearance. Lowe's
memoisation makes it fast: a node is determined by (model state, set of
placed requests, match), because the model's future replies and transitions
depend only on its state, what remains to place and the real-time
constraints on it only on the placed set, and future comparisons only on the
match. So a node fully explored is remembered, and reaching it again by
another order is cut at once. The state's fingerprint is the
events appended since the group began (the durable state is a fold of its
events), the runs, the runner's work and wakes, the ID counter and the step
limit. A request's wake is a runner transition of its own (``wake``), taken
any time after its admission: so an interrupt or an execution's end may fall
between a prompt's admission and its wake, as on a real server. It is not
held to the request's completion in real time (a weakening: a target that
takes a wake late is not told apart from one that takes it at once).

Which legal order, and every end. Orders legal on the folded events may
differ in what no observation of the group shows (a staged revert, an
execution's step count, a doorbell) and in where the runner's events fall
between the requests, which the invariant checkers, judging the target's
trace along the order found, do see. So where the target logs runner events
(``execution_started``, ``step_started``, ...), the search first looks for a
legal order that also places those where the target's log has them (as it
does the folded ones), and only when there is none for any legal order.
Likewise a kill: members in flight that admit one ID with different payloads
(a conflicting retry racing an exact one) leave rows, transcript and folded
events alike, but not the inbox (a later retry is judged against the payload
kept), so where the target's log writes each admission's payload
(docs/protocol.md), the search first looks for an order that admits the
payloads it logged (``passes``).
Asked for every end (``ends=True``, with memoisation), it does not stop at
the first legal order: it goes on (the memo then holds every node fully
explored, whose ends are all known) for up to ``ENDS_NODES`` nodes a part,
and :class:`Legal` lists every distinct end it reached (state and ID map, at
most ``ENDS``), the first order's first; a caller judges its next step from
each, and drops those the step cannot follow (``groups.GroupDriver``). The
first order found is the same as when the search stops there. (Lockstep,
``lockstep.py``, carries them too: each later request is compared from
every end, and diverges only when none follows.)

Three reductions, all sound:

- Without a kill, once every request is placed, the remaining runner
  transitions of different sessions commute (they touch disjoint sessions;
  the counter they share only names calls, which are matched, and the order
  of calls across sessions is seen only by ``calls``, a request), so one
  order of the sessions is tried (every order within a session: its wake and
  its execution's transition), not every interleaving.
- A request with an unknown outcome whose transition changes nothing (a
  read, an error) is never placed: it precedes nothing in real time, so
  leaving it out explores exactly the same continuations.
- A group is split into parts that share no session and no ID, each searched
  alone from the state before the group. This is locality (Herlihy and Wing,
  1990: a history is linearizable iff every object's subhistory is): the
  model's sessions are independent objects except through input IDs (one
  namespace across sessions), the ID counter (names only, matched), the
  order of open calls across sessions (seen only by ``calls``) and the kill.
  So a request's footprint is its session (a fork: both), the input or
  message IDs it names, and the session that owned a named input ID before
  the group (a reuse's verdict depends on it); ``hello``, ``calls`` and
  ``crash`` touch every session and join every part. One kill cuts every
  part: each part's cut is chosen alone and the kill placed after all of
  them. The parts' orders merge into one that respects real time (locality
  guarantees such a merge exists: a topological order of the parts' orders
  and the real-time precedence), and that merged order is replayed once and
  compared in full, a check of the split itself. One thing the parts do
  share: times are matched by their order on one clock for every session
  (``compare.Match.time``), so two parts may each match times consistently
  and disagree with each other. When the merged order fails its replay for
  that reason, the group is searched again whole, which is always sound.

What is not compared (only preferred, as above): event payloads and runner
events (implementations differ in them); nor ``hello`` and ``log`` replies
(as in lockstep).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..model import (
    WAKE,
    Answer,
    Calls,
    CrashOp,
    Err,
    Event,
    Fork,
    Hello,
    Ok,
    Op,
    RunnerStep,
    State,
    advance,
    enabled,
    request,
)
from . import compare
from .compare import Match, Mismatch
from .history import Group, Msg, Row, Shown, Unknown

KEEP = 200  # dead ends kept for the report (the deepest); all are counted
ENDS_NODES = 5000  # search nodes of a part, in all, while it looks for more legal ends
ENDS = 16  # most legal ends a group carries forward
WAKES_LAST = True  # which legal order is found first (``_Search._walk``); a test turns it off


@dataclass(frozen=True, slots=True)
class Move:
    """One transition of an order: request ``request``'s own effect, the
    runner transition ``step`` (with ``crash_at``: cut at that failpoint, the
    last move before the kill), or the kill."""

    request: int | None = None
    step: RunnerStep | None = None
    crash_at: str | None = None

    @property
    def kill(self) -> bool:
        return self.request is None and self.step is None

    def describe(self, group: Group) -> str:
        if self.request is not None:
            return f"r{self.request} {describe(group.requests[self.request].op)}"
        if self.step is not None:
            return str(self.step) + (f", died at {self.crash_at}" if self.crash_at else "")
        return "kill"


KILL = Move()
RUNNER_POINTS = ("mid_promotion", "after_promotion")  # failpoints inside a runner transition


@dataclass(frozen=True, slots=True)
class DeadEnd:
    """An order that failed, and why."""

    order: tuple[Move, ...]
    reason: str


@dataclass(frozen=True)
class End:
    """Where a legal order leaves the model: its state, and the target's ID
    for every model ID generated so far (the group's ``ids`` and its own);
    ``order``: the legal order that led there (lockstep judges the target's
    trace along it when the checkers reject the first end's)."""

    state: State
    ids: Mapping[str, str]
    order: tuple[Move, ...] = ()


@dataclass(frozen=True)
class Legal:
    """A legal order of the whole group; ``state`` is the model after it and
    ``ids`` maps every model ID the group generated to the target's.
    ``ends``: every distinct end of a legal order the search reached, this
    order's first (what no observation of the group tells apart, a later
    step may: the caller carries them all forward)."""

    order: tuple[Move, ...]
    state: State
    ids: Mapping[str, str]
    parts: tuple[tuple[int, ...], ...]
    explored: int
    ends: tuple[End, ...] = ()

    def explain(self, group: Group) -> str:
        steps = ", ".join(m.describe(group) for m in self.order)
        return f"legal ({len(self.parts)} parts, {self.explored} nodes): {steps}"


@dataclass(frozen=True)
class Illegal:
    """No order of one part gives what the target showed."""

    part: tuple[int, ...]
    sessions: tuple[str, ...]
    dead_ends: tuple[DeadEnd, ...]  # the deepest first
    tried: int
    explored: int

    def explain(self, group: Group, shown: int = 10) -> str:
        """The failure as a person reads it: the part of the group that has
        no legal order, each request with its times and the target's reply,
        what the target showed once the group was over, then the orders
        tried (the ones that got furthest first) and why each failed."""
        nodes = "node" if self.explored == 1 else "nodes"
        kill = ", then the target was killed" if group.killed else ""
        lines = [
            f"not linearizable: no order of {', '.join(f'r{i}' for i in self.part)} "
            f"(sessions {', '.join(self.sessions) or 'none'}) gives the target's replies "
            f"and state; {self.tried} orders tried ({self.explored} search {nodes})",
            f"the group: {len(group.requests)} requests issued together{kill}:",
        ]
        for i in self.part:
            r = group.requests[i]
            done = "never" if r.completed is None else f"{r.completed:g}"
            lines.append(
                f"  r{i} {describe(r.op)}: invoked {r.invoked:g}, completed {done}, "
                f"target {compare.said(r.returned)}"
            )
        lines.append("what the target showed after it" + (" (restarted):" if kill else ":"))
        for sid in self.sessions:
            lines.append(f"  {sid}: {shown_words(group.after[sid])}")
        lines.append("the orders tried (furthest first) and why each failed:")
        for dead in self.dead_ends[:shown]:
            lines.append("  " + " ; ".join(m.describe(group) for m in dead.order))
            lines.append(f"    -> {dead.reason}")
        if self.tried > shown:
            lines.append(f"  ... and {self.tried - min(shown, len(self.dead_ends))} more")
        return "\n".join(lines)


def shown_words(shown: Shown) -> str:
    """One session's observation in a line: pending, transcript, open call, log."""
    words = [
        f"pending [{', '.join(r.input for r in shown.pending)}]",
        f"transcript [{', '.join(m.id for m in shown.transcript)}]",
        compare.said_call(shown.call),
        *(f"and {compare.said_call(c)}" for c in shown.more_calls),
    ]
    if shown.events is not None:
        folded = [e for e in shown.events if compare.folded(e)]
        words.append(
            "log [" + ", ".join(f"{e.type}:{e.input}" if e.input else e.type for e in folded) + "]"
        )
    return "; ".join(words)


@dataclass(frozen=True)
class Undecided:
    """The search ran out of its node budget."""

    part: tuple[int, ...]
    explored: int

    def explain(self, group: Group) -> str:
        return f"undecided: {self.explored} search nodes for part {self.part} and no verdict"


Verdict = Legal | Illegal | Undecided


def linearize(
    group: Group, memo: bool = True, budget: int | None = None, ends: bool = False
) -> Verdict:
    """Find a legal order of the group, or report why there is none.

    ``memo=False`` turns Lowe's memoisation off (the plain search, for
    comparison); ``budget`` bounds the search nodes of each part; ``ends``:
    go on for every legal end (module docstring; with the memo only), else
    :attr:`Legal.ends` holds the first order's alone."""
    if group.before.busy:
        raise ValueError("the state before a group must be quiescent (no runner work)")
    for i, r in enumerate(group.requests):
        if (r.completed is None) != isinstance(r.returned, Unknown):
            raise ValueError(f"request r{i}: an outcome is unknown exactly when it never completed")
    start = Match.start(_known(group), group.ids)
    parts = split(group)
    *preferred, plain = passes(group)
    for prefer in preferred:
        verdict = _orders(group, parts, start, memo, budget, ends, prefer)
        if isinstance(verdict, Legal):
            return verdict
    return _orders(group, parts, start, memo, budget, ends, plain)


@dataclass(frozen=True, slots=True)
class Prefer:
    """What one pass of the search holds an order to beyond the folded
    events (module docstring, "Which legal order"): ``runner``, the
    target's runner events where its log has them; ``payloads``, each
    admission's payload where the target's log wrote one."""

    runner: bool = False
    payloads: bool = False


def passes(group: Group) -> list[Prefer]:
    """The search's passes, the most demanding first, the plain one last.
    A payload first: it is the inbox's state (a later retry is judged
    against it); runner events only say where the checkers see each. Only
    a kill leaves a payload unseen (a reply that came back showed it in its
    receipt), so only a killed group tries payloads."""
    shown = group.after.values()
    runner = (True, False) if any(_runner_logged(s) for s in shown) else (False,)
    payloads = (
        (True, False) if group.killed and any(_payloads_logged(s) for s in shown) else (False,)
    )
    return [Prefer(r, p) for p in payloads for r in runner]


def _orders(
    group: Group,
    parts: list[tuple[tuple[int, ...], frozenset[str]]],
    start: Match,
    memo: bool,
    budget: int | None,
    ends: bool,
    prefer: Prefer,
) -> Verdict:
    verdict = _search(group, parts, start, memo, budget, ends, prefer)
    if verdict is None and len(parts) > 1:  # the parts matched times apart (docstring)
        whole = [(tuple(range(len(group.requests))), frozenset(group.after))]
        verdict = _search(group, whole, start, memo, budget, ends, prefer)
    if verdict is None:
        raise AssertionError("the whole group's order fails its own replay: a checker bug")
    return verdict


def _runner_logged(shown: Shown) -> bool:
    return shown.events is not None and any(e.type in compare.RUNNER for e in shown.events)


def _payloads_logged(shown: Shown) -> bool:
    return shown.events is not None and any(compare.payload(e) is not None for e in shown.events)


def _search(
    group: Group,
    parts: list[tuple[tuple[int, ...], frozenset[str]]],
    start: Match,
    memo: bool,
    budget: int | None,
    ends: bool = False,
    prefer: Prefer = Prefer(),
) -> Verdict | None:
    """Search each part; None when every part has an order but the merged
    order fails its replay."""
    orders: list[tuple[Move, ...]] = []
    others: list[list[tuple[Move, ...]]] = []  # each part's orders to its other ends
    explored = 0
    for requests, sessions in parts:
        search = _Search(group, requests, sessions, memo, budget, prefer, every=ends)
        try:
            found = search.run(start)
        except _OutOfBudget:
            return Undecided(requests, search.explored)
        explored += search.explored
        if found is None:
            dead = tuple(d for *_, d in sorted(search.dead, reverse=True))
            return Illegal(requests, tuple(sorted(sessions)), dead, search.tried, explored)
        orders.append(found)
        others.append([o for o in search.ends.values() if o != found])
    order = _merge(group, orders)
    try:
        state, match = _follow(group, order, start)
    except Mismatch:
        return None
    parted = tuple(r for r, _ in parts)
    first = End(state, {**group.ids, **match.ids}, order)
    every = _ends(group, start, orders, others, first) if ends else (first,)
    return Legal(order, state, {**match.ids}, parted, explored, every)


def _ends(
    group: Group,
    start: Match,
    orders: list[tuple[Move, ...]],
    others: list[list[tuple[Move, ...]]],
    first: End,
) -> tuple[End, ...]:
    """The group's distinct legal ends: the found order's first, then each
    part's other ends with the other parts' found orders (the parts touch
    disjoint sessions, so their ends combine), at most ``ENDS``."""
    ends = {end_key(first): first}
    for k, alternatives in enumerate(others):
        for alternative in alternatives:
            if len(ends) >= ENDS:
                return tuple(ends.values())
            merged = _merge(group, orders[:k] + [alternative] + orders[k + 1 :])
            try:
                state, match = _follow(group, merged, start)
            except Mismatch:  # the parts matched times apart: not this combination
                continue
            end = End(state, {**group.ids, **match.ids}, merged)
            ends.setdefault(end_key(end), end)
    return tuple(ends.values())


def end_key(end: End) -> tuple[Any, ...]:
    """Two ends are the same when their states and ID maps are."""
    return (fingerprint(end.state, {}), tuple(sorted(end.ids.items())))


# --- splitting into independent parts -------------------------------------------------

ALL = "*"


def footprint(op: Op, before: State) -> frozenset[tuple[str, str]] | None:
    """The sessions and IDs a request may depend on or change; ``None``: all."""
    if isinstance(op, (Hello, Calls, CrashOp)):
        return None
    keys: set[tuple[str, str]] = set()
    if isinstance(op, Answer):
        for run in before.runs.values():
            if run.call.call == op.call:
                keys.add(("session", run.call.session))
        return frozenset(keys)  # a call not open before the group stays not open
    session = getattr(op, "session", None)
    if session is not None:
        keys.add(("session", session))
    if isinstance(op, Fork):
        keys.add(("session", op.child))
    for name in ("input", "message", "before"):
        ident = getattr(op, name, None)
        if ident is not None:
            keys.add(("id", ident))
            owner = before.store.owners.get(ident)
            if owner is not None:
                keys.add(("session", owner.session))
    return frozenset(keys)


def split(group: Group) -> list[tuple[tuple[int, ...], frozenset[str]]]:
    """The group's parts: requests sharing no session and no ID with another
    part, each with the observed sessions it answers for. Sessions no request
    names form a last part without requests (they must not have changed)."""
    n = len(group.requests)
    prints = [footprint(r.op, group.before) for r in group.requests]
    shown = frozenset(group.after)
    if any(p is None for p in prints):
        return [(tuple(range(n)), shown)]
    parent = list(range(n))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[tuple[str, str], int] = {}
    for i, keys in enumerate(prints):
        assert keys is not None
        for key in keys:
            if key in owner:
                parent[root(i)] = root(owner[key])
            else:
                owner[key] = i
    groups: dict[int, list[int]] = {}
    for i in range(n):
        groups.setdefault(root(i), []).append(i)
    parts = []
    named: set[str] = set()
    for members in sorted(groups.values()):
        sessions = {s for i in members for kind, s in prints[i] or () if kind == "session"}
        named |= sessions
        parts.append((tuple(members), frozenset(sessions) & shown))
    rest = shown - named
    if rest:
        parts.append(((), rest))
    return parts


# --- the search of one part -------------------------------------------------------------


class _OutOfBudget(Exception):
    pass


class _Enough(Exception):
    """A legal order is found and the search for more ends has used its nodes."""


class _Search:
    """Wing and Gong's search with Lowe's memo over one part (module docstring)."""

    def __init__(
        self,
        group: Group,
        requests: tuple[int, ...],
        sessions: frozenset[str],
        memo: bool,
        budget: int | None,
        prefer: Prefer = Prefer(),
        every: bool = False,
    ) -> None:
        self.group = group
        self.prefer = prefer
        self.every = every and memo  # go on for every legal end (needs the memo)
        self.requests = requests
        self.sessions = sessions
        self.memo = memo
        self.budget = budget
        self.explored = 0
        self.tried = 0
        self.dead: list[tuple[int, int, int, DeadEnd]] = []  # a heap: the deepest kept
        self.seen: set[tuple[Any, ...]] = set()  # nodes fully explored
        self.found: tuple[Move, ...] | None = None  # the first legal order
        self.ends: dict[tuple[Any, ...], tuple[Move, ...]] = {}  # a legal order per end
        self.now = max((r.op.now for r in group.requests), default=0)
        self.base = {sid: len(log.events) for sid, log in group.before.store.sessions.items()}
        ends = {i: group.requests[i].completed for i in requests}
        self.preds = {
            i: frozenset(
                j for j in requests if (e := ends[j]) is not None and e < group.requests[i].invoked
            )
            for i in requests
        }
        self.known = frozenset(
            i for i in requests if not isinstance(group.requests[i].returned, Unknown)
        )
        self.everything = frozenset(requests)
        # The events each appended event must match, in order, per session
        # whose log was read: the folded ones, and with ``prefer.runner`` where
        # the target logged runner events, those too (``passes``).
        self.ordered = {
            sid: _ordered_with_runner if prefer.runner and _runner_logged(shown) else compare.folded
            for sid in sessions
            if (shown := group.after[sid]).events is not None
        }
        self.logs = {
            sid: [e for e in group.after[sid].events or () if kept(e)]
            for sid, kept in self.ordered.items()
        }

    def run(self, start: Match) -> tuple[Move, ...] | None:
        """The first legal order found; with ``every``, the search then goes
        on (up to ``ENDS_NODES`` nodes in all) and ``ends`` holds a legal
        order for every distinct end it reached (module docstring)."""
        try:
            self._walk(self.group.before, frozenset(), start, ())
        except _Enough:
            pass
        return self.found

    def _walk(
        self, state: State, done: frozenset[int], m: Match, order: tuple[Move, ...]
    ) -> tuple[Move, ...] | None:
        self.explored += 1
        if self.found is not None and self.explored > ENDS_NODES:
            raise _Enough
        if self.budget is not None and self.explored > self.budget:
            if self.found is not None:
                raise _Enough
            raise _OutOfBudget
        key = (fingerprint(state, self.base), done, m.key()) if self.memo else None
        if key is not None and key in self.seen:
            return None
        if self.known <= done:
            if self.group.killed:
                end, killed = state.crashed(), order + (KILL,)
                if self._ends(end, m, killed, done) and self._legal(end, m, killed):
                    return killed
                cut = self._cut(state, done, m, order)
                if cut is not None:
                    return cut
            elif not state.busy and self._ends(state, m, order, done):
                if self._legal(state, m, order):
                    return order
        steps = enabled(state)
        if done == self.everything and not self.group.killed and steps:
            # the other sessions' transitions commute (module docstring)
            steps = tuple(s for s in steps if s.session == steps[0].session)
        # A wake is tried last: of the legal orders, the first found takes
        # each wake as late as it can, as a server does (at the end of its
        # request); the orders differ in what no observation shows (a
        # doorbell), which a later step may (a rung doorbell's follow-up).
        late = WAKE if WAKES_LAST else None
        for step in (s for s in steps if s.at != late):
            found = self._step(state, done, m, order, step)
            if found is not None:
                return found
        found = self._requests(state, done, m, order)
        if found is not None:
            return found
        for step in (s for s in steps if s.at == late):
            found = self._step(state, done, m, order, step)
            if found is not None:
                return found
        if key is not None:
            self.seen.add(key)  # every continuation failed, or every end is in ``ends``
        return None

    def _cut(
        self, state: State, done: frozenset[int], m: Match, order: tuple[Move, ...]
    ) -> tuple[Move, ...] | None:
        """The kill inside a runner transition: each enabled one cut at each
        runner failpoint it reaches (a batch's first promotion durable, or
        its promotions durable and its call not open), then the kill."""
        for step in enabled(state):
            if step.at == WAKE:
                continue  # a wake has no failpoint inside: only where it leads
            for point in RUNNER_POINTS:
                after = advance(state, step, self.now, point)
                if after.crashed is None:
                    continue  # never reached: the same as the whole transition
                cut = order + (Move(step=step, crash_at=point), KILL)
                try:
                    m2 = self._logged(after.state, after.events, m)
                except Mismatch as mismatch:
                    self._dead(cut, done, str(mismatch))
                    continue
                if self._ends(after.state, m2, cut, done) and self._legal(after.state, m2, cut):
                    return cut
        return None

    def _legal(self, state: State, m: Match, order: tuple[Move, ...]) -> bool:
        """A legal end: the first stops the search unless it goes on for
        every end; True when the walk must return now."""
        self.ends.setdefault((fingerprint(state, self.base), m.key()), order)
        if self.found is None:
            self.found = order
        return not self.every

    def _step(
        self,
        state: State,
        done: frozenset[int],
        m: Match,
        order: tuple[Move, ...],
        step: RunnerStep,
    ) -> tuple[Move, ...] | None:
        stepped = order + (Move(step=step),)
        after, appended, _ = advance(state, step, self.now)
        try:
            m2 = self._logged(after, appended, m)
        except Mismatch as mismatch:
            self._dead(stepped, done, str(mismatch))
            return None
        return self._walk(after, done, m2, stepped)

    def _requests(
        self, state: State, done: frozenset[int], m: Match, order: tuple[Move, ...]
    ) -> tuple[Move, ...] | None:
        for i in self.requests:
            if i in done or not self.preds[i] <= done:
                continue
            placed = order + (Move(request=i),)
            out = request(state, self.group.requests[i].op)
            assert isinstance(out.reply, (Ok, Err))
            if i not in self.known and not out.events and out.state == state:
                continue  # it changes nothing and precedes nothing: leaving it out is the same
            try:
                m2 = compare.reply(
                    self.group.requests[i].op,
                    out.reply,
                    self.group.requests[i].returned,
                    m,
                    f"r{i}'s reply",
                )
                m2 = self._logged(out.state, out.events, m2)
            except Mismatch as mismatch:
                self._dead(placed, done | {i}, str(mismatch))
                continue
            found = self._walk(out.state, done | {i}, m2, placed)
            if found is not None:
                return found
        return None

    def _logged(self, state: State, appended: tuple[Event, ...], m: Match) -> Match:
        """Folded events as they are appended must follow the target's log in
        order (when it was read): a wrong order dies at its first wrong event,
        not at the end."""
        for e in appended:
            theirs = self.logs.get(e.session)
            if theirs is None or not (kept := self.ordered[e.session])(e):
                continue
            log = state.store.sessions[e.session]
            new = log.events[self.base.get(e.session, 0) :]
            place = sum(1 for x in new if kept(x) and x.seq < e.seq)
            b = theirs[place] if place < len(theirs) else None
            m = compare.event(e.session, e, b, m, f"log of {e.session}")
            if self.prefer.payloads and b is not None:
                compare.same_payload(e, b, f"log of {e.session}")
        return m

    def _ends(self, state: State, m: Match, order: tuple[Move, ...], done: frozenset[int]) -> bool:
        try:
            observe(self.group, state, self.sessions, self.base, m)
        except Mismatch as mismatch:
            self._dead(order, done, str(mismatch))
            return False
        return True

    def _dead(self, order: tuple[Move, ...], done: frozenset[int], reason: str) -> None:
        self.tried += 1
        # The count breaks ties, so two dead ends are never compared themselves.
        entry = (len(done), len(order), -self.tried, DeadEnd(order, reason))
        if len(self.dead) < KEEP:
            heapq.heappush(self.dead, entry)
        elif entry[:3] > self.dead[0][:3]:
            heapq.heapreplace(self.dead, entry)


def _ordered_with_runner(event: Event) -> bool:
    return compare.folded(event) or event.type in compare.RUNNER


def fingerprint(state: State, base: Mapping[str, int]) -> tuple[Any, ...]:
    """The state as far as the group changed it (module docstring)."""
    logs = state.store.sessions
    return (
        tuple((sid, logs[sid].events[base.get(sid, 0) :]) for sid in sorted(logs)),
        tuple(sorted(state.runs.items())),
        tuple(sorted(state.work.items())),
        tuple(sorted(state.wakes)),
        state.counter,
        state.step_limit,
    )


def observe(
    group: Group, state: State, sessions: Iterable[str], base: Mapping[str, int], m: Match
) -> Match:
    """Compare the model's state with what the target showed of ``sessions``."""
    for sid in sorted(sessions):
        shown = group.after[sid]
        log = state.store.sessions.get(sid)
        if log is None:
            raise Mismatch(f"the target shows session {sid}, which the model does not have")
        rows = [Row(r.input, r.type, r.delivery, r.admitted_seq, r.time) for r in log.pending]
        m = compare.pending(sid, rows, shown.pending, m, f"pending of {sid}")
        msgs = [Msg(x.id, x.type, x.seq, x.time, x.copied_from) for x in log.transcript]
        m = compare.transcript(sid, msgs, shown.transcript, m, f"transcript of {sid}")
        if shown.more_calls:
            raise Mismatch(
                f"open calls of {sid}: the target shows {1 + len(shown.more_calls)}, "
                "the model never more than one per session"
            )
        run = state.runs.get(sid)
        m = compare.call(run.call if run else None, shown.call, m, f"open call of {sid}")
        if shown.events is not None:
            new = log.events[base.get(sid, 0) :]
            m = compare.events(sid, new, shown.events, m, f"log of {sid}")
    return m


# --- merging the parts and following the merged order ------------------------------------


def _merge(group: Group, orders: list[tuple[Move, ...]]) -> tuple[Move, ...]:
    """One order of every part's moves that keeps each part's order and real
    time (a topological order; locality says one exists)."""
    # A part's cut (a runner transition at a failpoint) is its last move;
    # the cuts go last of all, just before the kill.
    queues = [[m for m in order if not m.kill and m.crash_at is None] for order in orders]
    cuts = [m for order in orders for m in order if m.crash_at is not None]
    heads = [0] * len(queues)
    placed: set[int] = set()
    out: list[Move] = []
    reqs = group.requests

    def ready(move: Move) -> bool:
        if move.request is None:
            return True
        mine = reqs[move.request]
        return all(
            j in placed
            for j, r in enumerate(reqs)
            if r.completed is not None and r.completed < mine.invoked
        )

    while any(h < len(q) for h, q in zip(heads, queues, strict=True)):
        options = [k for k, q in enumerate(queues) if heads[k] < len(q) and ready(q[heads[k]])]
        if not options:
            raise AssertionError("the parts' orders do not merge: a checker bug")
        k = min(options, key=lambda k: _rank(group, queues[k][heads[k]]))
        move = queues[k][heads[k]]
        heads[k] += 1
        out.append(move)
        if move.request is not None:
            placed.add(move.request)
    out.extend(cuts)
    if group.killed:
        out.append(KILL)
    return tuple(out)


def _rank(group: Group, move: Move) -> float:
    # Runner moves first (they precede their part's next request), then requests
    # by invocation.
    return float("-inf") if move.request is None else group.requests[move.request].invoked


def _follow(group: Group, order: tuple[Move, ...], start: Match) -> tuple[State, Match]:
    """Replay an order through the model and compare everything (raises
    :class:`Mismatch` where it differs)."""
    state, m = group.before, start
    now = max((r.op.now for r in group.requests), default=0)
    base = {sid: len(log.events) for sid, log in state.store.sessions.items()}
    for move in order:
        if move.request is not None:
            r = group.requests[move.request]
            out = request(state, r.op)
            assert isinstance(out.reply, (Ok, Err))
            m = compare.reply(r.op, out.reply, r.returned, m, f"r{move.request}'s reply")
            state = out.state
        elif move.step is not None and move.crash_at is not None:
            # cut at its failpoint: the durable state so far, the process
            # still up for the other parts' cuts (the kill comes after them)
            cut = advance(state, move.step, now, move.crash_at).state
            state = replace(cut, runs=state.runs, work=state.work, wakes=state.wakes)
        elif move.step is not None:
            state = advance(state, move.step, now).state
        else:
            state = state.crashed()
    while steps := enabled(state):
        state = advance(state, steps[0], now).state
    m = observe(group, state, group.after, base, m)
    return state, m


# --- words and known IDs ------------------------------------------------------------------


def describe(op: Op) -> str:
    """A request in a few words, for reports."""
    wire = op.to_wire()
    words = [wire.pop("op")]
    wire.pop("now", None)
    for name in ("session", "input", "call", "child", "message", "before"):
        if name in wire:
            words.append(f"{name}={wire.pop(name)}")
    for name in ("delivery", "finish", "resume"):
        if name in wire:
            words.append(f"{name}={wire.pop(name)}")
    if "text" in wire:
        words.append(repr(wire.pop("text")))
    return " ".join(str(w) for w in words)


def _known(group: Group) -> set[str]:
    """IDs that exist before the group or that the harness sent: they stand
    for themselves (unless ``group.ids`` maps them)."""
    known: set[str] = set(group.before.store.owners)
    for log in group.before.store.sessions.values():
        known.add(log.id)
        known.update(r.input for r in log.pending)
        known.update(x.id for x in log.transcript)
        known.update(x.copied_from for x in log.transcript if x.copied_from is not None)
        known.update(e.input for e in log.events if e.input is not None)
    known.update(run.call.call for run in group.before.runs.values())
    for r in group.requests:
        for name in ("session", "child", "input", "message", "before", "call"):
            ident = getattr(r.op, name, None)
            if isinstance(ident, str):
                known.add(ident)
    return known
