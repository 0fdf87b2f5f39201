"""Shrinking a failing seed on the model: its decision list (:mod:`.decisions`)
cut down by the engine's passes, keeping an edit when the replayed run's
*first* violation is still the same invariant, then the rendered scenario's
steps (:func:`~.scenarios.minimize_steps`).

The passes, each round: delete the decisions of whole steps (then the
workload-action cap follows the new best run); delete chunks of decisions,
of decreasing size; zero chunks; lower single values; for a violation in
the liveness phase, fewer workload actions. Edits are judged by the order
(operations + faults, steps, decisions length, decisions), so every kept
edit is strictly simpler and the loop ends. The result is written with
:func:`~inboxsim.scenarios.render.write_scenario`, steps up to the violation
only, so the file is a regression test by itself.
"""

from __future__ import annotations

import time
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ...invariants import Monitor
from ...model import Policy
from ...scenarios.render import write_scenario
from ...sim import checkers
from ...sim.rng import replayer
from ...sim.run import RunOptions, RunResult, run, run_seed
from ...trace.record import Step
from .decisions import Marking
from .engine import (
    Candidate,
    Judged,
    Key,
    Shrinker,
    delete_chunks,
    delete_segments,
    lower_setting,
    lower_values,
    minimize,
    zero_chunks,
)
from .scenarios import minimize_steps, scenario_violation, verify_scenario
from .size import Size, first_violation, size_of, upto_violation

DEFAULT_MAX_RUNS = 20_000
DEFAULT_TIME_LIMIT = 60.0
DEFAULT_OPTIONS = RunOptions()


@dataclass(frozen=True, slots=True)
class ShrinkResult:
    invariant: str
    message: str
    original: Size
    final: Size  # the written scenario
    decided: Size  # the decisions' replay, before the step-level phase
    original_decisions: int
    final_decisions: int
    decisions: tuple[int, ...]  # replays to a run of size ``decided``
    steps: tuple[Step, ...]  # the minimal trace, up to the violation
    runs: int
    seconds: float
    text: str  # the scenario file
    verified: bool | None  # the written scenario, run, violates the invariant (None: not checked)
    ops: int  # the decisions replay (run_decisions) with RunOptions(ops=ops)
    also: tuple[str, ...] = ()  # other invariants the same last step violates

    def document(self) -> dict[str, Any]:
        return {
            "invariant": self.invariant,
            "also_violated": list(self.also),
            "replay_ops": self.ops,
            "message": self.message,
            "original": {**self.original.to_dict(), "decisions": self.original_decisions},
            "final": self.final.to_dict(),
            "decisions": {**self.decided.to_dict(), "decisions": self.final_decisions},
            "runs": self.runs,
            "seconds": round(self.seconds, 3),
            "verified": self.verified,
        }


def _actions_needed(result: RunResult, options: RunOptions) -> int:
    """Workload actions the run took before stopping in its safety phase, or
    ``options.ops`` when it got to the liveness phase."""
    steps = result.trace.steps
    if not steps or steps[-1].phase != "safety" or not result.violations:
        return options.ops
    restarts = sum(1 for s in steps if s.decision == "restart")
    return max(1, len(steps) - 1 - restarts)


def judging_only(
    only: tuple[str, ...], only_expected: bool = False
) -> Callable[[Policy, dict[str, Any]], Any]:
    """A run's monitor (``run_seed(..., monitor=)``) that judges only these
    invariants."""

    def build(policy: Policy, hello: dict[str, Any]) -> Any:
        return Monitor(policy, hello, only_expected, invariants=only)

    return build


