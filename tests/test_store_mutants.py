"""The ``mutants`` table: planted-bug results by campaign, their validation,
the rows ``inboxsim mutants --json`` documents make, and the kill matrix in
the report (HTML, Markdown, JSON, and one JUnit case per mutant)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from inboxsim.cli import main
from inboxsim.errors import HarnessError
from inboxsim.model import PRESETS
from inboxsim.sim.run import RunOptions, run_seed
from inboxsim.store.mutants import kill_row
from inboxsim.store.store import Store, open_store, write_results

KILLED = {
    "mutant": "volatile-inbox",
    "killed_by_kind": "divergence",
    "killed_by": "scenario seed-crash: pending s1 differs",
    "seed": None,
    "seconds_to_detect": 1.5,
    "runs": 3,
    "shrunk_ops": None,
}
BY_SEED = {
    "mutant": "promotion-not-atomic",
    "killed_by_kind": "invariant",
    "killed_by": "no-lost-input",
    "seed": 7,
    "seconds_to_detect": 4.25,
    "runs": 40,
    "shrunk_ops": 6,
}
SURVIVED = {
    "mutant": "admit-after-wake",
    "killed_by_kind": "none",
    "killed_by": None,
    "seed": None,
    "seconds_to_detect": None,
    "runs": 60,
    "shrunk_ops": None,
}
COLUMNS = "mutant, killed_by_kind, killed_by, seed, seconds_to_detect, runs, shrunk_ops"


def _held_store(path: Path) -> str:
    """A store whose runs all held, so only the mutants decide the exit code."""
    results = [run_seed(s, PRESETS["g4"], RunOptions(ops=20)) for s in range(3)]
    assert all(r.verdict == "held" for r in results)
    with Store(path) as s:
        write_results(s, results, 0, 0, PRESETS["g4"])
    return str(path)


def test_campaigns_are_numbered_and_read_back(tmp_path: Path) -> None:
    with Store(tmp_path / "m.duckdb") as s:
        assert s.write_mutants([KILLED, SURVIVED]) == 0
        assert s.write_mutants([BY_SEED]) == 1
        rows = s.con.execute(f"SELECT campaign_id, {COLUMNS} FROM mutants ORDER BY ALL").fetchall()
    assert rows == [
        (0, *SURVIVED.values()),
        (0, *KILLED.values()),
        (1, *BY_SEED.values()),
    ]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({**KILLED, "killed_by_kind": "luck"}, "killed_by_kind 'luck' is not one of invariant"),
        ({**KILLED, "killed_by": None}, "killed_by must be given exactly when"),
        ({**SURVIVED, "killed_by": "x"}, "killed_by must be given exactly when"),
        ({**BY_SEED, "seed": -1}, "seed must be a non-negative integer"),
        ({**BY_SEED, "runs": "many"}, "runs must be a non-negative integer"),
        ({**BY_SEED, "seconds_to_detect": "soon"}, "seconds_to_detect must be a number"),
        ({k: v for k, v in KILLED.items() if k != "runs"}, "mutant row 2 has no 'runs'"),
    ],
)
def test_bad_rows_write_nothing(tmp_path: Path, row: dict, message: str) -> None:
    with Store(tmp_path / "bad.duckdb") as s:
        with pytest.raises(HarnessError, match=message):
            s.write_mutants([BY_SEED, row])
        assert s.con.execute("SELECT count(*) FROM mutants").fetchone() == (0,)


def test_kill_rows_from_mutants_json() -> None:
    base = {"scenarios_run": 25, "seeds_run": 0, "killers": []}
    divergence = {
        **base,
        "mutant": "admit-after-wake",
        "killed": True,
        "by": "divergence",
        "where": "scenario seed-crash",
        "seconds_to_detect": 8.265,
        "detail": "divergence at step 2: pending s1 differs",
    }
    assert kill_row(divergence) == {
        "mutant": "admit-after-wake",
        "killed_by_kind": "divergence",
        "killed_by": "scenario seed-crash: divergence at step 2: pending s1 differs",
        "seed": None,
        "seconds_to_detect": 8.265,
        "runs": 25,
        "shrunk_ops": None,
    }
    by_seed = {
        **base,
        "mutant": "m",
        "killed": True,
        "by": "invariant",
        "where": "seed 12",
        "seconds_to_detect": 3.0,
        "detail": "promotion.atomic: the input vanished",
        "seeds_run": 13,
    }
    row = kill_row(by_seed)
    assert (row["killed_by"], row["seed"], row["runs"]) == ("promotion.atomic", 12, 38)
    in_scenario = {**by_seed, "where": "scenario q", "detail": "step 3: invariant a.b violated: x"}
    assert kill_row(in_scenario)["killed_by"] == "a.b" and kill_row(in_scenario)["seed"] is None
    survived = {**base, "mutant": "m", "killed": False, "by": None, "where": None, "detail": None}
    row = kill_row(survived)
    assert (row["killed_by_kind"], row["killed_by"], row["seconds_to_detect"]) == (
        "none",
        None,
        None,
    )


def test_report_shows_the_latest_kill_matrix(tmp_path: Path) -> None:
    db = _held_store(tmp_path / "r.duckdb")
    with Store(db) as s:
        s.write_mutants([{**SURVIVED, "mutant": "old-campaign"}])
        s.write_mutants([KILLED, BY_SEED])
    out = tmp_path / "all-killed"
    assert main(["report", "--db", db, "--out", str(out)]) == 0  # the latest campaign killed all
    summary = json.loads((out / "summary.json").read_text())
    m = summary["mutants"]
    assert (m["campaign_id"], m["killed"], m["survived"]) == (1, 2, [])
    assert [r["mutant"] for r in m["rows"]] == ["promotion-not-atomic", "volatile-inbox"]
    with Store(db) as s:
        s.write_mutants([KILLED, SURVIVED])
    out = tmp_path / "survivor"
    assert main(["report", "--db", db, "--out", str(out)]) == 1  # a planted bug went unnoticed
    root = ET.parse(out / "junit.xml").getroot()
    (suite,) = [s for s in root.iter("testsuite") if s.get("name") == "inboxsim.mutants"]
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert set(cases) == {"admit-after-wake", "volatile-inbox"}
    assert (suite.get("tests"), suite.get("failures")) == ("2", "1")
    failure = cases["admit-after-wake"].find("failure")
    assert failure is not None and failure.get("type") == "MutantSurvived"
    assert cases["volatile-inbox"].find("failure") is None
    props = {p.get("name"): p.get("value") for p in cases["volatile-inbox"].iter("property")}
    assert props["killed_by_kind"] == "divergence" and props["runs"] == "3"
    md = (out / "summary.md").read_text()
    assert "### Mutant kill matrix (campaign 2): 1/2 killed" in md
    assert "| `admit-after-wake` | ❌ survived |" in md
    assert "mutants survived" in md
    html = (out / "report.html").read_text()
    assert "Mutant kill matrix (campaign 2" in html and "survived" in html


def test_mutants_command_records_its_campaign(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "cli.duckdb")
    args = ["mutants", "--names", "admit-after-wake", "--seeds", "0", "--jobs", "1"]
    assert main([*args, "--db", db, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    with open_store(db) as s:
        rows = s.con.execute(f"SELECT {COLUMNS} FROM mutants").fetchall()
    (first,) = doc["mutants"]
    assert rows == [tuple(kill_row(first).values())]
    assert rows[0][1] in ("divergence", "invariant", "expectation")
