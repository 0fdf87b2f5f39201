"""The design study (``inboxsim designs``): every policy run through the same
experiments, and the document the verdicts are decided from.

For every policy (the presets of ``docs/cli.md`` and any custom TOML
policy file) the same seeded sweep and the same bounded exploration are run:

- **sweep**: seeds ``0 .. N-1`` through :func:`inboxsim.sim.run.run_seed`, every
  invariant judged. The run is not stopped at a violation (a collecting
  monitor records the first violation of each invariant and lets the run go
  on), so the measured behaviour covers whole runs for every policy;
- **exploration**: :func:`inboxsim.search.explore.explore` with every invariant
  (its first, shortest counterexample), then once per invariant the sweep saw
  violated, narrowed to that invariant, for its own shortest counterexample
  and the depth it lies at;
- **shrinking**: for every invariant the sweep saw violated, its first
  failing seed is rerun judging that invariant alone and shrunk
  (:func:`inboxsim.search.shrink.shrink_alone`) to a minimal, readable scenario,
  written as an expected-violation document, with a timeline plot. Every
  counterexample the report shows is one of these (never a raw seed).

Measured behaviour is computed from the traces alone (observed events and
pending inboxes), and traces are compared seed for seed against ``g4`` after
normalizing the policy name (the ``implementation`` string of ``hello``).

The report is organised by the seed's "Questions to decide" and the spec's
open points (``opencode-v2-inbox.md`` section 5) a policy covers; each gets
the evidence and a verdict stated from it, or "not decidable by simulation"
where the question is API shape or the presets are indistinguishable.

What a trace shows is measured by :mod:`.measure`, the questions are decided
by :mod:`.verdicts`, and the pages are written by :mod:`.report`.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..invariants.base import Violation
from ..invariants.monitor import Monitor
from ..invariants.registry import REGISTRY
from ..model.policy import PRESETS, Policy
from ..policy_file import load_policy
from ..reports import explore as shown
from ..reports.plots import run_detail, swimlane_png
from ..search import explore as ex
from ..search.shrink import shrink_alone
from ..search.world import exhaustive_claim
from ..sim.executor import run_tasks
from ..sim.run import RunOptions, run_seed
from ..trace.record import Step, step_wire
from . import verdicts as vd
from .difference import observable_difference
from .measure import Tally, measure, metrics_of, normalized_hash
from .report import explorer_depth, metric_figures
from .sentences import key

DEFAULT_POLICIES = ("g4", "g3", "g2", "g5", "a", "b", "c", "c-merged")
DEFAULT_SEEDS = 200
DEFAULT_OPS = 60
DEFAULT_DEPTH = 3
DEFAULT_SESSIONS = 1


# --- collecting monitor ----------------------------------------------------------


class _Collecting:
    """Wraps the invariant monitor: records violations, never stops the run."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.found: list[Any] = []
        self.exercised = inner.exercised

    def feed(self, step: Step) -> list[Any]:
        try:
            self.found.extend(self.inner.feed(step))
        except Exception:  # a checker confused by state after a violation: stop judging
            self.inner = _Dead()
        return []

    def finish(self, liveness: bool) -> list[Any]:
        try:
            return list(self.inner.finish(liveness))
        except Exception:
            return []


class _Dead:
    exercised: set[str] = set()

    def feed(self, step: Step) -> list[Any]:
        return []

    def finish(self, liveness: bool) -> list[Any]:
        return []


# --- timeline of a counterexample -----------------------------------------------------


def timeline_png(steps: Sequence[Step], policy: str, violations: Sequence[Any]) -> bytes:
    """The swimlane of :mod:`.plots` drawn from a trace (not the store)."""

    cited = [(v.invariant, list(v.steps)) for v in violations]
    return swimlane_png(run_detail(steps, cited, policy))


# --- one policy ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PolicyTask:
    spec: str
    policy: Policy
    seeds: int
    ops: int
    sessions: int
    depth: int


