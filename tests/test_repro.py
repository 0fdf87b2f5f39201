"""Shrinking through an adapter (search/shrink.py's shrink_through, search/repro.py):
a conformance failure against a planted bug becomes a short scenario file
that fails alone on the buggy adapter and passes on the correct one."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from inboxsim.cli import main
from inboxsim.conformance.catalogue import mutant_command
from inboxsim.conformance.check import conformance
from inboxsim.model import G4
from inboxsim.scenarios.load import load_scenario
from inboxsim.search.divergence import Divergence
from inboxsim.search.repro import shrink_conformance, with_model_expectations
from inboxsim.search.shrink import failure_key

MUTANT = "interrupt-clears-inbox"
MODEL_ADAPTER = f"{sys.executable} -m inboxsim.targets.model_adapter --no-fsync"
SEED = 1  # diverges against MUTANT at an interrupt, 25 steps in (ops 40)


def test_failure_keys() -> None:
    div = Divergence(4, {"op": "prompt", "session": "s1"}, "pending s1", [], [])
    assert failure_key(div) == "diverged:prompt:pending"
    kill = Divergence(2, None, "transcript s2", [], [])
    assert failure_key(kill) == "diverged:kill:transcript"
    retry = Divergence(3, {"op": "prompt"}, "retry receipt (an exact retry ...)", {}, {})
    assert failure_key(retry) == "diverged:prompt:retry"

    class V:
        invariant = "durability"

    assert failure_key(V()) == "violated:durability"


def test_seed_shrinks_through_the_mutant_adapter(tmp_path: Path) -> None:
    argv, _ = mutant_command(MUTANT)
    # max_runs is the binding budget (not the clock), so the result is the same every time
    repro = shrink_conformance(
        SEED, argv, G4, ops=40, max_runs=30, time_limit=3600, out=tmp_path / "repros"
    )
    assert repro is not None
    assert repro.key == "diverged:interrupt:pending"
    assert repro.steps <= 6 < repro.original_steps, repro.text
    assert repro.verified and repro.standalone and repro.model_passes, repro.document()
    assert repro.path is not None and Path(repro.path).read_text() == repro.text
    loaded = load_scenario(repro.path)
    assert loaded.scenario.expect_violation is None  # a regression test: passes when correct
    assert loaded.scenario.step[-1].op == "interrupt"
    assert loaded.scenario.step[-1].expect_pending is not None
    # `inboxsim run FILE --adapter CMD`: fails on the mutant, passes on the clean build
    assert main(["run", repro.path, "--adapter", shlex.join(argv)]) == 1
    assert main(["run", repro.path, "--adapter", shlex.join(mutant_command(None)[0])]) == 0
    assert main(["run", repro.path]) == 0  # and on the model


def test_a_seed_that_holds_has_no_repro() -> None:
    assert shrink_conformance(0, mutant_command(None)[0], "g4", ops=10) is None


def test_expectations_only_for_divergences() -> None:
    text = 'name = "x"\nsource = "y"\npolicy = "g4"\nstep_limit = 4\n\n'
    text += '[[step]]\nop = "create"\nsession = "s1"\n'
    assert with_model_expectations(text, "violated:durability", "", G4) == text
    with_reply = with_model_expectations(text, "diverged:create:reply", "reply", G4)
    assert with_reply.endswith("expect_ok = true\n")


def test_conformance_writes_repro_files(tmp_path: Path) -> None:
    argv, _ = mutant_command(MUTANT)
    report = conformance(
        argv,
        "g4",
        1,
        ops=40,
        seed_start=SEED,
        library=False,
        shrink=1,
        repro_dir=tmp_path,
        shrink_seconds=600,
        shrink_runs=8,
    )
    (item,) = report.of("seed")
    assert item.verdict == "diverged"
    assert item.repro_file == str(tmp_path / f"seed-{SEED}.toml")
    assert Path(item.repro_file).exists()
    text = "\n".join(report.lines())
    assert f"minimal repro scenario: {item.repro_file}" in text
    assert "inboxsim run " + item.repro_file in text
    assert item.to_dict()["repro_file"] == item.repro_file


@pytest.mark.parametrize("bad", [["--shrink", "-1"], ["--shrink-seconds", "0"]])
def test_shrink_options_checked(bad: list[str]) -> None:
    assert main(["conformance", "--target", "sqlite", *bad]) == 2


def test_seeds_in_worker_processes_give_the_same_verdicts() -> None:
    one = conformance(MODEL_ADAPTER, "g4", 3, ops=15, library=False, jobs=1)
    two = conformance(MODEL_ADAPTER, "g4", 3, ops=15, library=False, jobs=2)
    rows = [(i.kind, i.item, i.verdict, i.detail) for i in one.items]
    assert rows == [(i.kind, i.item, i.verdict, i.detail) for i in two.items]
    assert [i.item for i in two.of("seed")] == ["0", "1", "2"] and two.passed
