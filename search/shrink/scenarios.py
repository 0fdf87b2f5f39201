"""Shrinking a scenario file: its steps deleted (chunks, then any two
together), answers made plain, ``crash_at``, ``now`` and optional fields
dropped, as long as running the scenario (expectations stripped) still
violates the same invariant; the minimal scenario's trace is written as a
scenario file (:func:`~inboxsim.scenarios.render.write_scenario`). The seed
shrinker (:mod:`.seeds`) ends with the same step phase (:func:`minimize_steps`)."""

from __future__ import annotations

import time
import tomllib
from dataclasses import dataclass
from typing import Any

from ...model import Policy
from ...scenarios.load import load_scenario, load_text, resolve_policy
from ...scenarios.render import write_scenario
from ...scenarios.runner import run_scenario
from .engine import Candidate, Judged, Key, Shrinker, delete_chunks, delete_pairs, minimize
from .size import Size, size_of, upto_violation
from .steps import build_scenario, drop_fields, plain_answers, step_candidate

DEFAULT_TIME_LIMIT = 60.0


@dataclass(frozen=True, slots=True)
class ScenarioShrink:
    invariant: str | None  # None: the scenario violates no invariant
    original_steps: int
    final_steps: int
    original: Size | None
    final: Size | None
    runs: int
    seconds: float
    text: str | None
    passed: bool  # the original scenario passed
    verified: bool | None

    def document(self) -> dict[str, Any]:
        return {
            "invariant": self.invariant,
            "passed": self.passed,
            "original": {
                **(self.original.to_dict() if self.original else {}),
                "scenario_steps": self.original_steps,
            },
            "final": {
                **(self.final.to_dict() if self.final else {}),
                "scenario_steps": self.final_steps,
            },
            "runs": self.runs,
            "seconds": round(self.seconds, 3),
            "verified": self.verified,
        }


def scenario_violation(result: Any, invariant: str | None) -> Any | None:
    """A scenario run's first violation of ``invariant`` (None: of any)."""
    for v in result.violations:
        if invariant is None or v.invariant == invariant:
            return v
    return None


def verify_scenario(text: str, invariant: str, policy: Policy | None = None) -> bool:
    """The scenario ``text`` loads, and running it violates ``invariant``
    (and no expectation of it fails). Holds for both forms: a regression
    test (that fails, on ``invariant`` only) and an ``expect_violation``
    document (that passes)."""

    loaded = load_text(text, "<shrunk>")
    result = run_scenario(loaded, policy)
    # Another invariant broken by the same step is a failure of the file too
    # (a scenario expects one violation), but the counterexample stands.
    return not [f for f in result.failures if f.invariant is None] and any(
        v.invariant == invariant for v in result.violations
    )


def shrink_scenario_file(
    path: str,
    policy: Policy | None = None,
    *,
    max_runs: int = 5_000,
    time_limit: float = DEFAULT_TIME_LIMIT,
    expect: bool = False,
) -> ScenarioShrink:
    """Shrink a scenario file that violates an invariant (or that expects
    one): delete steps, simplify answers, drop crash_at, now and optional
    fields, while the scenario (expectations stripped) still violates the
    same invariant. ``expect``: write ``expect_violation`` (see
    :func:`~.seeds.shrink_run`)."""

    started = time.perf_counter()
    loaded = load_scenario(path)
    chosen = policy or resolve_policy(loaded.scenario.policy, loaded.origin)
    first_run = run_scenario(loaded, chosen)
    target = loaded.scenario.expect_violation
    if target is None or scenario_violation(first_run, target) is None:
        v = scenario_violation(first_run, None)
        target = v.invariant if v is not None else None
    n_steps = len(loaded.scenario.step)
    if target is None:
        return ScenarioShrink(
            None,
            n_steps,
            n_steps,
            None,
            None,
            1,
            time.perf_counter() - started,
            None,
            first_run.passed,
            None,
        )
    with open(path, "rb") as handle:
        table = tomllib.load(handle)
    found = minimize_steps(table, chosen, target, loaded.origin, max_runs, time_limit)
    final_run = found.result if found.result is not None else first_run
    violation = scenario_violation(final_run, target)
    steps = upto_violation(final_run.trace.steps, violation)
    text = write_scenario(
        steps,
        chosen,
        name=f"{loaded.scenario.name}-min",
        source=f"inboxsim shrink {path}: minimal steps violating {target}",
        step_limit=loaded.scenario.step_limit,
        expect_violation=target if expect else None,
    )
    verified = verify_scenario(text, target, chosen)
    return ScenarioShrink(
        target,
        n_steps,
        found.steps,
        size_of(upto_violation(first_run.trace.steps, scenario_violation(first_run, target))),
        size_of(steps),
        found.runs + 1,
        time.perf_counter() - started,
        text,
        first_run.passed,
        verified,
    )


@dataclass(frozen=True, slots=True)
class Minimized:
    """What :func:`minimize_steps` found."""

    steps: int  # scenario steps of the minimal candidate
    result: Any  # its ScenarioResult (None: the start did not fail, nothing kept)
    runs: int


def minimize_steps(
    table: dict[str, Any],
    policy: Policy,
    target: str,
    origin: str,
    max_runs: int,
    time_limit: float,
) -> Minimized:
    """The step-level passes over a parsed scenario table: delete chunks of
    steps, then any two steps together (a ``create`` and the one request
    that uses its session are rarely neighbours), simplify each answer's
    ``finish`` to ``stop`` and drop ``crash_at``, ``now`` and optional fields,
    as long as running the candidate (expectations stripped) still violates
    ``target``. Every kept edit is strictly smaller under the order
    (operations + faults, steps, fields, text), so the loop ends."""

    header = {
        k: v
        for k, v in table.items()
        if k not in ("step", "expect_violation", "breaker", "carries")
    }
    steps0 = step_candidate(
        {k: v for k, v in s.items() if not k.startswith("expect_")} for s in table["step"]
    )
    results: dict[Candidate, Any] = {}

    def key_of(cand: Candidate, r: Any) -> Key:
        size = size_of(r.trace.steps)
        return (size.operations + size.faults, len(cand), sum(len(s) for s in cand), repr(cand))

    def test(cand: Candidate) -> Judged | None:
        sc = build_scenario(header, cand, origin)
        if sc is None:
            return None
        r = run_scenario(sc, policy)
        if scenario_violation(r, target) is None:
            return None
        results[cand] = r
        return key_of(cand, r), cand

    start = test(steps0)
    if start is None:  # the stripped expectations mattered; shrink nothing
        return Minimized(len(steps0), None, 1)
    search = Shrinker(test, steps0, start[0], max_runs, time_limit, runs=1)
    minimize(search, (delete_chunks, delete_pairs, plain_answers, drop_fields))
    return Minimized(len(search.cur), results[search.cur], search.runs)


__all__ = [
    "Minimized",
    "ScenarioShrink",
    "minimize_steps",
    "scenario_violation",
    "shrink_scenario_file",
    "verify_scenario",
]
