"""Trace steps back to scenario TOML: how the shrinker and the explorer write a
minimal counterexample that a person can read and ``inboxsim run`` can rerun.

The renderer folds the steps exactly as the runner does (:class:`.Names`,
:class:`~inboxsim.trace.view.View`), so that running the file it writes sends the
same requests: a generated input ID becomes ``gen:N``, a fork's copy
``copy:<original>``, an answer to an open call ``session = ...`` (a stale
call ID stays literal), a crash between requests ``kill = true``. ``hello``
steps are left out because the runner sends them (first, and after each
crash); ``now`` is written only where it is not the previous ``now`` + 1.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

from ..model import Answer, Hello, Policy
from ..trace.record import Step
from ..trace.view import View
from .names import Names
from .runner import REFERENCE_FIELDS


def write_scenario(
    steps: Sequence[Step],
    policy: Policy | str,
    *,
    name: str = "counterexample",
    source: str = "rendered from a trace",
    step_limit: int | None = None,
    tags: Iterable[str] = (),
    breaks_under: Iterable[str] = (),
    breaker: tuple[str, int, str] | None = None,
    expect_violation: str | None = None,
) -> str:
    """Render ``steps`` (a trace's steps, hellos included or not) as a
    scenario file. ``step_limit`` defaults to the first hello's."""
    policy_name = policy if isinstance(policy, str) else policy.name
    if step_limit is None:
        step_limit = next(
            (
                s.request.step_limit
                for s in steps
                if isinstance(s.request, Hello) and s.request.step_limit
            ),
            4,
        )
    lines = [
        f"name = {toml_value(name)}",
        f"source = {toml_value(source)}",
        f"policy = {toml_value(policy_name)}",
        f"step_limit = {step_limit}",
    ]
    if tags:
        lines.append(f"tags = {toml_value(list(tags))}")
    if breaks_under:
        lines.append(f"breaks_under = {toml_value(list(breaks_under))}")
    if breaker is not None:
        name, step, reason = breaker
        lines.append(f"breaker = {toml_value({'name': name, 'step': step, 'reason': reason})}")
    if expect_violation is not None:
        lines.append(f"expect_violation = {toml_value(expect_violation)}")
    for table in _step_tables(steps):
        lines.append("")
        lines.append("[[step]]")
        lines.extend(f"{toml_key(k)} = {toml_value(v)}" for k, v in table.items())
    return "\n".join(lines) + "\n"


def _step_tables(steps: Sequence[Step]) -> list[dict[str, Any]]:
    view, names = View(), Names()
    tables: list[dict[str, Any]] = []
    now = 0
    pending_kill: dict[str, Any] | None = None  # a kill waits for its restart's now
    for step in steps:
        op = step.request
        if step.kind == "crash":
            pending_kill = {"kill": True}
            tables.append(pending_kill)
        elif isinstance(op, Hello):
            # The runner's own hellos: at 0 first, then at the crashed step's
            # now (a failpoint) or the kill step's now.
            if pending_kill is not None:
                if op.now != now + 1:
                    pending_kill["now"] = op.now
                now = op.now
                pending_kill = None
        elif op is not None:
            table = _request_table(step, view, names, now)
            now = op.now
            tables.append(table)
        view.absorb(step.observed)
        names.absorb(step.reply, step.observed)
    return tables


def _request_table(step: Step, view: View, names: Names, now: int) -> dict[str, Any]:
    op = step.request
    assert op is not None
    wire = op.to_wire()
    table: dict[str, Any] = {"op": wire.pop("op")}
    at = wire.pop("now")
    if at != now + 1:
        table["now"] = at
    if isinstance(op, Answer):
        call = next((c for c in view.calls if c.call == op.call), None)
        wire.pop("call")
        if call is not None:
            table["session"] = call.session
        else:
            table["call"] = op.call  # not open: a stale answer, sent as it was
    session = wire.get("session")
    for key in REFERENCE_FIELDS:
        value = wire.get(key)
        if isinstance(value, str):
            symbol = names.symbol(session, value)
            if symbol == value and key == "input":
                names.name(value)  # chosen by the harness, as the runner will see it
            wire[key] = symbol
    table.update(wire)
    if step.crash_at is not None:
        table["crash_at"] = step.crash_at
    return table


# --- a small TOML writer for the values a request holds ---------------------------

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def toml_key(key: str) -> str:
    return key if _BARE.match(key) else _string(key)


def _string(text: str) -> str:
    # JSON's escapes are TOML basic-string escapes; DEL must be escaped too.
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)  # keeps 1.0 a float: the trace's request is hashed as sent
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return (
            "{ "
            + ", ".join(f"{toml_key(str(k))} = {toml_value(v)}" for k, v in value.items())
            + " }"
            if value
            else "{}"
        )
    raise ValueError(f"cannot write {value!r} in a scenario file (TOML has no null)")
