"""``inboxsim check``: judge stored traces again with the current checkers.

The core is pure: :func:`rejudge` takes a stored run, its rebuilt trace and
a monitor factory and returns the verdict change; :func:`check_document`
and :func:`check_lines` turn the changes into the JSON document and the
human summary. Only :func:`check_store` reads the database.

A run is judged as it was live: steps are fed in order and judging stops
at the first step that reveals a violation; the liveness invariants are
judged at the end only when the stored run reached its liveness phase's
end (``liveness`` not ``stopped``), and a run that did not settle without
any checker saying why gets ``liveness.settles``, as :func:`inboxsim.sim.run.run`
does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import HarnessError
from ..sim.checkers import CheckersMonitor, load
from ..store.policies import load_fields, stored_policy
from ..store.traces import StoredRun, stored_runs, traces
from ..trace.record import Trace, trace_hash


@dataclass(frozen=True, slots=True)
class Rejudged:
    """A stored run judged again."""

    run: StoredRun
    violations: tuple[tuple[str, tuple[int, ...], str], ...]
    hash_ok: bool  # the rebuilt trace hashes to the stored hash

    @property
    def before(self) -> frozenset[str]:
        return frozenset(v[0] for v in self.run.violations)

    @property
    def after(self) -> frozenset[str]:
        return frozenset(v[0] for v in self.violations)

    @property
    def new(self) -> frozenset[str]:
        """Invariants violated now that were not before: a new violation in an old trace."""
        return self.after - self.before

    @property
    def fixed(self) -> frozenset[str]:
        """Invariants violated before and not now: a fixed false alarm (or a weakened checker)."""
        return self.before - self.after

    @property
    def changed(self) -> bool:
        return self.before != self.after


def rejudge(run: StoredRun, trace: Trace, policy: Any, monitor: CheckersMonitor) -> Rejudged:
    m = monitor(policy, trace.header.hello, bool(run.options.get("only_expected", False)))
    found: list[Any] = []
    if run.scenario is not None:
        # A scenario run was judged to its end, every violation kept, with no
        # liveness phase (scenarios.runner.execute): judge it the same way.
        found = [v for step in trace.steps for v in m.feed(step)]
        found += list(m.finish(False))
        return Rejudged(
            run,
            tuple((v.invariant, tuple(v.steps), v.message) for v in found),
            trace_hash(trace) == run.trace_hash,
        )
    for step in trace.steps:
        found = list(m.feed(step))
        if found:
            break
    if not found:
        found = list(m.finish(run.liveness != "stopped"))
        if run.liveness == "unsettled" and not found:
            last = tuple(s.index for s in trace.steps[-5:])
            stuck = next(
                (v[2] for v in run.violations if v[0] == "liveness.settles"), "did not settle"
            )
            found = [_V("liveness.settles", last, stuck)]
    return Rejudged(
        run,
        tuple((v.invariant, tuple(v.steps), v.message) for v in found),
        trace_hash(trace) == run.trace_hash,
    )


@dataclass(frozen=True, slots=True)
class _V:
    invariant: str
    steps: tuple[int, ...]
    message: str


@dataclass(frozen=True, slots=True)
class Skipped:
    run: StoredRun
    reason: str


def check_store(
    con: Any, checkers_module: str | None = None, progress: Callable[[int, int], None] | None = None
) -> tuple[list[Rejudged], list[Skipped]]:
    """Judge every stored run again (the I/O edge: reads runs and steps)."""

    monitor, _ = load(checkers_module)
    runs = stored_runs(con)
    fields = load_fields(con)
    # A run is judged under the policy it ran under: its stored fields (a
    # custom TOML file may be long gone), or for a pre-v3 run its preset.
    policies: dict[tuple[str, str | None], Any] = {}
    skipped: list[Skipped] = []
    judged: list[Rejudged] = []
    for run in runs:
        key = (run.policy, run.policy_hash)
        if key not in policies:
            try:
                policies[key] = stored_policy(run.policy, run.policy_hash, fields)
            except HarnessError as exc:  # no fields and no such preset: say so, go on
                policies[key] = exc
    for n, (run, trace) in enumerate(traces(con, runs), 1):
        policy = policies[(run.policy, run.policy_hash)]
        if isinstance(policy, Exception):
            skipped.append(Skipped(run, str(policy)))
            continue
        judged.append(rejudge(run, trace, policy, monitor))
        if progress is not None:
            progress(n, len(runs))
    return judged, skipped


def check_document(
    judged: Sequence[Rejudged], skipped: Sequence[Skipped], db: str
) -> dict[str, Any]:
    changed = [j for j in judged if j.changed]
    new = _by_invariant(changed, lambda j: j.new)
    fixed = _by_invariant(changed, lambda j: j.fixed)
    return {
        "command": "check",
        "db": db,
        "runs": len(judged),
        "skipped": [
            {"run_id": s.run.run_id, "seed": s.run.seed, "reason": s.reason} for s in skipped
        ],
        "unchanged": len(judged) - len(changed),
        "changed": [
            {
                "run_id": j.run.run_id,
                "seed": j.run.seed,
                "policy": j.run.policy,
                "before": sorted(j.before),
                "after": sorted(j.after),
                "new": sorted(j.new),
                "fixed": sorted(j.fixed),
                "violations": [
                    {"invariant": i, "steps": list(s), "message": m} for i, s, m in j.violations
                ],
            }
            for j in changed
        ],
        "new_violations": new,
        "fixed": fixed,
        "hash_mismatches": [j.run.run_id for j in judged if not j.hash_ok],
        "exit_code": 1 if new else 0,
    }


def _by_invariant(
    judged: Iterable[Rejudged], pick: Callable[[Rejudged], frozenset[str]]
) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for j in judged:
        for name in pick(j):
            out.setdefault(name, []).append(j.run.run_id)
    return dict(sorted(out.items()))


def skipped_lines(skipped: Sequence[dict[str, Any]]) -> list[str]:
    """Runs that could not be re-judged or replayed: one line per reason, not per run."""
    reasons: dict[str, list[int]] = {}
    for s in skipped:
        reasons.setdefault(s["reason"], []).append(s["run_id"])
    return [
        f"  skipped {len(ids)} run(s), e.g. run {ids[0]}: {reason}"
        for reason, ids in reasons.items()
    ]


def check_lines(doc: dict[str, Any]) -> list[str]:
    lines = [
        f"re-judged {doc['runs']} stored runs of {doc['db']}: "
        f"{doc['unchanged']} unchanged, {len(doc['changed'])} changed"
    ]
    lines += skipped_lines(doc["skipped"])
    for name, ids in doc["new_violations"].items():
        lines.append(f"  NEW {name}: {len(ids)} run(s), e.g. run {ids[0]}")
    for name, ids in doc["fixed"].items():
        lines.append(f"  fixed {name}: {len(ids)} run(s) no longer violate it, e.g. run {ids[0]}")
    for entry in doc["changed"][:20]:
        lines.append(
            f"  run {entry['run_id']} (seed {entry['seed']}, {entry['policy']}): "
            f"{', '.join(entry['before']) or 'held'} -> {', '.join(entry['after']) or 'held'}"
        )
    if doc["hash_mismatches"]:
        lines.append(
            f"  note: {len(doc['hash_mismatches'])} trace(s) did not read back to their "
            "stored hash (written by another inboxsim version?)"
        )
    lines.append("verdict: " + ("NEW VIOLATIONS" if doc["exit_code"] else "no new violations"))
    return lines
