"""A kill mid-group on the SQLite inbox: one member of a group carries a
failpoint; the thread serving it (and the runner work it does) reaches it
and the process dies with the other members in flight; the harness counts
every member unknown, restarts the inbox and the linearizability search
judges what survived (``search/groups.py``). The correct build holds at
every failpoint under several schedules; a build that loses admitted rows
across a crash (the ``volatile-inbox`` mutant) is caught.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from inboxsim.cli import main
from inboxsim.conformance.catalogue import mutant_command
from inboxsim.conformance.command_lines import target_command
from inboxsim.conformance.seeds import SeedRun, seed_item
from inboxsim.model import G4, Answer, Create, Op, Prompt, Synthetic
from inboxsim.search.groups import GroupCheck, GroupDriver
from inboxsim.targets.adapter import AdapterTarget

POINTS = ("after_admit", "mid_promotion", "after_promotion")


def _killed_group(folder: Path, mutant: str | None, point: str, seed: int) -> GroupCheck:
    """s1 with an open call and two steers pending, s2 with a queued prompt
    acknowledged before the group; then a group: the answer that reaches
    s1's boundary, a prompt on each session; one member carries ``point``
    (the answer for a promotion's failpoints, a prompt for after_admit)."""
    rng = random.Random(f"{point}/{seed}")
    with AdapterTarget(mutant_command(mutant)[0], folder, 4) as target:
        driver = GroupDriver(target, G4, 4)
        for op in [
            Create(1, session="s1"),
            Create(1, session="s2"),
            Prompt(2, session="s1", input="p1", text="go"),
            Prompt(3, session="s1", input="st1", text="s"),
            Synthetic(3, session="s1", input="st2", text="s"),
            Prompt(3, session="s2", input="q1", text="q", delivery="queue", resume=False),
        ]:
            assert driver.run([op]).legal
        call = driver.state.runs["s1"].call.call
        ops: list[Op] = [
            Answer(5, call=call, finish=rng.choice(["stop", "tool"])),
            Prompt(5, session="s1", input="n1", text="n"),
            Prompt(5, session="s2", input="n2", text="n"),
        ]
        crash: list[str | None] = [None, None, None]
        crash[0 if point != "after_admit" else rng.choice([1, 2])] = point
        schedule = [rng.randrange(1000) for _ in range(40)]
        return driver.run(ops, schedule, crash)


@pytest.mark.parametrize("point", POINTS)
def test_the_correct_inbox_holds_a_kill_mid_group(tmp_path: Path, point: str) -> None:
    killed = 0
    for seed in range(3):
        check = _killed_group(tmp_path / f"{seed}", None, point, seed)
        assert check.legal, check.explain()
        killed += check.group.killed
    assert killed, f"no schedule reached {point}: nothing was tested"


def test_a_build_that_loses_admitted_rows_across_a_crash_is_caught(tmp_path: Path) -> None:
    check = _killed_group(tmp_path, "volatile-inbox", "after_admit", 0)
    assert check.group.killed
    assert not check.legal
    # the steers acknowledged before the group, gone after the restart
    assert "model [st1, st2, n1], target []" in check.explain()


def test_conformance_kills_mid_group_and_the_correct_inbox_holds(tmp_path: Path) -> None:
    """Seed 23 of ``conformance --target sqlite --concurrency 4``: its one
    kill is inside a group (a prompt's runner dies at mid_promotion with
    another prompt in flight); every member came back unknown, and each is
    a step whose reply nobody saw, then the kill's own step, then the
    restart. The correct inbox holds."""
    argv = target_command(None, "sqlite", None, 10.0)[0]
    outcome = seed_item(
        SeedRun(argv, G4, "g4", 40, 10.0, "sqlite", concurrency=4, group_kills=True), 23, tmp_path
    )
    assert outcome.item.verdict == "held", outcome.item.detail
    assert "1 kills (1 mid-group)" in outcome.item.detail


@pytest.mark.parametrize("seed", [23, 69])
def test_conformance_catches_a_lost_inbox_at_a_kill_mid_group(tmp_path: Path, seed: int) -> None:
    """The same seeds (their first kill inside a group) against the
    ``volatile-inbox`` build: the rows admitted before the kill, gone after
    the restart, are named at the group's steps."""
    argv = mutant_command("volatile-inbox")[0]
    outcome = seed_item(
        SeedRun(argv, G4, "g4", 40, 10.0, "volatile", concurrency=4, group_kills=True),
        seed,
        tmp_path,
    )
    assert outcome.item.verdict == "violated", outcome.item.detail
    found = {inv for inv, _ in outcome.violations}
    assert found & {"durability", "replay-matches-views", "admission-projects-row"}, found


@pytest.mark.parametrize("flag", [None, "--no-group-kills"])
def test_conformance_sends_kills_mid_group_unless_told_not_to(
    capsys: pytest.CaptureFixture[str], flag: str | None
) -> None:
    """``conformance --concurrency N`` kills inside groups by default (seed 23's
    one kill is mid-group); ``--no-group-kills`` sends the groups whole, and
    a seed's repro command says so."""
    argv = ["conformance", "--target", "sqlite", "--concurrency", "4", "--no-library"]
    argv += ["--seed-start", "23", "--seeds", "1", "--shrink", "0", "--json"]
    assert main(argv + ([flag] if flag else [])) == 0
    (seed,) = [i for i in json.loads(capsys.readouterr().out)["items"] if i["kind"] == "seed"]
    assert seed["verdict"] == "held", seed["detail"]
    assert ("(0 mid-group)" if flag else "1 kills (1 mid-group)") in seed["detail"]
    assert ("--no-group-kills" in seed["repro"]) == bool(flag)
