"""Invariants that a planted bug of the SQLite inbox breaks, judged on the
real implementation's own trace (no lockstep: the checkers alone must see
it), next to the correct build, which breaks none of them."""

from __future__ import annotations

from itertools import count
from pathlib import Path

import pytest

from inboxsim.conformance.catalogue import mutant_command
from inboxsim.model import Policy
from inboxsim.scenarios.load import load_library
from inboxsim.scenarios.runner import run_scenario
from inboxsim.targets.adapter import AdapterTarget

# (mutant, library scenario, exactly the invariants its trace breaks). What a
# kill step shows is the restart's: the dead execution and call do not make
# the restart's work read as a second execution or a mid-step promotion.
BROKEN = [
    ("restart-resumes-pending", "crash-keeps-inbox", {"replay-starts-nothing"}),
    ("follow-up-drain-forced", "coalesce-steers", {"wake-follow-up", "step-allowance"}),
]


def _run(tmp_path: Path, mutant: str | None, scenario: str) -> set[str]:
    loaded = next(s for s in load_library() if s.scenario.name == scenario)
    argv, _ = mutant_command(mutant)
    folders = count()

    def target(policy: Policy, step_limit: int) -> AdapterTarget:
        folder = tmp_path / (mutant or "correct") / f"d{next(folders)}"
        return AdapterTarget(argv, folder, step_limit, timeout=20.0)

    result = run_scenario(loaded, target_factory=target)
    assert result.invariants_checked
    return {v.invariant for v in result.violations}


@pytest.mark.parametrize(("mutant", "scenario", "broken"), BROKEN)
def test_the_planted_bug_breaks_the_invariant(
    tmp_path: Path, mutant: str, scenario: str, broken: set[str]
) -> None:
    assert _run(tmp_path, mutant, scenario) == broken
    assert _run(tmp_path, None, scenario) == set()
