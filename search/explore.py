"""Bounded-exhaustive exploration: every interleaving of a small world, breadth first.

Theory of operation (after TLC's breadth-first search with a fingerprint set,
``harness-anchors.md`` 1.8, and P's exhaustive mode, 1.7):

- **World.** ``N`` sessions created up front, each with a pool of fresh
  input IDs, and an alphabet of operations on them (:mod:`.world`, which
  states them): the world is finite, and the ``d``-th operation of a path
  is sent with ``now = d``.

- **Exhaustive for the bound.** Every sequence of at most ``D`` operations
  from this alphabet over ``N`` sessions is covered: a path is expanded the
  first (shallowest) time its key is reached, and a path reaching a known key
  is equivalent to the one already expanded (the same futures, with the same
  verdicts) with at least as much depth left, so its futures are already
  covered. Every transition is judged, also those that lead to a known key
  (a step can be wrong even when the state it leads to is fine).

- **The merge key** (``search/canon.py``, :func:`~inboxsim.search.canon.compute`)
  is what the model and the invariant monitor will read in the future, and
  nothing else of the path: each session's fold (pending rows, transcript,
  staged revert, next seq) and run, and the monitor's shadows, lifecycles,
  receipts and checker memory; inputs and calls renamed by first
  appearance, times and seqs ranked per session (every later request
  carries a larger ``now``; no checker does arithmetic on times), trace
  step indexes kept only as "earlier", and sessions sorted (symmetry:
  worlds that differ only by session names collapse). Because the monitor
  is in the key, two paths are merged only when every continuation gets the
  same verdicts on both; ``tests/test_canon.py`` checks that as a
  bisimulation over every path of small bounds.

  Two coarser keys stay for measurement (:mod:`.coarse_keys`): neither
  includes the monitor, so ``merge="log"|"fold"`` is not exhaustive.

- **Sleep sets** (partial-order reduction, ``reduce``): an action that
  commutes with one judged at a sibling is not judged again
  (:mod:`.reduction` states when two actions commute, and how the sleep
  sets pass from a node to its children). Sleep sets remove transitions,
  never keys: the same keys level by level, the same shortest violations.

- **Frontier.** A level's nodes are kept as (parent, label): a chunk rebuilds
  its nodes' states and monitors by replaying labels from the state after
  the prefix (consecutive nodes share all but their last labels), so the
  frontier is bytes per node where states and monitors were kilobytes.

- **Judging.** The invariant monitor is mutable and history-dependent: each
  node's monitor is copied (``Monitor.clone``) for every transition. The
  first violation found is on a shortest path (BFS), and it is reported
  with the full trace from ``hello``. Each new distinct key also gets the
  end-of-run safety checks (``finish(liveness=False)``), since every path
  prefix is a run of its own; liveness is not judged here (a bounded
  prefix need not settle).
"""

from __future__ import annotations

import copy
import pickle
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from ..errors import HarnessError
from ..invariants.monitor import MonitorFactory
from ..model import Policy, State
from ..sim.collector import paused
from ..sim.executor import open_executor, result
from ..trace.record import Step
from .canon import KeyCache, compute
from .coarse_keys import FormCache, model_key, state_key
from .reduction import canonical, eligible, facts, quiet, quiet_sessions, sleeps_in
from .world import (
    DEFAULT_STEP_LIMIT,
    FAMILIES,
    FULL,
    POOL,
    Action,
    Transition,
    enabled_families,
    moves,
    requests,
    session_names,
    start,
    take,
)

DEFAULT_SESSIONS = 2
DEFAULT_DEPTH = 3
"""Small enough that the full alphabet with every checker runs in seconds (2
sessions: 11,646 distinct states); the benchmark goes deeper."""


Tick = Callable[[int, int, int, int, int], None]
MERGES = ("sound", "log", "fold")


@dataclass(slots=True)
class ExploreResult:
    """What a search found; ``violations`` and ``trace`` are empty when all held."""

    policy: str
    sessions: int
    depth: int
    step_limit: int
    alphabet: tuple[str, ...]  # the families explored (the target's features allowing)
    states: int = 0
    transitions: int = 0
    depth_reached: int = 0
    complete: bool = False  # the state space closed before the bound
    per_depth: list[int] = field(default_factory=list)  # new distinct states at each depth
    seconds: float = 0.0
    violations: list[Any] = field(default_factory=list)
    trace: tuple[Step, ...] = ()
    hello: dict[str, Any] = field(default_factory=dict)
    pool: int = POOL  # fresh input IDs per session
    slept: int = 0  # transitions a sleep set held aside (not judged: they commute)
    reduction: str = "sleep sets"

    @property
    def states_per_second(self) -> float:
        return self.states / self.seconds if self.seconds > 0 else float("inf")

    @property
    def operations(self) -> int:
        """Alphabet operations on the counterexample (restarts not counted)."""
        return sum(
            1
            for s in self.trace
            if s.decision not in ("hello", "restart") and s.decision[:7] != "create("
        )


