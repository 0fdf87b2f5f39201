"""The damaged-store half of the harness's fault-injection suite, long version.

    python -m benchmarks.faults_store [--sample] [--skip mutants --db ...] [--json FILE]

Builds a good store (a 30-seed sweep and six scenario runs: some 4 MB, 17
blocks), then spoils a fresh copy of it in every way of
``tests/store_damage.every_damage`` (cuts from 0 bytes to one byte short, a
flipped byte in each of the three headers and at three places in every
block, a foreign DuckDB file, a newer schema, rows lost outside inboxsim,
random bytes, a stale WAL) and gives each to every command that opens a
store (``store_damage.COMMANDS``), judging each outcome as the CI test does
(``tests/test_faults_store.py`` runs a sample of the same damages). Prints a
line per damage, every inconsistency, and the figures of
``docs/harness-faults.md``; exits 1 if any inconsistency was found.

Takes 10 to 20 minutes on a loaded 2-core machine (the writers that accept a
store run their whole command: ``mutants --db`` is the slow one).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from tests import store_damage as sd


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sample", action="store_true", help="only the CI test's sample")
    parser.add_argument("--skip", action="append", default=[], help="a command not to try")
    parser.add_argument("--json", help="also write the figures as JSON to this file")
    args = parser.parse_args()
    commands = [c for c in sd.COMMANDS if c not in args.skip]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="inboxsim-faults-store-") as folder:
        tmp = Path(folder)
        good = sd.build_good(tmp)
        damages = sd.sample_damage(good) if args.sample else sd.every_damage(good)
        print(
            f"good store: {good.stat().st_size} bytes, {sd.blocks_of(good)} blocks; "
            f"{len(damages)} damages x {len(commands)} commands",
            flush=True,
        )
        tally = sd.Tally()
        for label, damage in damages.items():
            seen = len(tally.inconsistencies)
            sd.judge(tally, label, damage, good, tmp, commands)
            print(f"{label}: {tally.line()}", flush=True)
            for line in tally.inconsistencies[seen:]:
                print(f"  INCONSISTENT {line}", flush=True)
    seconds = time.perf_counter() - started
    print(f"{tally.line()} ({seconds:.0f} s)")
    print(
        "| stores damaged | commands | tries | refused (exit 2, one line, file unchanged) "
        "| read | of which wrote past a flipped data byte | inconsistencies |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    print(
        f"| {tally.stores} | {len(tally.commands)} | {tally.tried} | {tally.refused} | "
        f"{tally.read} | {tally.wrote_past} | {len(tally.inconsistencies)} |"
    )
    if args.json:
        figures = {
            "stores": tally.stores,
            "commands": sorted(tally.commands),
            "tried": tally.tried,
            "refused": tally.refused,
            "read": tally.read,
            "wrote_past": tally.wrote_past,
            "inconsistencies": tally.inconsistencies,
            "seconds": round(seconds, 1),
        }
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 1 if tally.inconsistencies else 0


if __name__ == "__main__":
    sys.exit(main())
