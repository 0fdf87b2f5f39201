"""What a sweep (and a search) shows a person: progress on stderr, the
summary on stdout.

Progress is a rich progress bar when stderr is a terminal and plain lines
(at most about one a second) otherwise, so CI logs stay readable. The summary
is a few rich tables; rich drops colour and styling when stdout is not a
terminal.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from .probes import PROBES
from .sweep import SweepReport


def _bar(stream: TextIO, label: str, stats: str) -> Any:
    """A started rich progress bar on ``stream``: label, bar, done/total,
    the stats, elapsed time; it vanishes when stopped."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn(stats),
        TimeElapsedColumn(),
        console=Console(file=stream),
        transient=True,
    )
    bar.start()
    return bar


class SweepProgress:
    """Call with the report after every batch; use as a context manager."""

    def __init__(self, total: int, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.total = total
        self.tty = self.stream.isatty()
        self._last = 0.0
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> SweepProgress:
        if self.tty:
            self._bar = _bar(
                self.stream,
                "sweep",
                "{task.fields[violations]} failing  {task.fields[rate]} seeds/s",
            )
            self._task = self._bar.add_task("sweep", total=self.total, violations=0, rate="-")
        return self

    def __call__(self, report: SweepReport) -> None:
        # The plan's own count: remembered failing seeds come on top of
        # --seeds, and runs counted from the store (--resume) are done already.
        self.total = report.planned or self.total
        rate = (report.runs - report.resumed) / report.seconds if report.seconds else 0.0
        if self._bar is not None:
            self._bar.update(
                self._task,
                total=self.total,
                completed=report.runs,
                violations=len(report.failing),
                rate=f"{rate:.0f}",
            )
            return
        now = time.monotonic()
        if now - self._last >= 1.0 or report.runs >= self.total:
            self._last = now
            print(
                f"sweep: {report.runs}/{self.total} seeds, {len(report.failing)} failing, "
                f"{rate:.0f} seeds/s",
                file=self.stream,
                flush=True,
            )

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()


class ExploreProgress:
    """An explorer's progress: a bar over each level's frontier on a
    terminal; otherwise a line per finished level and, within a long level,
    at most one line every ``every`` seconds. Use as a context manager; pass
    :meth:`tick` and :meth:`level` to ``explore``."""

    def __init__(self, depth: int, stream: TextIO | None = None, every: float = 10.0) -> None:
        self.stream = stream or sys.stderr
        self.depth = depth
        self.every = every
        self.tty = self.stream.isatty()
        self._last = time.monotonic()
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> ExploreProgress:
        if self.tty:
            self._bar = _bar(
                self.stream,
                "explore depth {task.fields[level]}",
                "{task.fields[states]} states  {task.fields[transitions]} transitions",
            )
            self._task = self._bar.add_task(
                "explore", total=None, level="-", states=0, transitions=0
            )
        return self

    def tick(self, level: int, done: int, total: int, states: int, transitions: int) -> None:
        if self._bar is not None:
            self._bar.update(
                self._task,
                completed=done,
                total=total,
                level=f"{level}/{self.depth}",
                states=f"{states:,}",
                transitions=f"{transitions:,}",
            )
            return
        now = time.monotonic()
        if now - self._last >= self.every and done < total:
            self._last = now
            print(
                f"explore: depth {level}/{self.depth}: {done:,}/{total:,} frontier states "
                f"expanded, {states:,} states, {transitions:,} transitions",
                file=self.stream,
                flush=True,
            )

    def level(self, level: int, states: int, transitions: int) -> None:
        self._last = time.monotonic()
        line = f"explore: depth {level}/{self.depth}: {states} states, {transitions} transitions"
        if self._bar is not None:
            self._bar.console.print(line, highlight=False)
        else:
            print(line, file=self.stream, flush=True)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()


def print_summary(report: SweepReport, stream: TextIO | None = None) -> None:
    """The human summary of a sweep (the ``--json`` document's content)."""
    from rich.console import Console
    from rich.table import Table

    console = Console(file=stream or sys.stdout, highlight=False, soft_wrap=True)
    doc = report.document()
    seeds, through = doc["seeds"], doc["throughput"]
    head = Table(
        title=f"sweep: policy {doc['policy']}, {doc['options']['ops']} ops per run",
        show_header=False,
    )
    head.add_row(
        "seeds run",
        f"{seeds['run']} (from {seeds['start']}, "
        f"{len(seeds['remembered'])} remembered failing first)",
    )
    if seeds["resumed"]:
        head.add_row("resumed", f"{seeds['resumed']} of them counted from the store, not run again")
    if seeds["stopped_by_time_budget"]:
        head.add_row(
            "stopped", f"time budget reached after {seeds['run']} of {seeds['planned']} seeds"
        )
    head.add_row("operations", str(doc["operations"]))
    head.add_row("failing seeds", str(doc["verdicts"]["failed"]))
    head.add_row("liveness", ", ".join(f"{k} {v}" for k, v in doc["liveness"].items()) or "-")
    head.add_row(
        "throughput",
        f"{through['seeds_per_second']} seeds/s, {through['ops_per_second']} ops/s, "
        f"{through['seconds']} s on {through['jobs']} job(s)",
    )
    console.print(head)
    if doc["violations"]:
        table = Table(title="violations (runs)")
        table.add_column("invariant")
        table.add_column("runs", justify="right")
        for name, runs in doc["violations"].items():
            table.add_row(name, str(runs))
        console.print(table)
    probes = Table(title="coverage probes")
    probes.add_column("probe")
    probes.add_column("required")
    probes.add_column("runs", justify="right")
    probes.add_column("hits", justify="right")
    for p in PROBES:
        entry = doc["probes"][p.name]
        mark = "yes" if p.required else ""
        if not entry["possible"]:
            lacking = [f for f in p.needs if f not in report.features]
            mark = "(target lacks " + ", ".join(lacking) + ")"
        elif p.required and not entry["runs"]:
            mark = "yes: NEVER HIT"
        probes.add_row(p.name, mark, str(entry["runs"]), str(entry["hits"]))
    console.print(probes)
    if doc["failing"]:
        console.print("failing seeds (replay each with the command shown):")
        for entry in doc["failing"][:50]:
            console.print(
                f"  seed {entry['seed']}: {', '.join(entry['invariants'])}: {entry['message']}"
            )
            console.print(f"    {entry['replay']}")
        if len(doc["failing"]) > 50:
            console.print(f"  ... and {len(doc['failing']) - 50} more (see --json or the database)")
    if doc["missing_required_probes"]:
        console.print("required probes never hit: " + ", ".join(doc["missing_required_probes"]))
    verdict = "FAILED" if report.exit_code else "held"
    console.print(f"verdict: {verdict}")
