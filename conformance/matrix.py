"""The kill matrix of ``inboxsim mutants``: :func:`mutant_matrix` runs the
kill check of each mutant (across worker processes), and the results become a
document: one JSON document (the run's parameters, one entry per mutant, the
summary figures), a Markdown table, and one line of figures."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import HarnessError
from ..scenarios.load import load_library
from ..sim.executor import run_tasks
from .catalogue import MUTANTS
from .mutants import KillResult, check_mutant

FORMAT = "inboxsim-mutants"
FORMAT_VERSION = 1


# --- the mutant kill matrix, across processes ------------------------------------


def _check_one(args: tuple[str, tuple[int, ...], int, float | None]) -> Any:

    name, seeds, ops, shrink_seconds = args
    return check_mutant(
        name,
        load_library(),
        seeds,
        ops=ops,
        first_only=True,
        shrink=shrink_seconds is not None,
        shrink_seconds=shrink_seconds or 0.0,
    )


def mutant_matrix(
    names: Sequence[str] | None = None,
    seeds: int = 5,
    *,
    ops: int = 60,
    jobs: int = 1,
    progress: Callable[[str], None] | None = None,
    shrink_seconds: float | None = None,
) -> list[Any]:
    """:func:`.mutants.check_mutant` for each mutant (all by default), stopping
    each at its first detection that counts, ``jobs`` mutants at a time in
    worker processes; with ``shrink_seconds``, each first detection is then
    shrunk through the adapter for at most that long. Returns the
    KillResults in the order of ``names``."""

    chosen = list(MUTANTS) if names is None else list(names)
    unknown = [n for n in chosen if n not in MUTANTS]
    if unknown:
        raise HarnessError(f"unknown mutant(s) {', '.join(unknown)}; see `inboxsim mutants --list`")
    say = progress or (lambda _msg: None)
    work = [(n, tuple(range(seeds)), ops, shrink_seconds) for n in chosen]
    results: dict[str, Any] = {}
    for w, killed in run_tasks(
        _check_one,
        lambda slots: work,
        jobs=jobs if len(work) > 1 else 1,
        preload=("inboxsim.conformance.matrix",),
        what=lambda w: f"mutant {w[0]}",
    ):
        results[w[0]] = killed
        verdict = "killed" if killed.killed else "SURVIVED"
        say(f"mutants: [{len(results)}/{len(work)}] {w[0]}: {verdict}")
    return [results[n] for n in chosen]


# --- the matrix as a document ------------------------------------------------------


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def matrix_document(
    results: Sequence[KillResult], *, seeds: int, ops: int, policy: str = "g4"
) -> dict[str, Any]:
    """The kill matrix as one JSON document (``inboxsim mutants --json`` and
    ``--out PATH``): the run's parameters, one entry per mutant
    (:data:`RESULT_FIELDS` first), and the summary figures."""
    survived = [r.mutant for r in results if not r.killed]
    killed = [r for r in results if r.first is not None]
    times = [r.first.seconds for r in killed if r.first is not None]
    shrunk = [float(r.shrunk_ops) for r in killed if r.shrunk_ops is not None]
    lengths = [
        float(r.first.operations)
        for r in killed
        if r.first is not None and r.first.operations is not None
    ]
    by: dict[str, int] = {}
    for r in results:
        kind = r.first.by if r.first is not None else "none"
        by[kind] = by.get(kind, 0) + 1

    def rounded(x: float | None) -> float | None:
        return round(x, 3) if x is not None else None

    return {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "policy": policy,
        "seeds": seeds,
        "ops": ops,
        "mutants": [r.to_dict() for r in results],
        "killed": len(results) - len(survived),
        "survived": survived,
        "summary": {
            "mutants": len(results),
            "killed_by": dict(sorted(by.items())),
            "median_seconds_to_detect": rounded(_median(times)),
            "worst_seconds_to_detect": rounded(max(times) if times else None),
            "median_operations": _median(lengths),
            "median_shrunk_ops": _median(shrunk),
        },
        "exit_code": 1 if survived else 0,
    }


def render_matrix(results: Sequence[KillResult]) -> str:
    """The kill matrix as a Markdown table. ``length`` is the detecting run's
    operations up to the detection, ``shrunk`` that run shrunk (``-`` when no
    shrinker ran)."""
    lines = [
        "| mutant | class | killed by | first detection | time to detect | length | shrunk "
        "| all detections |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        m = MUTANTS.get(r.mutant or "")
        first = r.first
        others = sorted({k.where.removeprefix("scenario ") for k in r.kills if k.counts})
        bad = [f"{k.by} ({k.where})" for k in r.bad]
        length = first.operations if first and first.operations is not None else "-"
        shrunk = r.shrunk_ops if r.shrunk_ops is not None else "-"
        lines.append(
            f"| {r.mutant or '(none)'} | {m.bug_class if m else ''} | "
            f"{first.by if first else 'SURVIVED'} | {first.where if first else ''} | "
            f"{f'{first.seconds:.2f} s' if first else ''} | {length} | {shrunk} | "
            f"{', '.join(others)}{'; NOT COUNTED: ' + ', '.join(bad) if bad else ''} |"
        )
    return "\n".join(lines)


def summary_line(document: dict[str, Any]) -> str:
    """One line of figures from :func:`matrix_document`'s summary."""
    s = document["summary"]

    def fig(x: float | None, unit: str = "") -> str:
        return "-" if x is None else f"{x:g}{unit}"

    kinds = ", ".join(f"{n} by {k}" for k, n in s["killed_by"].items())
    return (
        f"{document['killed']}/{s['mutants']} killed ({kinds}); time to detect: median "
        f"{fig(s['median_seconds_to_detect'], ' s')}, "
        f"worst {fig(s['worst_seconds_to_detect'], ' s')}; "
        f"median length {fig(s['median_operations'], ' ops')}, "
        f"median shrunk length {fig(s['median_shrunk_ops'], ' ops')}"
    )
