"""``inboxsim run --db``: scenario runs land in the store, ``check`` re-judges
them as the runner did, and the report lists them (JUnit: one case per
scenario, besides one per invariant)."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from inboxsim.cli import main
from inboxsim.scenarios.load import library_paths, load_library
from inboxsim.store.store import open_store


@pytest.fixture(scope="module")
def library_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, dict]]:
    """The library under g4 (every scenario passes but those written for g2's
    departures) and under g2 (some fail: g2 has no synthetic route,
    admission-time stamps...), in one store."""
    db = str(tmp_path_factory.mktemp("scenarios") / "lib.duckdb")
    docs = {}
    for policy in ("g4", "g2"):
        out = io.StringIO()
        with redirect_stdout(out):
            assert main(["run", "--library", "--policy", policy, "--db", db, "--json"]) == 1
        docs[policy] = json.loads(out.getvalue())
    failed_g4 = {sc["name"] for sc in docs["g4"]["scenarios"] if not sc["passed"]}
    assert failed_g4 == {s.scenario.name for s in load_library() if "g4" in s.scenario.breaks_under}
    return db, docs


def test_scenario_runs_are_stored(library_db: tuple[str, dict[str, dict]]) -> None:
    db, docs = library_db
    n = len(library_paths())
    with open_store(db) as s:
        q = lambda sql: s.con.execute(sql).fetchall()  # noqa: E731
        assert q("SELECT count(*), count(scenario), count(seed) FROM runs") == [(2 * n, 2 * n, 0)]
        rows = q(
            "SELECT r.policy, s.scenario, s.passed, r.trace_hash, s.expectations, "
            "s.expectations_failed, s.failures, r.verdict, r.ops, p.preset "
            "FROM scenario_runs s JOIN runs r USING (run_id) JOIN policies p USING (policy_hash) "
            "ORDER BY s.run_id"
        )
        # Every step of every run is there, with its durable events.
        assert q("SELECT sum(ops) FROM runs") == q("SELECT count(*) FROM steps")
        assert q("SELECT count(*) FROM events")[0][0] > 0
    live = {(policy, sc["name"]): sc for policy, doc in docs.items() for sc in doc["scenarios"]}
    assert len(rows) == len(live) == 2 * n
    for policy, name, passed, digest, checked, failed, failures, verdict, ops, preset in rows:
        sc = live[(policy, name)]
        assert (passed, digest, preset) == (sc["passed"], sc["trace_hash"], policy)
        assert [f["message"] for f in json.loads(failures)] == [
            f["message"] for f in sc["failures"]
        ]
        violated = [f for f in sc["failures"] if f["message"].startswith("invariant ")]
        assert failed == len(sc["failures"]) - len(violated)
        assert (verdict == "violated") == bool(violated)
        assert checked > 0 and ops > 0
    assert sum(not r[2] for r in rows) == docs["g2"]["failed"] + docs["g4"]["failed"]
    assert docs["g2"]["failed"] > 0


def test_check_rejudges_scenario_runs(library_db: tuple[str, dict[str, dict]]) -> None:
    """Scenario runs are judged to their end (every violation), not to the
    first one as seeded runs are: re-judging them changes nothing."""
    db, _ = library_db
    with open_store(db) as s:
        assert s.con.execute("SELECT count(*) FROM runs WHERE verdict = 'violated'").fetchone()[0]
    from inboxsim.commands.check import run_check
    from inboxsim.commands.diff import run_diff

    doc = run_check(db)
    assert doc["runs"] == 2 * len(library_paths())
    assert not doc["changed"] and not doc["hash_mismatches"] and not doc["skipped"]
    rerun = run_diff(db, None)
    assert rerun["runs"] == 0 and len(rerun["skipped"]) == doc["runs"]
    assert "no model decisions to replay" in rerun["skipped"][0]["reason"]


def test_report_lists_scenarios(library_db: tuple[str, dict[str, dict]], tmp_path: Path) -> None:
    db, docs = library_db
    out = tmp_path / "report"
    assert main(["report", "--db", db, "--out", str(out)]) == 1  # g2 scenarios failed
    summary = json.loads((out / "summary.json").read_text())
    n = len(library_paths())
    assert len(summary["scenarios"]) == 2 * n
    failing = [s["name"] for s in summary["scenarios"] if s["failed"]]
    assert sorted(failing) == sorted(
        sc["name"] for doc in docs.values() for sc in doc["scenarios"] if not sc["passed"]
    )
    root = ET.parse(out / "junit.xml").getroot()
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    cases = suites["inboxsim.scenarios"].findall("testcase")
    assert len(cases) == 2 * n == int(suites["inboxsim.scenarios"].get("tests"))
    failed = [c for c in cases if c.find("failure") is not None]
    assert len(failed) == len(failing) == int(suites["inboxsim.scenarios"].get("failures"))
    assert {
        c.get("name") for c in failed if c.get("classname") != "inboxsim.scenarios.g2.model:g2"
    } == {sc["name"] for sc in docs["g4"]["scenarios"] if not sc["passed"]}
    assert all("step" in (c.find("failure").text or "") for c in failed)
    assert suites["inboxsim.invariants"].findall("testcase")  # and one case per invariant
    md = (out / "summary.md").read_text()
    assert f"### Scenarios ({2 * n}, {len(failing)} failing)" in md
    assert "scenarios failed" in md
    html = (out / "report.html").read_text()
    assert f"Scenarios ({2 * n}, {len(failing)} failing)" in html


def test_bad_db_fails_before_running(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    junk = tmp_path / "junk.duckdb"
    junk.write_bytes(b"not a database" * 500)
    assert main(["run", "--library", "--db", str(junk)]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and "not a readable DuckDB file" in err[0]
    assert "run: [1/" not in captured.err  # nothing ran


def test_diff_reports_newly_failing_scenarios(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same scenario (name, policy, target) passing in BASE and failing in
    NEW is a regression; the other way round, a fix."""
    original = next(p for p in library_paths() if p.stem == "seed-send")
    broken = tmp_path / "seed-send.toml"
    text = original.read_text(encoding="utf-8")
    assert 'expect_transcript = ["m1"]' in text
    broken.write_text(text.replace('expect_transcript = ["m1"]', 'expect_transcript = ["m9"]', 1))
    base, new = str(tmp_path / "base.duckdb"), str(tmp_path / "new.duckdb")
    assert main(["run", str(original), "--db", base]) == 0
    assert main(["run", str(broken), "--db", new]) == 1
    capsys.readouterr()
    assert main(["diff", base, new, "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["scenarios"]["new_failing"] == [
        {"scenario": "seed-send", "policy": "g4", "target": "model:g4"}
    ]
    assert main(["diff", new, base]) == 0
    out = capsys.readouterr().out
    assert "scenarios: 1 in both, 0 newly failing, 1 fixed" in out
