"""Shared by the explorer's tests and the reduction benchmark: the policies
that break an invariant, and the brute-force walk of every path.
"""

from __future__ import annotations

import pickle
from typing import Any

from inboxsim.invariants import Monitor
from inboxsim.model import PRESETS
from inboxsim.search import reduction, world
from inboxsim.search.canon import compute

STEP_LIMIT = world.DEFAULT_STEP_LIMIT

# Each policy that breaks an invariant: shrink a failing seed for that
# invariant, then the explorer (one session, stopping only at that invariant)
# finds it at a depth no larger than the shrunk scenario's operations.
BROKEN = [
    ("g2", "monotonic-visible-time"),
    ("c", "shared-admission-order"),
    ("c", "queue-fifo"),
    ("b", "receipt-reflects-request"),
    ("g5", "retry-same-receipt"),
    ("g5", "conflict-rejected"),
    ("g5", "barrier-blocks-promotion"),
]


def root(
    policy_name: str, sessions: int
) -> tuple[Any, Monitor, int, tuple[str, ...], frozenset[str]]:
    """The world after hello and the creates, with the full alphabet: its
    state, a monitor fed those steps, the trace length, the session names
    and the families the target enables."""
    policy = PRESETS[policy_name]
    names = world.session_names(sessions)
    state, prefix, hello = world.start(policy, names, STEP_LIMIT)
    enabled = world.enabled_families(world.FULL, hello.get("features", ()))
    monitor = Monitor(policy, hello)
    for step in prefix:
        monitor.feed(step)
    return state, monitor, len(prefix), names, enabled


def every_path(policy_name: str, sessions: int, depth: int) -> list[tuple[Any, bytes, int]]:
    """Every path of at most ``depth`` operations (no merging; an error reply
    is no new path): its state, its pickled monitor and its trace length."""
    state, monitor, length, names, enabled = root(policy_name, sessions)
    level = [(state, pickle.dumps(monitor), length)]
    paths = list(level)
    for now in range(1, depth + 1):
        nxt = []
        for source, blob, length in level:
            for t in world.transitions(source, names, now, STEP_LIMIT, enabled, length):
                if t.state is source:
                    continue  # an error reply: the same state
                child = pickle.loads(blob)
                for step in t.steps:
                    child.feed(step)
                nxt.append((t.state, pickle.dumps(child), length + len(t.steps)))
        paths += nxt
        level = nxt
    return paths


def every_key(
    policy_name: str, sessions: int, depth: int, pool: int = world.POOL
) -> list[tuple[Any, Any, int, int]]:
    """One state of every merge key reachable within ``depth`` operations
    (the first reached, breadth first, as the search keeps it; through
    violations too, as a search stopping at one invariant goes on): its
    state, its monitor, its trace length and its depth."""
    state, monitor, length, names, enabled = root(policy_name, sessions)
    level = [(state, monitor, length, 0)]
    keys = {compute(state, monitor).digest}
    out = list(level)
    for now in range(1, depth + 1):
        nxt = []
        for source, parent, length, _ in level:
            for t in world.transitions(source, names, now, STEP_LIMIT, enabled, length, pool):
                if t.state is source:
                    continue  # an error reply: the same state
                child = parent.clone()
                for step in t.steps:
                    child.feed(step)
                digest = compute(t.state, child).digest
                if digest not in keys:
                    keys.add(digest)
                    nxt.append((t.state, child, length + len(t.steps), now))
        out += nxt
        level = nxt
    return out


def _clean(monitor: Any, steps: Any) -> tuple[Any, bool]:
    child = monitor.clone()
    found = [v for step in steps for v in child.feed(step)]
    return child, not found


def _move(
    state: Any, names: Any, now: int, enabled: Any, length: int, label: str, pool: int
) -> Any:
    for t in world.transitions(state, names, now, STEP_LIMIT, enabled, length, pool):
        if t.action.label == label:
            return t
    return None


def diamonds(
    state: Any, monitor: Any, length: int, now: int, sessions: int = 2, pool: int = world.POOL
) -> tuple[int, int]:
    """Check every pair the search takes as independent at this state (the
    next operation is the ``now``-th): both orders exist, reach one merge
    key, and each action is as clean after the other as before it (the
    search uses a pair only where both are clean and neither changes the
    monitor's global facts, and where one crashes, the other's session is
    quiet before and after it). Return how many pairs were checked, and how
    many of them with a failpoint variant; a failing pair raises
    AssertionError naming it."""
    names = world.session_names(sessions)
    enabled = world.enabled_families(world.FULL, monitor.tracker.features)
    known = reduction.facts(monitor)
    before = reduction.quiet_sessions(state, monitor, names)
    firsts = {}
    for t in world.transitions(state, names, now, STEP_LIMIT, enabled, length, pool):
        if not reduction.eligible(t.action):
            continue
        child, clean = _clean(monitor, t.steps)
        if clean and reduction.facts(child) == known:
            session = t.action.session
            calm = session in before and reduction.quiet(t.state, child, session)
            firsts[t.action.label] = (t, child, calm)
    checked = crashing = 0
    for la, (ta, after_a, calm_a) in firsts.items():
        for lb, (tb, after_b, calm_b) in firsts.items():
            if la >= lb or not reduction.commutes(ta.action, calm_a, tb.action, calm_b):
                continue
            # a then b, and b then a: the later action keeps its label (the
            # next pool ID, the live inputs of its session and the failpoints
            # its request reaches are unchanged by the other session's
            # action), and is sent at the next ``now``
            ab = _move(ta.state, names, now + 1, enabled, length + len(ta.steps), lb, pool)
            ba = _move(tb.state, names, now + 1, enabled, length + len(tb.steps), la, pool)
            assert ab is not None and ba is not None, (la, lb)
            end_ab, clean_ab = _clean(after_a, ab.steps)
            end_ba, clean_ba = _clean(after_b, ba.steps)
            assert clean_ab and clean_ba, (la, lb)
            assert compute(ab.state, end_ab).digest == compute(ba.state, end_ba).digest, (la, lb)
            checked += 1
            crashing += ta.action.crash_at is not None or tb.action.crash_at is not None
    return checked, crashing
