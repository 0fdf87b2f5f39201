"""The explorer's partial-order reduction (sleep sets, search/explore.py) loses
nothing within the bound.

Two kinds of evidence, on bounds small enough for CI
(``benchmarks/reduction_soundness.py`` runs the same comparison deeper):

- **The independence definition holds where the search uses it.** Two
  actions the search takes as independent at a state (``commutes``: both
  eligible, on different sessions; neither reveals a violation there nor
  changes the monitor's global ``facts``; where one is a failpoint variant,
  the other's session quiet before and after it) commute modulo the merge
  key: both orders reach one key, and each action is as clean after the
  other as it was before it. Checked for every such pair at every key of
  depth 0 and 1 (pool 1).
- **Reduced and unreduced searches agree.** With two sessions (one session
  has nothing to reduce), for every preset that breaks an invariant, and
  for each invariant it breaks: the same violation at the same shortest
  depth; unfiltered, the same first depth; where nothing is found, the same
  distinct keys level by level, with fewer judged transitions.
"""

from __future__ import annotations

from typing import Any

import pytest

from inboxsim.invariants import Monitor
from inboxsim.model import PRESETS
from inboxsim.search import explore as ex
from inboxsim.search import reduction, world
from tests.explore_helpers import BROKEN, diamonds, every_key

STEP_LIMIT = world.DEFAULT_STEP_LIMIT


@pytest.mark.parametrize("policy_name", ["g4", "g2", "c", "b", "g5"])
def test_independent_actions_commute_modulo_the_key(policy_name: str) -> None:
    """Every pair the search takes as independent commutes modulo the key:
    at every key of depth 0 and 1 (pool 1), failpoint variants among them.
    ``benchmarks/reduction_soundness.py`` checks every key of depth 0 to 2
    (pool 1)."""
    checked = crashing = 0
    for state, monitor, length, at in every_key(policy_name, 2, 1, pool=1):
        pairs, crashes = diamonds(state, monitor, length, at + 1, 2, pool=1)
        checked += pairs
        crashing += crashes
    assert checked >= 200, "too few independent pairs: the check tests little"
    assert crashing >= 20, "too few pairs with a failpoint variant: that case is untested"


def test_independence_excludes_what_it_must() -> None:
    """Kills and reuses of ended IDs are never independent, nor one
    session's actions of each other; a failpoint variant commutes only with
    an action whose session is quiet before and after it; of two
    independent actions exactly one sleeps in the other's child, unless
    their ranks are equal (then neither)."""
    prompt = world.Action("prompt(s1,s1.i1,steer)", None, None, "s1", "s1.i1", "prompt_steer")
    other = world.Action("prompt(s2,s2.i1,queue)", None, None, "s2", "s2.i1", "prompt_queue")
    assert reduction.commutes(prompt, False, other, False)
    assert reduction.commutes(other, False, prompt, False)
    assert reduction.sleeps_in(other, False, prompt, False) != reduction.sleeps_in(
        prompt, False, other, False
    )
    resume = world.Action("resume(s1)", None, None, "s1", None, "resume")
    assert not reduction.commutes(prompt, True, resume, True)
    kill = world.Action("crash", None, None, None, None, "kill")
    reuse = world.Action("reuse(s2,s1.i1,prompt)", None, None, "s2", "s1.i1", world.REUSE)
    for a in (kill, reuse):
        assert not reduction.commutes(prompt, True, a, True)
        assert not reduction.commutes(a, True, prompt, True)
    label = "prompt(s2,s2.i1,steer)@after_admit"
    crash = world.Action(label, None, "after_admit", "s2", "s2.i1", "failpoints")
    assert reduction.commutes(prompt, True, crash, False)
    assert reduction.commutes(crash, False, prompt, True)
    assert not reduction.commutes(prompt, False, crash, True)
    assert not reduction.commutes(crash, True, prompt, False)
    mirror = world.Action("resume(s2)", None, None, "s2", None, "resume")
    assert reduction.commutes(resume, False, mirror, False)
    assert not reduction.sleeps_in(resume, False, mirror, False)
    assert not reduction.sleeps_in(mirror, False, resume, False)


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
