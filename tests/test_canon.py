"""The explorer's merge key (search/canon.py) is sound: paths it merges have the
same futures.

Two kinds of evidence:

- **Bisimulation on small bounds.** Every path of the full alphabet up to a
  depth is enumerated *without* merging, each with its own monitor. Paths
  with one key must have the same one-step futures: the same multiset of
  (verdicts of the transition, verdicts of the end-of-run checks, key of the
  child). By induction over the explored region, merging by the key hides
  no violation there. Run on the default policy and on the policies that
  break invariants, so that the verdicts compared are not all empty.
- **Step-scoped checker attributes are dead between steps.** The key leaves
  out what ``Checker.step_scoped`` names; a monitor whose step-scoped
  attributes are replaced after every step by a value that raises on any
  use judges simulator traces exactly as an untouched one does.
"""

from __future__ import annotations

import pickle
from collections import Counter, defaultdict
from typing import Any

import pytest

from inboxsim.invariants import Monitor
from inboxsim.model import PRESETS
from inboxsim.search import coarse_keys, world
from inboxsim.search.canon import merge_key
from inboxsim.sim.run import RunOptions, run_seed
from tests.explore_helpers import STEP_LIMIT, every_path, root

MEMBERS = 4


def _future(sessions: int, state: Any, blob: bytes, length: int, now: int) -> Counter[Any]:
    """One path's one-step futures: (transition verdicts, end-of-run
    verdicts, child key), as a multiset."""
    names = world.session_names(sessions)
    enabled = world.enabled_families(world.FULL, pickle.loads(blob).tracker.features)
    out: Counter[Any] = Counter()
    for t in world.transitions(state, names, now, STEP_LIMIT, enabled, length):
        child = pickle.loads(blob)
        found = frozenset(v.invariant for step in t.steps for v in child.feed(step))
        end = frozenset(v.invariant for v in pickle.loads(pickle.dumps(child)).finish(False))
        out[(found, end, merge_key(t.state, child))] += 1
    return out


@pytest.mark.parametrize(
    ("policy_name", "sessions", "depth"),
    [("g4", 1, 2), ("g4", 2, 2), ("g2", 1, 2), ("c", 1, 2), ("b", 1, 2), ("g5", 1, 2)],
)
def test_paths_with_one_key_have_the_same_futures(
    policy_name: str, sessions: int, depth: int
) -> None:
    groups: dict[Any, list[tuple[Any, bytes, int]]] = defaultdict(list)
    for state, blob, length in every_path(policy_name, sessions, depth):
        groups[merge_key(state, pickle.loads(blob))].append((state, blob, length))
    merged = [g for g in groups.values() if len(g) > 1]
    assert merged, "no two paths share a key: the bound tests nothing"
    now = depth + 1  # later than every recorded time on every path
    checked = 0
    for group in merged:
        first = _future(sessions, *group[0], now)
        # every merged class is checked; within one, the first few paths
        # (of a class's paths, most differ only by an interleaving)
        for other in group[1:MEMBERS]:
            assert _future(sessions, *other, now) == first
            checked += 1
    assert checked >= 10


def _follow(sessions: int, labels: list[str]) -> tuple[Any, Any]:
    """The state and monitor after the alphabet's actions with these labels
    (a failpoint variant's label ends in ``@point``), under g4."""
    policy = PRESETS["g4"]
    names = world.session_names(sessions)
    state, prefix, hello = world.start(policy, names, STEP_LIMIT)
    enabled = world.enabled_families(world.FULL, hello.get("features", ()))
    monitor, length = Monitor(policy, hello), len(prefix)
    for step in prefix:
        monitor.feed(step)
    for now, label in enumerate(labels, start=1):
        moves = world.transitions(state, names, now, STEP_LIMIT, enabled, length)
        t = next(t for t in moves if t.action.label == label)
        for step in t.steps:
            monitor.feed(step)
        state, length = t.state, length + len(t.steps)
    return state, monitor


