"""The scenario library in lockstep: :func:`run_scenarios_lockstep` runs each
scenario with a fresh :class:`.lockstep.LockstepTarget` and reports a
:class:`LockstepResult` per scenario (a divergence, or the scenario's own
failures)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..invariants import Monitor
from ..invariants.monitor import MonitorFactory
from ..scenarios.runner import run_scenario
from .divergence import Divergence
from .lockstep import LockstepTarget


@dataclass
class LockstepResult:
    """What a lockstep drive found: a divergence, or none."""

    name: str
    steps: int
    divergence: Divergence | None = None
    failures: tuple[str, ...] = ()  # the scenario's expectation failures / violations
    not_testable: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return self.divergence is None and not self.failures


def run_scenarios_lockstep(
    scenarios: Sequence[Any],
    make_model: Any,
    make_target: Any,
    monitor: MonitorFactory | None = Monitor,
    policy: Any = None,
) -> list[LockstepResult]:
    """Run each scenario with a fresh :class:`LockstepTarget` (``make_model(policy,
    step_limit)``, ``make_target(policy, step_limit)``), under its file's policy
    or ``policy``; a divergence is caught and reported, the scenario's own
    failures too."""

    out = []
    for loaded in scenarios:
        started = time.perf_counter()
        holder: list[LockstepTarget] = []

        def factory(
            policy: Any, step_limit: int, holder: list[LockstepTarget] = holder
        ) -> LockstepTarget:
            lock = LockstepTarget(make_model(policy, step_limit), make_target(policy, step_limit))
            holder.append(lock)
            return lock

        name = loaded.scenario.name
        try:
            result = run_scenario(loaded, policy, target_factory=factory, monitor=monitor)
        except Divergence as div:
            if holder:
                holder[0].close()
            out.append(
                LockstepResult(
                    name,
                    div.step + 1,
                    div,
                    (),
                    dict(holder[0].not_testable) if holder else {},
                    time.perf_counter() - started,
                )
            )
            continue
        lock = holder[0]
        out.append(
            LockstepResult(
                name,
                lock.steps,
                None,
                tuple(str(f) for f in result.failures),
                dict(lock.not_testable),
                time.perf_counter() - started,
            )
        )
    return out


__all__ = ["LockstepResult", "run_scenarios_lockstep"]
