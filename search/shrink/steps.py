"""A scenario's steps as a shrink candidate.

A candidate is a tuple of steps, each a sorted tuple of ``(field, value)``
with lists and tables frozen (:func:`freeze`), so that it hashes.
:func:`build_scenario` turns one back into a scenario the schema accepts (an
edit it refuses is no candidate). The passes of this representation, beside
the engine's deletions: :func:`plain_answers` (an answer's ``finish`` made
``stop``) and :func:`drop_fields` (``crash_at``, ``now`` and optional
request fields, one at a time).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ...scenarios.load import LoadedScenario
from ...scenarios.schema import Scenario
from .engine import Candidate, Shrinker

KEPT_FIELDS = frozenset({"op", "kill", "session", "call"})
"""A step's fields that say what it is: never dropped."""


def freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return ("__dict__", tuple(sorted((k, freeze(v)) for k, v in value.items())))
    if isinstance(value, list):
        return ("__list__", tuple(freeze(v) for v in value))
    return value


def thaw(value: Any) -> Any:
    if isinstance(value, tuple) and len(value) == 2 and value[0] == "__dict__":
        return {k: thaw(v) for k, v in value[1]}
    if isinstance(value, tuple) and len(value) == 2 and value[0] == "__list__":
        return [thaw(v) for v in value[1]]
    return value


def step_candidate(steps: Iterable[Mapping[str, Any]]) -> Candidate:
    """Steps (tables of a scenario file) as a candidate."""
    return tuple(tuple(sorted((k, freeze(v)) for k, v in s.items())) for s in steps)


def candidate_steps(cand: Candidate) -> list[dict[str, Any]]:
    """A candidate's steps as tables again."""
    return [{k: thaw(v) for k, v in s} for s in cand]


def build_scenario(
    header: Mapping[str, Any], cand: Candidate, origin: str
) -> LoadedScenario | None:
    """The scenario of ``header`` (name, policy, ...) with the candidate's
    steps; None for no steps or an edit the schema refuses."""
    if not cand:
        return None
    doc = {**header, "step": candidate_steps(cand)}
    try:
        return LoadedScenario(Scenario.model_validate(doc), origin)
    except Exception:  # an edit the schema refuses is just not a candidate
        return None


def plain_answers(s: Shrinker) -> bool:
    """An answer's ``finish`` simplified to ``stop`` (the plainest answer)."""
    improved = False
    for i in range(len(s.cur) - 1, -1, -1):
        cur = s.cur
        if i >= len(cur):
            continue
        step = dict(cur[i])
        if step.get("op") == "answer" and step.get("finish") not in (None, "stop"):
            step["finish"] = "stop"
            cand_step = tuple(sorted(step.items()))
            improved = s.attempt(cur[:i] + (cand_step,) + cur[i + 1 :]) or improved
    return improved


def drop_fields(s: Shrinker) -> bool:
    """Drop crash_at, now and optional request fields, one at a time."""
    improved = False
    i = len(s.cur) - 1
    while i >= 0 and not s.spent():
        cur = s.cur
        if i >= len(cur):
            i -= 1
            continue
        step = cur[i]
        for j in range(len(step) - 1, -1, -1):
            name = step[j][0]
            if name in KEPT_FIELDS:
                continue
            cand_step = step[:j] + step[j + 1 :]
            if s.attempt(cur[:i] + (cand_step,) + cur[i + 1 :]):
                improved = True
                break
        i -= 1
    return improved


__all__ = [
    "KEPT_FIELDS",
    "build_scenario",
    "candidate_steps",
    "drop_fields",
    "freeze",
    "plain_answers",
    "step_candidate",
    "thaw",
]