def explore_one(policy: Policy, sessions: int, depth: int, only: str | None) -> dict[str, Any]:

    def factory(p: Policy, hello: dict[str, Any]) -> Any:
        return Monitor(p, hello, invariants=None if only is None else (only,))

    result = ex.explore(policy, factory, sessions, depth)
    doc: dict[str, Any] = {
        "invariant_filter": only,
        "states": result.states,
        "transitions": result.transitions,
        "complete": result.complete,
        "seconds": round(result.seconds, 2),
        "claim": exhaustive_claim(sessions, depth),
        "violations": [shown.violation_wire(v) for v in result.violations],
    }
    if result.violations:
        text, fmt = shown.render_counterexample(result, policy, expect=True)
        doc["operations"] = result.operations
        doc["depth_found"] = result.depth_reached
        doc["scenario"] = text
        doc["scenario_format"] = fmt
        doc["steps"] = [
            f"[{s.index}] {s.decision} -> {shown.reply_text(s)}"
            for s in result.trace
            if s.decision != "hello" and not s.decision.startswith("create(")
        ]
        doc["trace"] = [step_wire(s) for s in result.trace]
        doc["_png"] = timeline_png(result.trace, policy.name, result.violations)
    return doc


SHRINK_MAX_RUNS = 3_000
"""Candidate runs the shrinker may try per invariant: a budget in runs, not
seconds, so the report's counterexamples do not depend on the machine's load
(g2's took about 1,300 runs). The time limit is only a safety net."""
SHRINK_TIME_LIMIT = 600.0


def shrink_one(task: PolicyTask, invariant: str, seed: int) -> dict[str, Any]:
    """The first failing seed of ``invariant``, rerun judging it alone, shrunk."""

    result = shrink_alone(
        seed,
        task.policy,
        RunOptions(ops=task.ops),
        invariant,
        max_runs=SHRINK_MAX_RUNS,
        time_limit=SHRINK_TIME_LIMIT,
        expect=True,
        name=f"{task.policy.name}-{invariant}",
        source=f"inboxsim designs: seed {seed} under {task.spec} (--ops {task.ops}), "
        f"judging {invariant} alone, shrunk",
    )
    if result is None:
        return {"seed": seed, "shrunk": False, "why": "the seed did not fail on it alone"}
    mark = _Marked(invariant, (len(result.steps) - 1,), result.message)
    return {
        "seed": seed,
        "shrunk": True,
        "operations": result.final.operations,
        "faults": result.final.faults,
        "original_operations": result.original.operations,
        "message": result.message,
        "scenario": result.text,
        "verified": result.verified,
        "steps": [f"[{s.index}] {s.decision if s.decision else '-'}" for s in result.steps],
        "_png": timeline_png(result.steps, task.policy.name, [mark]),
    }


@dataclass(frozen=True, slots=True)
class _Marked:
    """A violation as the timeline plot needs it (id and the steps it names)."""

    invariant: str
    steps: tuple[int, ...]
    message: str


