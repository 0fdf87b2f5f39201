"""Running a scenario against what breaks it (its ``breaker``) and saying where
it failed.

A breaker is a policy preset, a policy file or a planted bug (a mutant) of the
SQLite inbox (``impls/sqlite_inbox``). A policy runs on the model, in
process; a mutant runs the scenario straight on the SQLite adapter with the
bug switched on (no lockstep with the model: the scenario's own expectations
and the invariant checkers must catch it). A scenario *breaks at step N* when
its earliest failure (a failed expectation or a violated invariant) is
scenario step N. A protocol error is not a break: the bug must show as wrong
behaviour, not as a broken adapter.

``tests/test_breakers.py`` runs each library scenario against its own
breaker; ``benchmarks/scenario_matrix.py`` runs every scenario against every
breaker.
"""

from __future__ import annotations

import itertools
from pathlib import Path

from ..model import PRESETS, Policy
from ..scenarios.load import LoadedScenario, resolve_policy
from ..scenarios.runner import ScenarioResult, run_scenario
from ..targets.adapter import AdapterTarget
from ..targets.target import Target
from .catalogue import MUTANTS, mutant_command


def breaker_names() -> list[str]:
    """Every breaker: the presets, then the SQLite inbox's planted bugs."""

    return [*PRESETS, *MUTANTS]


def run_against(
    loaded: LoadedScenario, breaker: str, workdir: Path, timeout: float = 10.0
) -> ScenarioResult:
    """Run ``loaded`` against ``breaker``: the model under a preset, or the
    SQLite adapter with a planted bug (each run in a fresh folder under
    ``workdir``). Raises :class:`~inboxsim.targets.protocol.ProtocolError` when
    the adapter breaks the protocol."""
    if breaker in PRESETS:
        return run_scenario(loaded, PRESETS[breaker])
    if breaker.endswith(".toml"):  # a policy file, relative to the scenario file
        return run_scenario(loaded, resolve_policy(breaker, loaded.origin))

    argv, _ = mutant_command(breaker or None)  # "": the correct build (the control)
    counter = itertools.count()

    def factory(_policy: Policy, step_limit: int) -> Target:
        folder = workdir / f"{loaded.name}-{breaker}-{next(counter)}"
        return AdapterTarget(argv, folder, step_limit, timeout, name=f"sqlite[{breaker}]")

    return run_scenario(loaded, target_factory=factory)


def failing_step(result: ScenarioResult) -> int | None:
    """The earliest scenario step that failed; ``None`` when the run passed,
    or failed only as a whole (an expected violation that did not happen)."""
    steps = [f.step for f in result.failures if f.step is not None]
    return min(steps) if steps else None
