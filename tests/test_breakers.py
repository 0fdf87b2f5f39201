"""Every library scenario can fail, and fails where it says.

Each scenario names its ``breaker``: a policy preset (run here on the model
under that preset, in process) or a planted bug of the SQLite inbox (run here
straight on the SQLite adapter with that mutant switched on: no lockstep with
the model, so the scenario's own expectations and the invariant checkers must
catch it). The test checks that the scenario's earliest failure is the step
the file names, by behaviour (a failed expectation or a violated invariant),
never by a protocol error. ``benchmarks/scenario_matrix.py`` runs every
scenario against every breaker (``docs/coverage.md``, "Breakers").
"""

from __future__ import annotations

from pathlib import Path

import pytest

from inboxsim.model import PRESETS
from inboxsim.scenarios.breakers import failing_step, run_against
from inboxsim.scenarios.load import LoadedScenario, load_library
from inboxsim.scenarios.schema import Breaker
from inboxsim.sim.mutants import MUTANTS

LIBRARY = load_library()


def _breaker(loaded: LoadedScenario) -> Breaker:
    breaker = loaded.scenario.breaker
    assert breaker is not None, f"{loaded.name} names no breaker"
    return breaker


def test_every_breaker_is_a_preset_or_a_planted_bug() -> None:
    unknown = {
        s.name: _breaker(s).name
        for s in LIBRARY
        if _breaker(s).name not in PRESETS and _breaker(s).name not in MUTANTS
    }
    assert unknown == {}


def _unused_every_planted_bug_breaks_some_scenario() -> None:
    # Each mutant of the catalogue is some library scenario's breaker: a bug the
    # library plants is a bug the library shows it catches.
    named = {_breaker(s).name for s in LIBRARY}
    assert sorted(set(MUTANTS) - named) == []


@pytest.mark.parametrize("loaded", LIBRARY, ids=[s.name for s in LIBRARY])
def test_scenario_fails_on_its_breaker_at_its_step(loaded: LoadedScenario, tmp_path: Path) -> None:
    breaker = _breaker(loaded)
    result = run_against(loaded, breaker.name, tmp_path)
    assert result.failures, f"{loaded.name} holds on {breaker.name}"
    assert failing_step(result) == breaker.step, "\n".join(map(str, result.failures))
    first = [f for f in result.failures if f.step == breaker.step]
    assert not any(f.message.startswith("protocol error") for f in first)