def study_policy(task: PolicyTask) -> dict[str, Any]:
    """Sweep and explore one policy (runs in a worker)."""

    started = time.perf_counter()
    options = RunOptions(ops=task.ops)
    tally = Tally.new()
    hashes: list[str] = []
    first: dict[str, dict[str, Any]] = {}
    seeds_violating: dict[str, int] = {}
    exercised: dict[str, int] = {}
    for seed in range(task.seeds):
        holder: list[_Collecting] = []

        def monitor(p: Policy, hello: dict[str, Any], holder: list[_Collecting] = holder) -> Any:
            m = _Collecting(Monitor(p, hello))
            holder.append(m)
            return m

        result = run_seed(seed, task.policy, options, monitor=monitor, violation=Violation)
        found = list(holder[0].found) + list(result.violations)
        for inv in sorted({v.invariant for v in found}):
            seeds_violating[inv] = seeds_violating.get(inv, 0) + 1
        for inv in holder[0].exercised:
            exercised[inv] = exercised.get(inv, 0) + 1
        for v in found:
            if v.invariant not in first:
                first[v.invariant] = {
                    "seed": seed,
                    "steps": list(v.steps),
                    "message": v.message,
                    "replay": f"inboxsim replay {seed} --policy {task.spec} --ops {task.ops}",
                }
        measure(result.trace.steps, tally)
        hashes.append(normalized_hash(result.texts, task.policy.name))
    sweep_seconds = time.perf_counter() - started
    explorations = [explore_one(task.policy, task.sessions, task.depth, None)]
    first_found = {v["invariant"] for v in explorations[0]["violations"]}
    for inv in sorted(seeds_violating):
        if inv in first_found or inv == "liveness.settles":
            continue
        explorations.append(explore_one(task.policy, task.sessions, task.depth, inv))
    shrunk = {
        inv: shrink_one(task, inv, first[inv]["seed"])
        for inv in sorted(seeds_violating)
        if inv != "liveness.settles"  # a bounded prefix never shows it; the sweep's seed stands
    }
    differences = {
        inv: observable_difference(sh["scenario"], PRESETS[vd.BASE], task.policy)
        for inv, sh in shrunk.items()
        if sh.get("shrunk") and task.policy.name != vd.BASE
    }
    return {
        "name": task.policy.name,
        "spec": task.spec,
        "summary": task.policy.summary,
        "fields": task.policy.fields(),
        "seeds": task.seeds,
        "sweep_seconds": round(sweep_seconds, 2),
        "seconds": round(time.perf_counter() - started, 2),
        "metrics": metrics_of(tally),
        "violations": {
            inv: {"seeds": seeds_violating[inv], **first[inv]} for inv in sorted(seeds_violating)
        },
        "explore": explorations,
        "explore_depth": task.depth,
        "shrunk": shrunk,
        "differences": differences,
        "exercised": dict(sorted(exercised.items())),
        "expected": {inv.id: inv.expected(task.policy) for inv in REGISTRY.values()},
        "hashes": hashes,
    }


# --- every policy ----------------------------------------------------------------------------


def build(
    specs: Sequence[tuple[str, Policy]],
    seeds: int = DEFAULT_SEEDS,
    depth: int = DEFAULT_DEPTH,
    sessions: int = DEFAULT_SESSIONS,
    ops: int = DEFAULT_OPS,
    jobs: int = 1,
    progress: Callable[[str], None] | None = None,
) -> tuple[dict[str, Any], dict[str, bytes]]:
    """Study every policy: the report document (its ``figures`` are the run's numbers the
    verdicts are built from) and its images (PNG bytes by file name)."""
    started = time.perf_counter()
    tasks = [PolicyTask(spec, p, seeds, ops, sessions, depth) for spec, p in specs]
    results: list[dict[str, Any]] = []
    for _task, r in run_tasks(
        study_policy,
        lambda slots: tasks,
        jobs=jobs if len(tasks) > 1 else 1,
        preload=("inboxsim.designs.study",),
        what=lambda task: f"the study of {task.spec}",
        in_order=True,
    ):
        results.append(r)
        if progress:
            progress(f"designs: {r['name']} done ({r['seconds']} s)")
    images: dict[str, bytes] = {}
    identical: dict[str, tuple[int, int]] = {}
    differing: dict[str, list[int]] = {}
    base = next((r["hashes"] for r in results if r["name"] == vd.BASE), None)
    for r in results:
        if base is not None and r["name"] != vd.BASE:
            n = min(len(base), len(r["hashes"]))
            differing[r["name"]] = [i for i in range(n) if base[i] != r["hashes"][i]]
            identical[r["name"]] = (n - len(differing[r["name"]]), n)
    for r in results:
        r["hashes_digest"] = hashlib.sha256("".join(r.pop("hashes")).encode()).hexdigest()
        for k, e in enumerate(r["explore"]):
            png = e.pop("_png", None)
            if png is not None:
                images[f"timeline-{r['name']}-{k}.png"] = png
                e["figure"] = f"timeline-{r['name']}-{k}.png"
        for inv, sh in r["shrunk"].items():
            png = sh.pop("_png", None)
            if png is not None:
                images[f"shrunk-{r['name']}-{inv}.png"] = png
                sh["figure"] = f"shrunk-{r['name']}-{inv}.png"
    doc: dict[str, Any] = {
        "options": {"seeds": seeds, "ops": ops, "depth": depth, "sessions": sessions},
        "policies": results,
        "identical_to_g4": identical,
        "differing_from_g4": differing,
    }
    doc["figures"] = figures_of(doc)
    doc["questions"] = vd.verdicts(doc["figures"])
    images.update(metric_figures(results))
    doc["seconds"] = round(time.perf_counter() - started, 2)
    return doc, images


