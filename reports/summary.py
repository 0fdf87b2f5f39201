"""What a store says, as plain values: the facts read from it (:func:`load_facts`,
the only function here that queries) and the summary computed from them
(:func:`summarize`, pure), which the JSON, Markdown, HTML and JUnit outputs share.

"Quantified green": an invariant that held in ``n`` runs that exercised it
(reached a step where it could have failed) is not proven; what the runs
support is a 95 % upper bound on its per-run failure rate: ``3/n`` by the
rule of three, exactly ``1 - 0.05 ** (1/n)`` (the rate at which ``n`` clean
runs would still happen 5 % of the time).

``n`` counts distinct runs (the store's ``distinct_runs`` view): a seed run
again under the same policy, options, version and target is the same run,
and no new evidence, so a sweep re-run after a kill does not shrink a bound.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from typing import Any

from ..invariants import REGISTRY
from ..trace.probes import PROBES
from .conformance_view import load_conformance, markdown_lines, summarize_conformance
from .problems import run_problems, size_words

Row = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Facts:
    """Query results, as tuples; everything the reports need from a store."""

    db: str
    schema_version: int
    # run_id, seed, policy, target, version, options, verdict, liveness, ops, seconds, scenario,
    # policy_hash
    runs: list[Row]
    violations: list[Row]  # run_id, invariant, steps, message
    exercise: list[Row]  # invariant, policy, runs_exercised, runs_violated
    probes: list[Row]  # policy, probe, runs_hit, hits, runs
    latency: list[Row]  # policy, delivery, n, mean, p5, p25, p50, p75, p95, max
    registry: dict[str, tuple[str, str]] = field(default_factory=dict)  # id -> statement, source
    probe_info: dict[str, tuple[bool, str]] = field(
        default_factory=dict
    )  # name -> required, description
    # run_id, scenario, file, policy, target, passed, expectations, expectations_failed, failures
    scenario_runs: list[Row] = field(default_factory=list)
    # the latest campaign: campaign_id, mutant, killed_by_kind, killed_by, seed,
    # seconds_to_detect, runs, shrunk_ops, recorded_at
    mutants: list[Row] = field(default_factory=list)
    conformance: list[Row] = field(default_factory=list)  # latest batch per target
    stored_runs: int = 0  # rows of runs; ``runs`` holds each distinct run once


def load_facts(con: Any, db: str, schema_version: int) -> Facts:
    """Read the facts (the I/O edge)."""

    def q(sql: str) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = con.execute(sql).fetchall()
        return rows

    return Facts(
        db=db,
        schema_version=schema_version,
        runs=q(
            "SELECT run_id, seed, policy, target, version, options, verdict, liveness, ops, "
            "seconds, "
            "scenario, policy_hash FROM distinct_runs ORDER BY run_id"
        ),
        violations=q(
            "SELECT run_id, invariant, steps, message FROM violations "
            "WHERE run_id IN (SELECT run_id FROM distinct_runs) ORDER BY run_id, rowid"
        ),
        exercise=q("SELECT * FROM invariant_exercise ORDER BY invariant, policy"),
        probes=q(
            "SELECT policy, probe, runs_hit, hits, runs FROM probe_coverage ORDER BY policy, probe"
        ),
        latency=q(
            "SELECT policy, delivery, count(*), avg(latency), "
            "quantile_cont(latency, 0.05), quantile_cont(latency, 0.25), quantile_cont(latency, "
            "0.5), "
            "quantile_cont(latency, 0.75), quantile_cont(latency, 0.95), max(latency) "
            "FROM promotion_latency GROUP BY ALL ORDER BY policy, delivery"
        ),
        registry={i.id: (i.statement, i.source) for i in REGISTRY.values()},
        probe_info={p.name: (p.required, p.description) for p in PROBES},
        scenario_runs=q(
            "SELECT s.run_id, s.scenario, s.file, r.policy, r.target, s.passed, s.expectations, "
            "s.expectations_failed, s.failures FROM scenario_runs s "
            "JOIN distinct_runs r USING (run_id) ORDER BY s.run_id"
        ),
        mutants=q(
            "SELECT campaign_id, mutant, killed_by_kind, killed_by, seed, seconds_to_detect, runs, "
            "shrunk_ops, recorded_at FROM mutants "
            "WHERE campaign_id = (SELECT max(campaign_id) FROM mutants) ORDER BY mutant"
        ),
        conformance=load_conformance(con),
        stored_runs=q("SELECT count(*) FROM runs")[0][0],
    )


def upper_bounds(n: int) -> tuple[float | None, float | None]:
    """(rule of three, exact) 95 % upper bounds on the per-run failure rate
    after ``n`` clean runs; None when nothing exercised the invariant."""
    if n <= 0:
        return None, None
    return min(1.0, 3.0 / n), 1.0 - 0.05 ** (1.0 / n)


def replay_command(seed: int | None, policy: str, options: dict[str, Any]) -> str | None:
    if seed is None:
        return None
    cmd = f"inboxsim replay {seed} --policy {shlex.quote(policy)} --ops {options.get('ops', 100)}"
    cmd += " --only-expected" if options.get("only_expected") else ""
    concurrency = options.get("concurrency", 1)
    return cmd + (f" --concurrency {concurrency}" if concurrency > 1 else "")


def _replay(run: Row) -> str | None:
    return replay_command(None if run[1] is None else int(run[1]), run[2], json.loads(run[5]))


def summarize(f: Facts) -> dict[str, Any]:
    """The JSON summary document (pure)."""
    runs = f.runs
    by_run: dict[int, list[Row]] = {}
    for v in f.violations:
        by_run.setdefault(v[0], []).append(v)
    policies = sorted({r[2] for r in runs})
    invariants = []
    exercised: dict[tuple[str, str], tuple[int, int]] = {
        (e[0], e[1]): (e[2], e[3]) for e in f.exercise
    }
    violated_runs: dict[tuple[str, str], set[int]] = {}
    run_policy = {r[0]: r[2] for r in runs}
    for run_id, invariant, _steps, _msg in f.violations:
        violated_runs.setdefault((invariant, run_policy[run_id]), set()).add(run_id)
    names = sorted(set(f.registry) | {k[0] for k in exercised} | {k[0] for k in violated_runs})
    for name in names:
        for policy in policies:
            n, _ = exercised.get((name, policy), (0, 0))
            k = len(violated_runs.get((name, policy), ()))
            n = max(n, k)  # a violation exercises its invariant even if the run stopped first
            rule3, exact = upper_bounds(n) if k == 0 else (None, None)
            statement, source = f.registry.get(name, ("", ""))
            invariants.append(
                {
                    "id": name,
                    "policy": policy,
                    "statement": statement,
                    "source": source,
                    "status": "violated" if k else ("held" if n else "not exercised"),
                    "runs_exercised": n,
                    "runs_violated": k,
                    "upper_bound_rule_of_three": _round(rule3),
                    "upper_bound_exact": _round(exact),
                }
            )
    failing = []
    for r in runs:
        found = by_run.get(r[0])
        if not found:
            continue
        options = json.loads(r[5])
        failing.append(
            {
                "run_id": r[0],
                "seed": None if r[1] is None else int(r[1]),
                "policy": r[2],
                "scenario": r[10],
                "invariants": sorted({v[1] for v in found}),
                "steps": list(found[0][2]),
                "message": found[0][3],
                "replay": replay_command(None if r[1] is None else int(r[1]), r[2], options),
            }
        )
    seconds = sum(r[9] for r in runs)
    steps = sum(r[8] for r in runs)
    scenarios_failed = any(not r[5] for r in f.scenario_runs)
    survived = any(m[2] == "none" for m in f.mutants)
    return {
        "command": "report",
        "db": f.db,
        "schema_version": f.schema_version,
        "versions": sorted({r[4] for r in runs}),
        "targets": sorted({r[3] for r in runs}),
        "policies": policies,
        "runs": len(runs),
        "stored_runs": f.stored_runs,
        "verdicts": {
            "held": sum(1 for r in runs if r[6] != "violated"),
            "violated": sum(1 for r in runs if r[6] == "violated"),
        },
        "liveness": _count(r[7] for r in runs),
        "invariants": invariants,
        "failing": failing,
        "problems": run_problems(runs, f.violations, f.registry, _replay),
        "scenarios": _scenarios(f.scenario_runs),
        "mutants": _mutants(f.mutants),
        "probes": [
            {
                "policy": p[0],
                "probe": p[1],
                "runs_hit": p[2],
                "hits": int(p[3]),
                "runs": p[4],
                "required": f.probe_info.get(p[1], (False, ""))[0],
                "description": f.probe_info.get(p[1], (False, ""))[1],
            }
            for p in f.probes
        ],
        "missing_required_probes": _missing(f),
        "latency": [
            {
                "policy": row[0],
                "delivery": row[1],
                "promotions": row[2],
                "mean": _round(row[3]),
                "p50": _round(row[6]),
                "p95": _round(row[8]),
                "max": row[9],
            }
            for row in f.latency
        ],
        "throughput": {
            "steps": steps,
            "run_seconds": round(seconds, 3),
            "steps_per_second": round(steps / seconds, 1) if seconds > 0 else None,
        },
        "conformance": (conformance := summarize_conformance(f.conformance)),
        "exit_code": 1
        if failing or scenarios_failed or survived or any(b["failed"] for b in conformance)
        else 0,
    }


def _scenarios(rows: list[Row]) -> list[dict[str, Any]]:
    """One entry per scenario, policy and target: its runs, how many failed,
    the expectations checked and failed, and the first failure."""
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for run_id, name, file, policy, target, passed, checked, failed, failures in rows:
        entry = out.setdefault(
            (name, policy, target),
            {
                "name": name,
                "file": file,
                "policy": policy,
                "target": target,
                "runs": 0,
                "failed": 0,
                "expectations": 0,
                "expectations_failed": 0,
                "first_failure": None,
            },
        )
        entry["runs"] += 1
        entry["expectations"] += checked
        entry["expectations_failed"] += failed
        if not passed:
            entry["failed"] += 1
            if entry["first_failure"] is None:
                listed = json.loads(failures)
                first = listed[0] if listed else {"step": None, "message": "failed"}
                where = f"step {first['step']}" if first["step"] is not None else "scenario"
                entry["first_failure"] = f"run {run_id}, {where}: {first['message']}"
    return [out[k] for k in sorted(out)]


def _mutants(rows: list[Row]) -> dict[str, Any] | None:
    """The latest mutant campaign (the kill matrix), or None when there is none."""
    if not rows:
        return None
    return {
        "campaign_id": rows[0][0],
        "recorded_at": str(rows[0][8])[:19],  # to the second
        "killed": sum(1 for r in rows if r[2] != "none"),
        "survived": [r[1] for r in rows if r[2] == "none"],
        "rows": [
            {
                "mutant": r[1],
                "killed_by_kind": r[2],
                "killed_by": r[3],
                "seed": None if r[4] is None else int(r[4]),
                "seconds_to_detect": _round(r[5], 3),
                "runs": r[6],
                "shrunk_ops": r[7],
            }
            for r in rows
        ],
    }


def _missing(f: Facts) -> dict[str, list[str]]:
    hit = {(p[0], p[1]) for p in f.probes}
    out = {}
    for policy in sorted({r[2] for r in f.runs}):
        gone = [
            n for n, (req, _d) in sorted(f.probe_info.items()) if req and (policy, n) not in hit
        ]
        if gone:
            out[policy] = gone
    return out


def _count(values: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return dict(sorted(out.items()))


def _round(x: float | None, digits: int = 4) -> float | None:
    return None if x is None else round(float(x), digits)


def headline(doc: dict[str, Any]) -> str:
    """The report's verdict in a few words (Markdown and HTML)."""
    problems = []
    if doc["failing"]:
        problems.append("violations found")
    if any(s["failed"] for s in doc["scenarios"]):
        problems.append("scenarios failed")
    if doc["mutants"] and doc["mutants"]["survived"]:
        problems.append("mutants survived")
    if any(b["failed"] for b in doc.get("conformance", [])):
        problems.append("conformance failed")
    return "; ".join(problems) if problems else "every judged invariant held"


