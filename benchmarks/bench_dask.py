"""Dask against the local process pool: seeds/s, the overhead per seed and per
batch, and from what cluster size distributing a sweep pays for itself.

Each measurement is a whole ``sweep`` into a fresh DuckDB file (traces written
by the client, as the command does), the same seeds both ways:

- local: the process pool of ``--jobs`` workers (its start-up, measured
  apart, is taken off: the figures are per seed in steady state);
- dask: a Dask cluster on this machine, started as the README says
  (``dask scheduler``; ``dask worker --nworkers JOBS --nthreads 1``) before
  the measurement and reached by its address, as a sweep reaches a running
  cluster (its start-up is printed apart).

    python benchmarks/bench_dask.py [--seeds 600] [--ops 60] [--jobs 2] [--batches 5,50]

Wall time on a shared, loaded machine is noise, so the overhead is measured in
CPU: every process involved (this client, the pool's or the cluster's worker
processes and nannies, sampled with psutil), per seed. The estimate: with
``c_local`` and ``c_dask`` the CPU per seed locally and on Dask, and
assuming identical machines of ``jobs`` cores kept busy, linear scaling, and
network round trips no costlier than this loopback, M machines on Dask beat
one machine run locally from the smallest M > c_dask / c_local. Scaling stops
where the client, the only writer, is saturated: at ``1 / w`` seeds/s, ``w``
its CPU per seed (receiving and unpickling results, the DuckDB write, the tally).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil  # comes with the dask extra
from distributed import Client

from inboxsim.model import PRESETS
from inboxsim.sim.executor import open_executor
from inboxsim.sim.run import RunOptions
from inboxsim.sim.sweep import SweepPlan, sweep
from inboxsim.store.store import Store

PRELOAD = ["inboxsim.sim.sweep", "inboxsim.store.store"]  # as the sweep starts its pool


class TreeCPU:
    """CPU seconds of this process and all its descendants (pool workers, the
    Dask scheduler, nannies and workers) over a measurement: robust to other
    load on a shared machine, where wall time is not. Descendants are sampled
    every 200 ms, so a process that exits loses at most its last 200 ms."""

    def __init__(self) -> None:
        self.me = psutil.Process()
        self.base: dict[int, float] = {}
        self.meter = 0.0
        self.last: dict[int, float] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)

    def _sample(self) -> dict[int, float]:
        out = {}
        for proc in self.me.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                times = proc.cpu_times()
                out[proc.pid] = times.user + times.system
        return out

    def _poll(self) -> None:
        while not self.stop.wait(0.2):
            self.last.update(self._sample())
        # This thread's own CPU (scanning /proc) is the meter's, not the client's.
        self.meter = time.thread_time()

    def __enter__(self) -> TreeCPU:
        self.base = self._sample()
        self.own = time.process_time()
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()
        self.last.update(self._sample())
        self.client = time.process_time() - self.own - self.meter
        self.workers = sum(cpu - self.base.get(pid, 0.0) for pid, cpu in self.last.items())


@dataclass
class Measured:
    seconds: float  # wall time of the whole sweep
    client_cpu: float  # CPU of this process (with a local cluster: its scheduler too)
    worker_cpu: float  # CPU of every worker process (and nanny), all of it
    run_cpu: float  # CPU the workers spent inside run_batch
    runs: int
    batches: int
    processes: int


def measure(plan: SweepPlan, db: Path) -> Measured:
    started = time.perf_counter()
    with TreeCPU() as cpu, Store(db) as store:
        report = sweep(plan, store)
    seconds = time.perf_counter() - started
    assert report.runs == plan.seed_count and not report.failing, "the sweep did not hold"
    return Measured(
        seconds,
        cpu.client,
        cpu.workers,
        report.run_cpu,
        report.runs,
        sum(batches for batches, _ in report.workers.values()),
        len(report.workers),
    )


def pool_startup(jobs: int) -> tuple[float, float]:
    """Wall and CPU time (all processes) to start the local sweep's process pool
    and each of its workers: a fixed cost per local sweep, taken off below."""
    started = time.perf_counter()
    with TreeCPU() as cpu:
        with open_executor("local", jobs, None, PRELOAD) as (pool, _):
            for future in [pool.submit(os.getpid) for _ in range(jobs)]:
                future.result()
    return time.perf_counter() - started, cpu.client + cpu.workers


def line(name: str, m: Measured) -> str:
    per = 1000 / m.runs
    return (
        f"  {name:<6} {m.runs / m.seconds:6.1f} seeds/s ({m.seconds:.2f} s wall); CPU per seed "
        f"{per * (m.client_cpu + m.worker_cpu):.2f} ms = client {per * m.client_cpu:.2f} + "
        f"workers {per * m.worker_cpu:.2f} (of which running seeds {per * m.run_cpu:.2f}); "
        f"{m.batches} batches on {m.processes} processes"
    )


@contextlib.contextmanager
def dask_cluster(jobs: int, folder: Path) -> Iterator[str]:
    """A scheduler and ``jobs`` single-threaded workers in their own processes,
    started as the README says; yields the scheduler's address."""
    dask = [sys.executable, "-m", "dask"]  # the `dask` command of this interpreter
    info = folder / "scheduler.json"
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    started = []
    try:
        started.append(
            subprocess.Popen(
                [*dask, "scheduler", "--scheduler-file", str(info), "--port", "0"]
                + ["--no-dashboard"],
                **quiet,  # type: ignore[arg-type]
            )
        )
        started.append(
            subprocess.Popen(
                [*dask, "worker", "--scheduler-file", str(info), "--nworkers", str(jobs)]
                + ["--nthreads", "1", "--no-dashboard"],
                **quiet,  # type: ignore[arg-type]
            )
        )
        deadline = time.monotonic() + 60
        while not info.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        address = json.loads(info.read_text())["address"]
        with Client(address, timeout="60s") as client:
            client.wait_for_workers(jobs, timeout=60)
        yield address
    finally:
        for process in reversed(started):
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, default=600)
    parser.add_argument("--ops", type=int, default=60)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--batches", default="5,50", help="comma-separated seeds per batch")
    parser.add_argument("--policy", default="g4")
    args = parser.parse_args()
    print(" ".join([os.path.basename(sys.executable), *sys.argv]))
    print(
        f"{args.seeds} seeds x {args.ops} ops, {args.jobs} workers; load average {os.getloadavg()}"
    )
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp, dask_cluster(args.jobs, Path(tmp)) as address:
        print(
            f"Dask cluster (`dask scheduler`, `dask worker --nworkers {args.jobs} --nthreads 1`) "
            f"start-up: {time.perf_counter() - started:.2f} s (not counted)"
        )
        folder = Path(tmp)
        pool_startup(args.jobs)  # the first start also starts the forkserver: not counted
        startup, startup_cpu = pool_startup(args.jobs)
        print(
            f"local process pool start-up: {startup:.2f} s wall, {startup_cpu:.2f} s CPU "
            "(taken off the local figures)"
        )
        for size in (int(b) for b in args.batches.split(",")):

            def plan(executor: str, scheduler: str | None) -> SweepPlan:
                return SweepPlan(
                    args.policy,
                    PRESETS[args.policy],
                    RunOptions(ops=args.ops),
                    0,
                    args.seeds,
                    args.jobs,
                    batch_size=size,  # noqa: B023 - used within this iteration
                    executor=executor,
                    scheduler=scheduler,
                )

            local = measure(plan("local", None), folder / f"local-{size}.duckdb")
            dask = measure(plan("dask", address), folder / f"dask-{size}.duckdb")
            # Per seed in steady state: the local figure without its pool's start-up
            # (the Dask cluster was started beforehand).
            local.seconds = max(local.seconds - startup, 1e-9)
            local.worker_cpu = max(local.worker_cpu - startup_cpu, 0.0)
            wall_ratio = dask.seconds / local.seconds
            # The robust figure: CPU per seed of every process involved.
            cpu_local = (local.client_cpu + local.worker_cpu) / local.runs
            cpu_dask = (dask.client_cpu + dask.worker_cpu) / dask.runs
            ratio = cpu_dask / cpu_local
            per_batch = (cpu_dask - cpu_local) * dask.runs / dask.batches
            # The smallest M > ratio; a cluster is 2 machines at least (on one, Dask at
            # best matches the local pool).
            breakeven = max(2, math.floor(ratio) + 1)
            w = dask.client_cpu / dask.runs
            machine = args.jobs / (dask.worker_cpu / dask.runs)  # seeds/s of one machine
            ceiling = (1 / w) / machine if w > 0 else math.inf
            print(f"batch of {size} seeds:")
            print(line("local", local))
            print(line("dask", dask))
            print(
                f"  overhead ratio per seed dask/local: {ratio:.2f} in CPU "
                f"({wall_ratio:.2f} in wall time, steady state); Dask's extra CPU per batch: "
                f"{1000 * per_batch:.1f} ms"
            )
            print(
                f"  pays for itself from {breakeven} machines of {args.jobs} cores "
                f"(M > {ratio:.2f}); the client, the only writer, saturates at "
                f"{1 / w if w else math.inf:,.0f} seeds/s, ~{ceiling:.0f} such machines"
            )
    print(
        "assumption: identical machines of "
        f"{args.jobs} cores, linear scaling, network round trips no costlier than "
        "this loopback (the scheduler's CPU counts as Dask overhead); figures from a shared, "
        "loaded machine are noisy"
    )


if __name__ == "__main__":
    main()
