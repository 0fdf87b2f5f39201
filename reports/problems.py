"""Failures grouped into distinct problems (pure).

A sweep of a policy with three design bugs fails in hundreds of runs; a
reader wants three problems, each with how often it happened, where it first
did and one small example. A problem is the failures that share a key:

- a stored run: the policy and an invariant it violated. A run that violated
  two invariants is a member of both problems (the report says how many
  members of a problem also violated another one), so each problem's count
  is the number of runs that show it, as the invariants table counts them;
- a conformance failure: its failure key (:func:`inboxsim.sim.shrink.failure_key`):
  ``diverged:<operation>:<part that differed>`` or ``violated:<invariant>``.

:func:`group` is the one grouping rule (both kinds use it);
:func:`run_problems` builds the report's problem documents from a store's
runs and violations. Making each problem's shrunk example is the report
command's (:mod:`.counterexamples`); this module only says which run to shrink.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, TypeVar

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


def group(
    failures: Iterable[tuple[K, T]], first: Callable[[T], Any] | None = None
) -> list[tuple[K, list[T]]]:
    """``(key, member)`` pairs as ``(key, members)`` groups: most members
    first, then by key order of first appearance; members keep their order,
    or with ``first`` are sorted by it (the first member is the one a report
    shows first and shrinks)."""
    groups: dict[K, list[T]] = {}
    for key, member in failures:
        groups.setdefault(key, []).append(member)
    order = {key: n for n, key in enumerate(groups)}
    if first is not None:
        for members in groups.values():
            members.sort(key=first)
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), order[kv[0]]))


def slug(*parts: str) -> str:
    """A file name from a problem's key: letters, digits, ``.``, ``_``, ``-``."""
    text = "-".join(p for p in parts if p)
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "problem"


Row = tuple[Any, ...]


def size_words(size: dict[str, Any]) -> str:
    """A trace's size (``inboxsim.sim.shrink.Size.to_dict``) in words."""
    return f"{size['operations']} operations, {size['faults']} faults, {size['steps']} steps"


def run_problems(
    runs: Sequence[Row],
    violations: Sequence[Row],
    registry: dict[str, tuple[str, str]],
    replay: Callable[[Row], str | None],
) -> list[dict[str, Any]]:
    """The problems of a store's runs: one per (policy, violated invariant).

    ``runs``: (run_id, seed, policy, target, version, options, verdict,
    liveness, ops, seconds, scenario, policy_hash) as :class:`.summary.Facts`
    holds them;
    ``violations``: (run_id, invariant, steps, message) in each run's order;
    ``registry``: invariant id -> (statement, source); ``replay``: a run's
    replay command line (None for a scenario run)."""
    by_id = {r[0]: r for r in runs}
    violated: dict[int, dict[str, Row]] = {}  # run -> invariant -> its first violation
    for v in violations:
        if v[0] in by_id:
            violated.setdefault(v[0], {}).setdefault(v[1], v)
    pairs = [
        ((by_id[run_id][2], invariant), (by_id[run_id], v, frozenset(found) - {invariant}))
        for run_id, found in violated.items()
        for invariant, v in found.items()
    ]

    def order(member: tuple[Row, Row, frozenset[str]]) -> tuple[Any, ...]:
        run = member[0]
        return (run[1] is None, run[1] if run[1] is not None else 0, run[0])

    out = []
    for (policy, invariant), members in group(pairs, order):
        run, v, _ = members[0]
        statement, source = registry.get(invariant, ("", ""))
        also: dict[str, int] = {}
        for _run, _v, others in members:
            for other in others:
                also[other] = also.get(other, 0) + 1
        out.append(
            {
                "id": slug(policy, invariant),
                "kind": "invariant",
                "policy": policy,
                "invariant": invariant,
                "statement": statement,
                "source": source,
                "runs": len(members),
                "seeds": [int(m[0][1]) for m in members if m[0][1] is not None],
                "scenarios": sorted({m[0][10] for m in members if m[0][10] is not None}),
                "also_violated": dict(sorted(also.items())),
                "first": {
                    "run_id": run[0],
                    "seed": None if run[1] is None else int(run[1]),
                    "scenario": run[10],
                    "target": run[3],
                    "version": run[4],
                    "options": run[5],
                    "policy_hash": run[11] if len(run) > 11 else None,
                    "steps": list(v[2]),
                    "message": v[3],
                    "replay": replay(run),
                },
                "example": None,  # the report command attaches the shrunk counterexample
            }
        )
    return out