def _copier(monitor: Any) -> Callable[[Any], Any]:
    """How to copy a monitor between steps: its ``clone`` (the invariant
    monitor's: several times cheaper than the alternatives), else a
    ``pickle`` round trip, else ``deepcopy``."""
    if callable(getattr(monitor, "clone", None)):
        return lambda m: m.clone()
    try:
        pickle.dumps(monitor, protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError):
        return copy.deepcopy
    return lambda m: pickle.loads(pickle.dumps(m, protocol=pickle.HIGHEST_PROTOCOL))


def _feed(monitor: Any, steps: Iterable[Step]) -> list[Any]:
    found: list[Any] = []
    for step in steps:
        found.extend(monitor.feed(step))
    return found


def _judge_end(monitor: Any) -> list[Any]:
    """End-of-run safety checks (``finish(liveness=False)``) as if the run
    stopped here: every path prefix is a run of its own. Consumes the
    monitor (a child is judged on its own copy, never reused)."""
    finish = getattr(monitor, "finish", None)
    return [] if finish is None else list(finish(False))


def _wanted(found: list[Any], invariant: str | None) -> list[Any]:
    """The violations the search stops at: all, or those of ``invariant``."""
    if invariant is None:
        return found
    return [v for v in found if v.invariant == invariant]


@dataclass(frozen=True, slots=True)
class _Level:
    """What expanding one level needs besides its nodes (sent to workers)."""

    names: tuple[str, ...]
    step_limit: int
    enabled: frozenset[str]
    invariant: str | None
    merge: str
    now: int
    last: bool  # at the bound: children are counted, never expanded
    pool: int
    reduce: bool  # sleep sets
    root: tuple[State, Any, int]  # the state after the prefix, its monitor (or pickle), length

    def wanted(self, found: list[Any]) -> list[Any]:
        return _wanted(found, self.invariant)


def _take_label(state: State, label: str, now: int, level: _Level, base: int) -> Transition:
    """Take the action with this label again (replaying a path)."""
    plain, _, point = label.partition("@")
    for action in requests(state, level.names, now, level.enabled, level.pool):
        if action.label == plain:
            if point:
                action = Action(label, action.op, point, action.session, action.ident, "failpoints")
            return take(state, action, now, level.step_limit, base)
    raise RuntimeError(f"replay: no action {label!r} at depth {now}")


class _Replay:
    """The states and monitors along a path, rebuilt from the root by
    replaying its labels. The frontier keeps only labels (a few bytes per
    node, where a state and monitor are kilobytes); consecutive nodes share
    all but their last labels, so a chunk replays about one transition per
    node."""

    def __init__(self, level: _Level) -> None:
        state, monitor, length = level.root
        if isinstance(monitor, bytes):
            monitor = pickle.loads(monitor)
        self.level = level
        self.copy = _copier(monitor)
        self.stack: list[tuple[str | None, State, Any, int]] = [(None, state, monitor, length)]

    def to(self, labels: tuple[str, ...]) -> tuple[State, Any, int]:
        stack = self.stack
        same = 0
        while same < len(labels) and same + 1 < len(stack) and stack[same + 1][0] == labels[same]:
            same += 1
        del stack[same + 1 :]
        for depth in range(same, len(labels)):
            _, state, monitor, length = stack[-1]
            t = _take_label(state, labels[depth], depth + 1, self.level, length)
            child = self.copy(monitor)
            _feed(child, t.steps)
            stack.append((labels[depth], t.state, child, length + len(t.steps)))
        _, state, monitor, length = stack[-1]
        return state, monitor, length


# A chunk's result: the judged transitions that matter to the search, the
# number judged, and the number slept (pruned by sleep sets). A record is
# (position of its node in the chunk, the action's label, the violations it
# revealed, the key it reached, the child's sleep set in canonical form, the
# end-of-run violations of a key new to the chunk or None).
_Record = tuple[int, str, list[Any], Any, frozenset[Any], list[Any] | None]
_Chunk = tuple[list[_Record], int, int]

