"""A failing concurrent conformance seed is shrunk to a group scenario file
(``conformance/group_repro.py``): the seed run again through a taped
lockstep target, its steps up to the failing group written as a file,
shrunk on the shrink engine while ``inboxsim run FILE --adapter CMD`` still
judges it not linearizable. The file fails on the build with the race bug
and holds on the correct build.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from inboxsim.cli import main
from inboxsim.conformance.catalogue import mutant_command
from inboxsim.conformance.check import conformance
from inboxsim.scenarios.load import load_text

BUG = "race-retry-check-then-insert"


def test_a_race_bug_found_by_concurrent_conformance_shrinks_to_a_group_file(
    tmp_path: Path,
) -> None:
    buggy = mutant_command(BUG)[0]
    report = conformance(
        buggy,
        seeds=3,
        seed_start=3,  # seed 5 fails at its 28th step
        library=False,
        concurrency=4,
        shrink=1,
        repro_dir=tmp_path / "repros",
        workdir=tmp_path / "work",
        shrink_seconds=120.0,
    )
    failed = [i for i in report.items if i.kind == "seed" and i.verdict != "held"]
    assert failed, "the race bug survived three concurrent seeds"
    first = failed[0]
    assert first.repro_file is not None, first.detail
    assert "not shrunk" not in first.detail
    repro = first.failure["repro"]
    assert repro["standalone"] and repro["model_passes"], repro
    text = Path(first.repro_file).read_text(encoding="utf-8")
    assert text.startswith("# not linearizable"), text[:200]
    steps = load_text(text, first.repro_file).scenario.step
    assert any(s.op == "group" for s in steps)
    assert len(steps) <= 4 < repro["original_steps"], (len(steps), repro["original_steps"])
    assert main(["run", first.repro_file, "--adapter", shlex.join(buggy)]) == 1
    assert main(["run", first.repro_file, "--adapter", shlex.join(mutant_command(None)[0])]) == 0
