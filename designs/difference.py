"""The observable difference between two designs: one scenario run under
two policies, and the first step where they answer differently.

The design report (:mod:`.designs`) uses it where an invariant's violation
is circular evidence (the invariant restates the rule of the design a policy
departs from): instead of the violation, it shows what a client would see
differ. :func:`first_difference` is the pure core (two step lists in, one
difference out); :func:`observable_difference` the shell that runs the
scenario twice, without checkers.

What is compared, in two tiers: first what a client sees (the reply, the
pending inbox, the transcript, the open calls: what lockstep conformance
compares), with sequence numbers left out because they only order; only
where nothing of that differs, the event log and the sequence numbers too.
``hello`` results are never compared (implementation names and feature
lists differ by design). Lists of named rows (pending rows, messages, open
calls) that hold other rows, or the same in another order, differ as lists
of names, so "promoted u1 before u2" reads as ``["u2","u1"]`` against
``["u1","u2"]`` instead of a cascade of field differences.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..model.policy import Policy
from ..scenarios.load import load_text
from ..scenarios.runner import run_scenario
from ..trace.record import Step, observed_wire, reply_wire, step_wire

DIFFERENCE_PARTS = 3
"""Differing values a difference lists (the rest are counted)."""
ABSENT = object()
"""A list item or key only the other side has (of an observation, which
records only what changed: a part the step left unchanged)."""


IDENTITY = ("input", "id", "call")
"""The field that names a pending row, a message and an open call."""
ORDER_ONLY = ("seq", "admitted_seq")
"""Sequence numbers, which only order (lockstep conformance leaves them out too)."""


def _identities(rows: list[Any]) -> list[Any] | None:
    """The names of a list of rows (pending rows, messages, calls), or None."""
    for field in IDENTITY:
        if rows and all(isinstance(r, dict) and field in r for r in rows):
            return [r[field] for r in rows]
    return None


def _leaves(a: Any, b: Any, path: str) -> list[tuple[str, Any, Any]]:
    """The paths where two JSON values differ, in document order. Two lists
    of rows that name other rows, or the same ones in another order, differ
    as lists of names; otherwise items are compared one by one (an item or
    key only one side has is ``absent`` on the other)."""
    if isinstance(a, dict) and isinstance(b, dict):
        keys = [*a, *(k for k in b if k not in a)]
        return [d for k in keys for d in _leaves(a.get(k, ABSENT), b.get(k, ABSENT), f"{path}.{k}")]
    if isinstance(a, list) and isinstance(b, list):
        names = _identities(a), _identities(b)
        if names[0] is not None and names[1] is not None and names[0] != names[1]:
            return [(path, names[0], names[1])]
        return [
            d
            for i in range(max(len(a), len(b)))
            for d in _leaves(
                a[i] if i < len(a) else ABSENT, b[i] if i < len(b) else ABSENT, f"{path}[{i}]"
            )
        ]
    return [] if a == b else [(path, a, b)]


def reply_kind(reply: Any) -> str:
    """A reply in a word: ``ok``, ``error CODE``, ``unknown (POINT)`` or ``none``."""
    wire = reply_wire(reply)
    if wire is None:
        return "none"
    if "unknown" in wire:
        return f"unknown ({wire['unknown']})"
    return "ok" if wire["ok"] else f"error {wire['error']}"


def answer_parts(a: Step, b: Step, log: bool) -> list[tuple[str, str, str]]:
    """How two answers to the same request differ: the reply's kind, or (both
    ok) its result's fields, then the observation's values by path; the
    events appended and the sequence numbers only with ``log``."""
    kinds = reply_kind(a.reply), reply_kind(b.reply)
    drop = () if log else ORDER_ONLY
    out: list[tuple[str, str, str]] = []
    if kinds[0] != kinds[1]:
        out.append(("reply", *kinds))
    elif a.request is not None and a.request.OP != "hello":
        out += _shown_leaves(
            _without(reply_wire(a.reply), drop), _without(reply_wire(b.reply), drop), "reply"
        )
    seen = [_without(observed_wire(s.observed), drop) for s in (a, b)]
    if not log:
        seen = [{k: v for k, v in w.items() if k != "events"} for w in seen]
    return out + _shown_leaves(seen[0], seen[1], "observed")


def _shown_leaves(a: Any, b: Any, path: str) -> list[tuple[str, str, str]]:
    return [(p, _shown(x, p), _shown(y, p)) for p, x, y in _leaves(a, b, path)]


def _without(value: Any, fields: tuple[str, ...]) -> Any:
    """A JSON value with ``fields`` removed from every object in it."""
    if isinstance(value, dict):
        return {k: _without(v, fields) for k, v in value.items() if k not in fields}
    if isinstance(value, list):
        return [_without(v, fields) for v in value]
    return value


def _shown(value: Any, path: str) -> str:
    if value is ABSENT:  # an observation records what changed: a part it lacks did not
        return "unchanged" if path.startswith("observed") and "[" not in path else "absent"
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return text if len(text) <= 80 else text[:77] + "..."


def _scenario_step(step: Step) -> int:
    """The scenario step number of a trace step (its decision, 'scenario step N')."""
    words = step.decision.split()
    return int(words[2]) if words[:2] == ["scenario", "step"] else 0


def first_difference(
    base: Sequence[Step], other: Sequence[Step], base_name: str, other_name: str
) -> dict[str, Any] | None:
    """The first step where two runs of the same scenario answer differently
    (None: every step answered alike): its scenario step number, request,
    the tier it was seen in (``seen``: ``client`` or ``log``, see the module
    docstring) and the differing values by path. A run that stopped early (a
    step it could not build) differs at the first step only the other has."""
    n = min(len(base), len(other))
    for seen in ("client", "log"):
        for i in range(max(len(base), len(other))):
            if i < n:
                parts = answer_parts(base[i], other[i], log=seen == "log")
            else:
                parts = [("steps run", str(len(base)), str(len(other)))]
            if parts:
                step = (base if i < len(base) else other)[i]
                request = dict(step_wire(step)["request"] or {"op": "kill"})
                request.pop("now", None)
                return {
                    "base": base_name,
                    "policy": other_name,
                    "seen": seen,
                    "step": _scenario_step(step),
                    "request": request,
                    "parts": [
                        {"path": p.lstrip("."), "base": x, "policy": y}
                        for p, x, y in parts[:DIFFERENCE_PARTS]
                    ],
                    "more": max(0, len(parts) - DIFFERENCE_PARTS),
                }
    return None


def observable_difference(scenario: str, base: Policy, other: Policy) -> dict[str, Any] | None:
    """Run a scenario under two policies (no checker) and compare step by step."""

    loaded = load_text(scenario)
    a = run_scenario(loaded, policy=base, monitor=None).trace.steps
    b = run_scenario(loaded, policy=other, monitor=None).trace.steps
    return first_difference(a, b, base.name, other.name)


__all__ = ["answer_parts", "first_difference", "observable_difference", "reply_kind"]