CHUNK = 64
"""Frontier nodes per chunk: the unit of work sent to a worker, and the most
judged transitions held before they are merged."""


@paused  # the cyclic collector: sim/collector.py says why
def _expand_chunk(
    level: _Level, nodes: list[tuple[tuple[str, ...], frozenset[Any]]], seen: set[Any] | None = None
) -> _Chunk:
    """Judge every transition of the nodes, in order (those a sleep set
    holds aside excepted); stop at the first transition that reveals a
    violation (end-of-run violations of a new key do not stop it). ``seen``:
    the keys the search knows (in process), so that the end-of-run checks
    run once per key."""

    replay = _Replay(level)
    copy_of = replay.copy
    models = KeyCache()
    forms: FormCache = {}
    local: set[Any] = set()
    out: list[_Record] = []
    judged = slept = 0
    sound = level.merge == "sound"
    names, now, step_limit, enabled, pool = (
        level.names,
        level.now,
        level.step_limit,
        level.enabled,
        level.pool,
    )
    for at, (labels, sleep) in enumerate(nodes):
        state, monitor, length = replay.to(labels)
        known = facts(monitor)
        reduce = level.reduce and sound and known is not None
        # The node's key names its actions as its sleep set does (failpoint
        # variants too, which only ``transitions`` lists).
        key = compute(state, monitor, models) if reduce and sleep else None
        # The node's eligible actions judged clean, each with whether its
        # session was quiet before and after it; a child's sleep set names
        # actions judged after it, so the node's records wait until all its
        # actions are judged.
        clean: dict[str, tuple[Action, bool]] = {}
        quiet_here = quiet_sessions(state, monitor, names) if reduce else frozenset()
        held: list[tuple[_Record, Action | None, Any]] = []
        scratch = None
        asleep = None if key is None else partial(_asleep, sleep, key)
        for t in moves(state, names, now, step_limit, enabled, length, pool, asleep):
            if isinstance(t, Action):  # held aside by the sleep set: not taken, not judged
                slept += 1
                continue
            action = t.action
            judged += 1
            if t.state is state:  # an error reply: nothing changed, the monitor neither
                if scratch is None:
                    scratch = copy_of(monitor)
                found = _feed(scratch, t.steps)
                if level.wanted(found):
                    out.extend(r for r, _, _ in held)
                    out.append((at, action.label, level.wanted(found), None, frozenset(), None))
                    return out, judged, slept
                if reduce and not found and eligible(action):
                    clean[action.label] = (action, action.session in quiet_here)
                continue
            child = copy_of(monitor)
            found = _feed(child, t.steps)
            wanted = level.wanted(found)
            if wanted:
                out.extend(r for r, _, _ in held)
                out.append((at, action.label, wanted, None, frozenset(), None))
                return out, judged, slept
            commutes = reduce and not found and eligible(action) and facts(child) == known
            child_key: Any = None
            if sound:
                child_key = compute(t.state, child, models)
                digest: Any = child_key.digest
            elif level.merge == "fold":
                digest = model_key(t.state)
            else:
                digest = state_key(t.state, cache=forms)
            end = None
            if digest not in local and (seen is None or digest not in seen):
                local.add(digest)
                end = level.wanted(_judge_end(child))
            record: _Record = (at, action.label, [], digest, frozenset(), end)
            if commutes:
                calm = action.session in quiet_here and quiet(t.state, child, action.session)
                clean[action.label] = (action, calm)
                if not level.last and not child_key.tied:
                    held.append((record, action, child_key))
                    continue
            held.append((record, None, None))
        for record, taken, child_key in held:
            if taken is not None:
                a, calm = clean[taken.label]
                canon = frozenset(
                    canonical(b, child_key)
                    for b, b_calm in clean.values()
                    if sleeps_in(b, b_calm, a, calm)
                )
                record = (*record[:4], canon, record[5])
            out.append(record)
    return out, judged, slept


def _asleep(sleep: frozenset[Any], key: Any, action: Action) -> bool:
    """Is the action in the node's sleep set (written in its key's names)?"""
    return eligible(action) and canonical(action, key) in sleep