DIFFERING_SHOWN = 5
"""Differing seeds a verdict names (the count says how many there are)."""
METRIC_FIGURES = (
    "synthetic_requested",
    "synthetic_queue_requested",
    "synthetic_rejected_unsupported",
    "max_steers_per_boundary",
)


def figures_of(doc: dict[str, Any]) -> dict[str, Any]:
    """The flat table of the run's figures the verdicts are built from (the
    keys are listed in :mod:`.verdicts`)."""
    k = key
    f: dict[str, Any] = {k("options", n): v for n, v in doc["options"].items()}
    base_fields = PRESETS[vd.BASE].fields()
    f |= {k("field", vd.BASE, n): v for n, v in base_fields.items()}
    f |= {
        k("holds_under", i.id): {n: list(v) for n, v in i.holds_under.fields}
        for i in REGISTRY.values()
    }
    for r in doc["policies"]:
        p, m = r["name"], r["metrics"]
        f[k("seeds", p)] = r["seeds"]
        f |= {k("field", p, n): v for n, v in r["fields"].items()}
        f[k("fields_differ", p)] = sorted(
            n for n, v in r["fields"].items() if base_fields.get(n) != v
        )
        if p in doc["identical_to_g4"]:
            f[k("identical", p)], f[k("compared", p)] = doc["identical_to_g4"][p]
            f[k("differing", p)] = doc["differing_from_g4"][p][:DIFFERING_SHOWN]
        f[k("broken", p)] = sorted(r["violations"])
        for inv in (*REGISTRY, vd.LIVENESS):
            v = r["violations"].get(inv)
            f[k("violated", p, inv)] = v["seeds"] if v else 0
            if v:
                f[k("first", p, inv)] = v["seed"]
        for inv in REGISTRY:
            f[k("exercised", p, inv)] = r["exercised"].get(inv, 0)
            f[k("expected", p, inv)] = r["expected"][inv]
        for inv, sh in r["shrunk"].items():
            f[k("depth", p, inv)] = explorer_depth(r, inv)
            if sh.get("shrunk"):
                f[k("shrunk", p, inv)] = {
                    n: sh[n] for n in ("operations", "faults", "seed", "message")
                }
        f |= {k("difference", p, inv): d for inv, d in r["differences"].items()}
        f[k("explore_found", p)] = sorted(
            {v["invariant"] for e in r["explore"] for v in e["violations"]}
        )
        f |= {k("metric", p, n): m[n] for n in METRIC_FIGURES}
        f[k("metric", p, "synthetic_admitted_queue")] = m["synthetic_admitted"]["queue"]
    if doc["policies"]:
        f["max_batch"] = max(r["metrics"]["max_steers_per_boundary"] for r in doc["policies"])
    return f


def resolve(policies: str | None, files: Sequence[str]) -> list[tuple[str, Policy]]:
    """The policies to study, as (spec, policy); raises PolicyError on a bad one."""

    specs = [
        s.strip() for s in (policies.split(",") if policies else DEFAULT_POLICIES) if s.strip()
    ]
    specs += list(files)
    out: list[tuple[str, Policy]] = []
    seen: set[str] = set()
    for spec in specs:
        p = load_policy(spec)
        if p.name in seen:
            continue
        seen.add(p.name)
        out.append((spec, p))
    return out


__all__ = [
    "build",
    "figures_of",
    "resolve",
    "PRESETS",
]
