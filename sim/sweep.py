"""Seed sweeps: many runs across worker processes, one writer for the store.

Shape (python-ecosystem.md, section 4):

- the parent splits the seeds into batches and hands them to an executor
  (:mod:`.executor`): a :class:`~concurrent.futures.ProcessPoolExecutor`
  started by a ``forkserver`` (never plain ``fork``: a forked child would
  inherit the parent's open DuckDB connection), or a Dask cluster
  (``--executor dask``), possibly of many machines;
- a worker runs its batch and returns a compact result: a small summary per
  run and the batch's rows as pyarrow Tables (sent as Arrow IPC streams);
- the parent is the only process that opens the database; it writes each
  batch whole as it arrives, several to a transaction, at most once per
  batch (keyed by its first run id: a batch Dask reran after losing a
  worker is written once), and keeps the sweep's tally, including which
  processes (host and pid) ran the batches. That goes in the ``--json``
  document, not the store, so the store is the same whichever executor
  filled it.

With one job the batches run in the parent, one after another, without a
pool. Either way a seed's run is the same: the result of a seed does not
depend on the batch or process it ran in (tests/test_sim_sweep.py checks
trace hashes with 1 and 2 jobs).

Failing seeds are remembered in the store by policy and options; the next
sweep with the same policy and options runs them first, and forgets the ones
that pass (Hypothesis' example database). Each batch updates that list in the
transaction that stores its runs, so an interrupted sweep keeps it.

A sweep that was interrupted (Ctrl-C, a CI timeout, a kill) goes on with
``--resume``: the same command again, whose seeds already stored under the
same policy, options and inboxsim version are counted from the store, not run
again (:meth:`SweepPlan.resume_command`; :func:`resume_line` is the line the
interrupted sweep prints).
"""

from __future__ import annotations

import contextlib
import gc
import os
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..model import Policy, features
from ..procs.interrupt import Interrupted, deferred
from ..store.columns import BatchColumns
from ..store.store import ROW_GROUP, BatchWriter, Remember, open_store
from ..trace.probes import BY_NAME, NAMES, PROBES, REQUIRED
from .collector import paused
from .executor import run_tasks, worker_identity
from .run import RunOptions, run_seed

COMMIT_SECONDS = 5.0  # the longest a sweep's stored batches wait for their commit


@dataclass(frozen=True, slots=True)
class RunSummary:
    """What the parent needs of one run for the tally (the rows go to the store)."""

    seed: int
    verdict: str
    liveness: str
    ops: int
    trace_hash: str
    violations: tuple[tuple[str, tuple[int, ...], str], ...]
    probes: dict[str, int]


@dataclass(frozen=True, slots=True)
class BatchTask:
    seeds: tuple[int, ...]
    first_run_id: int
    sweep_id: int
    policy: Policy
    options: RunOptions
    write: bool  # build the store's tables (False when nothing is stored)
    checkers: str | None  # the checkers' module; None: inboxsim.invariants


@dataclass(slots=True)
class BatchOutcome:
    summaries: list[RunSummary]
    tables: dict[str, Any] | None
    seconds: float  # wall time of the batch
    cpu: float  # CPU time of the batch in its process (robust to other load)
    first_run_id: int = 0  # the batch's key: a second result for it is not written again
    host: str = ""  # where the batch ran (reporting only: never in a trace or a run row)
    pid: int = 0


def run_batch(task: BatchTask) -> BatchOutcome:
    """Run a batch of seeds (in a worker, or in the parent with one job)."""
    started, cpu = time.perf_counter(), time.process_time()
    columns = None
    if task.write:
        columns = BatchColumns()
    summaries = []

    # A run makes no reference cycles (tests/test_sim_run.py): what it builds
    # is freed by reference counting, and the cyclic collector's passes
    # during a run would only walk its live objects (~3 % of a sweep). So a
    # batch pauses the collector and collects the youngest generation once
    # after each seed, which also frees whatever a custom monitor left in
    # cycles, a seed at a time.
    @paused
    def run_seeds() -> None:
        for offset, seed in enumerate(task.seeds):
            result = run_seed(seed, task.policy, task.options, checkers_module=task.checkers)
            summaries.append(
                RunSummary(
                    seed,
                    result.verdict,
                    result.liveness,
                    result.ops,
                    result.trace_hash,
                    tuple((v.invariant, tuple(v.steps), v.message) for v in result.violations),
                    result.probes,
                )
            )
            if columns is not None:
                columns.add_run(task.first_run_id + offset, task.sweep_id, result, task.policy)
            del result
            gc.collect(0)

    run_seeds()
    tables = columns.tables() if columns is not None else None
    host, pid = worker_identity()
    return BatchOutcome(
        summaries,
        tables,
        time.perf_counter() - started,
        time.process_time() - cpu,
        task.first_run_id,
        host,
        pid,
    )


