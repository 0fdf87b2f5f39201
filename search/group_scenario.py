"""Scenario files with a ``group`` step: replayed through the group driver,
and written from what a driver sent.

**Replay** (:func:`run_group_scenario`). A file with a group step is judged
the way the driver judges a concurrent run (``groups.py``): every step, a
plain request as much as a group, goes to the target and is checked by the
linearizability search against the reference model; ``kill = true`` crashes
both. The file fails at the first step no order explains, with the search's
explanation. A group's ``schedule`` goes to a target with pause points, so a
seed's interleaving replays exactly; a member's ``crash_at`` kills the target
mid-group. IDs in such a file are the harness's own or the model's names for
the ones the target generated (``in-3``, ``call-5``): the driver maps them to
the target's as it goes, so an answer names its call by ``session``.

**Writing** (:class:`Recorder`). A driver wrapped in a recorder remembers
each step as a scenario table (an answer to a call open in the model as its
``session``), so that a failure found by a sweep becomes a file
(:func:`scenario_text`); ``group_shrink.py`` makes it minimal first.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .. import __version__
from ..errors import HarnessError
from ..model import OPS, Answer, Op, Policy, State
from ..scenarios.load import LoadedScenario, resolve_policy
from ..scenarios.render import toml_key, toml_value
from ..scenarios.runner import Failure, ScenarioResult, TargetFactory, model_target
from ..scenarios.schema import Scenario, StepSpec
from ..trace.record import Trace, TraceHeader
from .groups import GroupCheck, GroupDriver, GroupTarget


def has_group(scenario: Scenario) -> bool:
    return any(step.op == "group" for step in scenario.step)


# --- replay ----------------------------------------------------------------------------


def run_group_scenario(
    loaded: LoadedScenario,
    policy: Policy | None = None,
    target_factory: TargetFactory = model_target,
    on_check: OnCheck | None = None,
) -> ScenarioResult:
    """Run a scenario with group steps against a fresh target (see the
    module docstring); ``policy`` overrides the file's; ``on_check`` sees
    each step judged (the viewer page of ``run FILE --html``)."""
    scenario = loaded.scenario
    chosen = policy if policy is not None else resolve_policy(scenario.policy, loaded.origin)
    started = time.perf_counter()
    target = target_factory(chosen, scenario.step_limit)
    try:
        result = replay(scenario, loaded.origin, chosen, target, on_check)  # type: ignore[arg-type]
    finally:
        target.close()
    return dataclasses.replace(result, seconds=time.perf_counter() - started)


# Each step as judged: its number and its check (None: a kill).
OnCheck = Callable[[int, GroupCheck | None], None]


def replay(
    scenario: Scenario,
    origin: str,
    policy: Policy,
    target: GroupTarget,
    on_check: OnCheck | None = None,
) -> ScenarioResult:
    """Drive ``target`` through the file's steps, judging each (module docstring)."""
    driver = GroupDriver(target, policy, scenario.step_limit)
    digest = hashlib.sha256()
    failures: list[Failure] = []
    now = 0
    steps_run = 0
    for number, spec in enumerate(scenario.step, start=1):
        now = spec.now if spec.now is not None else now + 1
        steps_run = number
        if spec.kill:
            driver.kill()
            digest.update(b"kill\n")
            if on_check is not None:
                on_check(number, None)
            continue
        members = spec.requests if spec.op == "group" and spec.requests else [spec]
        ops: list[Op] = []
        for member in members:
            op, problem = build_member(member, now, driver.state)
            if op is None:
                failures.append(Failure(number, problem or "cannot build the request"))
                break
            ops.append(op)
        if failures:
            break
        try:
            check = driver.run(ops, spec.schedule or (), [m.crash_at for m in members])
        except ValueError as exc:  # the target lacks a feature the step needs
            raise HarnessError(f"{origin}: step {number}: {exc}") from None
        digest.update(_fingerprint(check).encode() + b"\n")
        if on_check is not None:
            on_check(number, check)
        if not check.legal:
            failures.append(Failure(number, check.explain()))
            break
    header = TraceHeader(
        None, policy.name, target.name, {}, __version__, {"scenario": scenario.name}
    )
    return ScenarioResult(
        scenario.name,
        origin,
        policy.name,
        tuple(failures),
        Trace(header, ()),
        digest.hexdigest(),
        False,
        steps_run,
    )