def _expanded(
    chunks: int,
    payload: Callable[[int], list[tuple[tuple[str, ...], frozenset[Any]]]],
    level: _Level,
    visited: set[Any],
    executor: Any,
    jobs: int,
) -> Iterator[tuple[int, _Chunk]]:
    """Each chunk's judged transitions, in frontier order: in process, or on
    ``executor`` (a few chunks per worker in flight, results taken back in
    order, so the search is the same whatever the number of workers).
    ``payload(k)`` is chunk ``k``'s nodes (built when it is sent)."""
    if executor is None:
        for k in range(chunks):
            yield k, _expand_chunk(level, payload(k), visited)
        return

    flight: deque[tuple[int, Any]] = deque()
    sent = 0
    try:
        while sent < chunks or flight:
            while sent < chunks and len(flight) < 2 * jobs:
                flight.append((sent, executor.submit(_expand_chunk, level, payload(sent))))
                sent += 1
            k, future = flight.popleft()
            yield k, result(future)
    finally:
        for _, future in flight:
            future.cancel()


def explore(
    policy: Policy,
    monitor: MonitorFactory,
    sessions: int = DEFAULT_SESSIONS,
    depth: int = DEFAULT_DEPTH,
    step_limit: int = DEFAULT_STEP_LIMIT,
    alphabet: frozenset[str] = FULL,
    progress: Callable[[int, int, int], None] | None = None,
    invariant: str | None = None,
    merge: str = "sound",
    jobs: int = 1,
    pool: int = POOL,
    tick: Tick | None = None,
    reduce: bool = True,
) -> ExploreResult:
    """Breadth-first search of every interleaving up to ``depth`` operations.

    Stops at the first violation (on a shortest path, by BFS). ``progress``
    is called after each depth with (depth, distinct states, transitions).
    ``merge``: ``sound`` (the default) merges paths by
    :func:`~inboxsim.search.canon.compute`, the model's fold together with
    what the monitor will read later: paths with one key have the same
    futures, so the search is exhaustive for the bound. ``log`` (the whole
    event log, :func:`state_key`) and ``fold`` (:func:`model_key`) leave the
    monitor out and judge a merged state along the shortest path to it
    only: measurements for the benchmark, not exhaustive.
    ``invariant``: stop only at a violation of this invariant; other
    violations are not reported and the search goes on through them (to ask
    "how deep is the shortest path to *this* failure").
    ``jobs``: worker processes judging chunks of each level (the monitor
    must pickle); the result is the same for any number. ``pool``: fresh
    input IDs per session (part of the world's bound). ``tick`` is called
    within a level, after each chunk of its frontier, with (depth, frontier
    nodes expanded, frontier size, distinct states, transitions): a level
    of a big search takes most of an hour. ``reduce``: sleep sets (with the
    sound merge only): a transition that commutes with one already judged
    is not judged again; the same states, the same shortest violations
    (module docstring), fewer transitions.
    """
    if merge not in MERGES:
        raise ValueError(f"unknown merge {merge!r}; known: {', '.join(MERGES)}")
    if jobs < 1 or pool < 1:
        raise ValueError(f"jobs and pool must be at least 1, not {jobs} and {pool}")
    search = partial(
        _search,
        policy,
        monitor,
        sessions,
        depth,
        step_limit,
        alphabet,
        progress,
        invariant,
        merge,
        pool,
        tick,
        reduce and merge == "sound",
    )
    if jobs == 1:
        return search(None, 1)
    from concurrent.futures.process import BrokenProcessPool

    try:
        pickle.dumps(monitor(policy, {}))
    except (pickle.PicklingError, TypeError, AttributeError):
        raise HarnessError(
            f"explore --jobs {jobs}: the monitor does not pickle; use --jobs 1"
        ) from None
    preload = ["inboxsim.search.explore", "inboxsim.search.canon", "inboxsim.invariants"]
    try:
        with open_executor("local", jobs, None, preload) as (executor, _):
            return search(executor, jobs)
    except BrokenProcessPool:
        raise HarnessError(
            f"explore --jobs {jobs}: a worker process died (killed, or out of memory); "
            "nothing of the search is kept: rerun, with fewer jobs if memory ran out"
        ) from None


