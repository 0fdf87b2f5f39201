"""``inboxsim shrink``: failing seeds and scenario files cut down to minimal,
readable scenarios that still fail the same way (search/shrink.py)."""

from __future__ import annotations

import json
import tomllib
from functools import cache
from pathlib import Path

import pytest

from inboxsim import cli
from inboxsim.policy_file import load_policy
from inboxsim.scenarios.load import load_scenario, load_text
from inboxsim.scenarios.runner import run_scenario
from inboxsim.search.shrink import ShrinkResult, shrink_scenario_file, shrink_seed, size_of
from inboxsim.sim.run import RunOptions, run_decisions, run_seed

OPTIONS = RunOptions(ops=100)
LIBRARY = Path(__file__).resolve().parent.parent / "scenarios" / "library"


def first_failing_seed(policy: str, invariant: str, limit: int = 200) -> int:
    p = load_policy(policy)
    for seed in range(limit):
        r = run_seed(seed, p, OPTIONS)
        if r.violations and r.violations[0].invariant == invariant:
            return seed
    raise AssertionError(f"no seed below {limit} violates {invariant} under {policy}")


@cache
def shrunk(policy: str, invariant: str) -> tuple[int, ShrinkResult]:
    seed = first_failing_seed(policy, invariant)
    result = shrink_seed(seed, load_policy(policy), OPTIONS)
    assert result is not None
    return seed, result


def _without_expectation(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.startswith("expect_violation"))


def _ops(text: str) -> list[str]:
    return [s.op for s in load_text(text).scenario.step if s.op not in (None, "create")]


@pytest.mark.parametrize(
    ("policy", "invariant"),
    [("g2", "monotonic-visible-time"), ("c", "shared-admission-order")],
)
def test_shrunk_seed_is_a_small_scenario_failing_the_same_way(policy: str, invariant: str) -> None:
    seed, result = shrunk(policy, invariant)
    assert result.invariant == invariant
    assert result.final.operations <= 6, result.text
    assert result.final.operations < result.original.operations or result.original.operations <= 6
    assert result.final_decisions <= result.original_decisions
    assert result.verified is True
    # The written file loads and is a regression test: it fails, on that
    # invariant, while the bug is there.
    loaded = load_text(result.text, "<shrunk>")
    assert loaded.scenario.expect_violation is None
    assert loaded.scenario.policy == policy
    assert len(_ops(result.text)) == result.final.operations
    ran = run_scenario(loaded)
    assert not ran.passed
    assert invariant in {f.invariant for f in ran.failures}
    # ... and passes under a policy that keeps the invariant (g4).
    assert run_scenario(loaded, load_policy("g4")).passed


@pytest.mark.parametrize(
    ("policy", "invariant"),
    [
        ("g5", "retry-same-receipt"),
        ("g5", "conflict-rejected"),
        ("g5", "barrier-blocks-promotion"),
        ("b", "receipt-reflects-request"),
    ],
)
def test_other_planted_bugs_shrink_to_a_few_operations(policy: str, invariant: str) -> None:
    _, result = shrunk(policy, invariant)
    assert result.invariant == invariant
    assert result.final.operations <= 3, result.text
    assert result.verified is True


def test_step_phase_removes_what_the_decision_list_cannot() -> None:
    """g5 seed 38: the decision list keeps a create and a resume of a second
    session (their draws steer later picks); the step phase drops them,
    and turns two answers and two queued prompts into nothing."""
    policy = load_policy("g5")
    without = shrink_seed(38, policy, OPTIONS, steps_phase=False)
    with_steps = shrink_seed(38, policy, OPTIONS)
    assert without is not None and with_steps is not None
    assert without.invariant == with_steps.invariant == "barrier-blocks-promotion"
    assert with_steps.decided == without.final
    assert with_steps.final.operations < without.final.operations
    assert _ops(with_steps.text) == ["prompt", "compact"]
    assert with_steps.verified is True


def test_expect_writes_an_expected_violation_document() -> None:
    seed = first_failing_seed("c", "shared-admission-order")
    result = shrink_seed(seed, load_policy("c"), OPTIONS, expect=True)
    assert result is not None and result.verified is True
    loaded = load_text(result.text)
    assert loaded.scenario.expect_violation == "shared-admission-order"
    ran = run_scenario(loaded)
    assert ran.passed and ran.verdict == "pass (violates shared-admission-order, as expected)"
    bare = run_scenario(load_text(_without_expectation(result.text)))
    assert not bare.passed and bare.verdict.startswith("FAIL")


def test_shrunk_decisions_replay_to_the_same_violation() -> None:
    _, result = shrunk("g2", "monotonic-visible-time")
    again = run_decisions(result.decisions, load_policy("g2"), RunOptions(ops=result.ops))
    assert again.violations[0].invariant == "monotonic-visible-time"
    assert size_of(again.trace.steps) == result.decided


def test_shrinking_is_deterministic() -> None:
    seed, result = shrunk("c", "shared-admission-order")
    again = shrink_seed(seed, load_policy("c"), OPTIONS)
    assert again is not None
    assert again.text == result.text and again.decisions == result.decisions


