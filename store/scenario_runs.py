"""Scenario runs (``inboxsim run --db``) in the trace store.

A scenario run is stored as any run is (a ``runs`` row with its steps, events,
violations and probe hits, ``runs.scenario`` naming it, no seed and no
decisions), plus one ``scenario_runs`` row: the file, whether the scenario
passed, the expectations it checked and those that failed, and every failure.
Its ``runs.verdict`` is the invariants' verdict; whether the *scenario* passed
(a scenario may expect a violation) is ``scenario_runs.passed``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..model import Policy
from ..trace.encode import StepText, step_text
from ..trace.probes import ProbeFold
from ..trace.record import Trace
from .columns import BatchColumns
from .store import Store

# The keys of a step that state an expectation (expect_session only says
# which session the state expectations are about).
EXPECT_KEYS = (
    "expect_error",
    "expect_ok",
    "expect_result",
    "expect_receipt",
    "expect_same_receipt_as",
    "expect_pending",
    "expect_transcript",
    "expect_calls",
    "expect_events",
)


def expectations(scenario: Any, steps_run: int) -> int:
    """How many expectations a run checked: those of the steps it reached,
    and the scenario's ``expect_violation``."""
    count = sum(
        1
        for spec in scenario.step[:steps_run]
        for key in EXPECT_KEYS
        if getattr(spec, key) is not None
    )
    return count + (scenario.expect_violation is not None)


@dataclass(frozen=True, slots=True)
class _AsRun:
    """A scenario result in the shape :meth:`BatchColumns.add_run` reads."""

    policy: str
    trace: Trace
    trace_hash: str
    texts: tuple[StepText, ...]
    violations: tuple[Any, ...]
    probes: dict[str, int]
    exercised: tuple[str, ...]
    seconds: float
    scenario: str
    seed: None = None
    swarm: dict[str, Any] | None = None
    decisions: tuple[int, ...] = ()
    liveness: str = "not run"  # a scenario has no liveness phase

    @property
    def options(self) -> dict[str, Any]:
        return dict(self.trace.header.options or {})

    @property
    def verdict(self) -> str:
        return "violated" if self.violations else "held"


def _probes(trace: Trace) -> dict[str, int]:
    fold = ProbeFold()
    for step in trace.steps:
        fold.feed(step)
    return dict(fold.hits)


def write_scenarios(store: Store, runs: Sequence[tuple[Any, Any, Policy]]) -> tuple[int, int]:
    """Write ``(loaded scenario, ScenarioResult, policy)`` triples as one batch
    (one transaction); returns the (first run_id, sweep_id) they got."""
    first, sweep_id = store.next_ids()
    cols = BatchColumns()
    table = cols.columns["scenario_runs"]
    for offset, (loaded, result, policy) in enumerate(runs):
        run_id = first + offset
        trace = result.trace
        as_run = _AsRun(
            policy=result.policy,
            trace=trace,
            trace_hash=result.trace_hash,
            texts=tuple(step_text(s) for s in trace.steps),
            violations=tuple(result.violations),
            probes=_probes(trace),
            exercised=tuple(result.exercised),
            seconds=result.seconds,
            scenario=result.name,
            swarm={},
        )
        cols.add_run(run_id, sweep_id, as_run, policy)
        failures = [
            {
                "step": f.step,
                "message": f.message,
                "invariant": f.invariant,
                "violation": f.violation,
            }
            for f in result.failures
        ]
        for key, value in (
            ("run_id", run_id),
            ("scenario", result.name),
            ("file", result.origin),
            ("passed", result.passed),
            ("expectations", expectations(loaded.scenario, result.steps_run)),
            ("expectations_failed", sum(1 for f in result.failures if not f.violation)),
            ("failures", json.dumps(failures, sort_keys=True, separators=(",", ":"))),
        ):
            table[key].append(value)
    store.write(cols.tables())
    return first, sweep_id
