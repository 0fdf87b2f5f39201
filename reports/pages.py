"""Viewer pages for the runs people ask about: a replayed seed
(``inboxsim replay SEED --html FILE``), a stored run, a shrunk
counterexample, a scenario run (``inboxsim run FILE --html PAGE``). Each
gathers what :func:`.viewer.page_html` shows (the invariants' statements, the
timeline drawn by :mod:`.plots`, the concurrent groups of :mod:`.group_view`)
and returns the page's text; none reads the store or writes a file.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..invariants import REGISTRY
from ..trace.record import Step
from .counterexamples import example_steps
from .group_view import Served, check_panel, kill_panel, trace_panels
from .plots import run_detail, swimlane_svg
from .problems import size_words
from .summary import replay_command
from .viewer import Finding, Page, page_html, step_table

Violation = tuple[str, Sequence[int], str]  # invariant, steps cited, message


def findings(violations: Sequence[Violation]) -> tuple[Finding, ...]:
    """Violations with their invariants' statements (from the registry)."""

    return tuple(
        Finding(inv, tuple(steps), message, REGISTRY[inv].statement if inv in REGISTRY else "")
        for inv, steps, message in violations
    )


def timeline(
    steps: Sequence[Step],
    violations: Sequence[Violation],
    policy: str,
    seed: int | None,
    run_id: int = 0,
) -> str:
    """A run's timeline as inline SVG, each mark a link to ``#step-N``."""

    if not steps:
        return ""
    detail = run_detail(steps, [(v[0], v[1]) for v in violations], policy, seed, run_id)
    return swimlane_svg(detail, lambda step: f"#step-{step}")


def run_page(
    title: str,
    steps: Sequence[Step],
    violations: Sequence[Violation],
    policy: str,
    seed: int | None = None,
    *,
    facts: Sequence[tuple[str, str]] = (),
    scenario: str | None = None,
    links: Sequence[tuple[str, str]] = (),
    intro: str = "",
    svg: str | None = None,
    served: Sequence[Served] = (),
) -> str:
    """The viewer page of one run's steps, with its timeline (``svg``: drawn
    already by :func:`timeline`) and its concurrent groups (``served``: as
    the model served them, when the run was watched by a
    :class:`~.group_view.GroupRecorder`)."""
    svg = timeline(steps, violations, policy, seed) if svg is None else svg
    found = findings(violations)
    groups = trace_panels(steps, [(f.invariant, f.at, f.message) for f in found], served)
    return page_html(
        Page(
            title,
            tuple(steps),
            found,
            tuple(facts),
            svg,
            scenario,
            tuple(links),
            intro,
            groups,
        )
    )


def verdict_words(violations: Sequence[Violation]) -> str:
    return ("violated " + ", ".join(sorted({v[0] for v in violations}))) if violations else "held"


def result_page(result: Any, replay: str = "", served: Sequence[Served] = ()) -> str:
    """The page of a :class:`~inboxsim.sim.run.RunResult` (a replayed seed;
    ``served``: its groups, see :func:`run_page`)."""
    header = result.trace.header
    violations = [(v.invariant, v.steps, v.message) for v in result.violations]
    facts = [
        ("seed", str(result.seed)),
        ("policy", result.policy),
        ("target", header.target),
        ("inboxsim", header.version),
        ("options", json.dumps(result.options, sort_keys=True)),
        ("verdict", f"{verdict_words(violations)}; liveness {result.liveness}"),
        ("trace hash", result.trace_hash),
    ]
    if replay:
        facts.append(("replay", replay))
    return run_page(
        f"seed {result.seed} ({result.policy}): {verdict_words(violations)}",
        result.trace.steps,
        violations,
        result.policy,
        result.seed,
        facts=facts,
        served=served,
    )


@dataclass
class ReportPages:
    """What the report adds to its HTML page: files by path under its
    folder, each problem's step table (by problem id), the timeline of the
    run it draws."""

    files: dict[str, str] = field(default_factory=dict)
    tables: dict[str, str] = field(default_factory=dict)
    timeline: str = ""


def run_file(run_id: int) -> str:
    return f"runs/run-{run_id}.html"


def stored_page(run: Any, trace: Any, svg: str | None = None) -> str:
    """The page of a stored run (:class:`~.traces.StoredRun` and its trace)."""

    what = f"seed {run.seed}" if run.seed is not None else f"scenario {run.scenario}"
    violations = [(v[0], v[1], v[2]) for v in run.violations]
    replay = replay_command(run.seed, run.policy, run.options)
    rows = [
        ("run", f"{run.run_id} in the store"),
        ("seed" if run.seed is not None else "scenario", str(run.seed or run.scenario)),
        ("policy", run.policy),
        ("target", run.target),
        ("inboxsim", run.version),
        ("options", json.dumps(run.options, sort_keys=True)),
        ("verdict", f"{verdict_words(violations)}; liveness {run.liveness}"),
        ("trace hash", run.trace_hash),
        *([("replay", replay)] if replay else []),
    ]
    return run_page(
        f"{what} ({run.policy}): {verdict_words(violations)}",
        trace.steps,
        violations,
        run.policy,
        run.seed,
        facts=rows,
        links=[("back to the report", "../report.html")],
        svg=svg,
    )


