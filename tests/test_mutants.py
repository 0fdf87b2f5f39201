"""The planted bugs of the SQLite inbox and the kill check (``conformance/mutants.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from inboxsim.conformance.catalogue import ADAPTER, MUTANTS, library_planted_bugs, mutant_command
from inboxsim.conformance.detection import hypothesis_detection, seeded_detection
from inboxsim.conformance.matrix import matrix_document, render_matrix, summary_line
from inboxsim.conformance.mutants import (
    RESULT_FIELDS,
    CountingTarget,
    Kill,
    KillResult,
    check_mutant,
    repro_operations,
)
from inboxsim.model import Answer, Create, Hello, Prompt
from inboxsim.scenarios.load import library_key, load_library
from inboxsim.targets.target import ModelTarget

IMPL = ADAPTER.parent


LIBRARY = load_library()


def library(*names: str) -> list[object]:
    by_name = {s.scenario.name: s for s in LIBRARY}
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
    assert len(planted) > 50
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
    # the length of the detecting run: counted through the adapter, up to the detection
    assert result.first.operations is not None and result.first.operations >= 1


def test_a_mutant_is_killed_quickly_by_the_whole_library(tmp_path: Path) -> None:
    result = check_mutant("one-steer-per-boundary", first_only=True, workdir=tmp_path)
    assert result.killed and result.first is not None and result.first.by == "divergence"
    assert result.scenarios_run < len(LIBRARY)
    assert result.to_dict()["runs"] == result.scenarios_run


def test_the_correct_build_survives_the_library(tmp_path: Path) -> None:
    # The kill check on the correct build: the first scenario of each topic,
    # and a g5 one, which the g4 check skips. (The whole library against the
    # correct build, in lockstep: test_lockstep.)
    g4 = [s for s in LIBRARY[::-1] if s.scenario.policy == "g4"]
    sample = list({library_key(Path(s.origin)).split("/")[0]: s for s in g4}.values())
    sample += library("g5-first-admission-wins-prompt")
    result = check_mutant(None, sample, workdir=tmp_path)
    assert not result.kills, render_matrix([result]) + "\n" + str(result.kills)
    assert result.scenarios_run == len(sample) - 1 and len(sample) == 11
    assert "SURVIVED" in render_matrix([result])


# Every library scenario that names a planted bug as its breaker fails on it,
# at the step it names: tests/test_breakers.py.


def test_counting_target_counts_like_size_of() -> None:
    from inboxsim.policy_file import load_policy

    counted = CountingTarget(ModelTarget(load_policy("g4"), 4))
    counted.request(Hello(0, step_limit=4))
    counted.request(Create(1, session="s"))
    counted.request(Prompt(2, session="s", input="a", text="x"), "after_admit")
    counted.kill()
    counted.request(Answer(3, call="nope"))
    assert (counted.steps, counted.operations, counted.faults) == (5, 2, 2)


def test_the_results_document() -> None:
    killed = KillResult("queue-batch", [Kill("divergence", "seed 7", "pending differs", 2.5, 9)])
    killed.seeds_run = 8
    killed.shrunk_ops = 3
    scenario = KillResult("volatile-inbox", [Kill("invariant", "scenario seed-crash", "x", 0.5, 4)])
    scenario.scenarios_run = 2
    bad = KillResult("queue-as-steer", [Kill("protocol error", "seed 0", "no response", 1.0)])
    doc = matrix_document([killed, scenario, bad], seeds=8, ops=60)
    first, second, third = doc["mutants"]
    assert tuple(first)[: len(RESULT_FIELDS)] == RESULT_FIELDS
    assert (first["killed_by"], first["seed"], first["scenario"], first["runs"]) == (
        "divergence",
        7,
        None,
        8,
    )
    assert (first["operations"], first["shrunk_ops"]) == (9, 3)
    assert (second["killed_by"], second["scenario"], second["seed"]) == (
        "invariant",
        "seed-crash",
        None,
    )
    # a protocol error is reported, and does not kill
    assert third["killed_by"] == "none" and third["not_counted"] == [
        "protocol error: seed 0: no response"
    ]
    assert doc["survived"] == ["queue-as-steer"] and doc["exit_code"] == 1
    summary = doc["summary"]
    assert summary["killed_by"] == {"divergence": 1, "invariant": 1, "none": 1}
    assert (summary["median_seconds_to_detect"], summary["worst_seconds_to_detect"]) == (1.5, 2.5)
    assert (summary["median_operations"], summary["median_shrunk_ops"]) == (6.5, 3)
    line = summary_line(doc)
    assert line.startswith("2/3 killed") and "median shrunk length 3 ops" in line
    table = render_matrix([killed, bad])
    assert "| 9 | 3 |" in table and "SURVIVED" in table and "NOT COUNTED" in table


# The budgets below are far above what detection takes: both sides are
# deterministic (seeds; derandomized Hypothesis), so a budget only bounds a
# broken run, it is never what the assertions measure.


def test_seeded_detection_kills_a_mutant_without_the_library() -> None:
    found = seeded_detection("volatile-inbox", seconds=600, ops=40)
    assert found.killed, found
    assert found.killed_by == "divergence" and found.seed is not None
    assert found.runs == found.seed + 1 and found.operations is not None
    again = seeded_detection("volatile-inbox", seconds=600, ops=40)
    assert (again.seed, again.operations, again.detail) == (
        found.seed,
        found.operations,
        found.detail,
    )


def test_hypothesis_detection_kills_and_shrinks_a_mutant() -> None:
    found = hypothesis_detection("volatile-inbox", seconds=600, shrink_seconds=5, steps=40)
    assert found.killed, found
    assert found.operations is not None and found.shrunk_operations is not None
    assert 1 <= found.shrunk_operations <= found.operations
    doc = found.to_dict()
    assert doc["side"] == "hypothesis" and doc["killed"] and doc["runs"] >= 1


def test_a_detection_is_shrunk_through_the_adapter(tmp_path: Path) -> None:
    # barrier-blocks-promotion trips the invariant at its 7th operation; the
    # admission the mutant forgets to log is visible from the first prompt on.
    result = check_mutant(
        "promote-without-admission",
        library("barrier-blocks-promotion"),
        first_only=True,
        shrink=True,
        shrink_seconds=120,
        workdir=tmp_path,
    )
    assert result.first is not None and result.first.operations is not None
    assert result.shrunk_ops is not None and result.shrink_seconds is not None
    assert 1 <= result.shrunk_ops < result.first.operations
    assert result.to_dict()["shrunk_ops"] == result.shrunk_ops


def test_repro_operations_counts_like_size_of() -> None:
    text = """
name = "x"
[[step]]
op = "create"
session = "s1"
[[step]]
op = "prompt"
session = "s1"
text = "a"
[[step]]
kill = true
[[step]]
op = "resume"
session = "s1"
"""
    assert repro_operations(text) == 2