def test_the_key_separates_what_the_monitor_tells_apart() -> None:
    """A queued prompt crashed mid-promotion (the client holds no receipt)
    and the same prompt admitted then interrupted (it holds one) leave one
    model fold, so the fold alone would merge them; the key does not."""
    crashed = _follow(1, ["prompt(s1,s1.i1,queue)@mid_promotion"])
    interrupted = _follow(1, ["prompt(s1,s1.i1,queue)", "interrupt(s1)"])
    assert coarse_keys.model_key(crashed[0]) == coarse_keys.model_key(interrupted[0])
    assert merge_key(*crashed) != merge_key(*interrupted)


def test_the_key_closes_the_gap_the_event_log_key_had() -> None:
    """A prompt crashed mid-promotion, then retried exactly: the retry
    appends nothing, so the event-log key (the old search's) is the same
    with or without it, yet only after it does the client hold a receipt
    that later retries are judged against. The merge key tells them apart."""
    crashed = _follow(1, ["prompt(s1,s1.i1,queue)@mid_promotion"])
    retried = _follow(1, ["prompt(s1,s1.i1,queue)@mid_promotion", "retry(s1,s1.i1)"])
    assert coarse_keys.state_key(crashed[0]) == coarse_keys.state_key(retried[0])
    assert crashed[1].tracker.lives["s1.i1"].receipt is None
    assert retried[1].tracker.lives["s1.i1"].receipt is not None
    assert merge_key(*crashed) != merge_key(*retried)


def test_interleavings_of_two_sessions_share_a_key() -> None:
    """Two sessions' answers in either order: one key (times are ranked per
    session; the calls' opening order, which the model reads, is the same)."""
    opening = ["prompt(s1,s1.i1,steer)", "prompt(s2,s2.i1,queue)"]
    answers = ["answer(s1,stop)", "answer(s2,tool)"]
    one = _follow(2, opening + answers)
    other = _follow(2, opening + answers[::-1])
    assert coarse_keys.state_key(one[0]) == coarse_keys.state_key(other[0])
    assert merge_key(*one) == merge_key(*other)


def test_session_renaming_shares_a_key() -> None:
    """The same history on s1 or on s2: one key (session symmetry)."""
    one = _follow(2, ["prompt(s1,s1.i1,steer)", "answer(s1,tool)"])
    other = _follow(2, ["prompt(s2,s2.i1,steer)", "answer(s2,tool)"])
    assert merge_key(*one) == merge_key(*other)
    third = _follow(2, ["prompt(s2,s2.i1,steer)", "answer(s2,stop)"])
    assert merge_key(*one) != merge_key(*third)


