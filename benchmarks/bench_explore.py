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

    python benchmarks/bench_explore.py [--sessions 2] [--depth 6] [--pool 2] [--alphabet LIST]
        [--merge sound|log|fold] [--jobs N] [--model-states]
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from inboxsim.model import PRESETS, Policy
from inboxsim.search import explore as ex

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
        "--compare-clone",
        action="store_true",
        help="also run with a deepcopy per child monitor (the alternative to pickle once, "
        "loads per child) and print the time ratio",
    )
    parser.add_argument(
        "--model-states",
        action="store_true",
        help="count distinct states by the model's fold alone (search/explore.py model_key: no "
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
    parser.add_argument("--pool", type=int, default=ex.POOL, help="fresh input IDs per session")
    args = parser.parse_args()
    if args.model_states:
        return _model_states(args)
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
        ex.DEFAULT_STEP_LIMIT,
        ex.parse_alphabet(args.alphabet),
        progress,
        merge=args.merge,
        jobs=args.jobs,
        pool=args.pool,
    )
    print(
        f"policy {policy.name}, {args.sessions} sessions, depth {args.depth}, "
        f"pool {args.pool}, jobs {args.jobs}, checks: {checks}"
    )
    print("alphabet: " + "; ".join(ex.describe(frozenset(result.alphabet))))
    if args.merge != "sound":
        key = "model_key (the fold)" if args.merge == "fold" else "state_key (the event logs)"
        print(f"merged by {key}, without the monitor: NOT exhaustive, paths with one key")
        print("but different monitor histories are judged along the shortest one only")
    else:
        print(ex.exhaustive_claim(args.sessions, args.depth, args.pool))
    print(f"distinct states   {result.states}")
    print(f"transitions       {result.transitions}")
    print(f"depth reached     {result.depth_reached}{' (closed)' if result.complete else ''}")
    print(f"new per depth     {result.per_depth}")
    print(f"seconds           {result.seconds:.1f}")
    print(f"states/s          {result.states_per_second:,.0f}")
    print(f"transitions/s     {result.transitions / result.seconds:,.0f}")
    print(f"violations        {len(result.violations)}")
    if args.compare_clone:
        ex._Frozen.by_pickle = False
        try:
            other = ex.explore(
                policy,
                monitor,
                args.sessions,
                args.depth,
                ex.DEFAULT_STEP_LIMIT,
                ex.parse_alphabet(args.alphabet),
            )
        finally:
            ex._Frozen.by_pickle = True
        assert other.states == result.states and other.transitions == result.transitions
        print(
            f"deepcopy per child: {other.seconds:.1f} s; pickle/deepcopy time ratio "
            f"{result.seconds / other.seconds:.2f}"
        )
    return 1 if result.violations else 0


def _model_states(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    counts = ex.count_states(
        PRESETS[args.policy],
        args.sessions,
        args.depth,
        ex.model_key,
        ex.parse_alphabet(args.alphabet),
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
