"""Shrunk results pinned: every shrink driver (a seed on the model, a seed
judging one invariant alone as the design study does, a scenario file, a
seed and a library scenario through an adapter) gives the same minimal
scenario, decision list and number of candidate runs as before the shrink
engine (``search/shrink/engine.py``) was split out of one 1,061-line module.

A change to a pass, to the order of the passes or to a driver's key moves
these pins: if it is deliberate, say why in ``CHANGELOG.md`` and re-pin
(``python tests/test_shrink_pinned.py`` prints the values).

Every budget here binds in runs, never in time (the time limits are an
hour), so the pins do not depend on the machine's load.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from inboxsim.conformance.catalogue import mutant_command
from inboxsim.designs import study
from inboxsim.invariants import Monitor
from inboxsim.model import PRESETS, Policy
from inboxsim.policy_file import load_policy
from inboxsim.scenarios.load import load_library
from inboxsim.scenarios.render import write_scenario
from inboxsim.search.repro import Repro, shrink_conformance, shrink_conformance_scenario
from inboxsim.search.shrink import shrink_run, shrink_scenario_file, shrink_seed
from inboxsim.sim.run import RunOptions, run_seed

LIBRARY = Path(__file__).resolve().parent.parent / "scenarios" / "library"
HOUR = 3600.0


def _digest(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def _seed(policy: str, seed: int, ops: int, **kw: Any) -> dict[str, Any]:
    result = shrink_seed(seed, load_policy(policy), RunOptions(ops=ops), time_limit=HOUR, **kw)
    assert result is not None
    return {
        "invariant": result.invariant,
        "runs": result.runs,
        "final": str(result.final),
        "decided": str(result.decided),
        "decisions": len(result.decisions),
        "ops": result.ops,
        "also": list(result.also),
        "digest": _digest(result.text, result.decisions),
    }


def _alone(policy: str, seed: int, invariant: str, max_runs: int) -> dict[str, Any]:
    """As the design study shrinks (designs/study.py): the seed rerun judging
    ``invariant`` alone, shrunk judging it alone, written as a document."""
    the_policy, options = load_policy(policy), RunOptions(ops=100)

    def alone(p: Policy, hello: dict[str, Any]) -> Any:
        return Monitor(p, hello, invariants=(invariant,))

    started = run_seed(seed, the_policy, options, monitor=alone)
    result = shrink_run(
        started,
        the_policy,
        options,
        invariant=invariant,
        only=(invariant,),
        max_runs=max_runs,
        time_limit=HOUR,
        expect=True,
    )
    return {
        "runs": result.runs,
        "final": str(result.final),
        "verified": result.verified,
        "digest": _digest(result.text, result.decisions),
    }


def _design(policy: str, seed: int, invariant: str, ops: int) -> dict[str, Any]:
    """The design study's own shrink (``designs/study.py``)."""
    task = study.PolicyTask(policy, PRESETS[policy], 1, ops, 1, 0)
    found = study.shrink_one(task, invariant, seed)
    return {
        "operations": found["operations"],
        "verified": found["verified"],
        "digest": _digest(found["scenario"], found["steps"]),
    }


def _file(path: Path, policy: str | None, max_runs: int) -> dict[str, Any]:
    chosen = load_policy(policy) if policy else None
    result = shrink_scenario_file(str(path), chosen, max_runs=max_runs, time_limit=HOUR)
    return {
        "invariant": result.invariant,
        "runs": result.runs,
        "steps": [result.original_steps, result.final_steps],
        "final": str(result.final),
        "digest": _digest((result.text or "").replace(str(path), "FILE")),
    }


def _written(tmp: Path, policy: str, seed: int) -> Path:
    run = run_seed(seed, load_policy(policy), RunOptions(ops=100))
    path = tmp / "big.toml"
    path.write_text(write_scenario(run.trace.steps, policy), encoding="utf-8")
    return path


def _through_seed(tmp: Path) -> dict[str, Any]:
    argv, _ = mutant_command("interrupt-clears-inbox")
    repro = shrink_conformance(1, argv, "g4", ops=40, max_runs=30, time_limit=HOUR, workdir=tmp)
    return _repro(repro)