def _search(
    policy: Policy,
    monitor: MonitorFactory,
    sessions: int,
    depth: int,
    step_limit: int,
    alphabet: frozenset[str],
    progress: Callable[[int, int, int], None] | None,
    invariant: str | None,
    merge: str,
    pool: int,
    tick: Tick | None,
    reduce: bool,
    executor: Any,
    jobs: int,
) -> ExploreResult:
    started = time.perf_counter()
    names = session_names(sessions)
    state, prefix, hello = start(policy, names, step_limit)
    enabled = enabled_families(alphabet, hello.get("features", ()))
    result = ExploreResult(
        policy.name,
        sessions,
        depth,
        step_limit,
        tuple(f for f in FAMILIES if f in enabled),
        hello=hello,
        pool=pool,
        reduction="sleep sets" if reduce else "none",
    )
    root_monitor = monitor(policy, hello)
    found = _wanted(_feed(root_monitor, prefix), invariant)
    if found:
        result.violations, result.trace = found, tuple(prefix)
        return _done(result, started)
    if merge == "sound":
        visited: set[Any] = {compute(state, root_monitor).digest}
    else:
        visited = {model_key(state) if merge == "fold" else state_key(state)}
    shipped: Any = root_monitor
    if executor is not None:
        shipped = pickle.dumps(root_monitor, protocol=pickle.HIGHEST_PROTOCOL)
    root = (state, shipped, len(prefix))
    # Each level's nodes as (index of the parent in the level before, label):
    # the frontier is labels only, and a node's path is read up the levels.
    levels: list[list[tuple[int, str]]] = [[(-1, "")]]
    sleeps: list[frozenset[Any]] = [frozenset()]
    result.states = 1

    def labels_of(k: int) -> tuple[str, ...]:
        out = []
        for nodes in reversed(levels[1:]):
            parent, label = nodes[k]
            out.append(label)
            k = parent
        return tuple(reversed(out))

    for now in range(1, depth + 1):
        level = _Level(
            names, step_limit, enabled, invariant, merge, now, now == depth, pool, reduce, root
        )
        frontier = levels[-1]
        payload = partial(_payload, labels_of, sleeps, len(frontier))
        chunks = (len(frontier) + CHUNK - 1) // CHUNK
        fresh: list[tuple[int, str]] = []
        fresh_sleeps: list[frozenset[Any]] = []
        here: dict[Any, int] = {}  # this level's new keys -> their place in ``fresh``
        interned: dict[frozenset[Any], frozenset[Any]] = {}
        new_at_bound = expanded = 0
        for k, (records, judged, slept) in _expanded(
            chunks, payload, level, visited, executor, jobs
        ):
            result.transitions += judged
            result.slept += slept
            for at, label, found, key, canon, end in records:
                parent = k * CHUNK + at
                if found or (key not in visited and end):
                    labels = (*labels_of(parent), label)
                    result.violations = found or end  # type: ignore[assignment]
                    result.trace = _trace(level, prefix, labels)
                    result.depth_reached = now
                    result.states = len(visited) + (0 if found else 1)
                    return _done(result, started)
                place = here.get(key)
                if place is not None:  # one more path to a key new at this level
                    if not level.last:
                        kept = fresh_sleeps[place] | canon
                        fresh_sleeps[place] = interned.setdefault(kept, kept)
                    continue
                if key in visited:
                    continue  # reached at an earlier level: its futures are covered
                visited.add(key)
                if level.last:
                    new_at_bound += 1
                    continue
                here[key] = len(fresh)
                fresh.append((parent, label))
                fresh_sleeps.append(interned.setdefault(canon, canon))
            expanded += min(CHUNK, len(frontier) - k * CHUNK)
            if tick is not None:
                tick(now, expanded, len(frontier), len(visited), result.transitions)
        grown = len(fresh) + new_at_bound
        result.per_depth.append(grown)
        result.states = len(visited)
        if grown:
            result.depth_reached = now
        if progress is not None:
            progress(now, result.states, result.transitions)
        if not grown:
            result.complete = True
            break
        levels.append(fresh)
        sleeps = fresh_sleeps
    return _done(result, started)


def _payload(
    labels_of: Callable[[int], tuple[str, ...]], sleeps: list[frozenset[Any]], size: int, chunk: int
) -> list[tuple[tuple[str, ...], frozenset[Any]]]:
    """Chunk ``chunk`` of a frontier of ``size`` nodes: each node's path and sleep set."""
    start = chunk * CHUNK
    return [(labels_of(k), sleeps[k]) for k in range(start, min(start + CHUNK, size))]


def _trace(level: _Level, prefix: Sequence[Step], labels: tuple[str, ...]) -> tuple[Step, ...]:
    """The full trace of a path, from hello: the prefix, then its labels
    replayed."""
    state, _, length = level.root
    steps = list(prefix)
    for depth, label in enumerate(labels, start=1):
        t = _take_label(state, label, depth, level, length)
        steps.extend(t.steps)
        state, length = t.state, length + len(t.steps)
    return tuple(steps)


def _done(result: ExploreResult, started: float) -> ExploreResult:
    result.seconds = time.perf_counter() - started
    return result