# --- the plan and the tally ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SweepPlan:
    policy_spec: str  # as the user gave it: a preset name or a TOML file
    policy: Policy
    options: RunOptions
    seed_start: int
    seed_count: int
    jobs: int
    time_budget: float | None = None
    batch_size: int | None = None
    checkers: str | None = None  # a module with Monitor and Violation; None: inboxsim.invariants
    executor: str = "local"  # "local": a process pool; "dask": a Dask cluster
    scheduler: str | None = None  # with "dask": a scheduler address; None: a local cluster
    resume: bool = False  # seeds the store holds (same policy, options, version) are not rerun

    def batch(self, total: int, slots: int | None = None) -> int:
        """Seeds per batch; ``slots``: batches the executor runs at once (default: jobs)."""
        if self.batch_size is not None:
            return max(1, self.batch_size)
        # Enough batches to balance the workers and to stop promptly on a
        # time budget; big enough that per-task overhead stays negligible.
        return max(5, min(100, -(-total // ((slots or self.jobs) * 8))))

    def replay_command(self, seed: int) -> str:
        """The command that reruns ``seed`` exactly as this sweep ran it."""
        policy = shlex.quote(self.policy_spec)
        command = f"inboxsim replay {seed} --policy {policy} --ops {self.options.ops}"
        if self.options.only_expected:
            command += " --only-expected"
        if self.options.concurrency > 1:
            command += f" --concurrency {self.options.concurrency}"
        return command

    def resume_command(self, db: str) -> str:
        """The command that goes on with this sweep in ``db`` (``--resume``)."""
        words = ["inboxsim", "sweep", "--seeds", str(self.seed_count)]
        if self.seed_start:
            words += ["--seed-start", str(self.seed_start)]
        words += ["--policy", self.policy_spec, "--ops", str(self.options.ops)]
        if self.options.only_expected:
            words.append("--only-expected")
        if self.options.concurrency > 1:
            words += ["--concurrency", str(self.options.concurrency)]
        if self.time_budget is not None:
            words += ["--time-budget", f"{self.time_budget:g}"]
        if self.executor != "local":
            words += ["--executor", self.executor]
            if self.scheduler:
                words += ["--scheduler", self.scheduler]
        return shlex.join([*words, "--db", db, "--resume"])


@dataclass(slots=True)
class SweepReport:
    """The running tally of a sweep; the summary and JSON document come from it."""

    plan: SweepPlan
    remembered: tuple[int, ...] = ()
    planned: int = 0
    resumed: int = 0  # runs counted from the store (--resume), not run again
    resumed_ops: int = 0  # their steps
    runs: int = 0
    ops: int = 0
    seconds: float = 0.0
    run_cpu: float = 0.0  # CPU seconds spent running seeds, all processes
    violations: dict[str, int] = field(default_factory=dict)  # invariant -> runs
    probe_runs: dict[str, int] = field(default_factory=dict)  # probe -> runs that hit it
    probe_hits: dict[str, int] = field(default_factory=dict)  # probe -> total hits
    liveness: dict[str, int] = field(default_factory=dict)
    failing: dict[int, tuple[tuple[str, tuple[int, ...], str], ...]] = field(default_factory=dict)
    passed_remembered: list[int] = field(default_factory=list)
    hashes: dict[int, str] = field(default_factory=dict)
    stopped_by_budget: bool = False
    features: tuple[str, ...] = ()  # the target's hello features
    slots: int = 0  # batches run at once: jobs, or a Dask scheduler's worker threads
    # (host, pid) -> [batches, seeds]: which processes ran the sweep. Kept out of
    # the store so that a store is the same whichever executor filled it.
    workers: dict[tuple[str, int], list[int]] = field(default_factory=dict)

    def add_batch(self, outcome: BatchOutcome) -> None:
        self.run_cpu += outcome.cpu
        tally = self.workers.setdefault((outcome.host, outcome.pid), [0, 0])
        tally[0] += 1
        tally[1] += len(outcome.summaries)
        for summary in outcome.summaries:
            self.add(summary)

    def add(self, summary: RunSummary) -> None:
        self.runs += 1
        self.ops += summary.ops
        self.hashes[summary.seed] = summary.trace_hash
        self.liveness[summary.liveness] = self.liveness.get(summary.liveness, 0) + 1
        for name, hits in summary.probes.items():
            self.probe_runs[name] = self.probe_runs.get(name, 0) + 1
            self.probe_hits[name] = self.probe_hits.get(name, 0) + hits
        if summary.violations:
            self.failing[summary.seed] = summary.violations
            for invariant in sorted({v[0] for v in summary.violations}):
                self.violations[invariant] = self.violations.get(invariant, 0) + 1
        elif summary.seed in self.remembered:
            self.passed_remembered.append(summary.seed)

    @property
    def missing_probes(self) -> list[str]:
        """Required probes never hit, among those the target's features allow."""
        return [
            name
            for name in REQUIRED
            if not self.probe_runs.get(name) and BY_NAME[name].possible(self.features)
        ]

    @property
    def exit_code(self) -> int:
        return 1 if self.failing or self.missing_probes else 0

    def document(self) -> dict[str, Any]:
        """The ``sweep --json`` result document."""
        plan = self.plan
        seconds = self.seconds or 1e-9
        return {
            "command": "sweep",
            "policy": plan.policy.name,
            "policy_spec": plan.policy_spec,
            "target": "model",
            "options": plan.options.to_dict(),
            "seeds": {
                "start": plan.seed_start,
                "count": plan.seed_count,
                "remembered": list(self.remembered),
                "planned": self.planned,
                "run": self.runs,
                "resumed": self.resumed,
                "stopped_by_time_budget": self.stopped_by_budget,
            },
            "operations": self.ops,
            "verdicts": {"held": self.runs - len(self.failing), "failed": len(self.failing)},
            "liveness": dict(sorted(self.liveness.items())),
            "violations": dict(sorted(self.violations.items())),
            "probes": {
                p.name: {
                    "required": p.required,
                    "possible": p.possible(self.features),
                    "runs": self.probe_runs.get(p.name, 0),
                    "hits": self.probe_hits.get(p.name, 0),
                    "description": p.description,
                }
                for p in PROBES
            },
            "missing_required_probes": self.missing_probes,
            "failing": [
                {
                    "seed": seed,
                    "invariants": sorted({v[0] for v in found}),
                    "message": found[0][2],
                    "steps": list(found[0][1]),
                    "replay": plan.replay_command(seed),
                }
                for seed, found in sorted(self.failing.items())
            ],
            "throughput": {
                "seconds": round(self.seconds, 3),
                # Of the seeds this sweep ran (not those --resume counted from the store).
                "seeds_per_second": round((self.runs - self.resumed) / seconds, 1),
                "ops_per_second": round((self.ops - self.resumed_ops) / seconds, 1),
                "run_cpu_seconds": round(self.run_cpu, 3),
                "jobs": self.slots or plan.jobs,
                "executor": plan.executor,
            },
            "workers": [
                {"host": host, "pid": pid, "batches": batches, "seeds": seeds}
                for (host, pid), (batches, seeds) in sorted(self.workers.items())
            ],
            "runs": [
                {"seed": seed, "trace_hash": digest} for seed, digest in sorted(self.hashes.items())
            ],
            "exit_code": self.exit_code,
        }


# --- running it --------------------------------------------------------------------


def seed_order(plan: SweepPlan, remembered: Sequence[int]) -> list[int]:
    """Remembered failing seeds first, then the requested range (no repeats)."""
    first = list(dict.fromkeys(remembered))
    seen = set(first)
    return first + [
        s for s in range(plan.seed_start, plan.seed_start + plan.seed_count) if s not in seen
    ]


def sweep(
    plan: SweepPlan,
    store: Any | None,
    progress: Callable[[SweepReport], None] = lambda report: None,
) -> SweepReport:
    """Run the plan, writing each batch to ``store`` (a
    :class:`~inboxsim.store.store.Store`, or None to keep nothing)."""
    remembered: list[int] = []
    first_run_id = sweep_id = 0
    options = plan.options.to_dict()
    if store is not None:
        remembered = store.failing_seeds(plan.policy_spec, options)
        first_run_id, sweep_id = store.next_ids()
    planned = seed_order(plan, remembered)
    report = SweepReport(
        plan,
        remembered=tuple(remembered),
        planned=len(planned),
        features=features(plan.policy),
        slots=plan.jobs,
    )
    seeds = planned
    if store is not None and plan.resume:
        seeds = _resume(plan, store, planned, report)

    def tasks(slots: int) -> list[BatchTask]:
        size = plan.batch(len(seeds), slots)
        return [
            BatchTask(
                tuple(seeds[i : i + size]),
                first_run_id + i,
                sweep_id,
                plan.policy,
                plan.options,
                store is not None,
                plan.checkers,
            )
            for i in range(0, len(seeds), size)
        ]

    started = time.perf_counter()
    written: set[int] = set()

    def absorb(outcome: BatchOutcome, writer: BatchWriter | None) -> None:
        # Exactly once per batch: a result for a batch already written (a
        # rerun whose first run also came back) is dropped, not stored twice.
        if outcome.first_run_id in written:
            return
        with deferred():  # an interrupt waits until the batch is stored and counted
            written.add(outcome.first_run_id)
            if writer is not None and outcome.tables is not None:
                writer.write(outcome.tables, _remember(plan, report, outcome.summaries))
            report.add_batch(outcome)
        report.seconds = time.perf_counter() - started
        progress(report)

    def over_budget() -> bool:
        return plan.time_budget is not None and time.perf_counter() - started >= plan.time_budget

    def slotted(slots: int) -> list[BatchTask]:
        report.slots = slots
        return tasks(slots)

    try:
        # Batches are committed two DuckDB row groups of steps at a time (some
        # 2,200 seeds of ~100 steps), which DuckDB writes into the file at once
        # (store.py says why that costs a third less than a commit per
        # batch), or every COMMIT_SECONDS, whichever comes first. The writer
        # commits what it holds however the sweep ends; a sweep killed
        # outright (SIGKILL, the OOM killer) loses the batches of its last
        # seconds, which --resume runs again.
        with (
            store.batches(2 * ROW_GROUP, COMMIT_SECONDS)
            if store is not None
            else contextlib.nullcontext()
        ) as writer:
            batches = run_tasks(
                run_batch,
                slotted,
                kind=plan.executor,
                jobs=plan.jobs,
                scheduler=plan.scheduler,
                # pyarrow too (the batches' tables): imported once in the server
                # rather than once per worker, in each worker's first batch (~0.7 s).
                preload=["inboxsim.sim.sweep", "inboxsim.store.store", "pyarrow"],
                what=lambda task: f"the batch of seeds {task.seeds[0]}..{task.seeds[-1]}",
                stop=over_budget,
            )
            for _task, outcome in batches:
                absorb(outcome, writer)
        report.stopped_by_budget = report.runs < len(planned) and over_budget()
        report.seconds = time.perf_counter() - started
    except Interrupted as stop:
        if store is not None:
            stop.kept = resume_line(plan, store.path, store)
        raise
    return report


def _remember(plan: SweepPlan, report: SweepReport, runs: Sequence[RunSummary]) -> Any:
    """A batch's update of the remembered failing seeds, written with it."""

    return Remember(
        plan.policy_spec,
        plan.options.to_dict(),
        tuple(r.seed for r in runs if r.violations),
        tuple(r.seed for r in runs if not r.violations and r.seed in report.remembered),
    )


def _resume(plan: SweepPlan, store: Any, planned: list[int], report: SweepReport) -> list[int]:
    """Count the planned seeds the store already holds (same policy, options
    and version: the same runs) into ``report``; the seeds left to run."""
    held = store.seeded_runs(plan.policy, plan.options.to_dict())
    resumed = [
        RunSummary(r.seed, r.verdict, r.liveness, r.ops, r.trace_hash, r.violations, r.probes)
        for seed in planned
        if (r := held.get(seed)) is not None
    ]
    for summary in resumed:
        report.add(summary)
    report.resumed = len(resumed)
    report.resumed_ops = sum(r.ops for r in resumed)
    if resumed:  # the remembered list agrees with what is stored, as after those batches
        store.update_failing(*_remember(plan, report, resumed))
    return [seed for seed in planned if seed not in held]


def resume_line(plan: SweepPlan, db: str, store: Any | None = None) -> str:
    """What an interrupted sweep kept and how to go on, for the line it
    prints after ``interrupted by SIGINT: ``: how many of the plan's seeds
    the store at ``db`` holds (and how many of them fail), and the command
    that goes on (``--resume``). Pass the sweep's open ``store`` while it
    still holds the file; otherwise the file is opened read-only. Never
    raises for a store it cannot read: it says so and still gives the command."""

    command = plan.resume_command(db)
    first, last = plan.seed_start, plan.seed_start + plan.seed_count - 1
    try:
        if store is not None:
            held = store.seeded_runs(plan.policy, plan.options.to_dict())
        else:
            with open_store(db) as opened:
                held = opened.seeded_runs(plan.policy, plan.options.to_dict())
    except Exception as exc:  # noqa: BLE001 - the line must be printed whatever the store says
        return f"the store {db} could not be read ({exc}); go on with: {command}"
    kept = [r for seed, r in held.items() if first <= seed <= last]
    failing = sum(1 for r in kept if r.violations)
    return (
        f"kept {len(kept):,} of the {plan.seed_count:,} seeds {first}..{last} in {db} "
        f"({failing:,} failing); go on with: {command}"
    )


def default_jobs() -> int:
    return os.cpu_count() or 1


__all__ = [
    "SweepPlan",
    "SweepReport",
    "sweep",
    "run_batch",
    "resume_line",
    "default_jobs",
    "NAMES",
]
