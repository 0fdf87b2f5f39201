"""Work of an explorer search, by instruction count: a figure the machine's
load does not move (CPU time on a shared machine does, by more than a
modest gain).

Each interpreter named runs, under ``valgrind --tool=callgrind``, the
search of ``--sessions`` sessions, pool ``--pool``, the full alphabet,
under g4, in process, to ``--depth``; the same script with depth 0 is
subtracted, so start-up and imports are left out. The release side is an
interpreter of a release's environment, e.g. one ``bench_explore.py --base
REF --base-keep DIR`` built (``DIR/<commit>/venv/bin/python``). It prints the keys,
judged and slept transitions (which must not change with a pass that only
makes the search cheaper) and the instructions. Depth 2 takes about half
a minute under valgrind, depth 3 some ten.

    python benchmarks/explore_instructions.py [--depth 2] [--sessions 2] [--pool 2]
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
from inboxsim.invariants import Monitor
from inboxsim.model import PRESETS
try:
    from inboxsim.search import explore as ex, world
except ImportError:  # a release before the search moved from sim/ to search/
    from inboxsim.sim import explore as ex
    world = ex
depth, sessions, pool = map(int, sys.argv[1:4])
if depth:
    r = ex.explore(PRESETS["g4"], Monitor, sessions, depth, world.DEFAULT_STEP_LIMIT,
                   world.parse_alphabet("full"), None, pool=pool)
    print(r.states, r.transitions, getattr(r, "slept", 0), list(r.per_depth))
"""


def instructions(python: str, depth: int, sessions: int, pool: int) -> tuple[int, str]:
    return callgrind.count(python, SCRIPT, str(depth), str(sessions), str(pool))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--depth", type=int, default=2)
    parser.add_argument("--sessions", type=int, default=2)
    parser.add_argument("--pool", type=int, default=2)
    parser.add_argument(
        "--python", action="append", default=[], help="an interpreter to measure (repeatable)"
    )
    args = parser.parse_args()
    first = None
    for python in [sys.executable, *args.python]:
        total, counts = instructions(python, args.depth, args.sessions, args.pool)
        work = total - instructions(python, 0, args.sessions, args.pool)[0]
        first = first or work
        print(
            f"{python}: keys, judged, slept, new per depth: {counts}; "
            f"{work / 1e6:,.1f} M instructions, {work / first:.2f}x the first one's",
            flush=True,
        )


if __name__ == "__main__":
    main()
