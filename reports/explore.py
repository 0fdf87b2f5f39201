"""What ``inboxsim explore`` shows of a search: the ``--json`` document, the
human summary, and the shortest counterexample as a scenario file (the
design study shows the same counterexamples)."""

from __future__ import annotations

from typing import Any

from ..model import Policy
from ..scenarios.render import write_scenario
from ..search.explore import ExploreResult
from ..search.world import describe, exhaustive_claim
from ..trace.record import Step, reply_wire, step_wire


def violation_wire(v: Any) -> dict[str, Any]:
    return {"invariant": v.invariant, "steps": list(v.steps), "message": v.message}


def result_document(result: ExploreResult, out: str | None) -> dict[str, Any]:
    """The ``explore --json`` document."""

    return {
        "policy": result.policy,
        "sessions": result.sessions,
        "depth": result.depth,
        "step_limit": result.step_limit,
        "pool": result.pool,
        "alphabet": list(result.alphabet),
        "alphabet_text": describe(frozenset(result.alphabet)),
        "claim": exhaustive_claim(result.sessions, result.depth, result.pool),
        "states": result.states,
        "transitions": result.transitions,
        "depth_reached": result.depth_reached,
        "complete": result.complete,
        "new_states_per_depth": result.per_depth,
        "seconds": round(result.seconds, 3),
        "states_per_second": round(result.states_per_second, 1) if result.seconds > 0 else None,
        "violations": [violation_wire(v) for v in result.violations],
        "counterexample": [step_wire(s) for s in result.trace],
        "counterexample_file": out if result.violations else None,
    }


def render_counterexample(
    result: ExploreResult, policy: Policy, expect: bool = False
) -> tuple[str, str]:
    """The shortest counterexample as file text, and its format (a scenario
    TOML file). Like ``shrink``'s, the scenario is a regression test
    (``inboxsim run`` fails on it while the bug is there); ``expect=True``
    writes ``expect_violation`` instead."""
    first = result.violations[0]
    text = write_scenario(
        result.trace,
        policy,
        name=f"explore-{policy.name}-{first.invariant}",
        source=f"inboxsim explore --sessions {result.sessions} --depth {result.depth} "
        f"--policy {policy.name}: shortest counterexample (breadth-first)",
        step_limit=result.step_limit,
        expect_violation=first.invariant if expect else None,
    )
    return text, "toml"


def summary_lines(result: ExploreResult, out: str | None) -> list[str]:
    """The human summary of a search."""
    lines = [
        f"explore: policy {result.policy}, {result.sessions} session(s) created up front, "
        f"{result.pool} fresh input ID{'s' if result.pool != 1 else ''} per session, "
        f"step limit {result.step_limit}, now = depth",
        "alphabet:",
        *(f"  - {text}" for text in describe(frozenset(result.alphabet))),
        exhaustive_claim(result.sessions, result.depth, result.pool)
        + (
            ""
            if not result.violations
            else f" (stopped at the first violation, depth {result.depth_reached})"
        ),
        f"distinct states: {result.states} (paths merged where the model and the monitor "
        f"read the same future, up to renaming; new per depth: {result.per_depth})",
        f"transitions: {result.transitions}",
        f"depth reached: {result.depth_reached}"
        + (" (state space closed)" if result.complete else ""),
        f"time: {result.seconds:.2f} s, {result.states_per_second:,.0f} states/s",
    ]
    if not result.violations:
        lines.append("no violation")
        return lines
    for v in result.violations:
        lines.append(f"VIOLATION {v.invariant} at steps {list(v.steps)}: {v.message}")
    lines.append(f"shortest counterexample ({result.operations} operations):")
    for s in result.trace:
        if s.decision in ("hello",) or s.decision.startswith("create("):
            continue
        lines.append(f"  [{s.index}] {s.decision}  ->  {reply_text(s)}")
    if out is not None:
        lines.append(f"written to {out}")
    return lines


def reply_text(step: Step) -> str:

    if step.kind == "crash":
        return "killed"
    wire = reply_wire(step.reply)
    if wire is None:
        return "-"
    if "unknown" in wire:
        return f"crashed at {wire['unknown']}"
    if not wire["ok"]:
        return f"error {wire['error']}"
    return "ok"
