"""The design-exploration report (``inboxsim designs``, issue 10).

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
"""

from __future__ import annotations

import base64
import hashlib
import json
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from ..invariants.base import Violation
from ..invariants.monitor import Monitor
from ..invariants.registry import REGISTRY
from ..model.policy import PRESETS, Policy
from ..policy_file import load_policy
from ..reports import explore as shown
from ..reports.plots import PALETTE, new_figure, png_bytes, run_detail, swimlane_png
from ..search import explore as ex
from ..search.shrink import shrink_alone
from ..search.world import exhaustive_claim
from ..sim.executor import run_tasks
from ..sim.run import RunOptions, run_seed
from ..trace.record import Step, step_wire
from . import verdicts as vd
from .difference import observable_difference
from .verdicts import plural

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


# --- measuring a trace ------------------------------------------------------------


@dataclass(slots=True)
class _Tally:
    lat_steps: dict[str, list[int]]
    lat_now: dict[str, list[int]]
    admitted: int = 0
    promoted: int = 0
    calls: int = 0
    agent_steps: int = 0
    executions: int = 0
    wakes: int = 0
    depth_samples: int = 0
    depth_sum: int = 0
    depth_max: int = 0
    batch_max: int = 0
    synthetic_steer: int = 0
    synthetic_queue: int = 0
    synthetic_rejected: int = 0
    synthetic_requested: int = 0
    synthetic_requested_queue: int = 0

    @classmethod
    def new(cls) -> _Tally:
        return cls({"steer": [], "queue": []}, {"steer": [], "queue": []})


def measure(steps: Sequence[Step], tally: _Tally) -> None:
    """Fold one trace's observations into ``tally``."""
    waiting: dict[tuple[str, str], tuple[int, int, str]] = {}
    depth: dict[str, int] = {}
    now = 0
    for step in steps:
        wire = step.request.to_wire() if step.request is not None else None
        if wire is not None:
            now = wire.get("now", now)
        ok = step.reply is not None and hasattr(step.reply, "result")
        op = wire["op"] if wire else None
        if op == "synthetic":
            tally.synthetic_requested += 1
            if wire.get("delivery") == "queue":  # type: ignore[union-attr]
                tally.synthetic_requested_queue += 1
            if step.reply is not None and getattr(step.reply, "code", None) == "unsupported":
                tally.synthetic_rejected += 1
        admitted_here = False
        batch: dict[str, int] = {}
        for e in step.observed.events:
            if e.type == "admitted":
                admitted_here = True
                tally.admitted += 1
                data = json.loads(e.data)
                delivery = data.get("delivery") or "steer"
                if data.get("type") == "synthetic":
                    if delivery == "queue":
                        tally.synthetic_queue += 1
                    else:
                        tally.synthetic_steer += 1
                waiting[(e.session, e.input or "")] = (step.index, now, delivery)
            elif e.type == "promoted":
                tally.promoted += 1
                batch[e.session] = batch.get(e.session, 0) + 1
                got = waiting.pop((e.session, e.input or ""), None)
                if got is not None:
                    tally.lat_steps.setdefault(got[2], []).append(step.index - got[0])
                    tally.lat_now.setdefault(got[2], []).append(now - got[1])
            elif e.type in ("step_started", "compaction_started"):
                tally.calls += 1
                if e.type == "step_started":
                    tally.agent_steps += 1
            elif e.type == "execution_started":
                tally.executions += 1
        if batch:
            tally.batch_max = max(tally.batch_max, *batch.values())
        if ok and (
            (op in ("prompt", "synthetic") and admitted_here and wire.get("resume", True))  # type: ignore[union-attr]
            or op == "resume"
        ):
            tally.wakes += 1
        for session, rows in step.observed.pending:
            depth[session] = len(rows)
        for e in step.observed.events:
            depth.setdefault(e.session, 0)
        for d in depth.values():
            tally.depth_samples += 1
            tally.depth_sum += d
            tally.depth_max = max(tally.depth_max, d)


