"""The planted bugs of the SQLite inbox and the kill check (``sim/mutants.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from inboxsim.scenarios.load import load_library
from inboxsim.sim.mutants import (
    ADAPTER,
    MUTANTS,
    check_mutant,
    library_planted_bugs,
    mutant_command,
    render_matrix,
)

IMPL = ADAPTER.parent


def library(*names: str) -> list[object]:
    by_name = {s.scenario.name: s for s in load_library()}
    return [by_name[n] for n in names]


def test_the_catalogue() -> None:
    assert len(MUTANTS) >= 20
    source = "\n".join(p.read_text() for p in IMPL.glob("*.py"))
    for name, mutant in MUTANTS.items():
        assert mutant.name == name and mutant.description and mutant.bug_class
        assert f'"{name}"' in source or f"'{name}'" in source, f"{name} is not planted"
    argv, env = mutant_command("queue-batch")
    assert argv[-2:] == ["--mutant", "queue-batch"] and env == {"INBOXSIM_MUTANT": "queue-batch"}
    assert mutant_command(None)[1] == {}
    with pytest.raises(KeyError):
        mutant_command("no-such-bug")


def test_every_planted_bug_of_the_library_is_a_mutant() -> None:
    planted = library_planted_bugs()
    assert planted
    assert {s: b for s, b in planted.items() if b not in MUTANTS} == {}


# Representative mutants and the library scenario written to catch each:
# a durability bug (at a kill), a retry bug, a promotion bug, a fork bug
# (all divergences), and one only the invariants see (events are not compared).
REPRESENTATIVE = [
    ("volatile-inbox", "crash-keeps-inbox", "divergence"),
    ("retry-ignores-metadata", "metadata-retry-identity", "divergence"),
    ("queue-batch", "queue-fifo", "divergence"),
    ("fork-cutoff-inclusive", "fork-before-message", "divergence"),
    ("promote-without-admission", "seed-send", "invariant"),
]


@pytest.mark.parametrize(("mutant", "scenario", "by"), REPRESENTATIVE)
def test_a_representative_mutant_is_killed(
    tmp_path: Path, mutant: str, scenario: str, by: str
) -> None:
    result = check_mutant(mutant, library(scenario), workdir=tmp_path)
    assert result.killed, render_matrix([result])
    assert result.first is not None
    assert (result.first.by, result.first.where) == (by, f"scenario {scenario}")
    assert not result.bad
    assert result.first.seconds < 10


def test_a_mutant_is_killed_quickly_by_the_whole_library(tmp_path: Path) -> None:
    result = check_mutant("one-steer-per-boundary", first_only=True, workdir=tmp_path)
    assert result.killed and result.first is not None and result.first.by == "divergence"
    assert result.first.seconds < 15
    assert result.scenarios_run < len(load_library())


def test_the_correct_build_survives_the_library(tmp_path: Path) -> None:
    result = check_mutant(None, workdir=tmp_path)
    assert not result.kills, render_matrix([result]) + "\n" + str(result.kills)
    assert result.scenarios_run == len(load_library())
    assert "SURVIVED" in render_matrix([result])
