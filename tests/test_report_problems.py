"""The report's problems: failing runs grouped by policy and violated invariant,
each first seed shrunk and cached in the store (schema v5), a viewer page per
counterexample; the conformance report's problems; and both pages opened in a
real browser (headless Chromium)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from html import escape
from pathlib import Path
from typing import Any

import pytest

from inboxsim.cli import main
from inboxsim.commands.report import run_report
from inboxsim.errors import HarnessError
from inboxsim.invariants import REGISTRY
from inboxsim.model import PRESETS
from inboxsim.reports.conformance_view import conformance_problems, sides
from inboxsim.reports.counterexamples import make_example, shrink_key
from inboxsim.reports.problems import group, run_problems
from inboxsim.sim.run import RunOptions, run_seed
from inboxsim.store.schema import SCHEMA_VERSION
from inboxsim.store.shrink_cache import ShrinkKey, load_shrunk, write_shrunk
from inboxsim.store.store import Store, open_store, write_results
from tests.browser import browser, console_errors
from tests.store_versions import v4_copy

OPTIONS = RunOptions(ops=100)  # a sweep's default
SEEDS = range(8)
# g5 departs from the V2 contract in three designed ways (model/policy.py):
# first admission wins, a retry answered from the message, an ordered barrier.
G5_PROBLEMS = {"conflict-rejected", "retry-same-receipt", "barrier-blocks-promotion"}


@pytest.fixture(scope="module")
def g5(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("g5") / "g5.duckdb"
    results = [run_seed(s, PRESETS["g5"], OPTIONS) for s in SEEDS]
    with Store(path) as s:
        write_results(s, results, 0, 0, PRESETS["g5"])
    return path


@pytest.fixture(scope="module")
def report(g5: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    out = tmp_path_factory.mktemp("report")
    doc, _ = run_report(str(g5), str(out), 120.0, 10)
    return doc, out


# --- grouping (pure) ---------------------------------------------------------------


def test_group_puts_the_biggest_first_and_keeps_first_appearance_order() -> None:
    pairs = [("a", 3), ("b", 1), ("a", 2), ("c", 5), ("b", 0), ("d", 4)]
    assert group(pairs) == [("a", [3, 2]), ("b", [1, 0]), ("c", [5]), ("d", [4])]
    assert group(pairs, first=lambda x: x)[:2] == [("a", [2, 3]), ("b", [0, 1])]


def _run(run_id: int, seed: int | None, policy: str = "g5", scenario: str | None = None) -> tuple:
    return (
        run_id,
        seed,
        policy,
        f"model:{policy}",
        "0.2.0",
        '{"ops":100}',
        "violated",
        "stopped",
        10,
        0.1,
        scenario,
        "h",
    )


def test_run_problems_by_policy_and_invariant() -> None:
    runs = [_run(0, 9), _run(1, 4), _run(2, None, scenario="sc"), _run(3, 4, "g4"), _run(4, 5)]
    violations = [
        (0, "conflict-rejected", [3], "c0"),
        (0, "retry-same-receipt", [3], "r0"),
        (1, "conflict-rejected", [7], "c1"),
        (1, "conflict-rejected", [9], "c1 again"),  # one run, one member
        (2, "conflict-rejected", [2], "c2"),
        (3, "conflict-rejected", [5], "c3"),
    ]
    registry = {"conflict-rejected": ("reuse fails", "spec 4.2")}
    problems = run_problems(runs, violations, registry, lambda r: f"replay {r[1]}")
    assert [(p["policy"], p["invariant"], p["runs"]) for p in problems] == [
        ("g5", "conflict-rejected", 3),
        ("g5", "retry-same-receipt", 1),
        ("g4", "conflict-rejected", 1),
    ]
    first = problems[0]
    # the first member is the lowest seed (run 1), not the first run stored; scenario runs last
    assert first["seeds"] == [4, 9] and first["scenarios"] == ["sc"]
    assert first["first"]["seed"] == 4 and first["first"]["message"] == "c1"
    assert first["first"]["steps"] == [7] and first["first"]["replay"] == "replay 4"
    assert first["also_violated"] == {"retry-same-receipt": 1}
    assert first["statement"] == "reuse fails" and first["id"] == "g5-conflict-rejected"
    assert problems[1]["also_violated"] == {"conflict-rejected": 1}


def test_shrink_key_only_for_seeded_runs_of_the_model() -> None:
    problem = {
        "kind": "invariant",
        "policy": "g5",
        "invariant": "conflict-rejected",
        "first": {
            "seed": 4,
            "target": "model:g5",
            "options": "{}",
            "version": "v",
            "policy_hash": "h",
        },
    }
    assert shrink_key(problem) == ShrinkKey(4, "g5", "h", "{}", "v", "conflict-rejected")
    assert shrink_key({**problem, "first": {**problem["first"], "seed": None}}) is None
    assert shrink_key({**problem, "first": {**problem["first"], "target": "sqlite"}}) is None


def test_a_seed_that_no_longer_fails_is_said_not_shrunk() -> None:
    key = ShrinkKey(3, "g4", None, '{"ops":30}', "0.0.1", "conflict-rejected")
    outcome, example = make_example(key, PRESETS["g4"], 5.0)
    assert outcome == "not reproduced"
    assert "seed 3" in example["message"] and "not conflict-rejected" in example["message"]


# --- the report --------------------------------------------------------------------


def test_the_report_shows_the_problems_each_with_a_shrunk_example(
    g5: Path, report: tuple[dict[str, Any], Path]
) -> None:
    doc, out = report
    problems = doc["problems"]
    with open_store(g5) as s:  # the grouping, asked of the store directly
        expected = s.con.execute(
            "SELECT v.invariant, list(DISTINCT r.seed ORDER BY r.seed) FROM violations v "
            "JOIN runs r USING (run_id) GROUP BY 1"
        ).fetchall()
    assert {p["invariant"]: p["seeds"] for p in problems} == {i: s for i, s in expected}
    assert {p["invariant"] for p in problems} == G5_PROBLEMS
    assert [p["runs"] for p in problems] == sorted((p["runs"] for p in problems), reverse=True)
    for p in problems:
        example = p["example"]
        assert example["outcome"] == "shrunk", p
        assert example["final"]["operations"] <= 3 < example["original"]["steps"]
        scenario = out / example["file"]
        assert scenario.read_text() == example["scenario"]
        # the file is a regression test: it fails (exit 1) while g5 does this
        assert main(["run", str(scenario)]) == 1
        page = (out / example["page"]).read_text()
        assert escape(REGISTRY[p["invariant"]].statement) in page and "violating" in page
        assert (out / p["first"]["page"]).is_file()
    md = (out / "summary.md").read_text()
    assert "### Problems (3)" in md and "```toml" in md
    suite = ET.parse(out / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    failing = {c.get("name"): c for c in suite if c.find("failure") is not None}
    assert set(failing) == G5_PROBLEMS
    for p in problems:
        case = failing[p["invariant"]]
        seeds = [x.get("value") for x in case.iter("property") if x.get("name") == "seeds"]
        assert seeds == [" ".join(map(str, p["seeds"]))]
        assert p["example"]["file"] in (case.find("failure").text or "")  # type: ignore[union-attr]


def test_a_second_report_reuses_the_cached_examples(
    g5: Path, report: tuple[dict[str, Any], Path], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    first_doc, first = report
    with open_store(g5) as s:
        assert s.con.execute("SELECT count(*), min(outcome) FROM shrunk").fetchone() == (
            3,
            "shrunk",
        )
    doc, _ = run_report(str(g5), str(tmp_path), 120.0, 10)
    assert "shrinking" not in capfd.readouterr().err
    assert doc["problems"] == first_doc["problems"]
    for p in doc["problems"]:
        for name in (p["example"]["file"], p["example"]["page"], "report.html", "junit.xml"):
            assert (tmp_path / name).read_bytes() == (first / name).read_bytes(), name


def test_shrink_none_leaves_problems_without_examples(g5: Path, tmp_path: Path) -> None:
    fresh = tmp_path / "fresh.duckdb"
    v4_copy(str(g5), str(fresh))  # the same runs, nothing cached
    assert main(["report", "--db", str(fresh), "--out", str(tmp_path / "r"), "--shrink", "0"]) == 1
    doc = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert len(doc["problems"]) == 3
    assert {p["example"]["outcome"] for p in doc["problems"]} == {"not shrunk"}
    assert not (tmp_path / "r" / "problems").exists()


def test_migration_from_v4_and_the_row_count_check_of_the_cache(g5: Path, tmp_path: Path) -> None:
    v4 = str(tmp_path / "v4.duckdb")
    v4_copy(str(g5), v4)
    with open_store(v4) as s:  # a reader migrates it: v4 -> v5
        assert s.schema_version() == SCHEMA_VERSION == 5
        assert s.con.execute("SELECT count(*) FROM shrunk").fetchone() == (0,)
    with Store(v4) as s:
        key = ShrinkKey(1, "g5", None, "{}", "v", "conflict-rejected")
        assert write_shrunk(s, "v", [(key, "shrunk", {"a": 1}), (key, "shrunk", {"a": 2})]) == 2
        assert load_shrunk(s.con, "v") == {key: ("shrunk", {"a": 2})}  # the later one
        assert load_shrunk(s.con, "w") == {}  # another version shrinks again
        with pytest.raises(ValueError, match="outcome 'maybe'"):
            write_shrunk(s, "v", [(key, "maybe", {})])
        s.verify()
        # rows written past the store's transactions (as by another program) are
        # found by the check every open makes
        s.con.execute("INSERT INTO shrunk SELECT * FROM shrunk")
        with pytest.raises(HarnessError, match="inconsistent: table shrunk holds 4 rows where"):
            s.verify()


# --- conformance problems (pure) --------------------------------------------------------


def _item(kind: str, item: str, key: str | None, **failure: Any) -> dict[str, Any]:
    return {
        "kind": kind,
        "item": item,
        "verdict": "diverged" if key and key.startswith("diverged") else "violated",
        "detail": f"{item} failed\nmore",
        "repro": f"rerun {item}",
        "failure": None if key is None else json.dumps({"key": key, **failure}),
    }


DIVERGENCE = {
    "step": 3,
    "request": {"now": 3, "op": "prompt", "session": "s1", "input": "m1"},
    "where": "reply",
    "model": {"error": "prompt_conflict"},
    "target": {"receipt": {"input": "m1"}},
    "model_raw": {"reply": {"ok": False, "error": "prompt_conflict"}},
    "target_raw": {"reply": {"ok": True, "result": {"input": "m1"}}},
    "model_views": {"pending": {"s1": []}, "transcript": {}, "calls": []},
    "target_views": {
        "pending": {
            "s1": [
                {"input": "m1", "type": "user", "delivery": "steer", "admitted_seq": 2, "time": 3}
            ]
        },
        "transcript": {},
        "calls": [],
    },
}


def test_conformance_failures_grouped_by_operation_and_part() -> None:
    repro = {
        "path": "r/seed-7.toml",
        "text": "x",
        "steps": 3,
        "original_steps": 9,
        "verified": True,
        "standalone": True,
        "model_passes": True,
        "divergence": DIVERGENCE,
    }
    items = [
        _item("seed", "3", "diverged:prompt:reply", divergence={"where": "reply"}),
        _item("seed", "5", "violated:promoted-once"),
        _item("seed", "7", "diverged:prompt:reply", repro=repro),
        _item("scenario", "s", "diverged:answer:pending"),
        _item("seed", "9", None),  # stored before failure keys: grouped by its verdict
        {**_item("invariant", "promoted-once", None), "verdict": "violated"},  # not a member
        {**_item("seed", "11", None), "verdict": "held"},
    ]
    problems = conformance_problems(items)
    assert [(p["key"], p["count"]) for p in problems] == [
        ("diverged:prompt:reply", 2),
        ("violated", 2),
        ("violated:promoted-once", 1),
        ("diverged:answer:pending", 1),
    ] or [(p["key"], p["count"]) for p in problems] == [
        ("diverged:prompt:reply", 2),
        ("violated:promoted-once", 1),
        ("diverged:answer:pending", 1),
        ("violated", 1),
    ]
    first = problems[0]
    assert first["items"] == ["seed 3", "seed 7"] and first["first"] == "seed 3"
    assert (first["operation"], first["part"]) == ("prompt", "reply")
    assert first["summary"] == "3 failed"
    assert first["repro"]["path"] == "r/seed-7.toml" and "divergence" not in first["repro"]
    assert first["divergence"] == DIVERGENCE  # the minimal repro's, not the first member's


def test_a_divergence_side_by_side() -> None:
    rows = {what: (model, target) for what, model, target in sides(DIVERGENCE)}
    request = rows["request (step 3)"]
    assert request[0] == request[1] and request[0].startswith("prompt ")
    assert rows["reply: compared, normalized"] == (
        '{"error": "prompt_conflict"}',
        '{"receipt": {"input": "m1"}}',
    )
    assert rows["pending after"] == ("s1: (none)", "s1: m1:user/steer@2")
    assert rows["open calls after"] == ("(none)", "(none)")
    old = {k: v for k, v in DIVERGENCE.items() if not k.endswith("_views")}
    assert "pending after" not in {what for what, _, _ in sides(old)}


# --- in a real browser -----------------------------------------------------------------


def test_the_report_and_a_viewer_page_in_headless_chromium(
    report: tuple[dict[str, Any], Path], tmp_path: Path
) -> None:
    doc, out = report
    driver = browser(tmp_path)
    try:
        driver.set_window_size(1300, 1600)
        driver.get((out / "report.html").as_uri())
        assert console_errors(driver) == []
        sections = driver.find_elements("css selector", "section.problem")
        assert len(sections) == 3
        for section, p in zip(sections, doc["problems"], strict=True):
            assert p["invariant"] in section.find_element("css selector", "h3").text
            assert section.find_elements("css selector", "table.steps tr.violating")
        titles = driver.find_elements("css selector", ".timeline svg a.mark title")
        assert titles and all(t.get_attribute("textContent") for t in titles)
        driver.save_screenshot(str(tmp_path / "report.png"))

        problem = doc["problems"][0]
        viewer = sections[0].find_element("css selector", "a.viewer")
        viewer.click()  # the link from the report to the counterexample's page
        assert driver.current_url == (out / problem["example"]["page"]).as_uri()
        assert console_errors(driver) == []
        violating = driver.find_elements("css selector", "article.step.violating")
        assert len(violating) == 1
        assert REGISTRY[problem["invariant"]].statement in violating[0].text
        marks = driver.find_elements("css selector", ".timeline svg a.mark")
        assert marks and all(
            (m.get_dom_attribute("href") or "").startswith("#step-") for m in marks
        )
        driver.save_screenshot(str(tmp_path / "viewer.png"))
    finally:
        driver.quit()
    for name in ("report.png", "viewer.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_conformance_failure_in_the_report(tmp_path: Path) -> None:
    """A planted bug of the SQLite inbox through `conformance --db`, then the
    report: the failure grouped under its key, its repro side by side."""
    from inboxsim.conformance.catalogue import mutant_command

    argv, _ = mutant_command("retry-ignores-metadata")
    db = tmp_path / "c.duckdb"
    args = ["conformance", "--adapter", " ".join(argv), "--scenario", "metadata-retry-identity"]
    args += ["--seeds", "0", "--db", str(db), "--repro-dir", str(tmp_path / "repros")]
    assert main(args) == 1
    doc, _ = run_report(str(db), str(tmp_path / "r"), 10.0, 1)
    (batch,) = doc["conformance"]
    (problem,) = batch["problems"]
    assert problem["key"] == "diverged:prompt:reply"
    assert problem["items"] == ["scenario metadata-retry-identity"]
    assert problem["repro"]["verified"] and Path(problem["repro"]["path"]).is_file()
    div = problem["divergence"]  # the repro's first differing step, both sides' views
    assert div["model"] == {"error": "prompt_conflict"} and "receipt" in div["target"]
    assert set(div["model_views"]) == set(div["target_views"]) == {"pending", "transcript", "calls"}
    html = (tmp_path / "r" / "report.html").read_text()
    assert 'class="sides"' in html and "transcript after" in html
    suites = ET.parse(tmp_path / "r" / "junit.xml").getroot().findall("testsuite")
    (suite,) = [s for s in suites if (s.get("name") or "").startswith("inboxsim.conformance.")]
    assert [c.get("name") for c in suite] == ["diverged:prompt:reply"]
