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

``--repros DIR`` also writes each race bug's minimal repro into DIR
(``races.write_repro``: the first paused seed that kills it, its failing
group and the steps before it, shrunk) and replays each file on the build
with the bug (must fail) and on the correct build (must hold); it prints the
steps and requests before and after shrinking, the largest group left, and
the seconds the hunt and the shrink took. Replay a file with
``inboxsim run DIR/BUG.toml --adapter "python impls/sqlite_inbox/adapter.py
--mutant BUG"``.

    python benchmarks/bench_races.py [--seeds 8] [--free 4] [--rounds 40]
                                     [--sequential 2] [--conformance 0] [--jobs 2]
                                     [--names A,B] [--repros DIR]
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

from inboxsim.conformance.catalogue import RACES
from inboxsim.conformance.mutants import check_mutant
from inboxsim.conformance.races import (
    SCENE_OF,
    SCENES,
    Hunt,
    Mode,
    adapter_factory,
    hunt,
    write_repro,
)
from inboxsim.model import G4
from inboxsim.scenarios.load import load_text
from inboxsim.search.group_scenario import run_group_scenario


def _one(args: tuple[str, str | None, int, Mode, int, str | None]) -> Hunt:
    folder, mutant, seed, mode, rounds, scene = args
    return hunt(Path(folder) / f"{mutant}-{scene}-{mode}-{seed}", mutant, seed, mode, rounds, scene)


def _conform(args: tuple[str, str, int]) -> tuple[str, int, int]:
    """(race bug, runs that killed it, runs) of the sequential kill check."""
    folder, name, seeds = args
    result = check_mutant(name, seeds=range(seeds), workdir=Path(folder) / f"{name}-conformance")
    return name, len({k.where for k in result.kills}), result.runs


def _repro(args: tuple[str, str, int, int, str]) -> tuple[str, int, str]:
    """(race bug, seed, a table row) of the bug's repro written into ``out``."""
    folder, name, seed, rounds, out = args
    work = Path(folder) / f"{name}-repro"
    path = Path(out) / f"{name}.toml"
    repro = write_repro(work, name, seed, path, rounds)
    if repro is None:
        return name, seed, "did not kill again"
    loaded = load_text(path.read_text(encoding="utf-8"), str(path))
    fails = not run_group_scenario(loaded, G4, adapter_factory(name, work / "bug")).passed
    holds = run_group_scenario(loaded, G4, adapter_factory(None, work / "correct")).passed
    group = max(len(s.requests or [s]) for s in loaded.scenario.step)
    (before, after), (sent, kept) = repro.steps, repro.requests
    return (
        name,
        seed,
        (
            f"{before:>3}/{sent:<3} -> {after:>2}/{kept:<2} {group:>5} {repro.seconds:>6.1f} "
            f"{'fails' if fails else 'HOLDS':>5} {'holds' if holds else 'FAILS':>7}"
        ),
    )


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
    parser.add_argument("--repros", default="", help="write each race bug's shrunk repro here")
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
            firsts = {}
            for h in hunts:
                if h.mode == "paused" and h.killed and h.mutant is not None:
                    firsts.setdefault(h.mutant, h)
            if opts.repros:
                Path(opts.repros).mkdir(parents=True, exist_ok=True)
            shrink = [
                (folder, n, firsts[n].seed, opts.rounds, opts.repros)
                for n in names
                if opts.repros and n in firsts
            ]
            repros = list(pool.map(_repro, shrink))
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
    if repros:
        print(f"\nrepros in {opts.repros} (steps/requests recorded -> shrunk, the largest group,")
        print("seconds to hunt and shrink, the file on the build with the bug, on the correct one)")
        for name, seed, row in repros:
            print(f"{name:34} seed {seed:<3} {row}")
    print(f"wall {wall:.0f} s at {opts.jobs} jobs; load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