def report_pages(
    doc: dict[str, Any],
    stored: dict[int, Any],
    picked: int | None,
    examples: dict[str, tuple[str, dict[str, Any]]],
) -> ReportPages:
    """The report's viewer pages: each problem's shrunk counterexample (its
    scenario file and page) and first failing run, and the run the report's
    timeline draws (``stored``: run id -> (StoredRun, Trace) or None;
    ``examples``: problem id -> (outcome, example) of :mod:`.counterexamples`).
    Fills each problem's ``example`` and ``first.page`` entries in ``doc``."""

    out = ReportPages()
    for run_id, found in stored.items():
        if found is None:
            continue
        run, trace = found
        svg = timeline(trace.steps, run.violations, run.policy, run.seed, run.run_id)
        out.files[run_file(run_id)] = stored_page(run, trace, svg)
        if run_id == picked:  # the report's timeline: the same marks, linking to this page
            out.timeline = svg.replace('href="#step-', f'href="{run_file(run_id)}#step-')
    for problem in doc["problems"]:
        first = problem["first"]
        if stored.get(first["run_id"]) is not None:
            first["page"] = run_file(first["run_id"])
        outcome, example = examples.get(problem["id"], ("not shrunk", {}))
        entry: dict[str, Any] = {"outcome": outcome}
        if outcome == "shrunk":
            steps = example_steps(example)
            violations = [(v[0], v[1], v[2]) for v in example["violations"]]
            scenario_file = f"problems/{problem['id']}.toml"
            page_file = f"problems/{problem['id']}.html"
            final, original = example["final"], example["original"]
            entry.update(
                {
                    "seed": example["seed"],
                    "message": example["message"],
                    "original": original,
                    "final": final,
                    "runs": example["runs"],
                    "seconds": example["seconds"],
                    "verified": example["verified"],
                    "judged_alone": example["judged_alone"],
                    "cut_short": example["cut_short"],
                    "scenario": example["scenario"],
                    "file": scenario_file,
                    "page": page_file,
                }
            )
            out.files[scenario_file] = example["scenario"]
            out.files[page_file] = run_page(
                f"{problem['invariant']} ({problem['policy']}): shrunk counterexample",
                steps,
                violations,
                problem["policy"],
                example["seed"],
                facts=[
                    ("problem", f"{problem['invariant']} in {problem['runs']} runs"),
                    ("shrunk from", f"seed {example['seed']}: {size_words(original)}"),
                    ("to", size_words(final)),
                    ("rerun it", f"inboxsim run {problem['id']}.toml"),
                ],
                scenario=example["scenario"],
                links=[
                    ("back to the report", "../report.html"),
                    ("the scenario file", f"{problem['id']}.toml"),
                    *(
                        [("the first failing run", f"../{first['page']}")]
                        if "page" in first
                        else []
                    ),
                ],
                intro=_intro(problem, example),
            )
            out.tables[problem["id"]] = step_table(steps, findings(violations))
        elif example:
            entry["message"] = example.get("message", "")
        problem["example"] = entry
    return out


def _intro(problem: dict[str, Any], example: dict[str, Any]) -> str:
    how = (
        " judged on this invariant alone (its run broke another one first)"
        if example["judged_alone"]
        else ""
    )
    cut = (
        " The shrink was cut short by its budget: a smaller example may exist."
        if example["cut_short"]
        else ""
    )
    return (
        f"The smallest run found that violates {problem['invariant']}: seed "
        f"{example['seed']} shrunk{how}. {problem['runs']} runs of the store show this "
        f"problem.{cut}"
    )


def scenario_page(result: Any, checks: Sequence[tuple[int, Any]], text: str | None) -> str:
    """The page of one scenario run (``inboxsim run FILE --html``): a file
    with ``group`` steps shows each step as the group driver judged it
    (``checks``: step number and :class:`~inboxsim.search.groups.GroupCheck`,
    None for a kill), its members side by side and the order found or the
    search's explanation; any other file, its trace's steps."""
    header = result.trace.header
    facts = [
        ("scenario", f"{result.name} ({result.origin})"),
        ("policy", result.policy),
        ("target", header.target),
        ("inboxsim", header.version),
        ("verdict", result.verdict),
        *((f"failure at step {f.step}", f.message.splitlines()[0]) for f in result.failures),
    ]
    title = f"scenario {result.name} ({result.policy}) on {header.target}: {result.verdict}"
    if checks:
        panels = tuple(
            kill_panel(number) if check is None else check_panel(check, number)
            for number, check in checks
        )
        page = Page(title, (), (), tuple(facts), "", text, (), "", panels)
        return page_html(page)
    violations = [(v.invariant, v.steps, v.message) for v in result.violations]
    return run_page(
        title, result.trace.steps, violations, result.policy, facts=facts, scenario=text
    )
