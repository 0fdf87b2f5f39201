"""Work per seed of a sweep, by instruction count: a figure the machine's
load does not move (CPU time on a shared machine does, by more than a
modest gain).

Each interpreter named runs, under ``valgrind --tool=callgrind``, one job's
loop in process: a warm-up seed, then ``--seeds`` seeds of ``--ops``
operations with every invariant and the store's tables built (as
``run_batch`` does in a worker); the same with no seeds is subtracted, so
start-up and imports are left out. The release side is an interpreter of a
release's environment, e.g. one ``bench_sweep.py --base REF --base-keep DIR``
built (``DIR/<commit>/venv/bin/python``).

    python benchmarks/sweep_instructions.py [--seeds 15] [--ops 100]
        [--python PATH ...]
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import callgrind  # noqa: E402  (benchmarks/ is scripts, not a package)

SCRIPT = """
import sys
from inboxsim.model import PRESETS
from inboxsim.sim.run import RunOptions
from inboxsim.sim.sweep import BatchTask, run_batch
seeds, ops = int(sys.argv[1]), int(sys.argv[2])
run_batch(BatchTask((10_000_000,), 0, 0, PRESETS["g4"], RunOptions(ops=ops), True, None))
if seeds:
    run_batch(BatchTask(tuple(range(seeds)), 0, 0, PRESETS["g4"], RunOptions(ops=ops), True, None))
"""


def instructions(python: str, seeds: int, ops: int) -> int:
    return callgrind.count(python, SCRIPT, str(seeds), str(ops))[0]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, default=15)
    parser.add_argument("--ops", type=int, default=100)
    parser.add_argument(
        "--python", action="append", default=[], help="an interpreter to measure (repeatable)"
    )
    args = parser.parse_args()
    first = None
    for python in [sys.executable, *args.python]:
        per_seed = (
            instructions(python, args.seeds, args.ops) - instructions(python, 0, args.ops)
        ) / args.seeds
        first = first or per_seed
        print(
            f"{python}: {per_seed / 1e6:.1f} M instructions a seed "
            f"({args.seeds} seeds x {args.ops} ops), {per_seed / first:.2f}x the first one's",
            flush=True,
        )


if __name__ == "__main__":
    main()
