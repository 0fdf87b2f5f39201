"""JUnit XML from the summary document (pure): one test case per invariant
and policy (a violated one is the failing case of its problem: its seeds and
shrunk counterexample), one per scenario, policy and target when the store holds scenario
runs, and one per mutant of the latest mutant campaign (a failure when it
survived: the harness missed a planted bug), and one per conformance problem of
each target's latest conformance batch.

A held invariant's case carries the runs that exercised it and the 95 %
upper bound on its failure rate as properties; one never exercised is skipped,
so CI dashboards do not count it as green.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from .problems import size_words


def junit_xml(doc: dict[str, Any]) -> str:
    suites = ET.Element("testsuites", name="inboxsim")
    _invariant_suite(suites, doc)
    if doc["scenarios"]:
        _scenario_suite(suites, doc)
    if doc["mutants"]:
        _mutant_suite(suites, doc["mutants"])
    for batch in doc.get("conformance", []):
        _conformance_suite(suites, batch)
    ET.indent(suites)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
    )


def _suite(parent: ET.Element, name: str, cases: int, failures: int, skipped: int) -> ET.Element:
    return ET.SubElement(
        parent,
        "testsuite",
        name=name,
        tests=str(cases),
        failures=str(failures),
        errors="0",
        skipped=str(skipped),
    )


def _invariant_suite(parent: ET.Element, doc: dict[str, Any]) -> None:
    invs = doc["invariants"]
    suite = _suite(
        parent,
        "inboxsim.invariants",
        len(invs),
        sum(1 for i in invs if i["status"] == "violated"),
        sum(1 for i in invs if i["status"] == "not exercised"),
    )
    problems = {(p["invariant"], p["policy"]): p for p in doc.get("problems", [])}
    for inv in invs:
        case = ET.SubElement(
            suite, "testcase", classname=f"inboxsim.invariants.{inv['policy']}", name=inv["id"]
        )
        props = ET.SubElement(case, "properties")
        for key in (
            "runs_exercised",
            "runs_violated",
            "upper_bound_exact",
            "upper_bound_rule_of_three",
            "source",
        ):
            if inv[key] is not None:
                ET.SubElement(props, "property", name=key, value=str(inv[key]))
        if inv["status"] == "violated":
            problem = problems.get((inv["id"], inv["policy"]))
            message = f"violated in {inv['runs_violated']} of {inv['runs_exercised']} runs"
            failure = ET.SubElement(case, "failure", message=message, type="InvariantViolated")
            if problem:
                ET.SubElement(
                    props, "property", name="seeds", value=" ".join(map(str, problem["seeds"]))
                )
                failure.text = _problem_text(problem)
        elif inv["status"] == "not exercised":
            ET.SubElement(case, "skipped", message="no run exercised this invariant")


def _problem_text(p: dict[str, Any]) -> str:
    """A problem in full: its first run, its seeds, its shrunk counterexample."""
    first, example = p["first"], p.get("example") or {}
    lines = [f"first: run {first['run_id']} seed {first['seed']}: {first['message']}"]
    if first["replay"]:
        lines.append(f"replay: {first['replay']}")
    if p["seeds"]:
        lines.append(f"seeds ({len(p['seeds'])}): {' '.join(map(str, p['seeds']))}")
    if p["scenarios"]:
        lines.append(f"scenarios: {' '.join(p['scenarios'])}")
    if p["also_violated"]:
        also = ", ".join(f"{k} ({v})" for k, v in p["also_violated"].items())
        lines.append(f"also violated in the same runs: {also}")
    if example.get("outcome") == "shrunk":
        lines += [
            f"shrunk counterexample ({size_words(example['final'])}): {example['file']}, "
            f"viewer page {example['page']}",
            example["scenario"].rstrip("\n"),
        ]
    return "\n".join(lines)


def _scenario_suite(parent: ET.Element, doc: dict[str, Any]) -> None:
    scenarios = doc["scenarios"]
    suite = _suite(
        parent, "inboxsim.scenarios", len(scenarios), sum(1 for s in scenarios if s["failed"]), 0
    )
    for s in scenarios:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"inboxsim.scenarios.{s['policy']}.{s['target']}",
            name=s["name"],
            file=s["file"],
        )
        props = ET.SubElement(case, "properties")
        for key in ("runs", "expectations", "expectations_failed"):
            ET.SubElement(props, "property", name=key, value=str(s[key]))
        if s["failed"]:
            failure = ET.SubElement(
                case,
                "failure",
                message=f"failed in {s['failed']} of {s['runs']} runs",
                type="ScenarioFailed",
            )
            failure.text = s["first_failure"]


def _conformance_suite(parent: ET.Element, batch: dict[str, Any]) -> None:
    """A conformance batch: one failing case per problem (its members listed),
    or one passing case when the target conformed."""
    problems = batch.get("problems", [])
    name = f"inboxsim.conformance.{batch['target']}"
    suite = _suite(parent, name, max(1, len(problems)), len(problems), 0)
    if not problems:
        ET.SubElement(suite, "testcase", classname=name, name="conformance")
        return
    for p in problems:
        case = ET.SubElement(suite, "testcase", classname=name, name=p["key"])
        failure = ET.SubElement(
            case, "failure", message=f"{p['title']} ({p['count']})", type="ConformanceFailed"
        )
        lines = [f"{', '.join(p['items'])}", f"first: {p['first']}: {p['summary']}"]
        if p["repro_command"]:
            lines.append(f"rerun: {p['repro_command']}")
        if p["repro"]:
            lines += [f"minimal repro: {p['repro']['path']}", p["repro"]["text"].rstrip("\n")]
        failure.text = "\n".join(lines)


def _mutant_suite(parent: ET.Element, m: dict[str, Any]) -> None:
    rows = m["rows"]
    suite = _suite(parent, "inboxsim.mutants", len(rows), len(m["survived"]), 0)
    for r in rows:
        case = ET.SubElement(suite, "testcase", classname="inboxsim.mutants", name=r["mutant"])
        props = ET.SubElement(case, "properties")
        for key in (
            "killed_by_kind",
            "killed_by",
            "seed",
            "seconds_to_detect",
            "runs",
            "shrunk_ops",
        ):
            if r[key] is not None:
                ET.SubElement(props, "property", name=key, value=str(r[key]))
        if r["killed_by_kind"] == "none":
            ET.SubElement(
                case,
                "failure",
                message=f"survived {r['runs']} runs: no invariant, divergence or expectation caught it",
                type="MutantSurvived",
            )