def _through_scenario(tmp: Path) -> dict[str, Any]:
    (loaded,) = [s for s in load_library() if s.scenario.name == "id-ended-barrier-as-prompt"]
    argv, _ = mutant_command("ids-freed-for-everyone")
    repro = shrink_conformance_scenario(
        loaded, argv, "g4", max_runs=60, time_limit=HOUR, workdir=tmp
    )
    return _repro(repro)


def _repro(repro: Repro | None) -> dict[str, Any]:
    assert repro is not None
    return {
        "key": repro.key,
        "runs": repro.runs,
        "steps": [repro.original_steps, repro.steps],
        "digest": _digest(repro.text),
    }


CASES: dict[str, Any] = {
    "seed g5 38": lambda tmp: _seed("g5", 38, 100),
    "seed g5 38 decisions only": lambda tmp: _seed("g5", 38, 100, steps_phase=False),
    "seed c 2 in 150 runs": lambda tmp: _seed("c", 2, 100, max_runs=150),
    "seed g2 25 in liveness": lambda tmp: _seed("g2", 25, 30, expect=True),
    "seed c 24 alone in 400 runs": lambda tmp: _alone("c", 24, "shared-admission-order", 400),
    "design c 24 alone": lambda tmp: _design("c", 24, "shared-admission-order", 100),
    "file barrier g5": lambda tmp: _file(
        LIBRARY / "barrier" / "barrier-blocks-promotion.toml", "g5", 5_000
    ),
    "file written g2 4 in 120 runs": lambda tmp: _file(_written(tmp, "g2", 4), None, 120),
    "through seed": _through_seed,
    "through scenario": _through_scenario,
}

PINNED: dict[str, Any] = {
    "design c 24 alone": {"operations": 2, "verified": True, "digest": "724752be45da5e07"},
    "file barrier g5": {
        "invariant": "barrier-blocks-promotion",
        "runs": 54,
        "steps": [8, 5],
        "final": "6 steps, 4 operations, 0 faults",
        "digest": "51ec8ae41184283b",
    },
    "seed c 2 in 150 runs": {
        "invariant": "shared-admission-order",
        "runs": 150,
        "final": "4 steps, 2 operations, 0 faults",
        "decided": "4 steps, 2 operations, 0 faults",
        "decisions": 52,
        "ops": 100,
        "also": [],
        "digest": "b7d1e54d3e298690",
    },
    "seed c 24 alone in 400 runs": {
        "runs": 400,
        "final": "5 steps, 2 operations, 1 faults",
        "verified": True,
        "digest": "c55e7dc7108e1b72",
    },
    "seed g2 25 in liveness": {
        "invariant": "monotonic-visible-time",
        "runs": 1500,
        "final": "7 steps, 5 operations, 0 faults",
        "decided": "11 steps, 8 operations, 0 faults",
        "decisions": 92,
        "ops": 30,
        "also": [],
        "digest": "a1192f6023854046",
    },
    "seed g5 38": {
        "invariant": "barrier-blocks-promotion",
        "runs": 1226,
        "final": "4 steps, 2 operations, 0 faults",
        "decided": "10 steps, 7 operations, 0 faults",
        "decisions": 95,
        "ops": 100,
        "also": [],
        "digest": "035da36728d07cc8",
    },
    "seed g5 38 decisions only": {
        "invariant": "barrier-blocks-promotion",
        "runs": 1197,
        "final": "10 steps, 7 operations, 0 faults",
        "decided": "10 steps, 7 operations, 0 faults",
        "decisions": 95,
        "ops": 100,
        "also": [],
        "digest": "1461abd59f27dfe4",
    },
    "through scenario": {
        "key": "diverged:prompt:reply",
        "runs": 15,
        "steps": [4, 4],
        "digest": "1fd1384870f9537b",
    },
    "through seed": {
        "key": "diverged:interrupt:pending",
        "runs": 30,
        "steps": [25, 3],
        "digest": "e3627d2ca804ce35",
    },
    "file written g2 4 in 120 runs": {
        "invariant": "monotonic-visible-time",
        "runs": 121,
        "steps": [98, 6],
        "final": "7 steps, 5 operations, 0 faults",
        "digest": "3045ecc553337a03",
    },
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_shrunk_results_are_pinned(case: str, tmp_path: Path) -> None:
    assert CASES[case](tmp_path) == PINNED[case]


if __name__ == "__main__":  # print the values to pin
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for name in sys.argv[1:] or sorted(CASES):
            print(f"{name!r}: {CASES[name](Path(tmp))!r},", flush=True)
