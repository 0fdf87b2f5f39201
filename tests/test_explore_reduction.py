"""The explorer's partial-order reduction (sleep sets, search/explore.py) loses
nothing within the bound.

Two kinds of evidence, on bounds small enough for CI
(``benchmarks/reduction_soundness.py`` runs the same comparison deeper):

- **The independence definition holds where the search uses it.** Two
  actions the search takes as independent at a state (``independent``: both
  eligible, on different sessions; neither reveals a violation there, and
  neither changes the monitor's global ``facts``) commute modulo the merge
  key: both orders reach one key, and each action is as clean after the
  other as it was before it. Checked for every such pair at every state of
  the root, and of a sample of the states at depths 1 and 2.
- **Reduced and unreduced searches agree.** With two sessions (one session
  has nothing to reduce), for every preset that breaks an invariant, and
  for each invariant it breaks: the same violation at the same shortest
  depth; unfiltered, the same first depth; where nothing is found, the same
  distinct keys level by level, with fewer judged transitions.
"""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from inboxsim.invariants import Monitor
from inboxsim.model import PRESETS
from inboxsim.search import explore as ex
from inboxsim.search import reduction, world
from inboxsim.search.canon import compute
from tests.explore_helpers import BROKEN

STEP_LIMIT = world.DEFAULT_STEP_LIMIT


def _clean(monitor: Any, steps: Any) -> tuple[Any, bool]:
    child = pickle.loads(pickle.dumps(monitor))
    found = [v for step in steps for v in child.feed(step)]
    return child, not found


def _move(state: Any, names: Any, now: int, enabled: Any, length: int, label: str) -> Any:
    for t in world.transitions(state, names, now, STEP_LIMIT, enabled, length):
        if t.action.label == label:
            return t
    return None


def _diamonds(policy_name: str, state: Any, monitor: Any, length: int, now: int) -> int:
    """Check every pair the search would take as independent at this state;
    return how many were checked."""
    names = world.session_names(2)
    enabled = world.enabled_families(world.FULL, monitor.tracker.features)
    moves = [
        t
        for t in world.transitions(state, names, now, STEP_LIMIT, enabled, length)
        if reduction.eligible(t.action)
    ]
    known = reduction.facts(monitor)
    firsts = {}
    for t in moves:
        child, clean = _clean(monitor, t.steps)
        if clean and reduction.facts(child) == known:
            firsts[t.action.label] = (t, child)
    checked = 0
    for la, (ta, after_a) in firsts.items():
        for lb, (tb, after_b) in firsts.items():
            if la >= lb or not reduction.independent(ta.action, tb.action):
                continue
            # a then b, and b then a: the later action keeps its label (the
            # next pool ID and the live inputs of its session are unchanged
            # by the other session's action), and is sent at the next ``now``
            ab = _move(ta.state, names, now + 1, enabled, length + len(ta.steps), lb)
            ba = _move(tb.state, names, now + 1, enabled, length + len(tb.steps), la)
            assert ab is not None and ba is not None, (policy_name, la, lb)
            end_ab, clean_ab = _clean(after_a, ab.steps)
            end_ba, clean_ba = _clean(after_b, ba.steps)
            assert clean_ab and clean_ba, (policy_name, la, lb)
            assert compute(ab.state, end_ab).digest == compute(ba.state, end_ba).digest, (
                policy_name,
                la,
                lb,
            )
            checked += 1
    return checked


