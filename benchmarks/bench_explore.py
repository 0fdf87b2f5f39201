"""Explorer throughput: distinct states and states per second, default policy g4.

The default measured world is two sessions and six operations over a stated
reduced alphabet: prompt steer and queue, the exact retry, every answer
(stop, tool, error), resume and a kill between requests; no synthetic input,
conflicting retry, compaction, interrupt or failpoint crash.
``--alphabet full`` takes every family: two sessions and six operations are
measured with one fresh input ID per session (``--pool 1``), five operations
with two, and one session to depth six (docs/explorer.md has the table).

``--merge`` compares the search's sound merge key (``search/canon.py``, the
default) with two coarser keys that leave the monitor out (``log``: the
event logs; ``fold``: the model's fold): those are measurements, not
exhaustive. ``--model-states`` counts distinct folds without any check.
``--jobs N`` spreads each level over N worker processes (the same result).

The checkers are the real ones when ``inboxsim.invariants`` exports
``Monitor``; otherwise a no-op monitor, and the output says so.

``--base REF`` runs the same search in this checkout and in the release
REF names, built in its own virtual environment (``benchmarks/baseline.py``),
one after the other in one run, and prints keys, judged and slept
transitions, search, wall and CPU time with the load, and the ratios.
``--no-reduce`` turns the sleep sets off (the same keys, every transition
judged). ``--concurrent`` runs the two sides at the same time instead, each
in its own process (on a shared machine both then meet the same load; each
side's CPU time is its own): for searches that take long enough for the
load to change between one side and the other.

    python benchmarks/bench_explore.py [--sessions 2] [--depth 6] [--pool 2] [--alphabet LIST]
        [--merge sound|log|fold] [--jobs N] [--model-states] [--no-reduce]
        [--base REF [--base-keep DIR] [--concurrent]]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from inboxsim.model import PRESETS, Policy
from inboxsim.search import coarse_keys, world
from inboxsim.search import explore as ex

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import baseline  # noqa: E402  (benchmarks/ is scripts, not a package)

BENCH_ALPHABET = "prompt_steer,prompt_queue,retry,answer_stop,answer_tool,answer_error,resume,kill"


class _NoChecks:
    def __init__(self, policy: Policy, hello: dict[str, Any]) -> None:
        pass

    def feed(self, step: Any) -> list[Any]:
        return []

    def finish(self, liveness: bool) -> list[Any]:
        return []


def _monitor() -> tuple[Any, str]:
    try:
        from inboxsim.invariants import Monitor
    except ImportError:
        return _NoChecks, "none (inboxsim.invariants has no Monitor yet): search cost only"
    return Monitor, "inboxsim.invariants.Monitor (every invariant, every transition)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=2)
    parser.add_argument("--depth", type=int, default=6)
    parser.add_argument("--policy", default="g4")
    parser.add_argument("--alphabet", default=BENCH_ALPHABET)
    parser.add_argument("--no-checks", action="store_true", help="measure the search alone")
    parser.add_argument(
        "--no-reduce",
        action="store_true",
        help="judge every transition (no sleep sets): the unreduced search, same keys",
    )
    parser.add_argument(
        "--model-states",
        action="store_true",
        help="count distinct states by the model's fold alone (search/coarse_keys.py model_key: no "
        "history, no monitor) at each depth: how far any state-merging reduction could go; "
        "a measurement, not an exhaustive check",
    )
    parser.add_argument(
        "--merge",
        choices=ex.MERGES,
        default="sound",
        help="sound (the explorer's): merge paths by search/canon.py merge_key, the fold "
        "with what the monitor reads later; log: by each session's event log (state_key); "
        "fold: by the model's fold (model_key). log and fold leave the monitor out: NOT "
        "exhaustive, measurements",
    )
    parser.add_argument(
        "--jobs", type=int, default=1, help="worker processes judging each level (explore --jobs)"
    )
    parser.add_argument("--pool", type=int, default=world.POOL, help="fresh input IDs per session")
    baseline.add_arguments(parser)
    parser.add_argument(
        "--concurrent",
        action="store_true",
        help="with --base: run both sides at the same time (the same load for both)",
    )
    args = parser.parse_args()
    if args.concurrent and not args.base:
        parser.error("--concurrent compares two sides: it needs --base REF")
    if args.model_states:
        return _model_states(args)
    if args.base:
        return _side_by_side(args)
    monitor, checks = (_NoChecks, "none (--no-checks)") if args.no_checks else _monitor()
    policy = PRESETS[args.policy]

    def progress(level: int, states: int, transitions: int) -> None:
        print(
            f"  depth {level}: {states} states, {transitions} transitions",
            file=sys.stderr,
            flush=True,
        )

    result = ex.explore(
        policy,
        monitor,
        args.sessions,
        args.depth,
        world.DEFAULT_STEP_LIMIT,
        world.parse_alphabet(args.alphabet),
        progress,
        merge=args.merge,
        jobs=args.jobs,
        pool=args.pool,
        reduce=not args.no_reduce,
    )
    print(
        f"policy {policy.name}, {args.sessions} sessions, depth {args.depth}, "
        f"pool {args.pool}, jobs {args.jobs}, checks: {checks}"
    )
    print("alphabet: " + "; ".join(world.describe(frozenset(result.alphabet))))
    if args.merge != "sound":
        key = "model_key (the fold)" if args.merge == "fold" else "state_key (the event logs)"
        print(f"merged by {key}, without the monitor: NOT exhaustive, paths with one key")
        print("but different monitor histories are judged along the shortest one only")
    else:
        print(world.exhaustive_claim(args.sessions, args.depth, args.pool))
    print(f"distinct states   {result.states}")
    print(f"transitions       {result.transitions}")
    print(f"depth reached     {result.depth_reached}{' (closed)' if result.complete else ''}")
    print(f"new per depth     {result.per_depth}")
    print(f"seconds           {result.seconds:.1f}")
    print(f"states/s          {result.states_per_second:,.0f}")
    print(f"transitions/s     {result.transitions / result.seconds:,.0f}")
    print(f"slept             {result.slept} (transitions a sleep set held aside)")
    print(f"violations        {len(result.violations)}")
    return 1 if result.violations else 0


# The measuring script both sides run (each under its own interpreter): the
# same call, through the API both releases share (the search moved from sim/
# to search/, its world beside it); its last line is JSON.
SCRIPT = """
import json, sys
from inboxsim.invariants import Monitor
from inboxsim.model import PRESETS
try:
    from inboxsim.search import explore as ex, world
