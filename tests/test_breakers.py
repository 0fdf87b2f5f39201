"""Every library scenario can fail, and fails where it says.

Each scenario names its ``breaker``: a policy preset or policy file (run here
on the model under it, in process) or a planted bug of the SQLite inbox (run here
straight on the SQLite adapter with that mutant switched on: no lockstep with
the model, so the scenario's own expectations and the invariant checkers must
catch it; the scenario must first pass on the correct build). The test checks
that the scenario's earliest failure is the step
the file names, by behaviour (a failed expectation or a violated invariant),
never by a protocol error. ``benchmarks/scenario_matrix.py`` runs every
scenario against every breaker (``docs/mutants.md``, "Every scenario can fail").
"""

from __future__ import annotations

from pathlib import Path

import pytest

from inboxsim.conformance.breakers import failing_step, run_against
from inboxsim.conformance.catalogue import MUTANTS
from inboxsim.model import PRESETS
from inboxsim.scenarios.load import LoadedScenario, load_library
from inboxsim.scenarios.schema import Breaker

LIBRARY = load_library()


def _breaker(loaded: LoadedScenario) -> Breaker:
    breaker = loaded.scenario.breaker
    assert breaker is not None, f"{loaded.name} names no breaker"
    return breaker


def test_every_breaker_is_a_policy_or_a_planted_bug() -> None:
    unknown = {
        s.name: _breaker(s).name
        for s in LIBRARY
        if _breaker(s).name not in PRESETS
        and _breaker(s).name not in MUTANTS
        and not (_breaker(s).preset and (Path(s.origin).parent / _breaker(s).name).is_file())
    }
    assert unknown == {}


# Planted bugs that no scenario names as its breaker (another bug breaks each
# scenario they break first), with a scenario each breaks and the step.
ALSO_BREAK = {
    "omitted-id-reuses-last": ("omitted-id-distinct", 3),
    "tool-on-final-continues": ("final-step-forces-stop", 5),
}


def test_every_planted_bug_breaks_some_scenario() -> None:
    # Each mutant of the catalogue is a scenario's breaker or in ALSO_BREAK: a
    # bug the SQLite inbox plants is a bug the library shows it catches.
    named = {_breaker(s).name for s in LIBRARY}
    assert sorted(set(MUTANTS) - named - set(ALSO_BREAK)) == []
    assert sorted(named & set(ALSO_BREAK)) == []


@pytest.mark.parametrize("mutant", sorted(ALSO_BREAK))
def test_a_planted_bug_no_scenario_names_breaks_one(mutant: str, tmp_path: Path) -> None:
    name, step = ALSO_BREAK[mutant]
    loaded = next(s for s in LIBRARY if s.name == name)
    assert failing_step(run_against(loaded, mutant, tmp_path)) == step


@pytest.mark.parametrize("loaded", LIBRARY, ids=[s.name for s in LIBRARY])
def test_scenario_fails_on_its_breaker_at_its_step(loaded: LoadedScenario, tmp_path: Path) -> None:
    breaker = _breaker(loaded)
    if not breaker.preset:  # the control: the correct SQLite build passes it
        control = run_against(loaded, "", tmp_path)
        assert control.failures == (), f"{loaded.name} fails on the correct SQLite inbox"
    result = run_against(loaded, breaker.name, tmp_path)
    assert result.failures, f"{loaded.name} holds on {breaker.name}"
    assert failing_step(result) == breaker.step, "\n".join(map(str, result.failures))
    first = [f for f in result.failures if f.step == breaker.step]
    assert not any(f.message.startswith("protocol error") for f in first)
