"""Every race bug of the SQLite inbox (``conformance/mutants.RACES``) is
killed with a minimal repro file that ``inboxsim run FILE --adapter CMD``
replays: a paused hunt's first failing group (the schedule drawn by the hunt)
and the steps that led to it, shrunk (``conformance/races.write_repro``).
The file fails on the build with the bug (exit 1) and holds on the correct
build (exit 0). One seed per bug, one that kills early, keeps this fast; the
full matrix (seeds, sizes, seconds) is ``benchmarks/bench_races.py
--repros DIR``.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path

import pytest

from inboxsim.cli import main
from inboxsim.conformance.catalogue import RACES, mutant_command
from inboxsim.conformance.races import REPRO_SEEDS, write_repro


def test_every_race_bug_has_a_repro_seed() -> None:
    assert set(REPRO_SEEDS) == set(RACES)


@pytest.mark.parametrize("bug", sorted(RACES))
def test_a_race_bug_shrinks_to_a_file_that_run_replays(
    tmp_path: Path, bug: str, record_property: Callable[[str, object], None]
) -> None:
    seed, rounds = REPRO_SEEDS[bug]
    path = tmp_path / f"{bug}.toml"
    repro = write_repro(tmp_path / "work", bug, seed, path, rounds)
    assert repro is not None, f"seed {seed} no longer kills {bug}"
    (before, after), (sent, kept) = repro.steps, repro.requests
    record_property("shrunk", f"{before} steps / {sent} requests -> {after} / {kept}")
    assert after <= before and kept < sent, repro
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# not linearizable"), text[:200]  # the failure, explained
    buggy = shlex.join(mutant_command(bug)[0])
    correct = shlex.join(mutant_command(None)[0])
    assert main(["run", str(path), "--adapter", buggy]) == 1
    assert main(["run", str(path), "--adapter", correct]) == 0
