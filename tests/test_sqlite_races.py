"""The SQLite inbox serves groups for real (one thread and one connection per
request, pause points at every write transaction, boundary read and runner
lock, impls/sqlite_inbox/interleave.py), and its race bugs
(``conformance/races.py`` hunts them): the correct build is legal on every
scene; each race bug survives the same requests sent one at a time and dies
when they come together under pause points, on every seed tried. Three races
the correct build had are fixed, each pinned by one seeded schedule that kills
the bug it was (kept as a race mutant) and passes the fixed build.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from inboxsim.conformance.catalogue import ADAPTER, RACES
from inboxsim.conformance.mutants import check_mutant
from inboxsim.conformance.races import SCENE_OF, SCENES, hunt
from inboxsim.model import G4, Answer, Compact, Create, Interrupt, Prompt
from inboxsim.search.groups import GroupDriver
from inboxsim.targets.adapter import AdapterTarget


def test_every_race_bug_has_a_scene() -> None:
    assert set(SCENE_OF) == set(RACES)
    assert set(SCENE_OF.values()) == set(SCENES)


@pytest.mark.parametrize("scene", sorted(SCENES))
def test_the_correct_inbox_is_legal_on_every_scene(tmp_path: Path, scene: str) -> None:
    for seed in range(2):
        found = hunt(tmp_path / f"{scene}-{seed}", None, seed, "paused", 6, scene)
        assert not found.killed, found.why


def test_a_free_group_runs_without_a_schedule(tmp_path: Path) -> None:
    with AdapterTarget([sys.executable, str(ADAPTER)], tmp_path / "free", 4) as target:
        driver = GroupDriver(target, G4, 4)
        driver.run([Create(1, session="s1")])
        ops = [Prompt(5, session="s1", input=x, text="t") for x in ("a", "a", "b", None)]
        served, _ = target.group(ops, None)  # no schedule: threads run free
        assert [o is not None and o["ok"] for o in served.outcomes] == [True] * 4
        assert served.pauses == []


@pytest.mark.parametrize("mutant", sorted(RACES))
def test_a_race_bug_survives_sequential_requests_and_dies_in_groups(
    tmp_path: Path, mutant: str
) -> None:
    alone = hunt(tmp_path / "alone", mutant, 0, "sequential", 6)
    assert not alone.killed, alone.why
    for seed in range(2):
        found = hunt(tmp_path / f"paused-{seed}", mutant, seed, "paused")
        assert found.killed, f"{mutant} survived seed {seed}"
        assert found.why.startswith("not linearizable")


# The races of the correct build, fixed: (the bug it was, now a race mutant;
# a seed whose first round's schedule hits it).
FIXED = [
    # the boundary read the barrier and the batch apart and its promotions
    # trusted that read: a compaction admitted between read and promotion
    # was overtaken (now one snapshot read, and each promotion checks again)
    ("race-promote-trusts-batch", 7),
    # the call counter was bumped and read back unlocked across sessions
    ("race-call-counter-unlocked", 6),
    # a synthetic notice read the staged revert before its transaction
    ("race-synthetic-revert-read-apart", 0),
]


@pytest.mark.parametrize(("bug", "seed"), FIXED)
def test_a_fixed_race_fails_before_the_fix_and_passes_after(
    tmp_path: Path, bug: str, seed: int
) -> None:
    before = hunt(tmp_path / "before", bug, seed, "paused", rounds=1)
    assert before.killed and before.killed_at == 1, before
    after = hunt(tmp_path / "after", None, seed, "paused", rounds=1, scene=SCENE_OF[bug])
    assert not after.killed, after.why


@pytest.mark.parametrize("mutant", sorted(RACES))
def test_sequential_conformance_does_not_kill_a_race_bug(tmp_path: Path, mutant: str) -> None:
    """Seeded lockstep conformance, kills and failpoints included (the library
    too in ``benchmarks/bench_races.py --conformance``)."""
    result = check_mutant(mutant, scenarios=[], seeds=range(2), ops=60, workdir=tmp_path)
    assert result.seeds_run == 2
    assert not result.kills, [k.detail for k in result.kills]


def test_a_prompt_admitted_before_an_interrupt_and_woken_after_it_is_legal(
    tmp_path: Path,
) -> None:
    """Issue 19's false alarm (seeds 34, 37 and 41 of ``conformance --target
    sqlite --concurrency 4``): the inbox admits a prompt, then wakes the
    session (spec 3.6), two steps; an interrupt between them discards the
    wakes recorded before it, so this one, taken after it, starts a
    successor that promotes the prompt (spec 3.7). The model once took a
    prompt's wake with its admission and judged this group illegal."""
    with AdapterTarget([sys.executable, str(ADAPTER)], tmp_path / "wake", 4) as target:
        driver = GroupDriver(target, G4, 4)
        driver.run([Create(1, session="s1")])
        assert driver.run([Prompt(2, session="s1", input="a", text="a")]).legal  # a call opens
        assert driver.run([Compact(3, session="s1", input="c")]).legal
        step = driver.state.open_calls()[0].call
        assert driver.run([Answer(4, call=step, finish="stop")]).legal  # c's call opens
        assert [c.kind for c in driver.state.open_calls()] == ["compaction"]
        ops = [Prompt(5, session="s1", input="b", text="b"), Interrupt(5, session="s1")]
        # r0 starts and admits, r1 starts and interrupts, then r0 wakes.
        check = driver.run(ops, [0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0])
        points = [(p["request"], p["point"]) for p in check.pauses]
        assert points[:5] == [(0, "start"), (0, "begin"), (1, "start"), (1, "runner"), (1, "begin")]
        assert points.index((0, "runner")) > points.index((1, "runner"))
        assert check.legal, check.explain()
        inbox = ("admitted", "compaction_failed", "promoted")
        log = [e for e in driver.state.store.sessions["s1"].events if e.type in inbox]
        assert [f"{e.type}:{e.input}" for e in log][-3:] == [
            "admitted:b",
            "compaction_failed:c",  # the interrupt, between b's admission and its promotion
            "promoted:b",
        ]
        assert [c.context for c in driver.state.open_calls()] == [("a", "b")]
