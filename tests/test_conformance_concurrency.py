"""Conformance with concurrent groups (``--concurrency N``): the correct
SQLite inbox holds, its check-then-insert race is named by invariant 22
(concurrent-retry), and a target that answers differently when a failing
seed runs again is reported as nondeterministic."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from inboxsim.conformance import seeds
from inboxsim.conformance.catalogue import ADAPTER
from inboxsim.conformance.check import conformance
from inboxsim.conformance.command_lines import target_command
from inboxsim.conformance.report import Item
from inboxsim.conformance.seeds import SeedOutcome, SeedRun, seed_item
from inboxsim.model import G4
from inboxsim.search.lockstep import LockstepTarget


def test_the_correct_sqlite_inbox_holds_under_concurrent_groups(tmp_path: Path) -> None:
    argv = target_command(None, "sqlite", None, 10.0)[0]
    report = conformance(
        argv, "g4", 3, library=False, workdir=tmp_path, target_name="sqlite", concurrency=4
    )
    assert report.passed, "\n".join(report.lines())
    seeds = report.of("seed")
    assert [i.verdict for i in seeds] == ["held"] * 3
    assert all("--concurrency 4" in i.repro for i in seeds)
    assert {i.item: i.verdict for i in report.of("invariant")}["concurrent-retry"] == "held"


def test_the_check_then_insert_race_breaks_concurrent_retry(tmp_path: Path) -> None:
    argv = [sys.executable, str(ADAPTER), "--mutant", "race-retry-check-then-insert"]
    outcome = seed_item(SeedRun(argv, G4, "g4", 40, 10.0, "race", concurrency=4), 0, tmp_path)
    assert outcome.item.verdict == "violated"
    assert "concurrent-retry" in {inv for inv, _ in outcome.violations}
    # Sequentially the same seed's requests never race: the bug stays hidden.
    alone = seed_item(SeedRun(argv, G4, "g4", 40, 10.0, "race"), 0, tmp_path / "alone")
    assert alone.item.verdict == "held"


@pytest.mark.parametrize("differ", [True, False])
def test_a_failing_seed_runs_again_and_a_target_that_answers_otherwise_is_nondeterministic(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, differ: bool
) -> None:
    runs: list[int] = []

    def once(*args: Any) -> SeedOutcome:
        runs.append(1)
        replies = ['{"ok": true}', f'{{"n": {len(runs) if differ else 0}}}']
        item = Item("seed", "7", "diverged", "the model said otherwise", "repro")
        return SeedOutcome(item, [], set(), {}, replies=replies)

    monkeypatch.setattr(seeds, "_seed_once", once)
    outcome = seed_item(SeedRun(["adapter"], G4, "g4", 40, 10.0, "t", concurrency=2), 7, tmp_path)
    assert len(runs) == 2
    if differ:
        assert outcome.item.verdict == "nondeterministic"
        assert outcome.item.failed
        assert "reply 1 was" in outcome.item.detail
        assert outcome.item.failure["first"]["replies"] != outcome.item.failure["again"]["replies"]
    else:
        assert outcome.item.verdict == "diverged"


# Issue 19's false alarms on the correct inbox, each a seed whose groups hit it
# under pause points: an interrupt between a prompt's admission and its wake
# (34, 37, 41), the doorbell that wake leaves (151), an ID admitted again
# within a group after a revert its first prompt committed (69). Then, of the
# 1,000-seed run: legal orders that put the target's runner events elsewhere
# than its log did (313, 545: a compaction run within an execution or after
# it, the step count it left unseen until a later group; 380, 725: an execution an
# exact retry's wake started before another's admission, judged in the
# admission's step; 526: an admission before an interrupt, judged after it);
# an earlier member shown with the row of an ID the group admits again only
# later (402); a failed request's step showing the runner's promotion in a
# busy group (445); an interrupt's step whose successor opened a call, the
# step count then reset (450, 625); an interrupt's kept doorbell after its
# one wake started the successor (526).
# These seeds' workloads were drawn before the workload put kills inside
# groups (which draws one more decision per group where the target serves
# them): they run with group kills off, so each still replays its group.
@pytest.mark.parametrize("seed", [34, 37, 41, 69, 151, 313, 380, 402, 445, 450, 526, 545, 625, 725])
def test_the_correct_sqlite_inbox_holds_the_seeds_that_were_false_alarms(
    tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(LockstepTarget, "group_kills", False)
    argv = target_command(None, "sqlite", None, 10.0)[0]
    outcome = seed_item(SeedRun(argv, G4, "g4", 40, 10.0, "sqlite", concurrency=4), seed, tmp_path)
    assert outcome.item.verdict == "held", outcome.item.detail
