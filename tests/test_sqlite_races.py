"""The SQLite inbox serves groups for real (one thread and one connection per
request, pause points at every write transaction and runner lock,
impls/sqlite_inbox/interleave.py), and its race bugs: the correct build is legal
on every seeded group; each race mutant passes when the same requests come
one at a time and is caught when they come together under pause points.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import pytest

from inboxsim.conformance.mutants import ADAPTER, RACES
from inboxsim.model import G4, Answer, Create, Prompt, Synthetic
from inboxsim.search.groups import GroupCheck, GroupDriver
from inboxsim.targets.adapter import AdapterTarget


def race(now: int, rng: random.Random) -> list[Any]:
    """Admissions racing on two sessions: exact retries of one ID, fresh IDs,
    omitted IDs, a synthetic notice."""
    ops: list[Any] = []
    for _ in range(rng.randrange(2, 5)):
        ident = rng.choice(["a", "b", None, f"u{now}"])
        kind = Synthetic if rng.random() < 0.25 else Prompt
        ops.append(kind(now, session=rng.choice(["s1", "s1", "s2"]), input=ident, text="t"))
    return ops


def run(
    tmp: Path, seed: int, mutant: str | None, together: bool, groups: int = 5
) -> GroupCheck | None:
    """The first group that is not legal, or None."""
    rng = random.Random(seed)
    command = [sys.executable, str(ADAPTER)] + (["--mutant", mutant] if mutant else [])
    with AdapterTarget(command, tmp / f"{seed}-{mutant}-{together}", 4) as target:
        driver = GroupDriver(target, G4, 4)
        for sid in ("s1", "s2"):
            assert driver.run([Create(1, session=sid)]).legal
        for k in range(groups):
            now = 10 + k
            ops = race(now, rng)
            ops += [
                Answer(now, call=c.call, finish=rng.choice(["stop", "tool"]))
                for c in driver.state.open_calls()
            ]
            schedule = [rng.randrange(1000) for _ in range(60)]
            steps = [ops] if together else [[op] for op in ops]
            for step in steps:
                check = driver.run(step, schedule)
                if not check.legal:
                    return check
    return None


@pytest.mark.parametrize("seed", range(4))
def test_the_correct_inbox_is_legal_under_scheduled_groups(tmp_path: Path, seed: int) -> None:
    check = run(tmp_path, seed, None, together=True)
    assert check is None, check.explain()


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
    for seed in range(3):
        check = run(tmp_path, seed, mutant, together=False, groups=3)
        assert check is None, check.explain()
    caught = next(
        (c for seed in range(12) if (c := run(tmp_path, seed, mutant, together=True)) is not None),
        None,
    )
    assert caught is not None, f"{mutant} not caught in 12 seeds"
    assert "not linearizable" in caught.explain()