def shrink_run(
    result: RunResult,
    policy: Policy,
    options: RunOptions,
    *,
    invariant: str | None = None,
    max_runs: int = DEFAULT_MAX_RUNS,
    time_limit: float = DEFAULT_TIME_LIMIT,
    name: str | None = None,
    source: str | None = None,
    verify: bool = True,
    expect: bool = False,
    steps_phase: bool = True,
    only: tuple[str, ...] | None = None,
    **run_kw: Any,
) -> ShrinkResult:
    """Shrink a failing run (any run: a seed's, a replayed one, one Hypothesis
    drove) to a minimal decision list whose first violation is ``invariant``
    (default: the run's own first one), then the rendered scenario's steps
    (:func:`~.scenarios.minimize_steps`; ``steps_phase=False`` skips it).

    The file is written as a regression test: without ``expect_violation``,
    so ``inboxsim run`` on it fails while the bug is there and passes once
    it is fixed. ``expect=True`` writes ``expect_violation`` instead (a
    document of a design's known counterexample: it passes while the
    violation is there).

    ``only``: judge only these invariants (the default checkers), so that an
    invariant another one usually precedes can be the run's first violation
    and be shrunk on its own."""
    started = time.perf_counter()
    first = first_violation(result)
    if first is None:
        raise ValueError("the run violated no invariant: nothing to shrink")
    target = invariant or first.invariant
    best: dict[Candidate, RunResult] = {}

    def key_of(r: RunResult) -> Key:
        size = size_of(r.trace.steps)
        return (size.operations + size.faults, size.steps, len(r.decisions), r.decisions)

    # Candidates run with at most as many workload actions as the best run so
    # far needed (a run that needs more cannot be simpler); a run that stopped
    # at its violation before that cap is the same run under any larger cap,
    # so the result still replays under ``options``.
    cap = [_actions_needed(result, options)]
    marks: dict[Candidate, tuple[int, ...]] = {}
    custom_checkers = run_kw.pop("checkers_module", None)
    build_monitor, _ = checkers.monitor_for(custom_checkers, options.only_expected)
    if only is not None and custom_checkers is None:
        build_monitor = judging_only(only, options.only_expected)

    def test(cand: Candidate) -> Judged | None:
        ch = replayer(cand)
        at: list[int] = []

        def monitor(policy: Policy, hello: dict[str, Any]) -> Any:
            return Marking(build_monitor(policy, hello), ch, at)

        opts = replace(options, ops=cap[0], liveness_bound=options.bound())
        r = run(policy, opts, ch, monitor=monitor, **run_kw)
        v = first_violation(r)
        if v is None or v.invariant != target:
            return None
        best[r.decisions] = r
        marks[r.decisions] = tuple(at)
        return key_of(r), r.decisions

    def whole_steps(s: Shrinker) -> bool:
        before = s.cur
        improved = delete_segments(s, marks)
        if s.cur != before:
            cap[0] = _actions_needed(best[s.cur], options)
        return improved

    def fewer_actions(s: Shrinker) -> bool:
        """A violation in the liveness phase: try fewer workload actions (the
        safety phase always runs all of them), smallest first."""
        steps = best[s.cur].trace.steps
        if not steps or steps[-1].phase != "liveness" or cap[0] <= 1:
            return False
        return lower_setting(s, cap, (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64))

    start = result
    if first.invariant != target:
        raise ValueError(f"the run's first violation is {first.invariant}, not {target}")
    best[start.decisions] = start
    test(start.decisions)  # its step marks
    search = Shrinker(test, start.decisions, key_of(start), max_runs, time_limit)
    minimize(search, (whole_steps, delete_chunks, zero_chunks, lower_values, fewer_actions))
    final = best[search.cur]
    violation = first_violation(final)
    assert violation is not None  # every kept candidate failed
    steps = upto_violation(final.trace.steps, violation)
    decided = size_of(steps)
    message = violation.message

    def render(steps: Sequence[Step], expect_violation: str | None) -> str:
        return write_scenario(
            steps,
            policy,
            name=name or f"shrunk-{policy.name}-{target}",
            source=source or "inboxsim shrink: a minimal failing run",
            expect_violation=expect_violation,
        )

    runs = search.runs
    # The scenario runner judges with the default checkers on the model: the
    # step phase applies only when the run was judged the same way.
    same_judge = run_kw.get("target") is None and custom_checkers is None
    if steps_phase and same_judge and not options.only_expected and not search.spent():
        # The decision list cannot drop a step whose decisions also steer
        # later draws (a session index, a family pick); the scenario's steps
        # can. The judge: running the scenario still violates ``target``.
        left = max(0.0, search.deadline - time.perf_counter())
        table = tomllib.loads(render(steps, None))
        found = minimize_steps(table, policy, target, "<shrink>", max(1, max_runs - runs), left)
        runs += found.runs
        v = scenario_violation(found.result, target) if found.result is not None else None
        if v is not None:
            better = upto_violation(found.result.trace.steps, v)
            new = size_of(better)
            if (new.operations + new.faults, new.steps) < (
                decided.operations + decided.faults,
                decided.steps,
            ):
                steps, message = better, v.message
    text = render(steps, target if expect else None)
    verified = verify_scenario(text, target, policy) if verify else None
    return ShrinkResult(
        invariant=target,
        message=message,
        original=size_of(upto_violation(result.trace.steps, first)),
        final=size_of(steps),
        decided=decided,
        original_decisions=len(result.decisions),
        final_decisions=len(final.decisions),
        decisions=final.decisions,
        steps=steps,
        runs=runs,
        seconds=time.perf_counter() - started,
        text=text,
        verified=verified,
        ops=cap[0] if steps and steps[-1].phase == "liveness" else options.ops,
        also=tuple(sorted({v.invariant for v in final.violations} - {target})),
    )


def shrink_seed(
    seed: int, policy: Policy, options: RunOptions = DEFAULT_OPTIONS, **kw: Any
) -> ShrinkResult | None:
    """Run ``seed`` and shrink it; None when it violates nothing."""
    result = run_seed(seed, policy, options)
    if not result.violations:
        return None
    kw.setdefault("name", f"shrunk-{policy.name}-seed-{seed}")
    kw.setdefault("source", f"inboxsim shrink {seed} --policy {policy.name} --ops {options.ops}")
    return shrink_run(result, policy, options, **kw)


def shrink_alone(
    seed: int, policy: Policy, options: RunOptions, invariant: str, **kw: Any
) -> ShrinkResult | None:
    """Run ``seed`` judging ``invariant`` alone, and shrink it judging it alone
    (:func:`shrink_run` with ``only``): an invariant that another one usually
    precedes gets a counterexample of its own. None when the seed does not
    violate it."""
    result = run_seed(seed, policy, options, monitor=judging_only((invariant,)))
    if not result.violations or result.violations[0].invariant != invariant:
        return None
    return shrink_run(result, policy, options, invariant=invariant, only=(invariant,), **kw)


__all__ = [
    "DEFAULT_OPTIONS",
    "ShrinkResult",
    "judging_only",
    "shrink_alone",
    "shrink_run",
    "shrink_seed",
]
