"""Shrinking a failing group run to a minimal scenario file.

A run the group driver judged illegal (``group_scenario.Recorder``) is a list
of ``[[step]]`` tables ending at the failing step. :func:`shrink` makes it
smaller while it still fails: it drops runs of earlier steps (halves,
quarters, ... of them), then single earlier steps, then single
members of a group (a group left with one member becomes a plain step), then
the tail of a group's schedule (a used-up schedule picks the first option),
keeping each candidate that still fails and starting over, until no
candidate fails or the attempts run out. "Still fails" is a replay of the
file on a fresh target judged not linearizable (:func:`replay_fails`), not
a failure of another kind (a request that can no longer be built).

The seam. :func:`shrink` knows nothing of targets: it is a greedy loop over
:func:`candidates` and a predicate on step tables. The shrink engine being
redesigned on issue 18 can take this over by taking ``candidates`` as this
kind of input's reduction moves and ``replay_fails`` as its oracle; nothing
else here depends on the loop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ..model import Policy
from ..scenarios.load import load_text
from ..scenarios.runner import TargetFactory
from .group_scenario import Recorder, run_group_scenario, scenario_text

Tables = list[dict[str, Any]]


def candidates(tables: Sequence[dict[str, Any]]) -> Iterator[Tables]:
    """Every one-move reduction of ``tables``, the biggest moves first."""
    last = len(tables) - 1
    size = last // 2
    while size >= 2:  # a run of earlier steps, the longest first (a long hunt's setup)
        for start in range(0, last - size + 1, size):
            yield [*tables[:start], *tables[start + size :]]
        size //= 2
    for i in range(last):  # an earlier step
        yield [*tables[:i], *tables[i + 1 :]]
    for i, table in enumerate(tables):  # a member of a group
        members = table.get("requests")
        if members is None:
            continue
        for j in range(len(members)):
            rest = [*members[:j], *members[j + 1 :]]
            yield [*tables[:i], _regroup(table, rest), *tables[i + 1 :]]
    for i, table in enumerate(tables):  # the schedule's tail
        schedule = table.get("schedule")
        if schedule:
            shorter = {**table, "schedule": schedule[: len(schedule) // 2]}
            if not shorter["schedule"]:
                del shorter["schedule"]
            yield [*tables[:i], shorter, *tables[i + 1 :]]


def _regroup(table: dict[str, Any], members: list[dict[str, Any]]) -> dict[str, Any]:
    if len(members) == 1:
        member = dict(members[0])
        return {"op": member.pop("op"), "now": table["now"], **member}
    return {**table, "requests": members}


def shrink(
    tables: Sequence[dict[str, Any]], fails: Callable[[Tables], bool], attempts: int = 200
) -> Tables:
    """The smallest reduction of ``tables`` that ``fails`` (a greedy,
    first-improvement descent; ``attempts`` bounds the calls of ``fails``)."""
    current = list(tables)
    tried = 0
    improved = True
    while improved and tried < attempts:
        improved = False
        for candidate in candidates(current):
            if tried >= attempts:
                break
            tried += 1
            if fails(candidate):
                current, improved = candidate, True
                break
    return current


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


def write_group_repro(
    recorded: Recorder | Sequence[dict[str, Any]],
    policy: Policy,
    step_limit: int,
    target_factory: TargetFactory,
    path: str | Path,
    *,
    name: str = "group-counterexample",
    attempts: int = 200,
) -> Path:
    """Shrink a recorded run's first failing step and what led to it (a
    recorder's, or step tables ending at the failing one) and write it as a
    scenario file with the failure's explanation on top."""
    if isinstance(recorded, Recorder):
        failing = recorded.failing()
        if failing is None:
            raise ValueError("the recorded run has no failing group")
        recorded = recorded.tables[: failing + 1]
    fails = replay_fails(policy, step_limit, target_factory)
    tables = list(recorded)
    if fails(tables):  # a failure that replays is shrunk; one that does not is kept whole
        tables = shrink(tables, fails, attempts)
    loaded = load_text(scenario_text(tables, policy.name, step_limit), "<shrunk>")
    result = run_group_scenario(loaded, policy, target_factory)
    why = result.failures[0].message if result.failures else "did not fail again on replay"
    text = scenario_text(tables, policy.name, step_limit, name=name, comment=why)
    out = Path(path)
    out.write_text(text, encoding="utf-8")
    return out
