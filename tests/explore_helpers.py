"""Shared by the explorer's tests and the reduction benchmark: the policies
that break an invariant, and the brute-force walk of every path.
"""

from __future__ import annotations

import pickle
from typing import Any

from inboxsim.invariants import Monitor
from inboxsim.model import PRESETS
from inboxsim.search import world

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