def repeats_note(doc: dict[str, Any]) -> str:
    """How many stored runs repeated an earlier one (counted once), if any."""
    extra = doc.get("stored_runs", doc["runs"]) - doc["runs"]
    return f" ({extra} more stored runs repeat one of them and count once)" if extra > 0 else ""


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _dash(value: Any) -> str:
    return "-" if value is None else str(value)


def problem_lines(doc: dict[str, Any], max_seeds: int = 20) -> list[str]:
    """The Markdown of the failing runs grouped into problems: each one's
    count, first seed and replay, seeds, and shrunk counterexample."""
    problems = doc.get("problems", [])
    out = [
        "",
        f"### Problems ({len(problems)}) in {len(doc['failing'])} failing runs",
        "",
        "Grouped by the invariant violated (a run that violated two counts in both).",
    ]
    for n, p in enumerate(problems, start=1):
        first, example = p["first"], p.get("example") or {}
        what = f"seed {first['seed']}" if first["seed"] is not None else f"run {first['run_id']}"
        if first["seed"] is None and first["scenario"]:
            what = f"scenario {first['scenario']}"
        out += [
            "",
            f"#### {n}. `{p['invariant']}` ({p['policy']}): {p['runs']} runs",
            "",
            f"- first: **{what}**: {_cell(first['message'])}",
        ]
        if first["replay"]:
            out.append(f"  - `{first['replay']}`")
        if p["seeds"]:
            more = len(p["seeds"]) - max_seeds
            listed = ", ".join(str(x) for x in p["seeds"][:max_seeds])
            out.append(f"- seeds: {listed}" + (f" and {more} more" if more > 0 else ""))
        if p["also_violated"]:
            also = ", ".join(f"`{k}` ({v})" for k, v in p["also_violated"].items())
            out.append(f"- also violated in the same runs: {also}")
        if example.get("outcome") == "shrunk":
            out += [
                f"- shrunk counterexample: {size_words(example['final'])} (seed "
                f"{example['seed']}: {size_words(example['original'])}); `{example['file']}`, "
                f"viewer page `{example['page']}`",
                "",
                "```toml",
                *example["scenario"].rstrip("\n").splitlines(),
                "```",
            ]
        elif example.get("message"):
            out.append(f"- not shrunk: {_cell(example['message'])}")
    return out


