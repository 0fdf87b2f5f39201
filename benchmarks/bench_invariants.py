"""Events checked per second, for all invariants together, over traces the
reference model produces.

    python -m benchmarks.bench_invariants [--runs 300] [--ops 60] [--policy g4] [--json]

The traces are generated first (not timed) by the invariant tests' seeded
random driver: every protocol operation, kills, failpoints and a closing
liveness phase. Then every trace is judged by ``check_trace`` with every
registered invariant enabled, and the rate is total durable events over
checking time. A second measurement judges the same number of operations
as a few long runs instead of many short ones: the rates match when the
cost is linear in the length of a trace.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from typing import Any


def _import_inboxsim() -> None:
    """Use the installed package, or this source tree (whose root *is* the
    package) through a temporary ``inboxsim`` link."""
    try:
        import inboxsim  # noqa: F401
    except ImportError:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        link_dir = tempfile.mkdtemp(prefix="inboxsim-bench-")
        os.symlink(root, os.path.join(link_dir, "inboxsim"))
        sys.path.insert(0, link_dir)


def measure(policy_name: str, runs: int, ops: int, seed0: int = 0) -> dict[str, Any]:
    from inboxsim.invariants import REGISTRY, check_trace
    from inboxsim.model import PRESETS
    from tests.invariant_driver import random_run

    policy = PRESETS[policy_name]
    traces = [random_run(policy, seed0 + i, ops).trace() for i in range(runs)]
    events = sum(len(s.observed.events) for t in traces for s in t.steps)
    steps = sum(len(t.steps) for t in traces)
    started = time.perf_counter()
    violations = 0
    for trace in traces:
        violations += len(check_trace(trace, policy, True, only_expected=False))
    seconds = time.perf_counter() - started
    return {
        "policy": policy_name,
        "runs": runs,
        "ops_per_run": ops,
        "invariants": len(REGISTRY),
        "steps": steps,
        "events": events,
        "seconds": round(seconds, 4),
        "events_per_second": round(events / seconds),
        "steps_per_second": round(steps / seconds),
        "violations": violations,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=300, help="short runs to judge")
    parser.add_argument("--ops", type=int, default=60, help="operations per short run")
    parser.add_argument("--policy", default="g4", help="policy preset the model runs under")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args(argv)
    _import_inboxsim()
    short = measure(args.policy, args.runs, args.ops)
    long_runs = max(1, args.runs // 20)
    long = measure(args.policy, long_runs, args.ops * args.runs // long_runs, seed0=10_000)
    if args.json:
        print(json.dumps({"short": short, "long": long}, indent=2))
        return 0
    for label, r in (("short runs", short), ("long runs", long)):
        print(
            f"{label:10}  {r['runs']:4d} x {r['ops_per_run']:5d} ops  {r['events']:7d} events  "
            f"{r['steps']:7d} steps  {r['seconds']:7.3f} s  {r['events_per_second']:8d} events/s  "
            f"{r['steps_per_second']:8d} steps/s  ({r['invariants']} invariants, policy "
            f"{r['policy']})"
        )
    ratio = long["events_per_second"] / short["events_per_second"]
    print(f"long/short rate ratio {ratio:.2f} (about 1 when checking is linear in trace length)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
