"""The long version of the harness's kill suite (issue 17): many kill points.

    python -m benchmarks.harness_kills [--trials 120] [--seed 1] [--kinds sweep-local,...]
                                       [--json results.json]

Runs ``--trials`` trials of ``tests/harness_faults.py`` (the same machinery
as ``tests/test_harness_kills.py``, which runs a CI-sized dozen): each starts
one command line (a sweep on a local pool, in one process or on a Dask
cluster; conformance against the SQLite inbox on two workers or against an
adapter that hangs after starting a helper and a daemon; ``run --db``),
sends SIGINT, SIGTERM or SIGKILL at a seeded random point of the run, and
judges what is left: the exit and its line, orphan processes, the store,
temporary folders. Kinds and signals are taken in turn, so every pair is
covered. Prints a line per trial and the table of docs/harness-faults.md.
Exits 1 when any trial found a problem (each is printed).

Slow by design: a trial is a few seconds of a real run plus the next run
(``inboxsim check`` of what was stored); 120 trials take about half an hour
on a quiet two-core machine. Say the load it ran under (printed).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from tests.harness_faults import KINDS, Outcome, plan, run_trial


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=120)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--json", help="also write every outcome to this file")
    args = parser.parse_args()
    kinds = tuple(k for k in args.kinds.split(",") if k)
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or not kinds:
        parser.error(f"--kinds: unknown {unknown}; known: {', '.join(KINDS)}")
    trials = plan(args.seed, args.trials, kinds)
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    started = time.monotonic()
    outcomes: list[Outcome] = []
    for n, trial in enumerate(trials, start=1):
        with tempfile.TemporaryDirectory(prefix="ibx", dir="/tmp") as folder:
            outcome = run_trial(trial, Path(folder))
        outcomes.append(outcome)
        state = "finished first" if outcome.finished_first else f"exit {outcome.exit_code}"
        verdict = "ok" if not outcome.problems else "; ".join(outcome.problems)
        print(
            f"[{n}/{len(trials)}] {trial.describe()}: {state}, {outcome.runs} runs stored, "
            f"{outcome.seconds:.1f} s: {verdict}",
            flush=True,
        )
    print(f"load average at end: {os.getloadavg()[0]:.1f}; {time.monotonic() - started:.0f} s")
    print()
    for line in table(outcomes):
        print(line)
    if args.json:
        Path(args.json).write_text(
            json.dumps([_document(o) for o in outcomes], indent=2) + "\n", encoding="utf-8"
        )
    return 1 if any(o.problems for o in outcomes) else 0


def table(outcomes: list[Outcome]) -> list[str]:
    """The figures of docs/harness-faults.md, per kind of run and in all."""
    rows = ["| run killed | kill points | SIGINT / SIGTERM / SIGKILL | inconsistencies | "
            "orphans | folders left | wrong exit or line |",
            "| --- | ---: | --- | ---: | ---: | ---: | ---: |"]  # fmt: skip
    groups = sorted({o.trial.kind for o in outcomes}, key=KINDS.index)
    for kind in [*groups, "all"]:
        mine = [o for o in outcomes if kind in ("all", o.trial.kind)]
        killed = [o for o in mine if not o.finished_first]
        signals = Counter(o.trial.signal for o in killed)
        label = "**all**" if kind == "all" else f"`{kind}`"
        rows.append(
            f"| {label} | {len(killed)} | {signals['SIGINT']} / {signals['SIGTERM']} / "
            f"{signals['SIGKILL']} | {sum(len(o.inconsistencies) for o in mine)} | "
            f"{sum(len(o.orphans) for o in mine)} | {sum(len(o.folders_left) for o in mine)} | "
            f"{sum(1 for o in mine if o.wrong_exit)} |"
        )
    finished = sum(o.finished_first for o in outcomes)
    rows.append("")
    rows.append(
        f"{len(outcomes)} trials, {finished} of them finished before their signal (not counted "
        f"as kill points); runs stored at the kill: {sum(o.runs for o in outcomes):,}."
    )
    return rows


def _document(outcome: Outcome) -> dict[str, object]:
    t = outcome.trial
    return {
        "kind": t.kind,
        "signal": t.signal,
        "to": t.to,
        "line": t.line,
        "delay_ms": t.delay_ms,
        "exit_code": outcome.exit_code,
        "finished_first": outcome.finished_first,
        "last_line": outcome.line,
        "stderr": outcome.stderr,
        "runs": outcome.runs,
        "orphans": outcome.orphans,
        "leaked": outcome.leaked,
        "leaked_after_next": outcome.leaked_after_next,
        "inconsistencies": outcome.inconsistencies,
        "said": outcome.said,
        "problems": outcome.problems,
        "seconds": round(outcome.seconds, 2),
    }


if __name__ == "__main__":
    sys.exit(main())
