"""What a design's traces show of its behaviour, measured from the traces alone
(observed events and pending inboxes): admission-to-promotion latency in
steps and in ``now`` units, model calls and executions per input, inbox
depth, steers per boundary, what became of synthetic input; and a run's hash
with the policy's name taken out, so that two presets compare by what was
observed. The design study (:mod:`.study`) folds every run of a sweep into
one :class:`Tally`."""

from __future__ import annotations

import hashlib
import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..trace.record import Step


@dataclass(slots=True)
class Tally:
    lat_steps: dict[str, list[int]]
    lat_now: dict[str, list[int]]
    admitted: int = 0
    promoted: int = 0
    calls: int = 0
    agent_steps: int = 0
    executions: int = 0
    wakes: int = 0
    depth_samples: int = 0
    depth_sum: int = 0
    depth_max: int = 0
    batch_max: int = 0
    synthetic_steer: int = 0
    synthetic_queue: int = 0
    synthetic_rejected: int = 0
    synthetic_requested: int = 0
    synthetic_requested_queue: int = 0

    @classmethod
    def new(cls) -> Tally:
        return cls({"steer": [], "queue": []}, {"steer": [], "queue": []})


def measure(steps: Sequence[Step], tally: Tally) -> None:
    """Fold one trace's observations into ``tally``."""
    waiting: dict[tuple[str, str], tuple[int, int, str]] = {}
    depth: dict[str, int] = {}
    now = 0
    for step in steps:
        wire = step.request.to_wire() if step.request is not None else {}
        now = wire.get("now", now)
        ok = step.reply is not None and hasattr(step.reply, "result")
        op = wire.get("op")
        if op == "synthetic":
            tally.synthetic_requested += 1
            if wire.get("delivery") == "queue":
                tally.synthetic_requested_queue += 1
            if step.reply is not None and getattr(step.reply, "code", None) == "unsupported":
                tally.synthetic_rejected += 1
        admitted_here = False
        batch: dict[str, int] = {}
        for e in step.observed.events:
            if e.type == "admitted":
                admitted_here = True
                tally.admitted += 1
                data = json.loads(e.data)
                delivery = data.get("delivery") or "steer"
                if data.get("type") == "synthetic":
                    if delivery == "queue":
                        tally.synthetic_queue += 1
                    else:
                        tally.synthetic_steer += 1
                waiting[(e.session, e.input or "")] = (step.index, now, delivery)
            elif e.type == "promoted":
                tally.promoted += 1
                batch[e.session] = batch.get(e.session, 0) + 1
                got = waiting.pop((e.session, e.input or ""), None)
                if got is not None:
                    tally.lat_steps.setdefault(got[2], []).append(step.index - got[0])
                    tally.lat_now.setdefault(got[2], []).append(now - got[1])
            elif e.type in ("step_started", "compaction_started"):
                tally.calls += 1
                if e.type == "step_started":
                    tally.agent_steps += 1
            elif e.type == "execution_started":
                tally.executions += 1
        if batch:
            tally.batch_max = max(tally.batch_max, *batch.values())
        if ok and (
            (op in ("prompt", "synthetic") and admitted_here and wire.get("resume", True))
            or op == "resume"
        ):
            tally.wakes += 1
        for session, rows in step.observed.pending:
            depth[session] = len(rows)
        for e in step.observed.events:
            depth.setdefault(e.session, 0)
        for d in depth.values():
            tally.depth_samples += 1
            tally.depth_sum += d
            tally.depth_max = max(tally.depth_max, d)


def _stats(xs: list[int]) -> dict[str, Any]:
    if not xs:
        return {"n": 0, "mean": None, "p50": None, "p95": None, "max": None}
    s = sorted(xs)
    return {
        "n": len(s),
        "mean": round(statistics.fmean(s), 2),
        "p50": s[len(s) // 2],
        "p95": s[min(len(s) - 1, int(0.95 * len(s)))],
        "max": s[-1],
    }


def _ratio(a: int, b: int) -> float | None:
    return round(a / b, 3) if b else None


def metrics_of(t: Tally) -> dict[str, Any]:
    return {
        "admitted": t.admitted,
        "promoted": t.promoted,
        "latency_steps": {d: _stats(v) for d, v in sorted(t.lat_steps.items())},
        "latency_now": {d: _stats(v) for d, v in sorted(t.lat_now.items())},
        "model_calls_per_admitted": _ratio(t.calls, t.admitted),
        "executions_per_wake": _ratio(t.executions, t.wakes),
        "agent_steps_per_promoted": _ratio(t.agent_steps, t.promoted),
        "depth_mean": _ratio(t.depth_sum, t.depth_samples),
        "depth_max": t.depth_max,
        "max_steers_per_boundary": t.batch_max,
        "synthetic_admitted": {"steer": t.synthetic_steer, "queue": t.synthetic_queue},
        "synthetic_requested": t.synthetic_requested,
        "synthetic_queue_requested": t.synthetic_requested_queue,
        "synthetic_rejected_unsupported": t.synthetic_rejected,
    }


def normalized_hash(texts: Sequence[Any], policy_name: str) -> str:
    """SHA-256 of a run's canonical step texts with the policy name (in
    ``hello``'s implementation string) replaced, so presets compare by what
    was observed."""
    digest = hashlib.sha256()
    mark = f"({policy_name})"
    for text in texts:
        for part in text:
            digest.update(part.replace(mark, "(*)").encode())
            digest.update(b"\x00")
    return digest.hexdigest()
