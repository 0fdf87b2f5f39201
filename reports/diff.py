"""``inboxsim diff``: what changed between two stores, or between a store and
the current model and checkers (``--rerun``).

The comparisons are pure functions of :class:`StoreFacts` (read by
:func:`store_facts`) and of rerun outcomes; only the ``store_facts`` and
:func:`rerun_store` functions touch a database or run the simulator.

Runs are matched by (policy, options, seed). A seed present in one store
only is listed but never counted as a regression. Something regressed, and
the command exits 1, when a seed that held now fails, an invariant that held
everywhere is now violated, or a required probe that was hit is no longer hit.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import HarnessError
from ..sim.run import RunOptions, run_decisions
from ..store.policies import current_policy, load_fields
from ..store.traces import stored_runs
from ..trace.probes import REQUIRED
from .check import skipped_lines

Key = tuple[str, str, int]  # policy, options, seed


@dataclass(frozen=True, slots=True)
class StoreFacts:
    db: str
    runs: dict[Key, frozenset[str]]  # the latest run of each key: its violated invariants
    probes: dict[tuple[str, str], float]  # (policy, probe) -> fraction of runs that hit it
    required: frozenset[str]
    steps: int
    seconds: float
    # (scenario, policy, target) -> whether its latest run passed
    scenarios: dict[tuple[str, str, str], bool] = field(default_factory=dict)


def store_facts(con: Any, db: str) -> StoreFacts:

    violated: dict[int, set[str]] = {}
    for run_id, invariant in con.execute(
        "SELECT DISTINCT run_id, invariant FROM violations"
    ).fetchall():
        violated.setdefault(run_id, set()).add(invariant)
    runs: dict[Key, frozenset[str]] = {}
    for run_id, policy, options, seed in con.execute(
        "SELECT run_id, policy, options, seed FROM runs WHERE seed IS NOT NULL ORDER BY run_id"
    ).fetchall():
        runs[(policy, options, int(seed))] = frozenset(violated.get(run_id, ()))  # later runs win
    probes = {
        (p, name): hit / total
        for p, name, hit, total in con.execute(
            "SELECT policy, probe, runs_hit, runs FROM probe_coverage"
        ).fetchall()
    }
    row = con.execute(
        "SELECT coalesce(sum(ops), 0), coalesce(sum(seconds), 0) FROM runs"
    ).fetchone()
    scenarios = {
        (name, policy, target): bool(passed)
        for name, policy, target, passed in con.execute(
            "SELECT s.scenario, r.policy, r.target, s.passed FROM scenario_runs s "
            "JOIN runs r USING (run_id) ORDER BY s.run_id"
        ).fetchall()
    }  # later runs win
    return StoreFacts(db, runs, probes, frozenset(REQUIRED), int(row[0]), float(row[1]), scenarios)


def _seed_entry(
    key: Key, before: frozenset[str] | None, after: frozenset[str] | None
) -> dict[str, Any]:
    return {
        "policy": key[0],
        "options": json.loads(key[1]),
        "seed": key[2],
        "before": sorted(before) if before is not None else None,
        "after": sorted(after) if after is not None else None,
    }


def _scenario_entry(key: tuple[str, str, str]) -> dict[str, str]:
    return {"scenario": key[0], "policy": key[1], "target": key[2]}


def diff_stores(base: StoreFacts, new: StoreFacts) -> dict[str, Any]:
    """The regression document (pure)."""
    both = sorted(base.runs.keys() & new.runs.keys())
    new_failing = [k for k in both if new.runs[k] and not base.runs[k]]
    fixed = [k for k in both if base.runs[k] and not new.runs[k]]
    still = [k for k in both if base.runs[k] and new.runs[k]]
    changed = [k for k in still if base.runs[k] != new.runs[k]]
    # Invariants are compared over the seeds both stores ran: a store of
    # another policy or seed range is not evidence of a regression.
    inv_base: frozenset[str] = frozenset().union(*(base.runs[k] for k in both))
    inv_new: frozenset[str] = frozenset().union(*(new.runs[k] for k in both))
    policies = {k[0] for k in base.runs} & {k[0] for k in new.runs}
    probe_names = sorted({n for p, n in base.probes} | {n for p, n in new.probes})
    probes = []
    lost_required = []
    for policy in sorted(policies):
        for name in probe_names:
            b, n = base.probes.get((policy, name), 0.0), new.probes.get((policy, name), 0.0)
            if b != n:
                probes.append(
                    {"policy": policy, "probe": name, "before": round(b, 4), "after": round(n, 4)}
                )
            if b > 0 and n == 0 and name in new.required:
                lost_required.append({"policy": policy, "probe": name})
    tp_base = base.steps / base.seconds if base.seconds > 0 else None
    tp_new = new.steps / new.seconds if new.seconds > 0 else None
    shared = sorted(base.scenarios.keys() & new.scenarios.keys())
    scenarios_failing = [k for k in shared if base.scenarios[k] and not new.scenarios[k]]
    scenarios_fixed = [k for k in shared if new.scenarios[k] and not base.scenarios[k]]
    regressed = bool(new_failing or (inv_new - inv_base) or lost_required or scenarios_failing)
    return {
        "command": "diff",
        "base": base.db,
        "new": new.db,
        "compared_seeds": len(both),
        "only_in_base": len(base.runs.keys() - new.runs.keys()),
        "only_in_new": len(new.runs.keys() - base.runs.keys()),
        "seeds": {
            "new_failing": [_seed_entry(k, base.runs[k], new.runs[k]) for k in new_failing],
            "fixed": [_seed_entry(k, base.runs[k], new.runs[k]) for k in fixed],
            "still_failing": [_seed_entry(k, base.runs[k], new.runs[k]) for k in still],
            "failing_differently": [_seed_entry(k, base.runs[k], new.runs[k]) for k in changed],
        },
        "invariants": {
            "new": sorted(inv_new - inv_base),
            "fixed": sorted(inv_base - inv_new),
            "still_violated": sorted(inv_base & inv_new),
        },
        "probes": {"changed": probes, "lost_required": lost_required},
        "scenarios": {
            "compared": len(shared),
            "new_failing": [_scenario_entry(k) for k in scenarios_failing],
            "fixed": [_scenario_entry(k) for k in scenarios_fixed],
        },
        "throughput": {
            "base_steps_per_second": None if tp_base is None else round(tp_base, 1),
            "new_steps_per_second": None if tp_new is None else round(tp_new, 1),
            "ratio": None if not (tp_base and tp_new) else round(tp_new / tp_base, 3),
        },
        "regressed": regressed,
        "exit_code": 1 if regressed else 0,
    }


def diff_lines(doc: dict[str, Any]) -> list[str]:
    s, inv = doc["seeds"], doc["invariants"]
    lines = [
        f"diff {doc['base']} -> {doc['new']}: {doc['compared_seeds']} seeds in both "
        f"({doc['only_in_base']} only in base, {doc['only_in_new']} only in new)",
        f"  seeds: {len(s['new_failing'])} newly failing, {len(s['fixed'])} fixed, "
        f"{len(s['still_failing'])} still failing",
    ]
    for e in s["new_failing"][:20]:
        lines.append(f"    NEW seed {e['seed']} ({e['policy']}): {', '.join(e['after'])}")
    for e in s["fixed"][:20]:
        lines.append(f"    fixed seed {e['seed']} ({e['policy']}): was {', '.join(e['before'])}")
    lines.append(
        f"  invariants: new {', '.join(inv['new']) or '-'}; fixed "
        f"{', '.join(inv['fixed']) or '-'}; "
        f"still violated {', '.join(inv['still_violated']) or '-'}"
    )
    for p in doc["probes"]["changed"][:30]:
        lines.append(
            f"  probe {p['probe']} ({p['policy']}): {p['before']:.0%} -> {p['after']:.0%} of runs"
        )
    for p in doc["probes"]["lost_required"]:
        lines.append(f"  LOST required probe {p['probe']} ({p['policy']})")
    sc = doc["scenarios"]
    if sc["compared"]:
        lines.append(
            f"  scenarios: {sc['compared']} in both, {len(sc['new_failing'])} newly failing, "
            f"{len(sc['fixed'])} fixed"
        )
    for e in sc["new_failing"][:20]:
        lines.append(f"    NEW failing scenario {e['scenario']} ({e['policy']}, {e['target']})")
    t = doc["throughput"]
    lines.append(
        f"  throughput: {t['base_steps_per_second']} -> {t['new_steps_per_second']} steps/s"
        + (f" (x{t['ratio']})" if t["ratio"] else "")
    )
    lines.append("verdict: " + ("REGRESSED" if doc["regressed"] else "no regression"))
    return lines


# --- --rerun: the stored decisions under the current model and checkers ----------


@dataclass(frozen=True, slots=True)
class RerunChange:
    run_id: int
    seed: int | None
    policy: str
    what: tuple[str, ...]  # of "replies", "observations", "verdict"
    first_step: int | None  # the first step whose reply or observations differ
    operation: str | None  # the request at that step (None: a crash step, or length)
    before: tuple[str, ...]
    after: tuple[str, ...]


def compare_rerun(
    run_id: int,
    seed: int | None,
    policy: str,
    stored: Sequence[tuple[str, str | None, str | None, str]],
    stored_violations: frozenset[str],
    texts: Sequence[tuple[str, str, str]],
    violations: frozenset[str],
) -> RerunChange | None:
    """Compare a stored run (per step: op, request, reply, observed text) with
    its rerun's step texts and verdict (pure)."""
    what: list[str] = []
    first: int | None = None
    operation: str | None = None
    for i in range(max(len(stored), len(texts))):
        if i >= len(stored) or i >= len(texts):
            first = i
            operation = stored[i][0] if i < len(stored) else None
            what.append("replies")  # the run took a different length: replies changed its course
            break
        op, _req, rep, obs = stored[i]
        new_rep = None if texts[i][1] == "null" else texts[i][1]
        if new_rep != rep or texts[i][2] != obs:
            first, operation = i, op
            if new_rep != rep:
                what.append("replies")
            if texts[i][2] != obs:
                what.append("observations")
            break
    if stored_violations != violations:
        what.append("verdict")
    if not what:
        return None
    return RerunChange(
        run_id,
        seed,
        policy,
        tuple(what),
        first,
        operation,
        tuple(sorted(stored_violations)),
        tuple(sorted(violations)),
    )


