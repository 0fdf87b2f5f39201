"""Every library scenario against every breaker: the full matrix.

A breaker is a policy preset (the scenario runs on the model under it, in
process) or a planted bug of the SQLite inbox (the scenario runs straight on
the SQLite adapter with that mutant switched on, no lockstep with the model):
``inboxsim.conformance.breakers``. Each cell says whether the scenario failed
and at which step (its earliest failed expectation or violated invariant),
or ``protocol error`` (which does not count as a break).

CI runs only the diagonal: each scenario against the breaker it names, at the
step it names (``tests/test_breakers.py``). This script runs the whole square
(presets x scenarios on the model; mutants x scenarios through one adapter
process each, plus its restarts) and prints:

* per scenario: how many breakers break it, and whether its own breaker is
  among them at its named step;
* per breaker: how many scenarios it breaks (a breaker that breaks nearly
  everything is a catch-all, not evidence), the scenarios that only it breaks;
* the totals, and the seconds it took, and the load it ran under.

    python benchmarks/scenario_matrix.py [--scenario SELECTOR]... [--breaker NAME]...
        [--jobs 2] [--out matrix.json]

The cells do not depend on the machine; the seconds do (the load is printed).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from inboxsim.conformance.breakers import breaker_names, failing_step, run_against
from inboxsim.scenarios.load import library_key, library_paths, load_scenario, select_library


def cell(path: str, breakers: list[str]) -> list[dict[str, Any]]:
    """One scenario against each breaker (run in a worker)."""
    from inboxsim.targets.protocol import ProtocolError

    loaded = load_scenario(path)
    out = []
    with tempfile.TemporaryDirectory(prefix="inboxsim-matrix-") as tmp:
        for breaker in breakers:
            started = time.perf_counter()
            try:
                result = run_against(loaded, breaker, Path(tmp))
                step = failing_step(result)
                verdict = "break" if result.failures else "held"
                detail = str(result.failures[0]) if result.failures else ""
            except ProtocolError as exc:
                step, verdict, detail = None, "protocol error", str(exc).splitlines()[0]
            out.append(
                {
                    "scenario": loaded.name,
                    "breaker": breaker,
                    "verdict": verdict,
                    "step": step,
                    "detail": detail[:200],
                    "seconds": round(time.perf_counter() - started, 3),
                }
            )
    return out


def summarize(cells: list[dict[str, Any]], named: dict[str, tuple[str, int]]) -> dict[str, Any]:
    by_scenario: dict[str, list[dict[str, Any]]] = {}
    for c in cells:
        by_scenario.setdefault(c["scenario"], []).append(c)
    breaks = Counter(c["breaker"] for c in cells if c["verdict"] == "break")
    only: dict[str, list[str]] = {}
    rows = []
    for scenario, row in sorted(by_scenario.items()):
        killers = [c for c in row if c["verdict"] == "break"]
        own = named.get(scenario)
        own_cell = next((c for c in row if own and c["breaker"] == own[0]), None)
        if len(killers) == 1:
            only.setdefault(killers[0]["breaker"], []).append(scenario)
        rows.append(
            {
                "scenario": scenario,
                "broken_by": len(killers),
                "breaker": own[0] if own else None,
                "named_step": own[1] if own else None,
                "own_step": own_cell["step"]
                if own_cell and own_cell["verdict"] == "break"
                else None,
            }
        )
    return {
        "scenarios": len(by_scenario),
        "breakers": len({c["breaker"] for c in cells}),
        "cells": len(cells),
        "breaks": sum(c["verdict"] == "break" for c in cells),
        "protocol_errors": sum(c["verdict"] == "protocol error" for c in cells),
        "unbroken": [r["scenario"] for r in rows if r["broken_by"] == 0],
        "own_breaker_at_named_step": sum(
            r["own_step"] is not None and r["own_step"] == r["named_step"] for r in rows
        ),
        "per_breaker": dict(sorted(breaks.items(), key=lambda kv: (-kv[1], kv[0]))),
        "breakers_breaking_nothing": sorted({c["breaker"] for c in cells} - set(breaks)),
        "only_broken_by": {k: sorted(v) for k, v in sorted(only.items())},
        "per_scenario": rows,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", action="append", default=[], help="library selector")
    parser.add_argument("--breaker", action="append", default=[], help="preset or mutant")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", help="write cells and summary as JSON")
    args = parser.parse_args(argv)
    paths = select_library(args.scenario) if args.scenario else library_paths()
    breakers = args.breaker or breaker_names()
    named = {}
    for p in paths:
        b = load_scenario(p).scenario.breaker
        if b is not None:
            named[load_scenario(p).name] = (b.name, b.step)
    load = os.getloadavg()[0]
    started = time.perf_counter()
    cells: list[dict[str, Any]] = []
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(cell, str(p), breakers) for p in paths]
        for n, (p, future) in enumerate(zip(paths, futures, strict=True), start=1):
            cells += future.result()
            print(f"[{n}/{len(paths)}] {library_key(p)}", file=sys.stderr)
    seconds = time.perf_counter() - started
    summary = summarize(cells, named)
    summary.update(
        seconds=round(seconds, 1),
        jobs=args.jobs,
        load_before=round(load, 2),
        load_after=round(os.getloadavg()[0], 2),
        cpus=os.cpu_count(),
    )
    print(
        f"{summary['scenarios']} scenarios x {summary['breakers']} breakers = {summary['cells']} "
        f"runs in {seconds:.0f} s ({args.jobs} jobs, load {load:.1f} before): "
        f"{summary['breaks']} breaks, {summary['protocol_errors']} protocol errors"
    )
    print(
        f"own breaker at its named step: {summary['own_breaker_at_named_step']}/{len(named)}; "
        f"unbroken scenarios: {len(summary['unbroken'])} {summary['unbroken']}"
    )
    print("scenarios broken, per breaker:")
    for name, count in summary["per_breaker"].items():
        alone = summary["only_broken_by"].get(name, [])
        print(f"  {name:34} {count:4}" + (f"  (alone: {', '.join(alone)})" if alone else ""))
    if summary["breakers_breaking_nothing"]:
        print(f"breakers that break no scenario: {', '.join(summary['breakers_breaking_nothing'])}")
    hist = Counter(r["broken_by"] for r in summary["per_scenario"])
    print(
        "scenarios by number of breakers: "
        + ", ".join(f"{k}: {v}" for k, v in sorted(hist.items()))
    )
    if args.out:
        Path(args.out).write_text(json.dumps({"summary": summary, "cells": cells}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
