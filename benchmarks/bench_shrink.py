"""Sweep + shrink versus Hypothesis, on the planted bugs.

For each policy with a planted bug (g2, c, g5, b), side by side:

* **sweep + shrink**: seeds 0, 1, 2, ... until the first run whose first
  violation is one of the policy's planted invariants, then
  :func:`inboxsim.search.shrink.shrink_run` on it;
* **Hypothesis**: the same run under ``@given(st.randoms(use_true_random=False))``
  (:func:`run_random`), failing on the same invariants, derandomized, no
  database, until it fails; Hypothesis then shrinks, and replays the minimal
  example last.

Same run options for both; the same budget of examples/seeds for detection
(``--budget``). Printed: examples and seconds to first detection, total
seconds (detection + shrink), the shrunk run's operations (requests other
than hello/create) and faults, and Hypothesis / sweep ratios.

    python benchmarks/bench_shrink.py [--ops 10] [--budget 300] [--policies g2,c,g5,b] [--json]

``--over-seeds N`` measures the shrinker alone instead: for each policy, the
first ``N`` seeds (``--ops 100``, the ``shrink`` command's default) whose run
fails, each shrunk twice -- the decision list only (``steps_phase=False``,
the shrinker before the step-level phase) and the whole shrinker -- and
prints the shrunk operations (+ faults) per seed, and their min / median /
max, before and after.

    python benchmarks/bench_shrink.py --over-seeds 10 --ops 100
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inboxsim.policy_file import load_policy
from inboxsim.search.shrink import shrink_run, size_of
from inboxsim.sim.rng import Chooser
from inboxsim.sim.run import RunOptions, RunResult, run, run_random, run_seed

PLANTED = {
    "g2": ("monotonic-visible-time",),
    "c": ("shared-admission-order", "queue-fifo"),
    "g5": ("retry-same-receipt", "conflict-rejected", "barrier-blocks-promotion"),
    "b": ("receipt-reflects-request",),
}


class ZeroIsNo(Chooser):
    """A live chooser whose ``chance`` is False at ``random() == 0.0``.

    :class:`Chooser` draws a chance as ``random() < p``, so the float
    Hypothesis shrinks toward (0.0) makes every chance *happen* (a kill, a
    crash, a queue) -- the opposite of the replay convention (0 = False).
    ``--zero-is-no`` measures Hypothesis with the chance flipped
    (``random() >= 1 - p``, same probability)."""

    __slots__ = ()

    def chance(self, p: float) -> bool:
        if self._rng is None or p <= 0.0 or p >= 1.0:
            return super().chance(p)
        value = 1 if self._rng.random() >= 1.0 - p else 0
        self.decisions.append(value)
        return value == 1


ZERO_IS_NO = [False]


@dataclass
class Side:
    found: bool
    invariant: str | None
    examples: int  # seeds / examples until the first failure
    detect_s: float
    total_s: float
    original_ops: int | None
    shrunk_ops: int | None
    shrunk_faults: int | None
    shrunk_steps: int | None


def planted_failure(result: RunResult, policy: str) -> str | None:
    if result.violations and result.violations[0].invariant in PLANTED[policy]:
        return str(result.violations[0].invariant)
    return None


def sweep_and_shrink(policy: str, options: RunOptions, budget: int) -> Side:
    p = load_policy(policy)
    started = time.perf_counter()
    for seed in range(budget):
        r = run_seed(seed, p, options)
        inv = planted_failure(r, policy)
        if inv is None:
            continue
        detect = time.perf_counter() - started
        s = shrink_run(r, p, options, invariant=inv, verify=False)
        return Side(
            True,
            inv,
            seed + 1,
            detect,
            time.perf_counter() - started,
            s.original.operations,
            s.final.operations,
            s.final.faults,
            s.final.steps,
        )
    return Side(
        False,
        None,
        budget,
        time.perf_counter() - started,
        time.perf_counter() - started,
        None,
        None,
        None,
        None,
    )


def hypothesis_side(policy: str, options: RunOptions, budget: int) -> Side:
    p = load_policy(policy)
    failing: list[RunResult] = []
    first: list[tuple[int, float, int]] = []
    count = [0]
    started = time.perf_counter()

    @settings(
        max_examples=budget,
        deadline=None,
        database=None,
        derandomize=True,
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.randoms(use_true_random=False))
    def holds(rng: Any) -> None:
        count[0] += 1
        r = run(p, options, ZeroIsNo(rng)) if ZERO_IS_NO[0] else run_random(rng, p, options)
        inv = planted_failure(r, policy)
        if inv is not None:
            if not first:
                first.append(
                    (count[0], time.perf_counter() - started, size_of(r.trace.steps).operations)
                )
            failing.append(r)
            raise AssertionError(inv)

    try:
        holds()
    except AssertionError:
        pass
    total = time.perf_counter() - started
    if not failing:
        return Side(False, None, count[0], total, total, None, None, None, None)
    last = failing[-1]
    size = size_of(last.trace.steps)
    return Side(
        True,
        str(last.violations[0].invariant),
        first[0][0],
        first[0][1],
        total,
        first[0][2],
        size.operations,
        size.faults,
        size.steps,
    )


def _ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b == 0:
        return "-"
    return f"{a / b:.2f}x"


def over_seeds(policy: str, options: RunOptions, count: int, scan: int = 2000) -> dict[str, Any]:
    """Shrunk lengths (operations + faults) over the first ``count`` failing seeds."""
    import statistics

    p = load_policy(policy)
    rows = []
    for seed in range(scan):
        r = run_seed(seed, p, options)
        if not r.violations:
            continue
        inv = str(r.violations[0].invariant)
        before = shrink_run(r, p, options, verify=False, steps_phase=False)
        started = time.perf_counter()
        after = shrink_run(r, p, options, verify=False)
        rows.append(
            {
                "seed": seed,
                "invariant": inv,
                "original": before.original.operations + before.original.faults,
                "before": before.final.operations + before.final.faults,
                "after": after.final.operations + after.final.faults,
                "after_s": time.perf_counter() - started,
            }
        )
        if len(rows) == count:
            break

    def stats(key: str) -> str:
        values = [row[key] for row in rows]
        if not values:
            return "-"
        return f"{min(values)} / {statistics.median(values):g} / {max(values)}"

    return {
        "policy": policy,
        "rows": rows,
        "before": stats("before"),
        "after": stats("after"),
        "original": stats("original"),
    }


def main_over_seeds(args: argparse.Namespace) -> None:
    options = RunOptions(ops=args.ops)
    out = [over_seeds(policy, options, args.over_seeds) for policy in args.policies.split(",")]
    if args.json:
        print(json.dumps({"ops": args.ops, "policies": out}, indent=2))
        return
    print(f"run options: ops={args.ops}; the first {args.over_seeds} failing seeds per policy")
    print("lengths are operations + faults up to the violation (min / median / max)\n")
    head = f"{'policy':6} {'original':>14} {'decisions only':>15} {'whole shrinker':>15}"
    print(head)
    print("-" * len(head))
    for doc in out:
        print(f"{doc['policy']:6} {doc['original']:>14} {doc['before']:>15} {doc['after']:>15}")
    print()
    for doc in out:
        for row in doc["rows"]:
            print(
                f"{doc['policy']:6} seed {row['seed']:>4} {row['invariant']:26} "
                f"{row['original']:>4} -> {row['before']:>2} -> {row['after']:>2} "
                f"({row['after_s']:.2f} s)"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=10)
    ap.add_argument("--budget", type=int, default=300)
    ap.add_argument("--policies", default="g2,c,g5,b")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--zero-is-no", action="store_true", help="Hypothesis side: see ZeroIsNo")
    ap.add_argument("--over-seeds", type=int, default=0, help="the shrinker alone, see above")
    args = ap.parse_args()
    if args.over_seeds:
        main_over_seeds(args)
        return
    ZERO_IS_NO[0] = args.zero_is_no
    options = RunOptions(ops=args.ops)
    rows = []
    for policy in args.policies.split(","):
        sw = sweep_and_shrink(policy, options, args.budget)
        hy = hypothesis_side(policy, options, args.budget)
        rows.append({"policy": policy, "sweep_shrink": asdict(sw), "hypothesis": asdict(hy)})
    if args.json:
        print(json.dumps({"ops": args.ops, "budget": args.budget, "rows": rows}, indent=2))
        return
    flip = " (Hypothesis side: --zero-is-no)" if args.zero_is_no else ""
    print(f"run options: ops={args.ops}; detection budget {args.budget} seeds / examples{flip}\n")
    head = (
        f"{'policy':6} {'side':11} {'invariant':26} {'to-detect':>9} {'detect s':>9} "
        f"{'total s':>8} {'orig ops':>8} {'shrunk ops':>10} {'faults':>6} {'steps':>5}"
    )
    print(head)
    print("-" * len(head))
    for row in rows:
        for label, key in (("sweep+shrink", "sweep_shrink"), ("hypothesis", "hypothesis")):
            s = row[key]
            print(
                f"{row['policy']:6} {label:11} {str(s['invariant']):26} {s['examples']:>9} "
                f"{s['detect_s']:>9.3f} {s['total_s']:>8.2f} {str(s['original_ops']):>8} "
                f"{str(s['shrunk_ops']):>10} {str(s['shrunk_faults']):>6} "
                f"{str(s['shrunk_steps']):>5}"
            )
    print("\nratios, Hypothesis / (sweep + shrink):")
    print(f"{'policy':6} {'to-detect':>10} {'detect s':>9} {'total s':>8} {'shrunk ops':>10}")
    for row in rows:
        a, b = row["hypothesis"], row["sweep_shrink"]
        print(
            f"{row['policy']:6} {_ratio(a['examples'], b['examples']):>10} "
            f"{_ratio(a['detect_s'], b['detect_s']):>9} {_ratio(a['total_s'], b['total_s']):>8} "
            f"{_ratio(a['shrunk_ops'], b['shrunk_ops']):>10}"
        )


if __name__ == "__main__":
    main()
