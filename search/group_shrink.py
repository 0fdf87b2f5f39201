"""Shrinking a failing group run to a minimal scenario file.

A run the group driver judged illegal (``group_scenario.Recorder``, or a
concurrent conformance seed taped by ``group_scenario.Taped``) is a list of
``[[step]]`` tables ending at the failing step. :func:`shrink` makes it
smaller while it still fails, on the one shrink engine
(``search/shrink/engine.py``): a candidate is the tuple of the tables (each
as canonical JSON, so the engine can remember what it tried), its key
(requests, steps, schedule choices) only ever gets smaller, and the passes
are, in order: runs of earlier steps and then single earlier steps deleted
(the engine's ``delete_chunks``, the failing step kept), single members of a
group dropped (a group left with one member becomes a plain step), and the
tail of a group's schedule cut (a used-up schedule picks the first option).
"Still fails" is a replay of the file on a fresh target judged not
linearizable (:func:`replay_fails`), not a failure of another kind (a
request that can no longer be built).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..model import Policy
from ..scenarios.load import load_text
from ..scenarios.runner import TargetFactory
from .group_scenario import Recorder, run_group_scenario, scenario_text
from .shrink.engine import Candidate, Judged, Key, Shrinker, delete_chunks, minimize

Tables = list[dict[str, Any]]


def _tables(cand: Candidate) -> Tables:
    return [json.loads(item) for item in cand]


def _candidate(tables: Sequence[dict[str, Any]]) -> Candidate:
    return tuple(json.dumps(t, sort_keys=True) for t in tables)


def size(tables: Sequence[dict[str, Any]]) -> Key:
    """A run's key: its requests (a group's members one by one), its steps,
    its schedule choices; smaller is simpler."""
    requests = sum(len(t.get("requests", [t])) for t in tables)
    return (requests, len(tables), sum(len(t.get("schedule", ())) for t in tables))


def _regroup(table: dict[str, Any], members: list[dict[str, Any]]) -> dict[str, Any]:
    if len(members) == 1:
        member = dict(members[0])
        return {"op": member.pop("op"), "now": table["now"], **member}
    return {**table, "requests": members}


def drop_members(s: Shrinker) -> bool:
    """Drop one member of a group (the last group's first: the failing step's)."""
    improved = False
    i = len(s.cur) - 1
    while i >= 0 and not s.spent():
        tables = _tables(s.cur)
        members = tables[i].get("requests") if i < len(tables) else None
        j = len(members or ()) - 1
        while members and j >= 0 and not s.spent():
            rest = [*members[:j], *members[j + 1 :]]
            if s.attempt(_candidate([*tables[:i], _regroup(tables[i], rest), *tables[i + 1 :]])):
                improved = True
                tables = _tables(s.cur)
                members = tables[i].get("requests")
            j = min(j - 1, len(members or ()) - 1)
        i -= 1
    return improved


def cut_schedules(s: Shrinker) -> bool:
    """Halve a group's schedule (its tail goes: a used-up schedule picks the
    first option), down to none."""
    improved = False
    for i in range(len(s.cur) - 1, -1, -1):
        while not s.spent():
            tables = _tables(s.cur)
            schedule = tables[i].get("schedule") if i < len(tables) else None
            if not schedule:
                break
            shorter = {**tables[i], "schedule": schedule[: len(schedule) // 2]}
            if not shorter["schedule"]:
                del shorter["schedule"]
            if not s.attempt(_candidate([*tables[:i], shorter, *tables[i + 1 :]])):
                break
            improved = True
    return improved


PASSES = (functools.partial(delete_chunks, keep=1), drop_members, cut_schedules)


def shrink(
    tables: Sequence[dict[str, Any]],
    fails: Callable[[Tables], bool],
    attempts: int = 200,
    seconds: float = math.inf,
) -> Tables:
    """The smallest reduction of ``tables`` that ``fails`` finds within
    ``attempts`` calls of ``fails`` and ``seconds`` (see the module docstring)."""

    def test(cand: Candidate) -> Judged | None:
        reduced = _tables(cand)
        return (size(reduced), cand) if fails(reduced) else None

    start = _candidate(tables)
    return _tables(minimize(Shrinker(test, start, size(tables), attempts, seconds), PASSES).cur)


def replay_fails(
    policy: Policy, step_limit: int, target_factory: TargetFactory
) -> Callable[[Tables], bool]:
    """The oracle: the tables, written as a file and replayed on a fresh
    target, are judged not linearizable at some step."""

    def fails(tables: Tables) -> bool:
        loaded = load_text(scenario_text(tables, policy.name, step_limit), "<shrinking>")
        result = run_group_scenario(loaded, policy, target_factory)
        return any(f.message.startswith("not linearizable") for f in result.failures)

    return fails


@dataclass(frozen=True)
class Shrunk:
    """A failing run shrunk: its steps before and after, the file's text (the
    failure's explanation on top), and whether the file still fails when
    replayed on a fresh target (a failure that did not recur is kept whole)."""

    tables: Tables
    original: Tables
    text: str
    why: str
    fails: bool
    runs: int


def shrink_group_run(
    tables: Sequence[dict[str, Any]],
    policy: Policy,
    step_limit: int,
    target_factory: TargetFactory,
    *,
    name: str = "group-counterexample",
    attempts: int = 200,
    seconds: float = math.inf,
) -> Shrunk:
    """Shrink step tables ending at a failing step (a recorder's, a taped
    seed's) and write them as a scenario file's text."""
    runs = 0
    oracle = replay_fails(policy, step_limit, target_factory)

    def fails(reduced: Tables) -> bool:
        nonlocal runs
        runs += 1
        return oracle(reduced)

    original = list(tables)
    failed = fails(original)
    shrunk = shrink(original, fails, attempts, seconds) if failed else original
    loaded = load_text(scenario_text(shrunk, policy.name, step_limit), "<shrunk>")
    result = run_group_scenario(loaded, policy, target_factory)
    why = result.failures[0].message if result.failures else "did not fail again on replay"
    text = scenario_text(shrunk, policy.name, step_limit, name=name, comment=why)
    return Shrunk(shrunk, original, text, why, bool(result.failures) and failed, runs + 1)


def write_group_repro(
    recorded: Recorder | Sequence[dict[str, Any]],
    policy: Policy,
    step_limit: int,
    target_factory: TargetFactory,
    path: str | Path,
    *,
    name: str = "group-counterexample",
    attempts: int = 200,
    seconds: float = math.inf,
) -> Path:
    """Shrink a recorded run's first failing step and what led to it (a
    recorder's, or step tables ending at the failing one) and write it as a
    scenario file with the failure's explanation on top."""
    if isinstance(recorded, Recorder):
        failing = recorded.failing()
        if failing is None:
            raise ValueError("the recorded run has no failing group")
        recorded = recorded.tables[: failing + 1]
    found = shrink_group_run(
        recorded, policy, step_limit, target_factory, name=name, attempts=attempts, seconds=seconds
    )
    out = Path(path)
    out.write_text(found.text, encoding="utf-8")
    return out