except ImportError:
    from inboxsim.sim import explore as ex
    world = ex

a = json.loads(sys.argv[1])
def progress(level, states, transitions):
    print(f"  depth {level}: {states} states, {transitions} transitions", file=sys.stderr,
          flush=True)
r = ex.explore(PRESETS[a["policy"]], Monitor, a["sessions"], a["depth"], world.DEFAULT_STEP_LIMIT,
               world.parse_alphabet(a["alphabet"]), progress, jobs=a["jobs"], pool=a["pool"])
print(json.dumps({"states": r.states, "transitions": r.transitions, "seconds": r.seconds,
                  "per_depth": list(r.per_depth), "violations": len(r.violations),
                  "complete": r.complete, "slept": getattr(r, "slept", 0)}))
"""


def _side_by_side(args: argparse.Namespace) -> int:
    """This checkout and the release ``--base`` names, one search each, the
    same bound, sound merge and every invariant. This checkout first: its
    interpreter has read every module before the release's long run starts."""
    bound = {
        "policy": args.policy,
        "sessions": args.sessions,
        "depth": args.depth,
        "alphabet": args.alphabet,
        "jobs": args.jobs,
        "pool": args.pool,
    }
    how = "at the same time" if args.concurrent else "one after the other"
    print(
        f"bound: {bound}; the two sides {how}; machine load before: {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    with baseline.sides(args) as (new, old):
        measured = {}
        if args.concurrent:
            print(f"{new.label} and {old.label} ...", file=sys.stderr, flush=True)
            running = [side.start(SCRIPT, bound) for side in (new, old)]
            try:
                for side, run in zip((new, old), running, strict=True):
                    measured[side.label] = run.wait()
            finally:
                for run in running:
                    run.stop()  # no orphan when one side failed or on Ctrl-C
        else:
            for side in (new, old):
                print(f"{side.label} (inboxsim {side.version}) ...", file=sys.stderr, flush=True)
                measured[side.label] = side.run(SCRIPT, bound)
        for side in (new, old):
            m = measured[side.label]
            r = m.result
            print(
                f"{side.label:<32} inboxsim {side.version:<8} keys {r['states']:>9,} "
                f"judged {r['transitions']:>10,} slept {r['slept']:>10,} "
                f"search {r['seconds']:8.1f} s  wall {m.wall:8.1f} s  CPU {m.cpu:8.1f} s  "
                f"{m.load_text()}",
                flush=True,
            )
        n, o = measured[new.label], measured[old.label]
    if n.result["violations"] != o.result["violations"]:
        print("the two sides disagree on the violations: not comparable")
        return 2
    if n.result["states"] != o.result["states"]:
        # The keys differ where one release's key is coarser (merges more
        # paths with the same futures): both are exhaustive for the bound.
        print(f"distinct keys differ ({n.result['states']:,} vs {o.result['states']:,}): the keys")
        print("are not the same function; each side's search is exhaustive for the bound")
    print(
        f"search time {baseline.ratio(n.result['seconds'], o.result['seconds'])}; "
        f"CPU {baseline.ratio(n.cpu, o.cpu)}; judged transitions "
        f"{o.result['transitions'] / max(n.result['transitions'], 1):.2f}x fewer"
    )
    return 0


def _model_states(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    counts = coarse_keys.count_states(
        PRESETS[args.policy],
        args.sessions,
        args.depth,
        coarse_keys.model_key,
        world.parse_alphabet(args.alphabet),
    )
    seconds = time.perf_counter() - started
    print(f"policy {args.policy}, {args.sessions} sessions, depth {args.depth}, no checks")
    print("key: model_key (the fold of each log, no history): NOT an exhaustive check")
    print(f"distinct folds per depth (cumulative) {counts}")
    growth = [round(b / a, 1) for a, b in zip(counts, counts[1:], strict=False)]
    print(f"growth per depth  {growth}")
    print(f"seconds           {seconds:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