_NOT_REPLAYABLE = "a scenario run or another target's run: no model decisions to replay"


def rerun_store(
    con: Any, progress: Callable[[int, int], None] | None = None
) -> tuple[int, list[RerunChange], list[tuple[int, str]]]:
    """Replay every stored run's decision list under the current model,
    policy and checkers; return (runs replayed, changes, skipped runs with
    why: a custom policy stored without its fields)."""

    runs = stored_runs(con)
    fields = load_fields(con)
    changes: list[RerunChange] = []
    skipped: list[tuple[int, str]] = []
    replayed = 0
    for n, run in enumerate(runs, 1):
        if not run.target.startswith("model") or run.scenario is not None:
            # Only the reference model can be rerun in process, and only a
            # seeded run has a decision list to replay (a scenario is its file).
            skipped.append((run.run_id, _NOT_REPLAYABLE))
            continue
        options = RunOptions(
            ops=run.options.get("ops", 100),
            liveness_bound=run.options.get("liveness_bound"),
            only_expected=bool(run.options.get("only_expected", False)),
        )
        try:
            policy = current_policy(run.policy, run.policy_hash, fields)
        except HarnessError as exc:
            skipped.append((run.run_id, str(exc)))
            continue
        result = run_decisions(run.decisions, policy, options)
        replayed += 1
        stored = con.execute(
            "SELECT coalesce(json_extract_string(request, '$.op'), kind), request, reply, observed "
            "FROM steps WHERE run_id = ? ORDER BY idx",
            [run.run_id],
        ).fetchall()
        change = compare_rerun(
            run.run_id,
            run.seed,
            run.policy,
            stored,
            frozenset(v[0] for v in run.violations),
            result.texts,
            frozenset(v.invariant for v in result.violations),
        )
        if change is not None:
            changes.append(change)
        if progress is not None:
            progress(n, len(runs))
    return replayed, changes, skipped