def _stats(xs: list[int]) -> dict[str, Any]:
    if not xs:
        return {"n": 0, "mean": None, "p50": None, "p95": None, "max": None}
    s = sorted(xs)
    return {
        "n": len(s),
        "mean": round(statistics.fmean(s), 2),
        "p50": s[len(s) // 2],
        "p95": s[min(len(s) - 1, int(0.95 * len(s)))],
        "max": s[-1],
    }


def _ratio(a: int, b: int) -> float | None:
    return round(a / b, 3) if b else None


def metrics_of(t: _Tally) -> dict[str, Any]:
    return {
        "admitted": t.admitted,
        "promoted": t.promoted,
        "latency_steps": {d: _stats(v) for d, v in sorted(t.lat_steps.items())},
        "latency_now": {d: _stats(v) for d, v in sorted(t.lat_now.items())},
        "model_calls_per_admitted": _ratio(t.calls, t.admitted),
        "executions_per_wake": _ratio(t.executions, t.wakes),
        "agent_steps_per_promoted": _ratio(t.agent_steps, t.promoted),
        "depth_mean": _ratio(t.depth_sum, t.depth_samples),
        "depth_max": t.depth_max,
        "max_steers_per_boundary": t.batch_max,
        "synthetic_admitted": {"steer": t.synthetic_steer, "queue": t.synthetic_queue},
        "synthetic_requested": t.synthetic_requested,
        "synthetic_queue_requested": t.synthetic_requested_queue,
        "synthetic_rejected_unsupported": t.synthetic_rejected,
    }


def normalized_hash(texts: Sequence[Any], policy_name: str) -> str:
    """SHA-256 of a run's canonical step texts with the policy name (in
    ``hello``'s implementation string) replaced, so presets compare by what
    was observed."""
    digest = hashlib.sha256()
    mark = f"({policy_name})"
    for text in texts:
        for part in text:
            digest.update(part.replace(mark, "(*)").encode())
            digest.update(b"\x00")
    return digest.hexdigest()


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


def _explore_one(policy: Policy, sessions: int, depth: int, only: str | None) -> dict[str, Any]:

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


def _shrink_one(task: PolicyTask, invariant: str, seed: int) -> dict[str, Any]:
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
    tally = _Tally.new()
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
    explorations = [_explore_one(task.policy, task.sessions, task.depth, None)]
    first_found = {v["invariant"] for v in explorations[0]["violations"]}
    for inv in sorted(seeds_violating):
        if inv in first_found or inv == "liveness.settles":
            continue
        explorations.append(_explore_one(task.policy, task.sessions, task.depth, inv))
    shrunk = {
        inv: _shrink_one(task, inv, first[inv]["seed"])
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


# --- lengths of a counterexample (the tables and per-design lines) ---------------------


def explorer_depth(p: dict[str, Any], inv: str) -> int | None:
    """The depth at which the explorer found ``inv`` (None: not within its bound)."""
    for e in p["explore"]:
        for v in e["violations"]:
            if v["invariant"] == inv:
                return int(e["depth_found"])
    return None


def _lengths(p: dict[str, Any], inv: str) -> str:
    """'shortest counterexample N operations (shrunk: ...; explorer: depth D)'."""
    sh = p.get("shrunk", {}).get(inv)
    depth = explorer_depth(p, inv)
    lengths, parts = [], []
    if sh and sh.get("shrunk"):
        lengths.append(sh["operations"])
        faults = f" + {plural(sh['faults'], 'fault')}" if sh["faults"] else ""
        parts.append(f"shrunk: {plural(sh['operations'], 'operation')}{faults}")
    if depth is not None:
        lengths.append(depth)
        parts.append(f"explorer: depth {depth}")
    elif inv != "liveness.settles":
        parts.append(f"explorer: not within depth {p.get('explore_depth')}")
    if not lengths:
        return "; ".join(parts)
    return f"shortest counterexample {plural(min(lengths), 'operation')} ({'; '.join(parts)})"


# --- the whole report ----------------------------------------------------------------------------


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
    k = vd.key
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


METRICS: tuple[tuple[str, str, Callable[[dict[str, Any]], float | None]], ...] = (
    (
        "latency-steer-steps",
        "mean admission-to-promotion latency, steer (steps)",
        lambda m: m["latency_steps"].get("steer", {}).get("mean"),
    ),
    (
        "latency-queue-steps",
        "mean admission-to-promotion latency, queue (steps)",
        lambda m: m["latency_steps"].get("queue", {}).get("mean"),
    ),
    (
        "latency-steer-now",
        "mean admission-to-promotion latency, steer (now units)",
        lambda m: m["latency_now"].get("steer", {}).get("mean"),
    ),
    (
        "latency-queue-now",
        "mean admission-to-promotion latency, queue (now units)",
        lambda m: m["latency_now"].get("queue", {}).get("mean"),
    ),
    ("calls-per-input", "model calls per admitted input", lambda m: m["model_calls_per_admitted"]),
    ("executions-per-wake", "executions per wake request", lambda m: m["executions_per_wake"]),
    ("depth-mean", "inbox depth, mean pending per session", lambda m: m["depth_mean"]),
    ("depth-max", "inbox depth, max pending", lambda m: m["depth_max"]),
    ("steps-per-prompt", "agent steps per promoted input", lambda m: m["agent_steps_per_promoted"]),
)


def metric_figures(results: list[dict[str, Any]]) -> dict[str, bytes]:
    """One bar chart per metric across policies (steer/queue grouped for latency)."""

    figures: dict[str, bytes] = {}
    names = [r["name"] for r in results]
    groups = (
        ("latency-steps", "admission-to-promotion latency (steps)", "latency_steps"),
        ("latency-now", "admission-to-promotion latency (now units)", "latency_now"),
    )
    for key, title, field in groups:
        fig, ax = new_figure(8, 3)
        width = 0.4
        for k, d in enumerate(("steer", "queue")):
            ys = [r["metrics"][field].get(d, {}).get("mean") or 0 for r in results]
            ax.bar(
                [i + (k - 0.5) * width for i in range(len(names))],
                ys,
                width,
                label=d,
                color=PALETTE[d],
            )
        ax.set_xticks(range(len(names)), names)
        ax.set_ylabel("mean")
        ax.set_title(title)
        ax.legend(fontsize=8)
        fig.tight_layout()
        figures[f"{key}.png"] = png_bytes(fig)
    for key, title, get in METRICS[4:]:
        fig, ax = new_figure(8, 2.8)
        ys = [get(r["metrics"]) or 0 for r in results]
        ax.bar(range(len(names)), ys, color="#1f77b4")
        ax.set_xticks(range(len(names)), names)
        ax.set_title(title)
        fig.tight_layout()
        figures[f"{key}.png"] = png_bytes(fig)
    return figures


# --- writing ---------------------------------------------------------------------------


def _metric_rows(doc: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    head = [
        "policy",
        "admitted",
        "promoted",
        *(t for _, t, _ in METRICS),
        "max steers/boundary",
        "identical to g4",
    ]
    rows = []
    for r in doc["policies"]:
        m = r["metrics"]
        same = doc["identical_to_g4"].get(r["name"])
        rows.append(
            [
                r["name"],
                str(m["admitted"]),
                str(m["promoted"]),
                *("-" if get(m) is None else str(get(m)) for _, _, get in METRICS),
                str(m["max_steers_per_boundary"]),
                "-" if same is None else f"{same[0]}/{same[1]}",
            ]
        )
    return head, rows


VIOLATION_HEAD = [
    "policy",
    "invariant",
    "seeds",
    "shrunk counterexample",
    "explorer depth (shortest)",
    "message",
]


def _violation_rows(doc: dict[str, Any]) -> list[list[str]]:
    rows = []
    for r in doc["policies"]:
        if not r["violations"]:
            rows.append([r["name"], "(none)", "0", "-", "-", "-"])
        for inv, v in r["violations"].items():
            sh = r.get("shrunk", {}).get(inv)
            if sh and sh.get("shrunk"):
                faults = f" + {plural(sh['faults'], 'fault')}" if sh["faults"] else ""
                shortest = f"{plural(sh['operations'], 'op')}{faults} (seed {sh['seed']})"
                message = sh["message"]
            else:
                shortest, message = f"- (seed {v['seed']})", v["message"]
            depth = explorer_depth(r, inv)
            found = (
                str(depth)
                if depth is not None
                else (
                    "not judged (liveness)"
                    if inv == "liveness.settles"
                    else f"> {r.get('explore_depth')}"
                )
            )
            rows.append([r["name"], inv, f"{v['seeds']}/{r['seeds']}", shortest, found, message])
    return rows


def design_lines(doc: dict[str, Any]) -> list[str]:
    """One line per design: what it breaks, how short, where the explorer found it."""
    lines = []
    for r in doc["policies"]:
        broken = [i for i in r["violations"] if i != "liveness.settles"]
        if not broken:
            claim = r["explore"][0]["claim"] if r["explore"] else "not explored"
            lines.append(
                f"{r['name']}: breaks no invariant ({r['seeds']} seeds; {claim}, "
                f"{r['explore'][0]['states'] if r['explore'] else 0} states)"
            )
            continue
        lines.append(f"{r['name']}: breaks " + "; ".join(_broken_note(r, i) for i in broken))
    return lines


def _broken_note(r: dict[str, Any], inv: str) -> str:
    """An invariant a design breaks, with its lengths; where the registry does
    not expect the design to keep it, says that the evidence is circular."""
    if r["expected"].get(inv, True):
        return f"{inv} ({_lengths(r, inv)})"
    when = REGISTRY[inv].holds_under
    return f"{inv} ({_lengths(r, inv)}; by design: stated for {when}, a difference, not a defect)"


def markdown(doc: dict[str, Any]) -> str:
    o = doc["options"]
    out = [
        "# inboxsim design exploration",
        "",
        f"Seeds 0..{o['seeds'] - 1} per policy ({o['ops']} workload ops each, every invariant "
        f"judged, runs not stopped at a violation); exploration: {o['sessions']} session(s), "
        f"depth {o['depth']}. Total {doc['seconds']} s.",
        "",
        "## Questions",
        "",
    ]
    for q in doc["questions"]:
        out += [
            f"### {q['title']}",
            "",
            f"*{q['source']}; policies compared: {', '.join(q['policies']) or '-'}"
            + (f"; not run: {', '.join(q['missing'])}" if q["missing"] else "")
            + "*",
            "",
            f"**Verdict.** {q['verdict']}",
            "",
        ]
    out += ["## Per design", ""]
    out += [f"- {line}" for line in design_lines(doc)]
    out += [
        "",
        "## Invariants broken",
        "",
        "| " + " | ".join(VIOLATION_HEAD) + " |",
        "|" + " --- |" * len(VIOLATION_HEAD),
    ]
    out += [
        "| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in _violation_rows(doc)
    ]
    out += [
        "",
        "## Counterexamples",
        "",
        "Each is the first failing seed of the sweep, rerun judging that invariant alone and "
        "shrunk; the file expects the violation (`inboxsim run FILE` passes while it is there), "
        "and the explorer's shortest path to the same invariant follows it.",
    ]
    for r in doc["policies"]:
        for inv, sh in r.get("shrunk", {}).items():
            if not sh.get("shrunk"):
                continue
            out += [
                "",
                f"### {r['name']}: {inv} ({_lengths(r, inv)})",
                "",
                sh["message"],
                "",
                "```toml",
                sh["scenario"].rstrip(),
                "```",
            ]
            if sh.get("figure"):
                out += ["", f"![timeline {r['name']} {inv}]({sh['figure']})"]
            e = next(
                (e for e in r["explore"] for w in e["violations"] if w["invariant"] == inv), None
            )
            if e is not None:
                out += ["", f"Explorer, depth {e['depth_found']} ({e['claim']}):", "", "```"]
                out += [*e["steps"], "```"]
                if e.get("figure"):
                    out += ["", f"![explorer timeline {r['name']} {inv}]({e['figure']})"]
        for e in r["explore"]:
            if not e["violations"] and e["invariant_filter"] is None:
                out += ["", f"- **{r['name']}**: no violation; {e['claim']} ({e['states']} states)"]
        for inv, v in r["violations"].items():
            if inv == "liveness.settles" or not r.get("shrunk", {}).get(inv, {}).get("shrunk"):
                out += [
                    f"- **{r['name']}** {inv}: first failing seed {v['seed']} "
                    f"(`{v['replay']}`): {v['message']}"
                ]
    head, rows = _metric_rows(doc)
    out += [
        "",
        "## Measured behaviour",
        "",
        "| " + " | ".join(head) + " |",
        "|" + " --- |" * len(head),
    ]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    out += [
        "",
        "Definitions: latency from the step (and `now`) of an input's `admitted` event to its "
        "`promoted` event; model calls are `step_started` + `compaction_started`; a wake request "
        "is a successful admission with resume or a `resume`; agent steps are `step_started`; "
        "inbox depth is sampled per known session after every step. Identical to g4: traces "
        "equal seed for seed after normalizing the policy name.",
        "",
    ]
    return "\n".join(out)


_STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:2em auto;
max-width:1300px;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:.85em}
th,td{border:1px solid #ddd;padding:.3em .6em;text-align:left}
th{background:#f4f4f4} code,pre{background:#f4f4f4;padding:0 .2em} pre{padding:.5em;overflow-x:auto}
img{max-width:100%;border:1px solid #eee;margin:.5em 0}
.verdict{background:#eef4fb;padding:.5em .8em;border-radius:6px}
"""


def _img(png: bytes, alt: str) -> str:
    return f'<img alt="{escape(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode()}">'


def _table(head: list[str], rows: list[list[str]]) -> str:
    parts = ["<table><tr>" + "".join(f"<th>{escape(h)}</th>" for h in head) + "</tr>"]
    parts += ["<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in rows]
    return "".join(parts) + "</table>"


def html(doc: dict[str, Any], images: dict[str, bytes]) -> str:
    o = doc["options"]
    p = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8"><title>inboxsim designs</title>',
        f"<style>{_STYLE}</style></head><body><h1>inboxsim design exploration</h1>",
        f"<p>Seeds 0..{o['seeds'] - 1} per policy ({o['ops']} ops), exploration "
        f"{o['sessions']} session(s), depth {o['depth']}; {doc['seconds']} s.</p>",
        "<h2>Questions</h2>",
    ]
    for q in doc["questions"]:
        p.append(
            f"<h3>{escape(q['title'])}</h3><p><i>{escape(q['source'])}; policies: "
            f"{escape(', '.join(q['policies']))}</i></p><p class=verdict>{escape(q['verdict'])}</p>"
        )
    p.append("<h2>Per design</h2><ul>")
    p += [f"<li>{escape(line)}</li>" for line in design_lines(doc)]
    p.append("</ul><h2>Invariants broken</h2>")
    p.append(_table(VIOLATION_HEAD, _violation_rows(doc)))
    p.append(
        "<h2>Counterexamples</h2><p>Each is the first failing seed, rerun judging that invariant "
        "alone and shrunk; then the explorer's shortest path to the same invariant.</p>"
    )
    for r in doc["policies"]:
        for inv, sh in r.get("shrunk", {}).items():
            if not sh.get("shrunk"):
                continue
            p.append(
                f"<h3>{escape(r['name'])}: {escape(inv)} ({escape(_lengths(r, inv))})</h3>"
                f"<p>{escape(sh['message'])}</p><pre>{escape(sh['scenario'])}</pre>"
            )
            if sh.get("figure") in images:
                p.append(_img(images[sh["figure"]], f"timeline {r['name']} {inv}"))
            e = next(
                (e for e in r["explore"] for w in e["violations"] if w["invariant"] == inv), None
            )
            if e is not None:
                p.append(
                    f"<p>Explorer, depth {e['depth_found']} ({escape(e['claim'])}):</p>"
                    f"<pre>{escape(chr(10).join(e['steps']))}</pre>"
                )
                if e.get("figure") in images:
                    p.append(_img(images[e["figure"]], f"explorer {r['name']} {inv}"))
    head, rows = _metric_rows(doc)
    p.append("<h2>Measured behaviour</h2>" + _table(head, rows))
    for name in sorted(images):
        if not name.startswith(("timeline-", "shrunk-")):
            p.append(_img(images[name], name))
    p.append("</body></html>\n")
    return "\n".join(p)


def report_files(doc: dict[str, Any], images: dict[str, bytes]) -> dict[str, str | bytes]:
    """The report's files by name: designs.html, .md and .json first (the
    files a caller names), then the figures designs.md links to."""
    files: dict[str, str | bytes] = {
        "designs.html": html(doc, images),
        "designs.md": markdown(doc),
        "designs.json": json.dumps(doc, indent=2, sort_keys=True, default=list) + "\n",
    }
    files.update(sorted(images.items()))
    return files


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
    "html",
    "markdown",
    "report_files",
    "resolve",
    "PRESETS",
]