def markdown(doc: dict[str, Any], max_failing: int = 20) -> str:
    """A Markdown summary, fit for a CI job summary or a PR comment (pure)."""
    verdict = "❌ " + headline(doc) if doc["exit_code"] else "✅ " + headline(doc)
    out = [
        f"## inboxsim report: {verdict}",
        "",
        f"{doc['runs']} runs{repeats_note(doc)} "
        f"({', '.join(doc['policies']) or 'no policy'}; target "
        f"{', '.join(doc['targets']) or '-'}; inboxsim {', '.join(doc['versions']) or '-'}): "
        f"{doc['verdicts']['held']} held, {doc['verdicts']['violated']} violated. "
        f"{doc['throughput']['steps']} steps.",
        "",
        "| invariant | policy | status | runs exercised | runs violated | 95% upper bound on "
        "failure rate (exact / 3/n) |",
        "| --- | --- | --- | ---: | ---: | --- |",
    ]
    order = {"violated": 0, "held": 1, "not exercised": 2}
    for inv in sorted(doc["invariants"], key=lambda i: (order[i["status"]], i["id"], i["policy"])):
        bound = (
            f"{inv['upper_bound_exact']:.2%} / {inv['upper_bound_rule_of_three']:.2%}"
            if inv["upper_bound_exact"] is not None
            else (
                "-"
                if inv["status"] != "violated"
                else f"observed {inv['runs_violated']}/{inv['runs_exercised']}"
            )
        )
        mark = {"violated": "❌ violated", "held": "✅ held", "not exercised": "⚪ not exercised"}[
            inv["status"]
        ]
        out.append(
            f"| `{inv['id']}` | {inv['policy']} | {mark} | {inv['runs_exercised']} | "
            f"{inv['runs_violated']} | {bound} |"
        )
    if doc["failing"]:
        out += problem_lines(doc, max_failing)
    if doc["scenarios"]:
        failed = sum(1 for s in doc["scenarios"] if s["failed"])
        out += [
            "",
            f"### Scenarios ({len(doc['scenarios'])}, {failed} failing)",
            "",
            "| scenario | policy | target | runs | failed | expectations (failed) "
            "| first failure |",
            "| --- | --- | --- | ---: | ---: | ---: | --- |",
        ]
        for sc in sorted(doc["scenarios"], key=lambda x: (not x["failed"], x["name"])):
            mark = "❌" if sc["failed"] else "✅"
            out.append(
                f"| {mark} `{sc['name']}` | {sc['policy']} | {sc['target']} | {sc['runs']} | "
                f"{sc['failed']} | {sc['expectations']} ({sc['expectations_failed']}) | "
                f"{_cell(sc['first_failure'] or '')} |"
            )
    if doc["mutants"]:
        m = doc["mutants"]
        out += [
            "",
            f"### Mutant kill matrix (campaign {m['campaign_id']}): "
            f"{m['killed']}/{len(m['rows'])} killed",
            "",
            "| mutant | killed by | detail | seed | seconds to detect | runs | shrunk ops |",
            "| --- | --- | --- | ---: | ---: | ---: | ---: |",
        ]
        for r in m["rows"]:
            kind = "❌ survived" if r["killed_by_kind"] == "none" else r["killed_by_kind"]
            out.append(
                f"| `{r['mutant']}` | {kind} | {_cell(r['killed_by'] or '')} | "
                f"{_dash(r['seed'])} | "
                f"{_dash(r['seconds_to_detect'])} | {r['runs']} | {_dash(r['shrunk_ops'])} |"
            )
    if doc["missing_required_probes"]:
        out += ["", "### Required probes never hit", ""]
        for policy, names in doc["missing_required_probes"].items():
            out.append(f"- {policy}: {', '.join(names)}")
    out += markdown_lines(doc.get("conformance", []))
    out.append("")
    return "\n".join(out)
