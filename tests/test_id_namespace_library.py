"""The library scenarios of the one ID namespace (issue 16) against the SQLite
inbox's planted bug ``ids-freed-for-everyone`` (the old rule: an ID whose
lifecycle ended is free for any session and kind).

Each scenario passes on the model (``test_scenarios``) and on the correct
SQLite inbox (``test_mutants::test_the_correct_build_survives_the_library``),
and fails on the planted bug it names as its breaker (``test_breakers``).
Here: the minimal repro that ``inboxsim conformance`` shrinks through the
buggy adapter names what went wrong, the conflict the model answers, and it
fails on that adapter alone while the model passes it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from inboxsim.conformance.catalogue import mutant_command
from inboxsim.scenarios.load import load_library
from inboxsim.search.repro import shrink_conformance_scenario

BUG = "ids-freed-for-everyone"

# scenario -> what its shrunk repro's last step must expect (the model's answer)
NAMED = {
    "id-ended-barrier-as-prompt": 'expect_error = "prompt_conflict"',
    "id-ended-synthetic-as-prompt-under-revert": 'expect_error = "prompt_conflict"',
    "id-ended-barrier-in-other-session": 'expect_error = "compaction_conflict"',
    "id-ended-prompt-in-fork": 'expect_error = "synthetic_conflict"',
    "id-ended-readmitted-in-own-session-and-kind": 'expect_error = "compaction_conflict"',
    "id-staged-boundary-reused": 'expect_error = "prompt_conflict"',
    # no conflict to name: the buggy generator hands out a client's ID, so
    # the receipt is not a new generated ID (gen:2) as the model's is
    "id-generated-never-collide": 'expect_receipt = { input = "gen:',
}


def test_every_scenario_of_the_rule_plants_the_bug() -> None:
    planted = {
        s.scenario.name: s.scenario.breaker.name
        for s in load_library()
        if s.scenario.breaker is not None
    }
    assert {name: planted.get(name) for name in NAMED} == dict.fromkeys(NAMED, BUG)


@pytest.mark.parametrize("name", sorted(NAMED))
def test_the_shrunk_repro_names_the_conflict(tmp_path: Path, name: str) -> None:
    (loaded,) = [s for s in load_library() if s.scenario.name == name]
    argv, _ = mutant_command(BUG)
    repro = shrink_conformance_scenario(loaded, argv, "g4", max_runs=60, workdir=tmp_path)
    assert repro is not None, f"{name} holds on {BUG}"
    assert repro.key.startswith("diverged:"), repro.key
    assert repro.verified and repro.standalone and repro.model_passes
    assert repro.steps <= repro.original_steps
    last_step = repro.text.rsplit("[[step]]", 1)[1]
    assert NAMED[name] in last_step, repro.text