def build_member(spec: StepSpec, now: int, state: State) -> tuple[Op | None, str | None]:
    """A step's request in the model's terms: an answer by ``session`` names
    that session's open call in the model. Where the model has none (the
    target showed none either, or an earlier step failed: an earlier race
    went the other way on this build), the answer names a call no one
    opened, which the model and the target must both refuse."""
    assert spec.op is not None
    fields = spec.request_fields()
    if isinstance(fields.get("after"), str):
        return None, f"after = {fields['after']!r}: a file with a group step names a seq"
    if spec.op == "answer" and "session" in fields:
        session = fields.pop("session")
        run = state.runs.get(session)
        fields["call"] = run.call.call if run else f"no-open-call-on-{session}"
    kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()}
    return OPS[spec.op](now=now, **kwargs), None


def _fingerprint(check: GroupCheck) -> str:
    """What the target answered and showed at one step, without its clock:
    the same interleaving gives the same line."""
    g = check.group
    said = [repr(r.returned) for r in g.requests]
    shown = [f"{sid}={g.after[sid]!r}" for sid in sorted(g.after)]
    return json.dumps([said, list(map(repr, check.pauses)), shown, g.killed])


# --- writing ------------------------------------------------------------------------


class Recorder:
    """A group driver that remembers its steps as scenario tables."""

    def __init__(self, driver: GroupDriver) -> None:
        self.driver = driver
        self.tables: list[dict[str, Any]] = []
        self.checks: list[GroupCheck | None] = []  # None: a kill

    @property
    def state(self) -> State:
        """The model's state after the steps so far (the driver's)."""
        return self.driver.state

    def run(
        self, ops: Sequence[Op], schedule: Sequence[int] = (), crash_at: Sequence[str | None] = ()
    ) -> GroupCheck:
        self.tables.append(step_table(ops, schedule, crash_at, self.driver.state))
        check = self.driver.run(ops, schedule, crash_at)
        self.checks.append(check)
        return check

    def kill(self) -> None:
        self.tables.append({"kill": True})
        self.checks.append(None)
        self.driver.kill()

    def failing(self) -> int | None:
        """The index of the first step judged illegal, or None."""
        return next((i for i, c in enumerate(self.checks) if c is not None and not c.legal), None)


def step_table(
    ops: Sequence[Op], schedule: Sequence[int], crash_at: Sequence[str | None], state: State
) -> dict[str, Any]:
    """One driver step as a ``[[step]]`` table (``now`` included: the
    writer drops the ones that follow from the previous step)."""
    points = list(crash_at) + [None] * (len(ops) - len(crash_at))
    members = []
    for op, point in zip(ops, points, strict=True):
        wire = op.to_wire()
        wire.pop("now")
        if isinstance(op, Answer):
            owner = next(
                (r.call.session for r in state.runs.values() if r.call.call == op.call), None
            )
            if owner is not None:  # else not open: a stale answer, sent as it was
                del wire["call"]
                wire = {"op": wire.pop("op"), "session": owner, **wire}
        if point is not None:
            wire["crash_at"] = point
        members.append(wire)
    now = max(op.now for op in ops)
    if len(members) == 1:
        return {"op": members[0].pop("op"), "now": now, **members[0]}
    table: dict[str, Any] = {"op": "group", "now": now}
    if schedule:
        table["schedule"] = list(schedule)
    table["requests"] = members
    return table


def scenario_text(
    tables: Iterable[dict[str, Any]],
    policy: str,
    step_limit: int,
    *,
    name: str = "group-counterexample",
    source: str = "written by the group driver",
    tags: Iterable[str] = ("group",),
    comment: str | None = None,
) -> str:
    """A scenario file of these step tables; ``comment`` (the failure's
    explanation) is written as TOML comments at the top."""
    lines = [f"# {line}".rstrip() for line in (comment or "").splitlines()]
    lines += [
        f"name = {toml_value(name)}",
        f"source = {toml_value(source)}",
        f"policy = {toml_value(policy)}",
        f"step_limit = {step_limit}",
        f"tags = {toml_value(list(tags))}",
    ]
    now = 0
    for table in tables:
        table = dict(table)
        at = table.pop("now", None)
        if at is not None and at != now + 1:
            table = {"now": at, **table}
        now = at if at is not None else now + 1
        lines += ["", "[[step]]"]
        lines += [f"{toml_key(k)} = {toml_value(v)}" for k, v in table.items() if k != "requests"]
        if "requests" in table:
            lines.append("requests = [")
            lines += [f"  {toml_value(m)}," for m in table["requests"]]
            lines.append("]")
    return "\n".join(lines) + "\n"
