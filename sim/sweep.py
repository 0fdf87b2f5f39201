"""Seed sweeps: many runs across worker processes, one writer for the store.

Shape (python-ecosystem.md, section 4):

- the parent splits the seeds into batches and hands them to a
  :class:`~concurrent.futures.ProcessPoolExecutor` whose workers are started
  by a ``forkserver`` (``spawn`` where there is none), never plain ``fork``:
  a forked child would inherit the parent's open DuckDB connection;
- a worker runs its batch and returns a compact result: a small summary per
  run and the batch's rows as pyarrow Tables (pickled as buffers);
- the parent is the only process that opens the database; it writes each
  batch in one transaction as it arrives, and keeps the sweep's tally.

With one job the batches run in the parent, one after another, without a
pool. Either way a seed's run is the same: the result of a seed does not
depend on the batch or process it ran in (tests/test_sim_sweep.py checks
trace hashes with 1 and 2 jobs).

Failing seeds are remembered in the store by policy and options; the next
sweep with the same policy and options runs them first, and forgets the ones
that pass (Hypothesis' example database).
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import multiprocessing
import os
import shlex
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import HarnessError
from ..model import Policy, features
from .probes import BY_NAME, NAMES, PROBES, REQUIRED
from .run import RunOptions, run_seed


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


def run_batch(task: BatchTask) -> BatchOutcome:
    """Run a batch of seeds (in a worker, or in the parent with one job)."""
    started, cpu = time.perf_counter(), time.process_time()
    columns = None
    if task.write:
        from ..reports.store import BatchColumns

        columns = BatchColumns()
    summaries = []
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
    tables = columns.tables() if columns is not None else None
    return BatchOutcome(summaries, tables, time.perf_counter() - started, time.process_time() - cpu)


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

    def batch(self, total: int) -> int:
        if self.batch_size is not None:
            return max(1, self.batch_size)
        # Enough batches to balance the workers and to stop promptly on a
        # time budget; big enough that per-task overhead stays negligible.
        return max(5, min(100, -(-total // (self.jobs * 8))))

    def replay_command(self, seed: int) -> str:
        """The command that reruns ``seed`` exactly as this sweep ran it."""
        policy = shlex.quote(self.policy_spec)
        command = f"inboxsim replay {seed} --policy {policy} --ops {self.options.ops}"
        if self.options.only_expected:
            command += " --only-expected"
        return command


@dataclass(slots=True)
class SweepReport:
    """The running tally of a sweep; the summary and JSON document come from it."""

    plan: SweepPlan
    remembered: tuple[int, ...] = ()
    planned: int = 0
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
                "seeds_per_second": round(self.runs / seconds, 1),
                "ops_per_second": round(self.ops / seconds, 1),
                "run_cpu_seconds": round(self.run_cpu, 3),
                "jobs": plan.jobs,
            },
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


def _context() -> multiprocessing.context.BaseContext:
    methods = multiprocessing.get_all_start_methods()
    if "forkserver" in methods:
        ctx = multiprocessing.get_context("forkserver")
        # Import the simulator once in the server, not once per worker.
        ctx.set_forkserver_preload(["inboxsim.sim.sweep", "inboxsim.reports.store"])
        return ctx
    return multiprocessing.get_context("spawn")


def sweep(
    plan: SweepPlan,
    store: Any | None,
    progress: Callable[[SweepReport], None] = lambda report: None,
) -> SweepReport:
    """Run the plan, writing each batch to ``store`` (a
    :class:`~inboxsim.reports.store.Store`, or None to keep nothing)."""
    remembered: list[int] = []
    first_run_id = sweep_id = 0
    if store is not None:
        remembered = store.failing_seeds(plan.policy_spec, plan.options.to_dict())
        first_run_id, sweep_id = store.next_ids()
    seeds = seed_order(plan, remembered)
    report = SweepReport(
        plan, remembered=tuple(remembered), planned=len(seeds), features=features(plan.policy)
    )
    size = plan.batch(len(seeds))
    tasks = [
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

    def absorb(outcome: BatchOutcome) -> None:
        if store is not None and outcome.tables is not None:
            store.write(outcome.tables)
        report.run_cpu += outcome.cpu
        for summary in outcome.summaries:
            report.add(summary)
        report.seconds = time.perf_counter() - started
        progress(report)

    def over_budget() -> bool:
        return plan.time_budget is not None and time.perf_counter() - started >= plan.time_budget

    if plan.jobs <= 1 and plan.executor == "local":
        for task in tasks:
            if over_budget():
                report.stopped_by_budget = True
                break
            absorb(run_batch(task))
    else:
        _run_pool(plan, tasks, absorb, over_budget, report)
    report.seconds = time.perf_counter() - started
    if store is not None:
        store.update_failing(
            plan.policy_spec,
            plan.options.to_dict(),
            sorted(report.failing),
            report.passed_remembered,
        )
    return report


def _run_pool(
    plan: SweepPlan,
    tasks: list[BatchTask],
    absorb: Callable[[BatchOutcome], None],
    over_budget: Callable[[], bool],
    report: SweepReport,
) -> None:
    # At most two batches in flight per worker: enough to keep every worker
    # busy, few enough to stop soon after a time budget runs out.
    window = plan.jobs * 2
    queue = list(reversed(tasks))
    with _executor(plan) as pool:
        running: set[cf.Future[BatchOutcome]] = set()
        try:
            while queue or running:
                while queue and len(running) < window and not over_budget():
                    running.add(pool.submit(run_batch, queue.pop()))
                if queue and over_budget():
                    report.stopped_by_budget = True
                    queue.clear()
                if not running:
                    break
                done, running = cf.wait(running, return_when=cf.FIRST_COMPLETED)
                # Completion order varies between sweeps; absorb a wave in a
                # fixed order so the store's insertion order varies less.
                for future in sorted(done, key=lambda f: f.result().summaries[0].seed):
                    absorb(future.result())
        except BaseException:
            for future in running:
                future.cancel()
            raise


@contextlib.contextmanager
def _executor(plan: SweepPlan) -> Iterator[cf.Executor]:
    """Where batches run: a local process pool, or a Dask cluster through its
    ``concurrent.futures`` face (``Client.get_executor``), so the sweep's
    loop is the same for both and the parent stays the only store writer."""
    if plan.executor == "local":
        with cf.ProcessPoolExecutor(max_workers=plan.jobs, mp_context=_context()) as pool:
            yield pool
        return
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise HarnessError("--executor dask needs Dask: pip install 'dask[distributed]'") from None
    cluster = None
    if plan.scheduler is None:
        cluster = LocalCluster(
            n_workers=plan.jobs, threads_per_worker=1, processes=True, dashboard_address=None
        )
    try:
        client = Client(cluster if cluster is not None else plan.scheduler, timeout="20s")
    except OSError as exc:
        raise HarnessError(f"cannot reach the Dask scheduler {plan.scheduler!r}: {exc}") from None
    try:
        with client.get_executor(pure=False) as pool:
            yield pool
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def default_jobs() -> int:
    return os.cpu_count() or 1


__all__ = ["SweepPlan", "SweepReport", "sweep", "run_batch", "default_jobs", "NAMES"]
