"""Seeded conformance versus a Hypothesis stateful test, on the planted bugs.

For each mutant of the SQLite inbox (``inboxsim mutants --list``), with the
same wall-time budget for detection on both sides:

* **seeded**: :func:`inboxsim.conformance.detection.seeded_detection` -- seeds 0, 1, 2,
  ... in lockstep with the g4 model through the adapter protocol, judged by
  the invariant checkers, until the first divergence or violation (no scenario
  library: both sides start from nothing but their generator); the failing
  seed is then shrunk through the adapter (``search/repro.py``, capped at
  ``--shrink-budget`` seconds);
* **Hypothesis**: :func:`inboxsim.conformance.detection.hypothesis_detection` -- the
  :class:`inboxsim.search.stateful.InboxMachine` rules driving the same mutant
  through the same ``LockstepTarget`` with the same checkers, derandomized,
  then Hypothesis' own shrinking (capped at ``--shrink-budget`` seconds).

Per run, at most ``--ops`` workload operations (seeded safety phase) and
``--ops`` rule steps (Hypothesis). Printed: per mutant, what killed it, the
seconds and runs (seeds / examples) to the first detection, the length of the
failing run (operations: requests other than hello and create) and, for
Hypothesis, the shrunk length; then the medians side by side as
Hypothesis / seeded ratios. ``--out`` writes everything as JSON.

    python benchmarks/bench_mutants.py [--budget 60] [--shrink-budget 30] [--ops 40]
        [--names a,b] [--jobs 1] [--out bench_mutants.json]

Timings depend on the machine's load: read the ratios, not the seconds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

from inboxsim.conformance.catalogue import MUTANTS
from inboxsim.conformance.detection import hypothesis_detection, seeded_detection


def one(name: str, budget: float, shrink_budget: float, ops: int) -> dict[str, Any]:
    seeded = seeded_detection(name, seconds=budget, ops=ops, shrink_seconds=shrink_budget)
    hyp = hypothesis_detection(name, seconds=budget, shrink_seconds=shrink_budget, steps=ops)
    return {"mutant": name, "seeded": seeded.to_dict(), "hypothesis": hyp.to_dict()}


def censored(side: dict[str, Any], budget: float) -> float:
    """Seconds to detect, or the budget for a mutant not killed within it."""
    t = side["seconds_to_detect"]
    return float(t) if side["killed"] and t is not None else budget


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def summary(rows: list[dict[str, Any]], budget: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for side in ("seeded", "hypothesis"):
        sides = [r[side] for r in rows]
        out[side] = {
            "killed": sum(1 for s in sides if s["killed"]),
            "median_seconds_to_detect": _median([censored(s, budget) for s in sides]),
            "worst_seconds_to_detect": max((censored(s, budget) for s in sides), default=None),
            "median_runs_to_detect": _median([float(s["runs"]) for s in sides if s["killed"]]),
            "median_operations": _median(
                [
                    float(s["operations"])
                    for s in sides
                    if s["killed"] and s["operations"] is not None
                ]
            ),
            "median_shrunk_operations": _median(
                [
                    float(s["shrunk_operations"])
                    for s in sides
                    if s["killed"] and s["shrunk_operations"] is not None
                ]
            ),
            "median_shrink_seconds": _median(
                [float(s["shrink_seconds"]) for s in sides if s["shrink_seconds"] is not None]
            ),
        }
    both = [r for r in rows if r["seeded"]["killed"] and r["hypothesis"]["killed"]]
    ratios = [
        censored(r["hypothesis"], budget) / max(censored(r["seeded"], budget), 1e-9) for r in rows
    ]
    out["killed_by_both"] = len(both)
    out["median_ratio_seconds_to_detect"] = _median(ratios)
    return out


def _fmt(value: Any, spec: str = "") -> str:
    if value is None:
        return "-"
    return format(value, spec) if spec else str(value)


def _ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b == 0:
        return "-"
    return f"{a / b:.2f}x"


def render(rows: list[dict[str, Any]], summ: dict[str, Any], args: argparse.Namespace) -> str:
    lines = [
        f"budget {args.budget:g} s to detect per mutant per side; each side shrinks for at most "
        f"{args.shrink_budget:g} s; {args.ops} operations per run",
        "",
        f"{'mutant':34} {'seeded':>10} {'s':>6} {'seeds':>5} {'ops':>4} {'shrunk':>6}   "
        f"{'hypothesis':>10} {'s':>6} {'exs':>4} {'ops':>4} {'shrunk':>6}   {'t ratio':>7}",
    ]
    lines.append("-" * len(lines[-1]))
    for r in rows:
        s, h = r["seeded"], r["hypothesis"]
        lines.append(
            f"{r['mutant']:34} {s['killed_by']:>10} {_fmt(s['seconds_to_detect'], '.1f'):>6} "
            f"{s['runs']:>5} {_fmt(s['operations']):>4} {_fmt(s['shrunk_operations']):>6}   "
            f"{h['killed_by']:>10} {_fmt(h['seconds_to_detect'], '.1f'):>6} {h['runs']:>4} "
            f"{_fmt(h['operations']):>4} {_fmt(h['shrunk_operations']):>6}   "
            f"{_ratio(censored(h, args.budget), censored(s, args.budget)):>7}"
        )
    a, b = summ["hypothesis"], summ["seeded"]
    n = len(rows)
    lines += [
        "",
        f"{'':34} {'seeded':>12} {'hypothesis':>12} {'hyp/seeded':>10}",
        f"{'killed within the budget':34} {b['killed']:>9}/{n:<2} {a['killed']:>9}/{n:<2}",
        f"{'median s to detect (censored)':34} {_fmt(b['median_seconds_to_detect'], '.2f'):>12} "
        f"{_fmt(a['median_seconds_to_detect'], '.2f'):>12} "
        f"{_ratio(a['median_seconds_to_detect'], b['median_seconds_to_detect']):>10}",
        f"{'worst s to detect (censored)':34} {_fmt(b['worst_seconds_to_detect'], '.2f'):>12} "
        f"{_fmt(a['worst_seconds_to_detect'], '.2f'):>12} "
        f"{_ratio(a['worst_seconds_to_detect'], b['worst_seconds_to_detect']):>10}",
        f"{'median runs to detect (killed)':34} {_fmt(b['median_runs_to_detect']):>12} "
        f"{_fmt(a['median_runs_to_detect']):>12} "
        f"{_ratio(a['median_runs_to_detect'], b['median_runs_to_detect']):>10}",
        f"{'median length of the failing run':34} {_fmt(b['median_operations']):>12} "
        f"{_fmt(a['median_operations']):>12} "
        f"{_ratio(a['median_operations'], b['median_operations']):>10}",
        f"{'median shrunk length':34} {_fmt(b['median_shrunk_operations']):>12} "
        f"{_fmt(a['median_shrunk_operations']):>12} "
        f"{_ratio(a['median_shrunk_operations'], b['median_shrunk_operations']):>10}",
        f"{'median s shrinking':34} {_fmt(b['median_shrink_seconds'], '.1f'):>12} "
        f"{_fmt(a['median_shrink_seconds'], '.1f'):>12} "
        f"{_ratio(a['median_shrink_seconds'], b['median_shrink_seconds']):>10}",
        f"{'median per-mutant ratio of s to detect':34} {'':>12} {'':>12} "
        f"{_fmt(summ['median_ratio_seconds_to_detect'], '.2f'):>9}x",
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--budget", type=float, default=60.0, help="seconds to detect, per side")
    ap.add_argument("--shrink-budget", type=float, default=30.0, help="shrink cap, per side")
    ap.add_argument("--ops", type=int, default=40)
    ap.add_argument("--names", default=None, help="comma-separated mutants (default: all)")
    ap.add_argument("--jobs", type=int, default=1, help="mutants at a time, in processes")
    ap.add_argument("--out", default=None, help="write the results as JSON here")
    args = ap.parse_args()
    names = [n for n in args.names.split(",") if n] if args.names else list(MUTANTS)
    unknown = [n for n in names if n not in MUTANTS]
    if unknown:
        sys.exit(f"unknown mutant(s): {', '.join(unknown)}")
    print(f"command: python benchmarks/bench_mutants.py {' '.join(sys.argv[1:])}", flush=True)
    started = time.perf_counter()
    done: dict[str, dict[str, Any]] = {}
    work = (args.budget, args.shrink_budget, args.ops)
    if args.jobs <= 1:
        for i, name in enumerate(names, start=1):
            done[name] = one(name, *work)
            print(f"[{i}/{len(names)}] {name}", file=sys.stderr, flush=True)
    else:
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            futures = {pool.submit(one, name, *work): name for name in names}
            for i, fut in enumerate(as_completed(futures), start=1):
                done[futures[fut]] = fut.result()
                print(f"[{i}/{len(names)}] {futures[fut]}", file=sys.stderr, flush=True)
    rows = [done[n] for n in names]
    summ = summary(rows, args.budget)
    print(render(rows, summ, args))
    print(f"\nwall time {time.perf_counter() - started:.0f} s, jobs {args.jobs}")
    if args.out:
        doc = {
            "budget_seconds": args.budget,
            "shrink_budget_seconds": args.shrink_budget,
            "ops": args.ops,
            "jobs": args.jobs,
            "rows": rows,
            "summary": summ,
        }
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=2)
        print(f"results written to {args.out}")


if __name__ == "__main__":
    main()