def rerun_document(
    db: str,
    replayed: int,
    changes: Sequence[RerunChange],
    skipped: Sequence[tuple[int, str]] = (),
) -> dict[str, Any]:
    by_invariant: dict[str, list[int]] = {}
    by_operation: dict[str, list[int]] = {}
    for c in changes:
        for name in sorted(set(c.before) ^ set(c.after)):
            by_invariant.setdefault(name, []).append(c.run_id)
        by_operation.setdefault(c.operation or "-", []).append(c.run_id)
    regressed = any(set(c.after) - set(c.before) for c in changes)
    return {
        "command": "diff",
        "rerun": db,
        "runs": replayed,
        "skipped": [{"run_id": run_id, "reason": why} for run_id, why in skipped],
        "changed": [
            {
                "run_id": c.run_id,
                "seed": c.seed,
                "policy": c.policy,
                "what": list(c.what),
                "first_step": c.first_step,
                "operation": c.operation,
                "before": list(c.before),
                "after": list(c.after),
            }
            for c in changes
        ],
        "by_invariant": dict(sorted(by_invariant.items())),
        "by_operation": dict(sorted(by_operation.items())),
        "regressed": regressed,
        "exit_code": 1 if regressed else 0,
    }


def rerun_lines(doc: dict[str, Any]) -> list[str]:

    lines = [f"reran {doc['runs']} stored runs of {doc['rerun']}: {len(doc['changed'])} changed"]
    lines += skipped_lines(doc["skipped"])
    for name, ids in doc["by_invariant"].items():
        lines.append(f"  invariant {name}: {len(ids)} run(s) changed verdict, e.g. run {ids[0]}")
    for op, ids in doc["by_operation"].items():
        lines.append(f"  first difference at operation {op}: {len(ids)} run(s)")
    for c in doc["changed"][:20]:
        lines.append(
            f"  run {c['run_id']} (seed {c['seed']}, {c['policy']}): {', '.join(c['what'])} changed"
            f" at step {c['first_step']} ({c['operation']})"
        )
    lines.append("verdict: " + ("REGRESSED" if doc["regressed"] else "no regression"))
    return lines