class _Poison:
    """Raises on any use: a step-scoped attribute read before it is set."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"a step-scoped attribute was read between steps (.{name})")

    def __bool__(self) -> bool:
        raise AssertionError("a step-scoped attribute was read between steps (truth)")

    def __iter__(self) -> Any:
        raise AssertionError("a step-scoped attribute was read between steps (iteration)")

    def __len__(self) -> int:
        raise AssertionError("a step-scoped attribute was read between steps (len)")

    def __eq__(self, other: object) -> bool:
        raise AssertionError("a step-scoped attribute was read between steps (==)")

    __hash__ = None  # type: ignore[assignment]


@pytest.mark.parametrize("policy_name", ["g4", "g2", "c", "b", "g5"])
def test_step_scoped_attributes_are_dead_between_steps(policy_name: str) -> None:
    policy = PRESETS[policy_name]
    scoped_total = 0
    for seed in range(20):
        trace = run_seed(seed, policy, RunOptions(ops=100)).trace
        plain = Monitor(policy, trace.header.hello)
        poisoned = Monitor(policy, trace.header.hello)
        for step in trace.steps:
            assert [v.invariant for v in poisoned.feed(step)] == [
                v.invariant for v in plain.feed(step)
            ]
            for checker in poisoned.checkers:
                for name in type(checker).step_scoped:
                    setattr(checker, name, _Poison())
                    scoped_total += 1
        assert [v.invariant for v in poisoned.finish(True)] == [
            v.invariant for v in plain.finish(True)
        ]
    assert scoped_total > 0


def test_poison_fires_on_an_attribute_that_is_memory() -> None:
    """The poison test can fail: declaring real memory step-scoped (the
    tracker-backed lifecycle memory of LifecycleChecker) is caught."""
    from inboxsim.invariants.execution import LifecycleChecker

    policy = PRESETS["g4"]
    trace = run_seed(0, policy, RunOptions(ops=60)).trace
    monitor = Monitor(policy, trace.header.hello)
    checker = next(c for c in monitor.checkers if isinstance(c, LifecycleChecker))
    with pytest.raises(AssertionError, match="step-scoped"):
        for step in trace.steps:
            monitor.feed(step)
            checker.open_since = _Poison()  # type: ignore[assignment]


@pytest.mark.parametrize("policy_name", ["g4", "g5"])
def test_a_monitor_clone_judges_on_its_own(policy_name: str) -> None:
    """``Monitor.clone`` (what the explorer copies per transition): fed the
    rest of a trace, a clone finds what an untouched monitor finds, and the
    monitor it was cloned from does not change (its pickle is the same)."""
    policy = PRESETS[policy_name]
    cloned = 0
    for seed in range(6):
        trace = run_seed(seed, policy, RunOptions(ops=60)).trace
        steps = trace.steps
        monitor = Monitor(policy, trace.header.hello)
        for i, step in enumerate(steps):
            monitor.feed(step)
            if i % 10:
                continue
            before = pickle.dumps(monitor)
            clone = monitor.clone()
            reference = pickle.loads(before)
            rest = steps[i + 1 :]
            assert [v.invariant for s in rest for v in clone.feed(s)] == [
                v.invariant for s in rest for v in reference.feed(s)
            ]
            assert [v.invariant for v in clone.finish(True)] == [
                v.invariant for v in reference.finish(True)
            ]
            assert pickle.dumps(monitor) == before
            cloned += 1
    assert cloned >= 12


def test_stateless_checkers_stay_stateless() -> None:
    """A monitor's copies share its stateless checkers (no attribute but
    the base's and ``step_scoped`` ones), decided once when it is made: fed
    simulator traces, no such checker grows an attribute (memory the
    copies would then share)."""
    for policy_name in ("g4", "g2", "c", "b", "g5"):
        policy = PRESETS[policy_name]
        for seed in range(5):
            trace = run_seed(seed, policy, RunOptions(ops=100)).trace
            monitor = Monitor(policy, trace.header.hello)
            stateless = {i: set(vars(c)) for i, c in enumerate(monitor.checkers) if c.stateless()}
            assert len(stateless) > len(monitor.checkers) // 2
            for step in trace.steps:
                monitor.feed(step)
            monitor.finish(True)
            for i, names in stateless.items():
                assert set(vars(monitor.checkers[i])) == names, type(monitor.checkers[i])


@pytest.mark.parametrize("policy_name", ["g4", "g5"])
def test_the_key_cache_changes_no_key(policy_name: str) -> None:
    """The explorer computes keys with a cache shared by neighbouring
    states (each session's segment by the identity of what it is written
    from; the tracker copies on write). Over every path of two sessions to
    depth 2, children made by ``Monitor.clone`` as the explorer makes them,
    each key with the cache is the key of an independent copy without it."""
    from inboxsim.search.canon import KeyCache, compute

    state, monitor, length, names, enabled = root(policy_name, 2)
    level = [(state, monitor, length)]
    cache = KeyCache()
    hits = 0
    for now in (1, 2):
        nxt = []
        for source, parent, length in level:
            for t in world.transitions(source, names, now, STEP_LIMIT, enabled, length):
                if t.state is source:
                    continue
                child = parent.clone()
                for step in t.steps:
                    child.feed(step)
                before = len(cache.segments)
                cached = compute(t.state, child, cache)
                hits += len(t.state.store.sessions) - (len(cache.segments) - before)
                alone = pickle.loads(pickle.dumps((t.state, child)))
                assert cached.digest == compute(*alone).digest
                assert cached.names == compute(*alone).names
                nxt.append((t.state, child, length + len(t.steps)))
        level = nxt
    assert hits > 100  # the cache was used


def test_the_key_writers_know_the_classes_they_write() -> None:
    """The per-class writers name each class's attributes; a class that
    grows one is written in full instead (sound, slower): this test says
    when the writers fall behind."""
    from inboxsim.invariants import tracker
    from inboxsim.model import state, store, values
    from inboxsim.search import canon
    from inboxsim.trace import record as trace

    def slots_of(cls: type) -> tuple[str, ...]:
        names: list[str] = []
        for klass in reversed(cls.__mro__):
            declared = klass.__dict__.get("__slots__", ())
            names.extend((declared,) if isinstance(declared, str) else declared)
        return tuple(n for n in names if n != "__weakref__")

    classes = {
        "SessionLog": store.SessionLog,
        "Receipt": values.Receipt,
        "Message": values.Message,
        "Call": values.Call,
        "Run": state.Run,
        "Owner": store.Owner,
    }
    for name, cls in classes.items():
        assert slots_of(cls) == canon._MODEL_SLOTS[name], name
    for name, slots in canon._MONITOR_SLOTS.items():
        cls = getattr(tracker, name, None) or getattr(trace, name)
        assert slots_of(cls) == slots, name


def _flat(tokens: Any) -> list[Any]:
    if isinstance(tokens, (tuple, list)):
        return [x for t in tokens for x in _flat(t)]
    return [tokens]


@pytest.mark.parametrize("policy_name", ["g4", "g2"])
def test_the_key_writers_know_the_monitor_they_are_given(policy_name: str) -> None:
    """The segment writers know every attribute of the invariant monitor's
    tracker: nothing of it is written in full (the reflective writer names
    what it writes: an object's class, ``tracker.NAME`` for an attribute the
    writers were not told of). This test says when they fall behind."""
    for state, blob, _length in every_path(policy_name, 2, 1):
        tokens = _flat(merge_key(state, pickle.loads(blob)))
        assert "Monitor" not in tokens and "Tracker" not in tokens
        assert not [t for t in tokens if isinstance(t, str) and t.startswith("tracker.")]


def test_a_tracker_attribute_the_writers_do_not_know_is_written_alone() -> None:
    """When the tracker learns something the writers were not told of, the
    key stays sound (that attribute's value tells keys apart) and cheap: the
    attribute alone is written in full, read from the tracker itself, not
    the whole monitor (which took an explorer at depth 3 from 40 s to over 5
    minutes when the tracker learnt ``busy``)."""
    state, blob, _length = every_path("g4", 2, 1)[-1]
    keys = []
    for value in (None, 1, 2, 2):
        monitor = pickle.loads(blob)
        if value is not None:
            monitor.tracker.learnt = value
        tokens = _flat(merge_key(state, monitor))
        assert "Monitor" not in tokens and "Tracker" not in tokens
        assert ("tracker.learnt" in tokens) is (value is not None)
        keys.append(tokens)
    assert len({repr(k) for k in keys[:3]}) == 3 and keys[2] == keys[3]


def test_a_concurrent_groups_memory_is_written_only_when_not_idle() -> None:
    """The concurrent-retry checker's memory of a group is left out of the
    key while it holds the checker's initial values (no explorer path starts
    a group), and written in full, telling keys apart, once it holds
    anything else: leaving the idle values out merges nothing new."""
    from inboxsim.invariants import retry
    from inboxsim.search import canon

    kind = retry.ConcurrentRetryChecker
    fresh = next(c for c in Monitor(PRESETS["g4"], {}).checkers if type(c) is kind)
    for (cls, name), idle in canon._IDLE_OUTSIDE_GROUPS.items():
        assert cls == "ConcurrentRetryChecker"
        assert getattr(fresh, name) == idle and type(getattr(fresh, name)) is type(idle), name
    state, blob, _length = every_path("g4", 2, 1)[-1]
    keys = []
    for group in (None, -1, 3, 4):
        monitor = pickle.loads(blob)
        checker = next(c for c in monitor.checkers if type(c) is kind)
        if group is not None:
            checker.group = group
        tokens = _flat(merge_key(state, monitor))
        assert ("ConcurrentRetryChecker.group" in tokens) is (group not in (None, -1))
        keys.append(repr(tokens))
    assert keys[0] == keys[1] and len({keys[1], keys[2], keys[3]}) == 3
