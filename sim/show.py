"""A run's trace, readable: one block per step (``inboxsim replay``).

Each step shows its index, phase and decision label, the request (without its
``now``, shown separately), the reply (``ok`` with its result, the error code,
or ``UNKNOWN`` when the target crashed at a failpoint), then what was
observed: the events appended, the pending inboxes and transcripts that
changed, the open calls when they changed. The steps a violation cites are
marked ``!!``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from ..model import Call, Crashed, Err, Event, Ok
from ..trace.record import MessageView, PendingView, Step, group_of, step_wire
from .run import RunResult


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def request_text(step: Step) -> str:
    """The request in one line: the operation, its fields, ``crash_at``, then ``(now T)``."""
    if step.request is None:
        if group_of(step.decision):  # a group's own kill step (trace.record.UNSEEN)
            return "KILL (mid-group, members in flight)"
        return "KILL (crash between requests)"
    wire = step.request.to_wire()
    parts = [wire.pop("op")]
    now = wire.pop("now")
    parts += [f"{k}={v if isinstance(v, str) else _compact(v)}" for k, v in wire.items()]
    if step.crash_at:
        parts.append(f"crash_at={step.crash_at}")
    return " ".join(parts) + f" (now {now})"


def reply_text(step: Step) -> str:
    """``ok`` and the result, ``error CODE: message``, or ``UNKNOWN`` (crashed at a failpoint)."""
    reply = step.reply
    if reply is None:
        return ""
    if isinstance(reply, Ok):
        return "ok " + _compact(reply.result) if reply.result else "ok"
    if isinstance(reply, Err):
        return f"error {reply.code}: {reply.message}"
    assert isinstance(reply, Crashed)
    return f"UNKNOWN (crashed at {reply.point})"


def event_text(e: Event) -> str:
    """``SESSION#SEQ TYPE [INPUT] [DATA] @TIME``."""
    who = f" {e.input}" if e.input else ""
    data = "" if e.data == "{}" else " " + e.data
    return f"{e.session}#{e.seq} {e.type}{who}{data} @{e.time}"


def pending_text(row: PendingView) -> str:
    """``INPUT:TYPE/DELIVERY@ADMITTED_SEQ``."""
    return f"{row.input}:{row.type}/{row.delivery}@{row.admitted_seq}"


def message_text(m: MessageView) -> str:
    """``ID[<COPIED_FROM]@SEQtTIME``."""
    return f"{m.id}{'<' + m.copied_from if m.copied_from else ''}@{m.seq}t{m.time}"


def call_text(c: Call) -> str:
    """``CALL:SESSION/KIND step N [final]``."""
    return f"{c.call}:{c.session}/{c.kind} step {c.step}{' final' if c.final else ''}"


def step_lines(step: Step, marked: bool = False) -> Iterator[str]:
    mark = "!!" if marked else "  "
    yield f"{mark}{step.index:4d} {step.phase:<8} {step.decision:<22} {request_text(step)}"
    reply = reply_text(step)
    if reply:
        yield f"{'':16}-> {reply}"
    observed = step.observed
    for e in observed.events:
        yield f"{'':16}event {event_text(e)}"
    for sid, rows in observed.pending:
        listed = ", ".join(pending_text(r) for r in rows) or "(empty)"
        yield f"{'':16}pending {sid}: {listed}"
    for sid, msgs in observed.transcript:
        listed = ", ".join(message_text(m) for m in msgs) or "(empty)"
        yield f"{'':16}transcript {sid}: {listed}"
    if observed.calls is not None:
        listed = ", ".join(call_text(c) for c in observed.calls) or "(none)"
        yield f"{'':16}open calls: {listed}"


def trace_lines(result: RunResult) -> Iterator[str]:
    """The whole replay printout."""
    header = result.trace.header
    yield (
        f"seed {result.seed}, policy {result.policy}, target {header.target}, "
        f"options {_compact(result.options)}, inboxsim {header.version}"
    )
    yield f"swarm {_compact(result.swarm)}"
    cited = {i for v in result.violations for i in v.steps}
    for step in result.trace.steps:
        yield from step_lines(step, step.index in cited)
    yield ""
    yield f"steps {result.ops}, liveness {result.liveness}, trace hash {result.trace_hash}"
    hits = ", ".join(f"{k} {v}" for k, v in sorted(result.probes.items())) or "none"
    yield f"probes hit: {hits}"
    if result.violations:
        for v in result.violations:
            yield f"VIOLATION {v.invariant} at steps {list(v.steps)}: {v.message}"
    else:
        yield "verdict: held"


def result_document(result: RunResult) -> dict[str, Any]:
    """The ``replay --json`` document."""

    return {
        "command": "replay",
        "seed": result.seed,
        "policy": result.policy,
        "target": result.trace.header.target,
        "version": result.trace.header.version,
        "options": result.options,
        "swarm": result.swarm,
        "hello": result.trace.header.hello,
        "trace_hash": result.trace_hash,
        "verdict": result.verdict,
        "liveness": result.liveness,
        "violations": [
            {"invariant": v.invariant, "steps": list(v.steps), "message": v.message}
            for v in result.violations
        ],
        "probes": dict(sorted(result.probes.items())),
        "exercised": list(result.exercised),
        "decisions": list(result.decisions),
        "steps": [step_wire(s) for s in result.trace.steps],
    }
