"""The SQLite inbox's race bugs against the group driver: how reliably, and
how fast, each mode finds each one (``conformance/races.py`` hunts them).

For each race bug (``inboxsim.conformance.mutants.RACES``), on its scene:

- **paused**: one hunt per seed, each group under a schedule drawn from the
  seed (the adapter's pause points follow it): seeds killed / tried, the
  median round of the kill (one round = one racing group and its setup) and
  the median seconds to detect (from the adapter's start to the failing
  step's verdict, setup included);
- **free**: the same hunts with no schedule (threads run as they will, what
  a target without pause points gives): seeds killed / tried, and the rate
  per racing group (kills over the groups sent);
- **sequential**: the same requests one at a time: seeds killed (expected 0);
- **conformance** (``--conformance N``): the sequential kill check of the
  planted bugs (``check_mutant``: the scenario library, then N seeds in
  lockstep with kills and failpoints): runs that killed / runs (expected 0);
- the size of the failing group (median; 1 when the damage shows only at a
  later lone request, such as the answer to a call whose execution was lost).

The correct build is hunted on every scene too, paused and free: any kill
there is a false alarm (expected 0). Hunts run in ``--jobs`` processes.

    python benchmarks/bench_races.py [--seeds 8] [--free 4] [--rounds 40]
                                     [--sequential 2] [--conformance 0] [--jobs 2]
                                     [--names A,B]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from inboxsim.conformance.mutants import RACES, check_mutant
from inboxsim.conformance.races import SCENE_OF, SCENES, Hunt, Mode, hunt


def _one(args: tuple[str, str | None, int, Mode, int, str | None]) -> Hunt:
    folder, mutant, seed, mode, rounds, scene = args
    return hunt(Path(folder) / f"{mutant}-{scene}-{mode}-{seed}", mutant, seed, mode, rounds, scene)


def _conform(args: tuple[str, str, int]) -> tuple[str, int, int]:
    """(race bug, runs that killed it, runs) of the sequential kill check."""
    folder, name, seeds = args
    result = check_mutant(name, seeds=range(seeds), workdir=Path(folder) / f"{name}-conformance")
    return name, len({k.where for k in result.kills}), result.runs


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.1f}" if values else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=8, help="paused hunts per race bug")
    parser.add_argument("--free", type=int, default=4, help="free hunts per race bug")
    parser.add_argument("--rounds", type=int, default=40, help="racing groups per hunt, at most")
    parser.add_argument("--sequential", type=int, default=2, help="sequential hunts per race bug")
    parser.add_argument(
        "--conformance", type=int, default=0, help="also the library + N seeds in lockstep"
    )
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--names", default="", help="comma-separated race bugs (default: all)")
    opts = parser.parse_args()
    names = [n for n in opts.names.split(",") if n] or list(RACES)
    print("command:", " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]))
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")

    work: list[tuple[str, str | None, int, Mode, int, str | None]] = []
    with tempfile.TemporaryDirectory(prefix="bench-races-") as folder:
        for name in names:
            work += [(folder, name, s, "paused", opts.rounds, None) for s in range(opts.seeds)]
            work += [(folder, name, s, "free", opts.rounds, None) for s in range(opts.free)]
            rounds = opts.rounds
            work += [(folder, name, s, "sequential", rounds, None) for s in range(opts.sequential)]
        for scene in SCENES:
            work += [(folder, None, s, "paused", opts.rounds, scene) for s in range(opts.free)]
            work += [(folder, None, s, "free", opts.rounds, scene) for s in range(opts.free)]
        began = time.perf_counter()
        with ProcessPoolExecutor(opts.jobs) as pool:
            hunts = list(pool.map(_one, work))
            conform = [(folder, name, opts.conformance) for name in names if opts.conformance]
            conformance = {n: (k, r) for n, k, r in pool.map(_conform, conform)}
        wall = time.perf_counter() - began

    header = (
        f"{'race bug':34} {'scene':9} {'paused':>7} {'round':>5} {'s':>5} "
        f"{'free':>5} {'/group':>7} {'seq':>4} {'size':>4} {'conformance':>11}"
    )
    print(header)
    print("-" * len(header))
    for name in names:
        mine = [h for h in hunts if h.mutant == name]
        paused = [h for h in mine if h.mode == "paused"]
        free = [h for h in mine if h.mode == "free"]
        seq = [h for h in mine if h.mode == "sequential"]
        killed = [h for h in paused if h.killed]
        groups = sum(h.killed_at or h.rounds for h in free)
        rate = sum(h.killed for h in free) / groups if groups else 0.0
        size = _median([h.group_size for h in mine if h.killed and h.mode != "sequential"])
        print(
            f"{name:34} {SCENE_OF[name]:9} {len(killed):>3}/{len(paused):<3} "
            f"{_median([h.killed_at or 0 for h in killed]):>5} "
            f"{_median([h.seconds for h in killed]):>5} "
            f"{sum(h.killed for h in free):>2}/{len(free):<2} {rate:>7.3f} "
            f"{sum(h.killed for h in seq):>2}/{len(seq)} {size:>4} "
            f"{'/'.join(map(str, conformance.get(name, ('-',)))):>11}"
        )
    correct = [h for h in hunts if h.mutant is None]
    alarms = [h for h in correct if h.killed]
    groups = sum(h.rounds for h in correct)
    print(
        f"correct build, every scene, paused and free: {len(alarms)} false alarms"
        f" in {len(correct)} hunts ({groups} racing groups)"
    )
    for h in alarms:
        print(f"  FALSE ALARM {h.scene} seed {h.seed} {h.mode}: {h.why.splitlines()[0]}")
    print(f"wall {wall:.0f} s at {opts.jobs} jobs; load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
