"""The sweep's parent by instruction count: what it spends receiving the
workers' batches and writing them into the store, a figure the machine's load
does not move.

Runs ``--batches`` batches of ``--size`` seeds of ``--ops`` operations in
process as the workers do (``run_batch``), each pickled as a worker's result
is sent. Then, under ``valgrind --tool=callgrind``, the real ``sweep`` of a
fresh store with its pool replaced by those results (each unpickled as the
parent does): the store's writes, commits and checkpoints, the tally; the
same with no batch is subtracted, so start-up, imports and the store's
creation are left out. The commit time bound is lifted (under valgrind a
second is worth some fifty): the batches are committed by their rows alone.
``--results FILE`` keeps the pickled batches (running them takes minutes) or
reuses those it holds; each side of a comparison makes its own (a batch is
pickled as its code sends it). Some ten minutes on a loaded 2-core machine.

    python benchmarks/parent_instructions.py [--batches 30] [--size 100] [--ops 100]
        [--results FILE]
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
import tempfile
from multiprocessing.reduction import ForkingPickler

from inboxsim.model import PRESETS
from inboxsim.sim.run import RunOptions
from inboxsim.sim.sweep import BatchTask, run_batch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import callgrind  # noqa: E402  (benchmarks/ is scripts, not a package)

SCRIPT = """
import pickle, sys, tempfile
from pathlib import Path
from inboxsim.model import PRESETS
from inboxsim.sim import sweep as sweep_module
from inboxsim.sim.run import RunOptions
from inboxsim.store.store import Store

results, count, size, ops = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
with open(results, "rb") as f:
    sent = pickle.load(f)[:count]


def replay(fn, make_tasks, **kw):
    for task, data in zip(make_tasks(2), sent):
        yield task, pickle.loads(data)


sweep_module.run_tasks = replay
sweep_module.COMMIT_SECONDS = float("inf")
plan = sweep_module.SweepPlan(
    "g4", PRESETS["g4"], RunOptions(ops=ops), 0, count * size, 2, batch_size=size
)
with tempfile.TemporaryDirectory() as folder:
    with Store(Path(folder) / "parent.duckdb") as store:
        # DuckDB draws a progress bar for a statement that runs 2 s (under
        # valgrind, some of them): not the parent's work.
        store.con.execute("SET enable_progress_bar = false")
        report = sweep_module.sweep(plan, store)
print(report.runs)
"""


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--ops", type=int, default=100)
    parser.add_argument(
        "--results", help="keep the pickled batches in this file, or reuse the ones it holds"
    )
    args = parser.parse_args()
    path = args.results
    if path and os.path.exists(path):
        with open(path, "rb") as f:
            sent = pickle.load(f)
    else:
        sent = batches(args.batches, args.size, args.ops)
        with open(path, "wb") if path else tempfile.NamedTemporaryFile(delete=False) as f:
            pickle.dump(sent, f)
            path = f.name
    try:
        counts = [
            callgrind.count(sys.executable, SCRIPT, path, str(n), str(args.size), str(args.ops))
            for n in (0, args.batches)
        ]
    finally:
        if not args.results:
            os.remove(path)
    seeds = args.batches * args.size
    assert counts[1][1].splitlines()[-1] == str(seeds), counts[1][1]
    per_seed = (counts[1][0] - counts[0][0]) / seeds
    print(
        f"{sys.executable}: the parent {per_seed / 1e3:,.0f} k instructions a seed "
        f"({args.batches} batches of {args.size} seeds x {args.ops} ops, "
        f"{sum(map(len, sent)) / len(sent) / 1e6:.1f} MB a batch sent)",
        flush=True,
    )


def batches(count: int, size: int, ops: int) -> list[bytes]:
    """``count`` batches run as a worker runs them, each pickled as it sends it."""
    sent = []
    for first in range(0, count * size, size):
        task = BatchTask(
            tuple(range(first, first + size)),
            first,
            0,
            PRESETS["g4"],
            RunOptions(ops=ops),
            True,
            None,
        )
        sent.append(bytes(ForkingPickler.dumps(run_batch(task))))
    return sent


if __name__ == "__main__":
    main()
