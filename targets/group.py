"""The model serving a concurrent group (``docs/protocol.md``, "Groups").

A group's requests are issued at once; the model's fine-grained form
(``model/apply.py``) says what may happen meanwhile: each request's own
effect, and each runner transition the model enables, in any order. Which
order is the **schedule**'s choice: at each decision the options are the
requests not yet placed (in the group's order) and then the enabled runner
transitions (by session); choice ``k`` takes option ``schedule[k] % len``,
and once the schedule is used up, option 0 (so an empty schedule places the
requests in order and then runs the runner to quiescence). The schedule is
the harness's, drawn from the seed, so a seed replays exactly; this is the
model's form of pause points: every option is a place it stops and waits.

The outcomes are in the protocol's wire form (``MemberOutcome``), with the
decision count as the clock: every request is invoked at 0 and completes at
the decision that placed it. The group ends at quiescence, as every request
does. ``pauses`` lists every decision taken.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from ..model import Err, Event, Op, State, advance, enabled, request

PAUSE_POINTS = ("request", "runner")  # what the model adapter declares in hello


class GroupReply(NamedTuple):
    """What a target answered to a group: one wire ``MemberOutcome`` per
    request, in the group's order (``None``: the implementation died and the
    adapter with it, so nothing came back), and the pause points passed.
    ``killed``: the implementation was killed while the group ran, whether or
    not a member was still in flight (its volatile state is gone)."""

    outcomes: list[dict[str, Any] | None]
    pauses: list[dict[str, Any]]
    killed: bool = False


class Served(NamedTuple):
    state: State
    outcomes: list[dict[str, Any]]
    pauses: list[dict[str, Any]]
    events: tuple[Event, ...]


def serve_group(
    state: State, ops: Sequence[Op], rids: Sequence[int], schedule: Sequence[int]
) -> Served:
    """Run a group under a schedule (see the module docstring)."""
    if state.work:
        raise ValueError("a group starts from a quiescent model")
    now = max((op.now for op in ops), default=0)
    waiting = list(range(len(ops)))
    outcomes: list[dict[str, Any] | None] = [None] * len(ops)
    pauses: list[dict[str, Any]] = []
    events: list[Event] = []
    k = 0
    while True:
        steps = enabled(state)
        options = len(waiting) + len(steps)
        if options == 0:
            break
        pick = schedule[k] % options if k < len(schedule) else 0
        k += 1
        if pick < len(waiting):
            i = waiting.pop(pick)
            out = request(state, ops[i])
            state = out.state
            events.extend(out.events)
            reply = out.reply
            wire: dict[str, Any] = {"rid": rids[i], "invoked": 0.0, "completed": float(k)}
            if isinstance(reply, Err):
                wire.update(ok=False, error={"code": reply.code, "message": reply.message})
            else:
                wire.update(ok=True, result=reply.result)  # type: ignore[union-attr]
            outcomes[i] = wire
            pauses.append({"request": i, "point": "request"})
        else:
            step = steps[pick - len(waiting)]
            after = advance(state, step, now)
            state = after.state
            events.extend(after.events)
            pauses.append({"point": f"runner {step.session}: {step.at}"})
    return Served(state, [o for o in outcomes if o is not None], pauses, tuple(events))
