"""``inboxsim sweep`` and ``inboxsim replay`` on the command line (in process)."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from inboxsim import cli
from inboxsim.sim import checkers
from tests.sim_helpers import checkers_module


@pytest.fixture(autouse=True)
def _checkers(monkeypatch: pytest.MonkeyPatch) -> None:
    # In process and with one job, the commands take their checkers from here.
    monkeypatch.setattr(checkers, "DEFAULT", checkers_module())
    monkeypatch.delenv(cli.TRACEBACK_ENV, raising=False)


def _one_line_error(capsys: pytest.CaptureFixture[str], args: list[str], needle: str) -> None:
    assert cli.main(args) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and needle in captured.err, captured.err
    assert captured.err.startswith("inboxsim: error: ") and "Traceback" not in captured.err
    assert captured.out == ""


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["sweep", "--policy", "nope"], "unknown policy 'nope'"),
        (["sweep", "--seeds", "-1"], "'--seeds': Input should be greater than or equal to 1"),
        # A sweep of nothing tests nothing (was exit 1: "required probes never hit").
        (["sweep", "--seeds", "0"], "'--seeds': Input should be greater than or equal to 1"),
        (["sweep", "--ops", "0"], "'--ops': Input should be greater than or equal to 1"),
        (["sweep", "--ops", "-5"], "'--ops': Input should be greater than or equal to 1"),
        (["sweep", "--jobs", "0"], "'--jobs': Input should be greater than or equal to 1"),
        (["sweep", "--time-budget", "0"], "'--time-budget': Input should be greater than or equal"),
        # nan fails every bound and inf the week-long maximum (was accepted).
        (["sweep", "--time-budget", "nan"], "Invalid value for '--time-budget'"),
        (["sweep", "--time-budget", "inf"], "'--time-budget': Input should be less than or equal"),
        (["sweep", "--target", "opencode"], "--target 'opencode' is not available"),
        (["sweep", "--seeds", "many"], "Invalid value for '--seeds'"),
        (["replay", "3", "--policy", "missing.toml"], "cannot read policy file missing.toml"),
        (["replay", "--", "-3"], "'seed': Input should be greater than or equal to 0"),
        (["replay", "3", "--ops", "0"], "'--ops': Input should be greater than or equal to 1"),
        (["shrink", "3", "--time-limit", "inf"], "'--time-limit': Input should be less than"),
        (["run", "--library", "--adapter-timeout", "nan"], "Invalid value for '--adapter-timeout'"),
        (["conformance", "--target", "sqlite", "--adapter-timeout", "inf"], "'--adapter-timeout'"),
        (["conformance", "--target", "sqlite", "--shrink-seconds", "0"], "'--shrink-seconds'"),
        (["mutants", "--jobs", "0"], "'--jobs': Input should be greater than or equal to 1"),
        (["designs", "--ops", "0"], "'--ops': Input should be greater than or equal to 1"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: list[str], needle: str
) -> None:
    _one_line_error(
        capsys,
        [*args, *(["--db", str(tmp_path / "x.duckdb")] if args[0] == "sweep" else [])],
        needle,
    )


def test_an_unwritable_database_is_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file, not a folder")
    _one_line_error(
        capsys,
        ["sweep", "--seeds", "1", "--db", str(blocker / "db.duckdb")],
        "cannot open the database",
    )


def test_sweep_json_reports_failures_with_their_replay_command(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = tmp_path / "g2.duckdb"
    args = [
        "sweep",
        "--seeds",
        "30",
        "--policy",
        "g2",
        "--ops",
        "60",
        "--jobs",
        "1",
        "--db",
        str(db),
        "--json",
    ]
    assert cli.main(args) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["seeds"]["run"] == 30 and doc["db"] == str(db)
    assert doc["failing"] and doc["exit_code"] == 1
    assert any("monoton" in name for name in doc["violations"])
    failing = doc["failing"][0]
    assert failing["replay"] == f"inboxsim replay {failing['seed']} --policy g2 --ops 60"

    # The printed command reruns the seed exactly: same trace hash as stored.
    assert cli.main([*failing["replay"].split()[1:], "--json"]) == 1
    replayed = json.loads(capsys.readouterr().out)
    con = duckdb.connect(str(db), read_only=True)
    stored = con.execute("SELECT trace_hash FROM runs WHERE seed = ?", [failing["seed"]]).fetchone()
    con.close()
    assert stored == (replayed["trace_hash"],)
    assert replayed["violations"][0]["invariant"] in doc["violations"]


def test_sweep_summary_names_probes_and_missing_ones(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    args = [
        "sweep",
        "--seeds",
        "3",
        "--ops",
        "10",
        "--jobs",
        "1",
        "--db",
        str(tmp_path / "s.duckdb"),
    ]
    assert cli.main(args) == 1  # too few seeds to hit every required probe
    captured = capsys.readouterr()
    assert "coverage probes" in captured.out and "NEVER HIT" in captured.out
    assert "required probes never hit" in captured.out
    assert "sweep: 3/3 seeds" in captured.err  # plain progress lines when stderr is not a terminal


def test_replay_prints_the_trace_readably(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["replay", "5", "--ops", "40"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("seed 5, policy g4, target model:g4")
    assert "hello step_limit=" in out and "-> ok" in out and "event s1#0 admitted" in out
    assert "verdict: held" in out and "trace hash" in out


def test_replay_marks_the_violation(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert (
        cli.main(
            [
                "sweep",
                "--seeds",
                "30",
                "--policy",
                "g2",
                "--ops",
                "60",
                "--jobs",
                "1",
                "--db",
                str(tmp_path / "f.duckdb"),
                "--json",
            ]
        )
        == 1
    )
    seed = json.loads(capsys.readouterr().out)["failing"][0]["seed"]
    assert cli.main(["replay", str(seed), "--policy", "g2", "--ops", "60"]) == 1
    out = capsys.readouterr().out
    assert "\n!!" in out and "VIOLATION" in out


def test_a_sweep_run_again_does_not_count_twice_in_the_report(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Was: a re-run of seeds 0..N-1 doubled runs_exercised and halved the
    rule-of-three bound. Every bound counts distinct runs; --resume adds
    no row at all."""
    db = str(tmp_path / "twice.duckdb")
    args = ["sweep", "--seeds", "40", "--ops", "30", "--jobs", "1", "--db", db]
    assert cli.main(args) in (0, 1)
    assert cli.main(args) in (0, 1)
    capsys.readouterr()
    assert cli.main([*args, "--resume", "--json"]) in (0, 1)
    resumed = json.loads(capsys.readouterr().out)
    assert resumed["seeds"]["resumed"] == 40 and len(resumed["runs"]) == 40
    assert cli.main(["report", "--db", db, "--out", str(tmp_path / "r"), "--json"]) in (0, 1)
    doc = json.loads(capsys.readouterr().out)
    assert doc["runs"] == 40 and doc["stored_runs"] == 80
    held = [i for i in doc["invariants"] if i["status"] == "held"]
    assert held and max(i["runs_exercised"] for i in held) <= 40
    assert all(i["upper_bound_rule_of_three"] >= 3 / 40 for i in held)
    summary = (tmp_path / "r" / "summary.md").read_text()
    assert "40 runs (40 more stored runs repeat one of them and count once)" in summary
