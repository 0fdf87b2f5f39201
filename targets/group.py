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

**A kill mid-group.** One member may carry a failpoint (``crash_at``). The
process dies the first time that member's own effect reaches it
(``after_admit``), or, once the member took effect, the first time a runner
transition does (``mid_promotion``, ``after_promotion``): the work a request
made ready is the runner's, as in a sequential request, where ``apply`` runs
it inside the request. The state is then the durable state at that point,
crashed; the members placed before are completed, the one that died and the
ones not yet placed are unknown (each in flight: it took no effect, took
effect up to the crash point, or completed unseen). A failpoint never
reached leaves the group whole, as a sequential request's does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from ..model import (
    FAILPOINTS,
    Crashed,
    Err,
    Event,
    Ok,
    Op,
    Reply,
    RunnerStep,
    State,
    advance,
    enabled,
    request,
)
from ..trace.record import Observed, Step, StepKind, group_label, unseen

PAUSE_POINTS = ("request", "runner")  # what the model adapter declares in hello


class GroupReply(NamedTuple):
    """What a target answered to a group: one wire ``MemberOutcome`` per
    request, in the group's order (``None``: the implementation died and the
    adapter with it, so nothing came back), and the pause points passed."""

    outcomes: list[dict[str, Any] | None]
    pauses: list[dict[str, Any]]
    killed: bool = False  # the implementation died with the group in flight


class Member(NamedTuple):
    """One request of a group as a trace records it, along the order the
    group took effect: its ``position`` in the group, its reply, and what changed
    from just before it to just before the next request of that order (the
    runner's transitions in between included; after the last, to quiescence)."""

    position: int
    reply: Reply
    observed: Observed
    busy: bool = False  # the runner still had work when the next request came


class GroupSteps(NamedTuple):
    """A group as a run records it: its members along the order found, the
    pause points passed, and the target's failure when no legal order was
    found (the members then follow the group's own order; the run records
    them, lets the checkers name what they can, then raises it)."""

    members: list[Member]
    pauses: list[dict[str, Any]]
    failure: Exception | None = None
    # A kill mid-group: the member whose own admission reached its failpoint,
    # its reply (``Crashed``) and what it changed up to the restart.
    crash: Member | None = None
    # A kill mid-group that no member's step shows (a runner transition died,
    # or a target's members in flight: ``trace.record.UNSEEN``): the kill's
    # own step (no request), with what the target showed after its restart.
    kill: Observed | None = None

    def steps(
        self, first: int, race: str, ops: Sequence[Op], crash_at: Sequence[str | None] = ()
    ) -> list[Step]:
        """The trace steps a run records for the group, the first at index
        ``first``: each member (a member in flight that took effect with its
        failpoint), the member that died in its admission, the kill's own
        step (what ``sim.run`` records, step by step, stopping at a violation)."""
        out: list[Step] = []

        def add(decision: str, op: Op | None, point: str | None, reply: Any, obs: Observed) -> None:
            kind: StepKind = "request" if op is not None else "crash"
            out.append(Step(first + len(out), "safety", kind, decision, op, point, reply, obs))

        def point(k: int) -> str | None:
            return crash_at[k] if k < len(crash_at) else None

        for m in self.members:
            at = point(m.position) if unseen(m.reply) else None
            add(group_label(first, race, m.busy), ops[m.position], at, m.reply, m.observed)
        if self.crash is not None:
            c = self.crash
            add(group_label(first, race), ops[c.position], point(c.position), c.reply, c.observed)
        if self.kill is not None:
            add(group_label(first, race), None, None, None, self.kill)
        return out


class Cut(NamedTuple):
    """A runner transition cut at a failpoint inside it (``mid_promotion``,
    ``after_promotion``): the last move of an order before a kill."""

    step: RunnerStep
    point: str


def member_reply(outcome: dict[str, Any]) -> Reply:
    """A wire ``MemberOutcome`` with a reply, as a :data:`Reply`."""
    if outcome["ok"]:
        return Ok(outcome["result"])
    return Err(outcome["error"]["code"], outcome["error"]["message"])


class Move(NamedTuple):
    """One decision of a served group: request ``request``'s own effect, or
    the runner transition ``step``."""

    request: int | None
    step: RunnerStep | None = None


class Served(NamedTuple):
    state: State
    outcomes: list[dict[str, Any]]
    pauses: list[dict[str, Any]]
    events: tuple[Event, ...]
    killed: bool = False
    moves: tuple[Move, ...] = ()  # the decisions taken, in order


def serve_group(
    state: State,
    ops: Sequence[Op],
    rids: Sequence[int],
    schedule: Sequence[int],
    crash_at: Sequence[str | None] = (),
) -> Served:
    """Run a group under a schedule; ``crash_at`` holds each member's
    failpoint, or None (see the module docstring)."""
    if state.busy:
        raise ValueError("a group starts from a quiescent model")
    points = list(crash_at) + [None] * (len(ops) - len(crash_at))
    armed = [p for p in points if p is not None]
    if len(armed) > 1 or any(p not in FAILPOINTS for p in armed):
        raise ValueError(f"a group holds at most one failpoint of {FAILPOINTS}, not {armed}")
    now = max((op.now for op in ops), default=0)
    waiting = list(range(len(ops)))
    outcomes: list[dict[str, Any]] = [{"rid": rid, "unknown": True, "invoked": 0.0} for rid in rids]
    pauses: list[dict[str, Any]] = []
    events: list[Event] = []
    runner_point: str | None = None  # armed once its member took effect
    moves: list[Move] = []
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
            pauses.append({"request": i, "point": "request"})
            moves.append(Move(i))
            out = request(state, ops[i], points[i])
            state = out.state
            events.extend(out.events)
            reply = out.reply
            if isinstance(reply, Crashed):
                return Served(state, outcomes, pauses, tuple(events), True, tuple(moves))
            if points[i] is not None:
                runner_point = points[i]
            wire: dict[str, Any] = {"rid": rids[i], "invoked": 0.0, "completed": float(k)}
            if isinstance(reply, Err):
                wire.update(ok=False, error={"code": reply.code, "message": reply.message})
            else:
                wire.update(ok=True, result=reply.result)
            outcomes[i] = wire
        else:
            step = steps[pick - len(waiting)]
            pauses.append({"point": f"runner {step.session}: {step.at}"})
            moves.append(Move(None, step))
            after = advance(state, step, now, runner_point)
            state = after.state
            events.extend(after.events)
            if after.crashed is not None:
                return Served(state, outcomes, pauses, tuple(events), True, tuple(moves))
    return Served(state, outcomes, pauses, tuple(events), False, tuple(moves))
