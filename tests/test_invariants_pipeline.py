"""The invariants on traces the model produces through the real pipeline:
the default policy passes everything it is expected to over thousands of
random runs (crashes and failpoints included); the policies that depart
from an invariant are caught by a search over random runs; online and
offline checking agree.
"""

from __future__ import annotations

import pickle
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inboxsim.invariants import REGISTRY, Monitor, Violation, check_trace, expected
from inboxsim.model import G4, PRESETS, Ok, Policy
from inboxsim.trace.record import Step
from tests.invariant_driver import random_run

G4_RUNS = 3000
CHUNK = 500


def judge_run(
    policy: Policy,
    seed: int | random.Random,
    only_expected: bool = True,
    invariants: list[str] | None = None,
    n_ops: int = 40,
) -> tuple[list[Violation], Monitor]:
    run = random_run(policy, seed, n_ops)
    monitor = Monitor(policy, run.hello, only_expected, invariants)
    found = [v for step in run.steps for v in monitor.feed(step)]
    return found + monitor.finish(True), monitor


@pytest.mark.parametrize("start", range(0, G4_RUNS, CHUNK))
def test_g4_passes_every_expected_invariant(start: int) -> None:
    """Thousands of random g4 runs (kills, failpoints, forks, reverts,
    compactions, and a closing liveness phase) break nothing."""
    exercised: set[str] = set()
    for seed in range(start, start + CHUNK):
        n_ops = 20 + seed % 50
        found, monitor = judge_run(G4, seed, n_ops=n_ops)
        assert not found, f"seed {seed}: {found[0]}"
        exercised |= monitor.exercised
    # every invariant met a step where it could fail; those of concurrent groups
    # only meet one under --concurrency (tests/test_conformance_concurrency.py)
    assert exercised == {i for i in expected(G4) if "concurrency" not in REGISTRY[i].tags}


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_each_preset_passes_what_it_promises(name: str) -> None:
    policy = PRESETS[name]
    for seed in range(200):
        found, _ = judge_run(policy, seed)
        assert not found, f"{name} seed {seed}: {found[0]}"


def _departures() -> list[tuple[str, str]]:
    """(invariant, preset) for every preset an invariant is not expected under."""
    return [
        (inv.id, name)
        for inv in REGISTRY.values()
        for name, policy in sorted(PRESETS.items())
        if not inv.holds_under(policy)
    ]


def search(policy: Policy, invariant: str, budget: int = 400) -> tuple[int, Violation] | None:
    """The first seed whose random run violates ``invariant`` under ``policy``."""
    for seed in range(budget):
        found, _ = judge_run(policy, seed, only_expected=False, invariants=[invariant])
        if found:
            return seed, found[0]
    return None


@pytest.mark.parametrize(
    ("invariant", "preset"),
    # a sequential random run has no concurrent group: those are found under
    # --concurrency (tests/test_conformance_concurrency.py)
    [(i, p) for i, p in _departures() if "concurrency" not in REGISTRY[i].tags],
)
def test_a_search_finds_the_departure(invariant: str, preset: str) -> None:
    """Where a preset is not expected to keep an invariant, random runs of
    the model under that preset break it (and the violation says how)."""
    hit = search(PRESETS[preset], invariant)
    assert hit is not None, f"no run of {preset} broke {invariant}"
    seed, violation = hit
    assert violation.invariant == invariant and violation.steps


def test_g2_breaks_monotonic_visible_time() -> None:
    hit = search(PRESETS["g2"], "monotonic-visible-time")
    assert hit is not None
    assert "run backward" in hit[1].message


def test_c_breaks_the_shared_admission_order() -> None:
    hit = search(PRESETS["c"], "shared-admission-order")
    assert hit is not None
    assert "share one admission order" in hit[1].message


def test_the_departures_are_the_policy_fields() -> None:
    """The table of which presets depart from which invariants, as the
    policy fields dictate (presets indistinguishable from g4 depart from
    nothing)."""
    table: dict[str, set[str]] = {}
    for invariant, preset in _departures():
        table.setdefault(preset, set()).add(invariant)
    assert table == {
        "b": {"receipt-reflects-request"},
        "c": {"queue-fifo", "shared-admission-order"},
        "g2": {"monotonic-visible-time"},
        "g5": {
            "barrier-blocks-promotion",
            "concurrent-retry",
            "conflict-rejected",
            "retry-same-receipt",
        },
    }


def test_every_invariant_can_fire_through_the_pipeline_or_names_its_planted_bug() -> None:
    departing = {invariant for invariant, _ in _departures()}
    for inv in REGISTRY.values():
        assert inv.id in departing or len(inv.planted_bug.split()) >= 4, inv.id


class Online:
    """Feeds a monitor step by step while the run is being played."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.monitor: Monitor | None = None
        self.found: list[Violation] = []

    def __call__(self, step: Step) -> None:
        if self.monitor is None:
            assert isinstance(step.reply, Ok)
            self.monitor = Monitor(self.policy, step.reply.result, only_expected=False)
        self.found.extend(self.monitor.feed(step))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rng=st.randoms(use_true_random=False),
    name=st.sampled_from(sorted(PRESETS)),
    n_ops=st.integers(0, 60),
    liveness=st.booleans(),
)
def test_online_and_offline_verdicts_agree(
    rng: random.Random, name: str, n_ops: int, liveness: bool
) -> None:
    """The monitor fed while the run happens, and the whole stored trace
    checked afterwards (round-tripped through pickle), give the same
    violations, in the same order, for every invariant."""
    policy = PRESETS[name]
    online = Online(policy)
    run = random_run(policy, rng, n_ops, liveness=liveness, on_step=online)
    assert online.monitor is not None
    online_found = online.found + online.monitor.finish(liveness)
    stored: Any = pickle.loads(pickle.dumps(run.trace()))
    assert check_trace(stored, policy, liveness, only_expected=False) == online_found


def test_a_copied_monitor_judges_on_alone() -> None:
    """The explorer keeps a deep copy of the monitor per search node: a copy
    taken mid-run gives the same verdicts as the original, and neither
    disturbs the other."""
    import copy

    for seed in range(30):
        run = random_run(PRESETS["g2"], seed, 40)
        original = Monitor(G4, run.hello, only_expected=False)
        half = len(run.steps) // 2
        for step in run.steps[:half]:
            original.feed(step)
        clone = copy.deepcopy(original)
        rest = run.steps[half:]
        mine = [v for step in rest for v in original.feed(step)] + original.finish(True)
        theirs = [v for step in rest for v in clone.feed(step)] + clone.finish(True)
        assert mine == theirs
        assert original.exercised == clone.exercised and original.exercised is not clone.exercised
