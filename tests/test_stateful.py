"""Hypothesis over the same model and the same checkers as the sweeps.

Three ways to use it, each one adaptable in your own pytest runs:

* ``@given(st.randoms(use_true_random=False))`` driving :func:`run_random`:
  every choice the simulator makes is a Hypothesis choice, so a failing run
  shrinks (python-ecosystem.md section 3.2: the mode that shrinks best);
* the same under a policy with a planted bug (``g2``): Hypothesis finds the
  timestamp violation and shrinks it to a handful of operations;
* a :class:`RuleBasedStateMachine` whose rules are protocol operations (steer
  and queue prompts, synthetic input, answers, compaction, interrupts,
  crashes, exact retries) against the reference model, with the invariant
  Monitor judging every step; its failing example prints as a step program.

Budgets are small (well under 30 s in all). Under ``CI=true`` Hypothesis loads
its ``ci`` profile (derandomized, no database); the settings below fix the
database to None everywhere, so no ``.hypothesis`` folder is written either.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inboxsim.model import Policy
from inboxsim.policy_file import load_policy
from inboxsim.search.lockstep import LockstepTarget
from inboxsim.search.shrink import size_of
from inboxsim.search.stateful import InboxMachine, hunt
from inboxsim.sim.run import RunOptions, RunResult, run_random
from inboxsim.targets.target import ModelTarget

OPTIONS = RunOptions(ops=30)
QUICK = settings(
    max_examples=25,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# --- 1. a property over whole simulated runs ---------------------------------------


@QUICK
@given(st.randoms(use_true_random=False))
def test_g4_runs_violate_nothing(rng: Any) -> None:
    result = run_random(rng, load_policy("g4"), OPTIONS)
    assert not result.violations, [v.message for v in result.violations]


# --- 2. Hypothesis finds and shrinks g2's planted bug ----------------------------------


def hypothesis_shrink(
    policy: str, invariant: str, options: RunOptions = OPTIONS, max_examples: int = 300
) -> RunResult | None:
    """Let Hypothesis find a run of ``policy`` whose first violation is
    ``invariant`` and shrink it; the shrunk run (Hypothesis replays the
    minimal example last), or None when none was found within the budget."""
    the_policy = load_policy(policy)
    failing: list[RunResult] = []

    @settings(
        max_examples=max_examples,
        deadline=None,
        database=None,
        derandomize=True,
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.randoms(use_true_random=False))
    def holds(rng: Any) -> None:
        result = run_random(rng, the_policy, options)
        if result.violations and result.violations[0].invariant == invariant:
            failing.append(result)
            raise AssertionError(result.violations[0].message)

    try:
        holds()
    except AssertionError:
        return failing[-1]
    return None


def test_hypothesis_finds_and_shrinks_the_g2_timestamp_violation() -> None:
    # A short safety phase: run_random always plays all ``ops`` workload
    # actions before the liveness phase, whatever Hypothesis shrinks.
    result = hypothesis_shrink("g2", "monotonic-visible-time", RunOptions(ops=10), max_examples=600)
    assert result is not None, "Hypothesis did not find g2's timestamp violation"
    assert result.violations[0].invariant == "monotonic-visible-time"
    size = size_of(result.trace.steps)
    assert size.operations <= 20, [s.request for s in result.trace.steps]


# --- 3. a rule-based state machine over the model and the Monitor ------------------------


# The machine lives in the package (inboxsim.search.stateful), so that the mutant
# benchmark drives adapters with the very same rules; here it runs the model.
class ModelMachineG4(InboxMachine):
    """The package's machine over the g4 model (a subclass, so that these
    settings stay the test's own)."""


ModelMachineG4.TestCase.settings = settings(
    max_examples=30,
    stateful_step_count=20,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TestInboxMachineG4 = ModelMachineG4.TestCase


class _G2Machine(InboxMachine):
    POLICY = "g2"


def test_state_machine_checkers_are_live() -> None:
    """The machine's rules, played by hand under g2, trip the timestamp
    invariant (found by Hypothesis too, but only in about half of 300-example
    budgets: too slow and too chancy for the suite)."""
    machine = _G2Machine()
    machine.create_sessions()
    machine.queue("s1", "u1", "a", False, None)  # waits: resume = false
    machine.steer("s1", None, "a", False, None, None)  # starts a call
    machine.answer(0, "stop", None)  # the steer is seen first, stamped later
    assert [v.invariant for v in machine.violations] == ["monotonic-visible-time"]
    with pytest.raises(AssertionError, match="monotonic-visible-time"):
        machine.no_violation()


# --- 4. the machine under a budget (sim.stateful.hunt) ------------------------------------


class _G5AgainstG4(InboxMachine):
    """The g5 model as the target, in lockstep with the g4 model: they differ
    (g5 departs from g4 on retries and the barrier), so a hunt must find it."""

    def target(self, policy: Policy) -> Any:
        return LockstepTarget(
            ModelTarget(policy, self.STEP_LIMIT), ModelTarget(load_policy("g5"), self.STEP_LIMIT)
        )


def test_hunt_finds_a_divergence_and_shrinks_it() -> None:
    # The budget is examples, not seconds: derandomized, the result is the same each time.
    found = hunt(_G5AgainstG4, detect_seconds=10_000, shrink_seconds=10, max_examples=300)
    assert found.found and found.first is not None and found.shrunk is not None
    assert found.first.kind == "divergence", found.first
    assert found.shrunk.kind == "divergence"
    assert 1 <= found.shrunk.operations <= found.first.operations
    assert found.examples_to_detect is not None and found.examples >= found.examples_to_detect
    assert found.to_dict()["shrunk"]["operations"] == found.shrunk.operations


def test_hunt_holds_on_a_correct_target() -> None:
    found = hunt(ModelMachineG4, detect_seconds=10_000, max_examples=10, steps=10)
    assert not found.found and found.examples >= 10 and found.failures == []


def test_hunt_stops_at_its_budget() -> None:
    ticks = iter(range(0, 1_000_000, 10))  # a clock that runs 10 s per reading
    found = hunt(ModelMachineG4, detect_seconds=5, clock=lambda: next(ticks))
    assert not found.found and found.examples == 0
