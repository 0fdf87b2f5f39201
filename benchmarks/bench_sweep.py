"""Sweep throughput: seeds/s and ops/s of the default mix, every invariant on,
traces written to DuckDB, at 1 and 2 jobs; then where the time goes.

The goal (issue 4): 10,000 seeds of ~100 ops in under a minute on a 2-core
machine. Each measurement is a whole ``sweep`` as the command runs it: pool
start-up, the runs, the checkers, encoding, and the parent's database writes,
into a fresh database each time.

    python benchmarks/bench_sweep.py [--seeds 10000] [--ops 100] [--jobs 1,2]
        [--profile-seeds 300] [--checkers MODULE]

The profile runs a sample of seeds in process (as one job does, the store
write included) under cProfile, and prints the hottest functions and the
time per area (model, simulator, checkers, encoding, store).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import inboxsim
from inboxsim.model import PRESETS
from inboxsim.sim.run import RunOptions
from inboxsim.sim.sweep import BatchTask, SweepPlan, run_batch, sweep
from inboxsim.store.store import Store

PACKAGE = str(Path(inboxsim.__file__).parent) + "/"  # the repository root is the package
AREAS = (  # first match wins: package folders by relative path, then libraries
    ("model/", "model"),
    ("invariants/", "checkers"),
    ("sim/encode", "encoding"),
    ("sim/", "simulator"),
    ("reports/", "store"),
)
LIBRARIES = (
    ("json", "encoding"),
    ("hashlib", "encoding"),
    ("duckdb", "store"),
    ("pyarrow", "store"),
)


def area_of(path: str) -> str:
    if path.startswith(PACKAGE):
        relative = path[len(PACKAGE) :]
        return next(
            (name for prefix, name in AREAS if relative.startswith(prefix)), "other inboxsim"
        )
    return next((name for needle, name in LIBRARIES if needle in path), "other (builtins, stdlib)")


def measure(
    seeds: int, ops: int, jobs: int, policy: str, checkers: str | None, folder: Path
) -> None:
    plan = SweepPlan(
        policy, PRESETS[policy], RunOptions(ops=ops), 0, seeds, jobs, checkers=checkers
    )
    before = os.times()
    started = time.perf_counter()
    with Store(folder / f"bench-{jobs}.duckdb") as store:
        report = sweep(plan, store)
    seconds = time.perf_counter() - started
    after = os.times()
    # CPU time of this process, and of running the seeds wherever they ran
    # (workers report their own): robust to other load on a shared machine,
    # where wall time is not. With one job the runs are inside the parent's.
    parent = after.user + after.system - before.user - before.system
    workers = report.run_cpu if jobs > 1 else 0.0
    size = (folder / f"bench-{jobs}.duckdb").stat().st_size / 1e6
    print(
        f"jobs {jobs}: {report.runs} seeds, {report.ops} ops in {seconds:.1f} s wall: "
        f"{report.runs / seconds:,.0f} seeds/s, {report.ops / seconds:,.0f} ops/s; "
        f"CPU {parent:.1f} s parent + {workers:.1f} s workers = "
        f"{1000 * (parent + workers) / max(report.runs, 1):.2f} ms per seed "
        f"({len(report.failing)} failing, {len(report.missing_probes)} required probes missed, "
        f"database {size:.0f} MB)",
        flush=True,
    )


def profile(seeds: int, ops: int, policy: str, checkers: str | None, folder: Path) -> None:
    task = BatchTask(
        tuple(range(seeds)), 0, 0, PRESETS[policy], RunOptions(ops=ops), True, checkers
    )
    run_batch(
        BatchTask((10_000_000,), 0, 0, PRESETS[policy], RunOptions(ops=ops), True, checkers)
    )  # warm up
    profiler = cProfile.Profile()
    with Store(folder / "profile.duckdb") as store:
        profiler.enable()
        outcome = run_batch(task)
        assert outcome.tables is not None
        store.write(outcome.tables)
        profiler.disable()
    stats = pstats.Stats(profiler)
    total = sum(v[2] for v in stats.stats.values())  # type: ignore[attr-defined]
    areas: dict[str, float] = defaultdict(float)
    for (path, _, _), (_, _, tottime, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        areas[area_of(path)] += tottime
    print(
        f"\nprofile of {seeds} seeds in one process ({total:.2f} s under cProfile), time by area:"
    )
    for area, seconds in sorted(areas.items(), key=lambda kv: -kv[1]):
        print(f"  {area:<26} {seconds:6.2f} s  {100 * seconds / total:5.1f} %")
    print("\nhottest functions (own time):")
    stats.sort_stats("tottime").print_stats(20)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, default=10_000)
    parser.add_argument("--ops", type=int, default=100)
    parser.add_argument("--jobs", default="1,2", help="comma-separated job counts to measure")
    parser.add_argument("--policy", default="g4")
    parser.add_argument("--profile-seeds", type=int, default=300)
    parser.add_argument(
        "--checkers", default=None, help="checkers' module (default inboxsim.invariants)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for jobs in (int(j) for j in args.jobs.split(",")):
            measure(args.seeds, args.ops, jobs, args.policy, args.checkers, folder)
        if args.profile_seeds:
            profile(args.profile_seeds, args.ops, args.policy, args.checkers, folder)


if __name__ == "__main__":
    main()
