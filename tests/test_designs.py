"""The design-exploration report (``inboxsim designs``, issue 10)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inboxsim import cli
from inboxsim.model import PRESETS
from inboxsim.reports import designs as ds


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("designs")
    code = cli.main(
        [
            "designs",
            "--policies",
            "g4,c,c-merged",
            "--seeds",
            "6",
            "--ops",
            "40",
            "--depth",
            "2",
            "--jobs",
            "1",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    return out, json.loads((out / "designs.json").read_text())


def test_writes_three_files(report: tuple[Path, dict]) -> None:
    out, doc = report
    for name in ("designs.html", "designs.md", "designs.json"):
        assert (out / name).stat().st_size > 0
    page = (out / "designs.html").read_text()
    assert "data:image/png;base64," in page and "<img" in page
    assert {q["key"] for q in doc["questions"]} >= {"q1-variant", "q6-retry", "a1-time", "parallel"}


def test_c_counterexample_and_c_merged_none(report: tuple[Path, dict]) -> None:
    _, doc = report
    by = {p["name"]: p for p in doc["policies"]}
    first = by["c"]["explore"][0]
    assert first["violations"][0]["invariant"] == "shared-admission-order"
    assert "[[step]]" in first["scenario"]
    assert all(not e["violations"] for e in by["c-merged"]["explore"])
    assert "shared-admission-order" not in by["c-merged"]["violations"]
    assert doc["identical_to_g4"]["c-merged"] == [6, 6]
    assert (
        "shared-admission-order"
        in next(q for q in doc["questions"] if q["key"] == "parallel")["verdict"]
    )


def test_indistinguishable_presets_have_identical_traces() -> None:
    tasks = {
        n: ds.study_policy(ds.PolicyTask(n, PRESETS[n], 5, 40, 1, 0))
        for n in ("g4", "g3", "a", "c-merged")
    }
    for n in ("g3", "a", "c-merged"):
        assert tasks[n]["hashes"] == tasks["g4"]["hashes"], n
    differing = ds.study_policy(ds.PolicyTask("g2", PRESETS["g2"], 5, 40, 1, 0))
    assert differing["hashes"] != tasks["g4"]["hashes"]


def test_custom_policy_file_accepted(tmp_path: Path) -> None:
    policy = tmp_path / "mine.toml"
    policy.write_text('base = "g4"\nvisible_time = "admission"\n')
    out = tmp_path / "out"
    code = cli.main(
        [
            "designs",
            str(policy),
            "--policies",
            "g4",
            "--seeds",
            "4",
            "--ops",
            "30",
            "--depth",
            "3",
            "--jobs",
            "1",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    doc = json.loads((out / "designs.json").read_text())
    names = [p["name"] for p in doc["policies"]]
    assert names == ["g4", "mine"]
    mine = doc["policies"][1]
    assert any(
        v["invariant"] == "monotonic-visible-time" for e in mine["explore"] for v in e["violations"]
    )


def test_bad_usage_exits_2(tmp_path: Path) -> None:
    assert cli.main(["designs", "--policies", "nope", "--out", str(tmp_path)]) == 2
    assert cli.main(["designs", "--seeds", "0", "--out", str(tmp_path)]) == 2


def test_every_counterexample_is_a_shrunk_scenario(report: tuple[Path, dict]) -> None:
    """No raw seed stands as a counterexample: each broken invariant has a
    shrunk scenario (that expects the violation and reproduces it), a
    timeline plot, and the explorer's depth."""
    from inboxsim.scenarios.load import load_text
    from inboxsim.scenarios.runner import run_scenario

    out, doc = report
    seen = 0
    for p in doc["policies"]:
        for inv in p["violations"]:
            if inv == "liveness.settles":
                continue
            sh = p["shrunk"][inv]
            assert sh["shrunk"] and sh["verified"], (p["name"], inv)
            assert sh["operations"] <= 6
            loaded = load_text(sh["scenario"])
            assert loaded.scenario.expect_violation == inv
            assert run_scenario(loaded).passed
            assert (out / sh["figure"]).stat().st_size > 0
            assert ds.explorer_depth(p, inv) is not None
            seen += 1
    assert seen >= 1
    md = (out / "designs.md").read_text()
    assert "## Per design" in md and "explorer: depth" in md
    assert "c-merged: breaks no invariant" in md


@pytest.mark.parametrize(
    ("policy", "invariant", "depth"),
    [("b", "receipt-reflects-request", 1), ("c", "queue-fifo", 2)],
)
def test_counterexamples_once_only_raw_seeds_are_shrunk_and_explored(
    policy: str, invariant: str, depth: int
) -> None:
    """b's receipt-reflects-request and c's queue-fifo (which c's sweep sees
    after shared-admission-order): shrunk alone, and found by the explorer."""
    from inboxsim.sim.run import RunOptions, run_seed

    seed = next(
        s
        for s in range(300)
        if invariant
        in {v.invariant for v in run_seed(s, PRESETS[policy], RunOptions(ops=60)).violations}
        or _violates_alone(policy, invariant, s)
    )
    task = ds.PolicyTask(policy, PRESETS[policy], 1, 60, 1, depth)
    sh = ds._shrink_one(task, invariant, seed)
    assert sh["shrunk"] and sh["verified"] and sh["operations"] <= 3
    explored = ds._explore_one(PRESETS[policy], 1, depth, invariant)
    assert explored["violations"][0]["invariant"] == invariant
    assert explored["depth_found"] <= depth


def _violates_alone(policy: str, invariant: str, seed: int) -> bool:
    from inboxsim.invariants.monitor import Monitor
    from inboxsim.sim.run import RunOptions, run_seed

    def alone(p: object, hello: dict) -> Monitor:
        return Monitor(p, hello, invariants=(invariant,))  # type: ignore[arg-type]

    return bool(run_seed(seed, PRESETS[policy], RunOptions(ops=60), monitor=alone).violations)


def test_shrunk_counterexample_is_deterministic() -> None:
    """The shrink budget is in runs, so two reports give the same scenario."""
    task = ds.PolicyTask("g2", PRESETS["g2"], 1, 60, 1, 0)
    seed = next(s for s in range(300) if _violates_alone("g2", "monotonic-visible-time", s))
    one = ds._shrink_one(task, "monotonic-visible-time", seed)
    two = ds._shrink_one(task, "monotonic-visible-time", seed)
    assert one["scenario"] == two["scenario"] and one["operations"] <= 6