@pytest.mark.parametrize("policy_name", ["g4", "g2", "c", "b", "g5"])
def test_independent_actions_commute_modulo_the_key(policy_name: str) -> None:
    policy = PRESETS[policy_name]
    names = world.session_names(2)
    state, prefix, hello = world.start(policy, names, STEP_LIMIT)
    enabled = world.enabled_families(world.FULL, hello.get("features", ()))
    monitor = Monitor(policy, hello)
    for step in prefix:
        monitor.feed(step)
    checked = _diamonds(policy_name, state, monitor, len(prefix), 1)
    # a sample of the states at depth 1 (every third) and 2 (every ninth)
    for i, t in enumerate(world.transitions(state, names, 1, STEP_LIMIT, enabled, len(prefix))):
        if t.state is state or i % 3:
            continue
        child, clean = _clean(monitor, t.steps)
        if clean:
            checked += _diamonds(policy_name, t.state, child, len(prefix) + len(t.steps), 2)
            if i % 9 == 0:
                for u in world.transitions(
                    t.state, names, 2, STEP_LIMIT, enabled, len(prefix) + len(t.steps)
                ):
                    grand, ok = _clean(child, u.steps)
                    if ok and u.state is not t.state:
                        length = len(prefix) + len(t.steps) + len(u.steps)
                        checked += _diamonds(policy_name, u.state, grand, length, 3)
                        break
    assert checked >= 50, "too few independent pairs: the check tests little"


def test_independence_is_structural_and_excludes_what_it_must() -> None:
    """Crashes, kills and reuses of ended IDs are never independent; one
    session's actions are not independent of each other."""
    prompt = world.Action("p", None, None, "s1", "s1.i1", "prompt_steer")
    other = world.Action("q", None, None, "s2", "s2.i1", "prompt_queue")
    assert reduction.independent(prompt, other) and reduction.independent(other, prompt)
    assert not reduction.independent(prompt, world.Action("r", None, None, "s1", None, "resume"))
    crash = world.Action("p@after_admit", None, "after_admit", "s2", "s2.i1", "failpoints")
    kill = world.Action("crash", None, None, None, None, "kill")
    reuse = world.Action("reuse", None, None, "s2", "s1.i1", world.REUSE)
    for a in (crash, kill, reuse):
        assert not reduction.independent(prompt, a) and not reduction.independent(a, prompt)


def _both(policy_name: str, depth: int, invariant: str | None) -> tuple[Any, Any]:
    policy = PRESETS[policy_name]
    return tuple(  # type: ignore[return-value]
        ex.explore(policy, Monitor, 2, depth, invariant=invariant, reduce=reduce)
        for reduce in (True, False)
    )


@pytest.mark.parametrize(
    ("policy_name", "invariant"),
    [*BROKEN, *((p, None) for p in sorted({p for p, _ in BROKEN}))],
)
def test_reduced_search_finds_each_violation_at_the_same_depth(
    policy_name: str, invariant: str | None
) -> None:
    reduced, full = _both(policy_name, 3, invariant)
    assert full.violations, "the unreduced search finds nothing: the bound tests nothing"
    assert reduced.depth_reached == full.depth_reached
    if invariant is not None:
        assert {v.invariant for v in reduced.violations} == {invariant}
    else:
        assert reduced.violations
    # each side's counterexample is a real one: replayed, it breaks the invariant
    for result in (reduced, full):
        monitor = Monitor(PRESETS[policy_name], result.hello)
        found = {v.invariant for step in result.trace for v in monitor.feed(step)}
        found |= {v.invariant for v in monitor.finish(False)}
        assert {v.invariant for v in result.violations} <= found


@pytest.mark.parametrize(("policy_name", "depth", "pool"), [("g4", 3, 1)])
def test_reduced_search_reaches_the_same_keys_level_by_level(
    policy_name: str, depth: int, pool: int
) -> None:
    policy = PRESETS[policy_name]
    reduced, full = (
        ex.explore(policy, Monitor, 2, depth, pool=pool, reduce=reduce) for reduce in (True, False)
    )
    assert not reduced.violations and not full.violations
    assert reduced.per_depth == full.per_depth
    assert reduced.states == full.states
    assert reduced.slept > 0 and full.slept == 0
    assert reduced.transitions + reduced.slept == full.transitions
    assert reduced.transitions < full.transitions
