"""The sleep-set reduction's soundness check (tests/test_explore_reduction.py)
at bounds too big for CI: reduced and unreduced searches side by side.

First the independence claim at every key of depth 0 to ``--diamond-depth``
(pool ``--diamond-pool``, two sessions), for g4 and each preset that breaks
an invariant: every pair the search takes as independent reaches one key in
either order, each action as clean after the other. Then, for every preset
that breaks an invariant, each invariant it breaks (and unfiltered): the
same violation at the same shortest depth. For g4 (which holds): the same
distinct keys level by level, and how many transitions the reduction did
not judge.

    python -m benchmarks.reduction_soundness [--sessions 2] [--depth 4] [--pool 2]
        [--holds-depth 3] [--diamond-depth 1] [--diamond-pool 2]

A disagreement exits 1 and names the case. Measured figures are in
docs/explorer.md ("What the reduction assumes").
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from inboxsim.invariants import Monitor
from inboxsim.model import PRESETS
from inboxsim.search import explore as ex
from inboxsim.search import world
from tests.explore_helpers import BROKEN, diamonds, every_key


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=2)
    parser.add_argument("--depth", type=int, default=4, help="bound for the breaking presets")
    parser.add_argument("--pool", type=int, default=world.POOL)
    parser.add_argument("--holds-depth", type=int, default=3, help="bound for g4 (holds)")
    parser.add_argument("--diamond-depth", type=int, default=1)
    parser.add_argument("--diamond-pool", type=int, default=world.POOL)
    args = parser.parse_args()
    print(f"load before: {os.getloadavg()[0]:.1f}", flush=True)
    bad = 0
    for name in ("g4", *sorted({p for p, _ in BROKEN})):
        started = time.perf_counter()
        keys = every_key(name, 2, args.diamond_depth, args.diamond_pool)
        pairs = crashing = 0
        try:
            for state, monitor, length, at in keys:
                found, crashes = diamonds(state, monitor, length, at + 1, 2, args.diamond_pool)
                pairs += found
                crashing += crashes
        except AssertionError as failed:
            bad += 1
            print(f"{name}: a pair taken as independent does not commute: {failed}", flush=True)
            continue
        print(
            f"{name}: every key to depth {args.diamond_depth} (pool {args.diamond_pool}, "
            f"{len(keys):,} keys): {pairs:,} independent pairs commute, {crashing:,} with a "
            f"failpoint variant ({time.perf_counter() - started:.1f} s)",
            flush=True,
        )
    cases = [*BROKEN, *((p, None) for p in sorted({p for p, _ in BROKEN}))]
    for name, invariant in cases:
        started = time.perf_counter()
        reduced, full = (
            ex.explore(
                PRESETS[name],
                Monitor,
                args.sessions,
                args.depth,
                invariant=invariant,
                pool=args.pool,
                reduce=reduce,
            )
            for reduce in (True, False)
        )
        found = (reduced.depth_reached, {v.invariant for v in reduced.violations})
        wanted = (full.depth_reached, {v.invariant for v in full.violations})
        same = found[0] == wanted[0] and bool(found[1]) == bool(wanted[1])
        if invariant is not None:
            same = same and found[1] == wanted[1]
        bad += not same
        print(
            f"{name} {invariant or '(any)'}: reduced {found}, unreduced {wanted}: "
            f"{'same' if same else 'DIFFERENT'} ({time.perf_counter() - started:.1f} s)",
            flush=True,
        )
    started = time.perf_counter()
    reduced, full = (
        ex.explore(
            PRESETS["g4"], Monitor, args.sessions, args.holds_depth, pool=args.pool, reduce=reduce
        )
        for reduce in (True, False)
    )
    same = reduced.per_depth == full.per_depth and not reduced.violations and not full.violations
    bad += not same
    print(
        f"g4 holds to depth {args.holds_depth}: keys per depth reduced {reduced.per_depth}, "
        f"unreduced {full.per_depth}: {'same' if same else 'DIFFERENT'}; judged "
        f"{reduced.transitions:,} vs {full.transitions:,} ({reduced.slept:,} slept) "
        f"({time.perf_counter() - started:.1f} s)",
        flush=True,
    )
    print(f"load after: {os.getloadavg()[0]:.1f}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
