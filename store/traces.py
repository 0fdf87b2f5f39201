"""Traces read back from a store.

A stored step keeps its request, reply and observations as canonical JSON.
Parsing them back (:mod:`inboxsim.trace.decode`, which says what the wire form
leaves out and why that is safe) gives a :class:`~inboxsim.trace.record.Trace`
that the checkers judge exactly as they judged the live run, and whose trace
hash is the stored one (tests/test_reports_check.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..model import Ok, op_from_wire
from ..trace.decode import observed_from_wire, reply_from_wire
from ..trace.record import Phase, Step, StepKind, Trace, TraceHeader


def step_from_row(
    index: int,
    phase: Phase,
    kind: StepKind,
    decision: str,
    request: str | None,
    reply: str | None,
    observed: str,
    opened: dict[str, int],
) -> Step:
    """One stored ``steps`` row as a :class:`Step` (SQL NULL: no request or reply)."""
    req = json.loads(request) if request is not None else None
    crash_at = req.get("crash_at") if req is not None else None
    op = op_from_wire(req) if req is not None else None
    return Step(
        index,
        phase,
        kind,
        decision,
        op,
        crash_at,
        reply_from_wire(json.loads(reply) if reply is not None else None),
        observed_from_wire(json.loads(observed), opened),
    )


@dataclass(frozen=True, slots=True)
class StoredRun:
    """One ``runs`` row with what judging it again needs."""

    run_id: int
    seed: int | None
    policy: str
    target: str
    version: str
    options: dict[str, Any]
    decisions: tuple[int, ...]
    verdict: str
    liveness: str
    trace_hash: str
    violations: tuple[tuple[str, tuple[int, ...], str], ...]
    scenario: str | None = None
    policy_hash: str | None = None  # into ``policies`` (v3); None: a pre-v3 run


def build_trace(run: StoredRun, rows: Sequence[tuple[Any, ...]]) -> Trace:
    """The run's trace from its step rows (idx, phase, kind, decision, request, reply, observed)."""
    opened: dict[str, int] = {}
    steps = tuple(
        step_from_row(idx, phase, kind, decision, request, reply, observed, opened)
        for idx, phase, kind, decision, request, reply, observed in rows
    )
    hello: dict[str, Any] = {}
    if steps and steps[0].reply is not None and isinstance(steps[0].reply, Ok):
        hello = steps[0].reply.result  # the first step is always hello; its result heads the trace
    header = TraceHeader(run.seed, run.policy, run.target, hello, run.version, run.options)
    return Trace(header, steps)


_RUN_COLUMNS = (
    "run_id, seed, policy, target, version, options, decisions, verdict, liveness, trace_hash, "
    "scenario, policy_hash"
)


def stored_runs(con: Any, where: str = "") -> list[StoredRun]:
    """Every run in the store (optionally filtered by a SQL condition), with its violations."""
    found: dict[int, list[tuple[str, tuple[int, ...], str]]] = {}
    for run_id, invariant, steps, message in con.execute(
        "SELECT run_id, invariant, steps, message FROM violations ORDER BY run_id, rowid"
    ).fetchall():
        found.setdefault(run_id, []).append((invariant, tuple(steps), message))
    rows = con.execute(f"SELECT {_RUN_COLUMNS} FROM runs {where} ORDER BY run_id").fetchall()
    return [
        StoredRun(
            r[0],
            None if r[1] is None else int(r[1]),
            r[2],
            r[3],
            r[4],
            json.loads(r[5]),
            tuple(r[6]),
            r[7],
            r[8],
            r[9],
            tuple(found.get(r[0], ())),
            r[10],
            r[11],
        )
        for r in rows
    ]


def stored_trace(con: Any, run_id: int) -> tuple[StoredRun, Trace] | None:
    """One stored run and its rebuilt trace (None when there is no such run)."""
    found = stored_runs(con, f"WHERE run_id = {int(run_id)}")
    if not found:
        return None
    rows = con.execute(
        "SELECT idx, phase, kind, decision, request, reply, observed FROM steps "
        "WHERE run_id = ? ORDER BY idx",
        [int(run_id)],
    ).fetchall()
    return found[0], build_trace(found[0], rows)


def traces(con: Any, runs: Sequence[StoredRun]) -> Iterator[tuple[StoredRun, Trace]]:
    """Each run with its rebuilt trace; steps are read in one ordered scan
    (one query per run would dominate for large stores)."""
    by_id = {r.run_id: r for r in runs}
    cursor = con.execute(
        "SELECT run_id, idx, phase, kind, decision, request, reply, observed FROM steps ORDER BY "
        "run_id, idx"
    )
    current: int | None = None
    rows: list[tuple[Any, ...]] = []
    while True:
        batch = cursor.fetchmany(10_000)
        for row in batch:
            if row[0] != current:
                if current in by_id:
                    yield by_id[current], build_trace(by_id[current], rows)
                current, rows = row[0], []
            rows.append(row[1:])
        if not batch:
            break
    if current in by_id:
        yield by_id[current], build_trace(by_id[current], rows)