def test_a_seed_that_holds_has_nothing_to_shrink() -> None:
    assert shrink_seed(0, load_policy("g4"), RunOptions(ops=20)) is None


def test_scenario_file_shrinks_by_steps(tmp_path: Path) -> None:
    # A long failing run written as a scenario, then shrunk as a file.
    from inboxsim.scenarios.render import write_scenario

    seed = first_failing_seed("g2", "monotonic-visible-time")
    run = run_seed(seed, load_policy("g2"), OPTIONS)
    big = tmp_path / "big.toml"
    big.write_text(write_scenario(run.trace.steps, "g2"), encoding="utf-8")
    result = shrink_scenario_file(str(big))
    assert result.invariant == "monotonic-visible-time"
    assert result.final_steps < result.original_steps
    # Steps only (values are not edited): coarser than shrinking the seed.
    assert result.original is not None and result.final is not None
    assert result.final.operations <= 10 < result.original.operations
    assert result.verified is True
    assert result.text is not None
    assert load_text(result.text).scenario.expect_violation is None


def test_library_scenario_under_its_breaking_policy_shrinks() -> None:
    path = LIBRARY / "barrier" / "barrier-blocks-promotion.toml"
    result = shrink_scenario_file(str(path), load_policy("g5"))
    assert result.invariant == "barrier-blocks-promotion"
    assert result.final_steps <= len(load_scenario(path).scenario.step)
    assert result.verified is True


# --- the command line ------------------------------------------------------------


def test_cli_shrink_seed_writes_the_scenario(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seed, _ = shrunk("g2", "monotonic-visible-time")
    out = tmp_path / "min.toml"
    code = cli.main(["shrink", str(seed), "--policy", "g2", "--out", str(out), "--json"])
    assert code == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["invariant"] == "monotonic-visible-time" and doc["written"] == str(out)
    assert doc["final"]["operations"] <= 6 < doc["original"]["operations"] + 7
    assert doc["verified"] is True and doc["expect_violation"] is False
    table = tomllib.loads(out.read_text(encoding="utf-8"))
    assert "expect_violation" not in table
    # The file is a regression test: `inboxsim run` fails, on that
    # invariant, while the bug is there.
    assert cli.main(["run", str(out), "--json"]) == 1
    ran = json.loads(capsys.readouterr().out)
    assert ran["scenarios"][0]["failures"][0]["invariant"] == "monotonic-visible-time"
    # --expect writes it as an expected violation, which run passes and says so.
    doc_out = tmp_path / "doc.toml"
    assert cli.main(["shrink", str(seed), "--policy", "g2", "--out", str(doc_out), "--expect"]) == 1
    assert "expects the violation" in capsys.readouterr().out
    assert tomllib.loads(doc_out.read_text())["expect_violation"] == "monotonic-visible-time"
    assert cli.main(["run", str(doc_out)]) == 0
    text = capsys.readouterr().out
    assert "pass (violates monotonic-visible-time, as expected)" in text
    assert "1 passed (1 of them by an expected violation), 0 failed" in text


def test_cli_shrink_summary_names_lengths(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seed, _ = shrunk("c", "shared-admission-order")
    out = tmp_path / "c.toml"
    assert cli.main(["shrink", str(seed), "--policy", "c", "--out", str(out)]) == 1
    text = capsys.readouterr().out
    assert "invariant: shared-admission-order" in text
    assert "original:" in text and "shrunk:" in text and "operations" in text
    assert "a regression test" in text and "fails while the bug is present" in text
    assert out.exists()


def test_cli_shrink_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "bb.toml"
    original = LIBRARY / "barrier" / "barrier-blocks-promotion.toml"
    src.write_text(original.read_text(), encoding="utf-8")
    code = cli.main(["shrink", str(src), "--policy", "g5", "--json"])
    assert code == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["invariant"] == "barrier-blocks-promotion"
    assert Path(doc["written"]) == tmp_path / "bb-min.toml" and (tmp_path / "bb-min.toml").exists()


def test_cli_shrink_nothing_to_shrink(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["shrink", "0", "--policy", "g4", "--ops", "20"]) == 0
    assert "nothing to shrink" in capsys.readouterr().out


def test_cli_shrink_passing_file_has_nothing_to_shrink(capsys: pytest.CaptureFixture[str]) -> None:
    path = LIBRARY / "barrier" / "barrier-blocks-promotion.toml"
    assert cli.main(["shrink", str(path), "--policy", "g4", "--out", "/nonexistent/x.toml"]) == 0
    assert "nothing to shrink" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["shrink", "no-such-file.toml"], "neither a seed"),
        (["shrink", "--", "-3"], "non-negative"),
        (["shrink", "1", "--policy", "nope"], "unknown policy 'nope'"),
        (["shrink", "1", "--max-runs", "0"], "--max-runs"),
        (["shrink"], "Missing argument"),
    ],
)
def test_cli_shrink_bad_usage(
    capsys: pytest.CaptureFixture[str], args: list[str], needle: str
) -> None:
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("inboxsim: error: ") and needle in err, err
