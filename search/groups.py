"""The group driver: concurrent groups sent to a target, each judged by the
linearizability checker (``linearize.py``) against the reference model.

A :class:`GroupDriver` holds the model's state (quiescent, as the last legal
order left it) and the IDs the target generated so far (model ID -> target
ID). :meth:`GroupDriver.run` sends a list of requests, in the model's terms,
as one step: one request goes alone (``Target.request``), several go as a
``group`` with a schedule (``Target.group``; the schedule is used only by a
target with pause points, and comes from the caller's seed, so a seed
replays). Then it reads back what the target shows of every session the
model knows or the group may have created (``pending``, ``messages``, the
``log`` after the last seq it saw) and the open ``calls``, builds the
:class:`~.history.Group` and judges it. A legal group moves the model to the
state of the order found and extends the ID map with the matches the search
made; an illegal one is the target's failure, reported with the group, the
orders tried and why each failed (:meth:`GroupCheck.explain`). A member may
carry a failpoint: the target dies mid-group, the members in flight come
back unknown, and the search judges the restarted target's state.
``group_scenario.Recorder`` keeps a driver's steps as a scenario file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from ..model import (
    DEFAULT_STEP_LIMIT,
    G4,
    Call,
    Calls,
    Crashed,
    Create,
    Err,
    Event,
    Fork,
    Log,
    Messages,
    Ok,
    Op,
    Pending,
    Policy,
    Reply,
    RunnerStep,
    State,
    apply,
    initial_state,
)
from ..targets.group import Cut, GroupReply
from ..targets.target import hello_op
from ..trace.record import MessageView, Observed, PendingView
from .history import Group, Request, Shown, Unknown, returned_from_wire, shown_from_wire
from .linearize import ENDS, End, Illegal, Legal, Undecided, Verdict, end_key, linearize

ID_FIELDS = ("call", "message", "before", "input")


class GroupTarget(Protocol):
    """A target that serves groups (``ModelTarget``, ``AdapterTarget``)."""

    name: str

    def request(self, op: Op, crash_at: str | None = None) -> tuple[Reply, Observed]: ...

    def kill(self) -> Observed: ...

    def group(
        self, ops: list[Op], schedule: list[int], crash_at: Sequence[str | None] = ()
    ) -> tuple[GroupReply, Observed]: ...


@dataclass(frozen=True)
class GroupCheck:
    """One step of the driver: the group as judged, its verdict, and how the
    target interleaved it (the pause points it passed)."""

    group: Group
    verdict: Verdict
    schedule: tuple[int, ...]
    pauses: tuple[Mapping[str, Any], ...] = field(default=())
    crash_at: tuple[str | None, ...] = ()  # each member's failpoint, when one was asked

    @property
    def legal(self) -> bool:
        return isinstance(self.verdict, Legal)

    def explain(self) -> str:
        """The verdict's explanation, then how the target ran the group: the
        schedule sent, the pause points it passed, the failpoint asked."""
        text = self.verdict.explain(self.group)
        if self.schedule:
            text += f"\nthe schedule sent: {list(self.schedule)}"
        if self.pauses:
            passed = ", ".join(
                f"r{p['request']} {p['point']}" if "request" in p else str(p["point"])
                for p in self.pauses
            )
            text += f"\nthe target's interleaving: {passed}"
        for i, point in enumerate(self.crash_at):
            if point is not None:
                fate = "and died there" if self.group.killed else "which was never reached"
                text += f"\nthe kill: r{i} asked to crash at {point}, {fate}"
        return text


class GroupDriver:
    """Sends steps to a target and judges each (see the module docstring)."""

    def __init__(
        self, target: GroupTarget, policy: Policy = G4, step_limit: int = DEFAULT_STEP_LIMIT
    ) -> None:
        self.target = target
        self.state = apply(initial_state(policy, step_limit), hello_op(0, step_limit)).state
        self.ids: dict[str, str] = {}  # model ID -> target ID, generated ones
        # The other legal ends of the steps so far (model state and ID map):
        # what no observation told apart from ``state`` yet. Each step is
        # judged from every one; those it cannot follow are dropped.
        self.others: tuple[End, ...] = ()
        self.seqs: dict[str, int] = {}  # session -> last seq of the target's log read
        target.request(hello_op(0, step_limit))

    def run(
        self,
        ops: Sequence[Op],
        schedule: Sequence[int] = (),
        crash_at: Sequence[str | None] = (),
    ) -> GroupCheck:
        """Send ``ops`` as one step and judge it; ``crash_at``: a member's
        failpoint (at most one), where the target dies mid-group."""
        sent = [self._target_op(op) for op in ops]
        pauses: list[dict[str, Any]] = []
        if len(sent) == 1:
            reply, _ = self.target.request(sent[0], crash_at[0] if crash_at else None)
            outcomes: list[dict[str, Any] | None] = [_wire(reply)]
            killed = isinstance(reply, Crashed)
        else:
            # A failpoint is passed only when asked: a target may serve no kills.
            more = (crash_at,) if any(crash_at) else ()
            served, _ = self.target.group(sent, list(schedule), *more)
            outcomes, pauses, killed = served.outcomes, served.pauses, served.killed
        # A member with no outcome was in flight when the implementation died.
        killed = killed or any(o is None or o.get("unknown") for o in outcomes)
        now = max(op.now for op in ops)
        after = self._shown(ops, outcomes, now)
        judged: list[tuple[Group, Verdict]] = []
        for start in (End(self.state, dict(self.ids)), *self.others):
            mine = [_renamed(op, start.ids) for op in sent] if judged else list(ops)
            group = history(start.state, mine, outcomes, after, start.ids, killed)
            judged.append((group, linearize(group, ends=True)))
        legal = [(g, v) for g, v in judged if isinstance(v, Legal)]
        group, verdict = legal[0] if legal else judged[0]
        if isinstance(verdict, Legal):
            ends: dict[tuple[Any, ...], End] = {}
            for _, v in legal:
                for end in v.ends if isinstance(v, Legal) else ():
                    ends.setdefault(end_key(end), end)
            first, *rest = ends.values()
            self.state, self.ids = first.state, dict(first.ids)
            self.others = tuple(rest[: ENDS - 1])
        return GroupCheck(group, verdict, tuple(schedule), tuple(pauses), tuple(crash_at))

    def kill(self) -> None:
        """A crash between steps: the target restarts, the model crashes."""
        self.target.kill()
        self.state = self.state.crashed()
        self.others = tuple(End(end.state.crashed(), end.ids) for end in self.others)

    def _target_op(self, op: Op) -> Op:
        """The op with the model's generated IDs replaced by the target's."""
        changes: dict[str, Any] = {
            name: self.ids[value]
            for name in ID_FIELDS
            if isinstance(value := getattr(op, name, None), str) and value in self.ids
        }
        return replace(op, **changes) if changes else op

    def _shown(
        self, ops: Sequence[Op], outcomes: Sequence[dict[str, Any] | None], now: int
    ) -> dict[str, Shown]:
        sessions = set(self.state.store.sessions)
        for op, outcome in zip(ops, outcomes, strict=True):
            if isinstance(op, (Create, Fork)) and outcome is not None and outcome.get("ok"):
                sessions.add(op.child if isinstance(op, Fork) else op.session)
        calls = self._ask(Calls(now))["calls"]
        after = {}
        for sid in sorted(sessions):
            last = self.seqs.get(sid)
            log = self._ask(Log(now, session=sid, after=last))["events"]
            if log:
                self.seqs[sid] = log[-1]["seq"]
            pending = self._ask(Pending(now, session=sid))["pending"]
            messages = self._ask(Messages(now, session=sid))["messages"]
            after[sid] = shown_from_wire(sid, pending, messages, calls, log)
        return after

    def _ask(self, op: Op) -> dict[str, Any]:
        reply, _ = self.target.request(op)
        if not isinstance(reply, Ok):
            raise RuntimeError(f"{self.target.name}: {op.OP} failed: {reply}")
        return reply.result


def _renamed(op: Op, ids: Mapping[str, str]) -> Op:
    """A request in the target's terms as a model whose generated IDs map to
    the target's by ``ids`` names it."""
    back = {t: m for m, t in ids.items()}
    changes: dict[str, Any] = {
        name: back[value]
        for name in ID_FIELDS
        if isinstance(value := getattr(op, name, None), str) and value in back
    }
    return replace(op, **changes) if changes else op


def _wire(reply: Reply) -> dict[str, Any] | None:
    """A lone request's reply as a group outcome (issued at 0, done at 1)."""
    if isinstance(reply, Crashed):
        return None
    if isinstance(reply, Err):
        return {
            "ok": False,
            "error": {"code": reply.code, "message": reply.message},
            "invoked": 0.0,
            "completed": 1.0,
        }
    return {"ok": True, "result": reply.result, "invoked": 0.0, "completed": 1.0}


def history(
    before: State,
    ops: Sequence[Op],
    outcomes: Sequence[Mapping[str, Any] | None],
    after: Mapping[str, Shown],
    ids: Mapping[str, str],
    killed: bool = False,
) -> Group:
    """The group the checker judges: ``ops`` in the model's terms, each with
    the target's wire outcome (None: nothing came back), what the target
    showed after it, and which model ID stands for which target ID."""
    requests = tuple(_request(op, o) for op, o in zip(ops, outcomes, strict=True))
    return Group(before, requests, after, killed, dict(ids))


def renamed(observed: Observed, names: Mapping[str, str]) -> Observed:
    """The model's observation with its IDs renamed as the search matched
    them (the model's -> the target's); names not listed stay."""

    def n(ident: str | None) -> str | None:
        return None if ident is None else names.get(ident, ident)

    def call(c: Call) -> Call:
        return replace(c, call=n(c.call) or "", context=tuple(n(x) or "" for x in c.context))

    def event(e: Event) -> Event:
        return replace(e, input=n(e.input))

    def row(r: PendingView) -> PendingView:
        return replace(r, input=n(r.input) or "")

    def msg(m: MessageView) -> MessageView:
        return replace(m, id=n(m.id) or "", copied_from=n(m.copied_from))

    return Observed(
        tuple(event(e) for e in observed.events),
        tuple((sid, tuple(row(r) for r in rows)) for sid, rows in observed.pending),
        tuple((sid, tuple(msg(m) for m in msgs)) for sid, msgs in observed.transcript),
        None if observed.calls is None else tuple(call(c) for c in observed.calls),
    )


def _request(op: Op, outcome: Mapping[str, Any] | None) -> Request:
    if outcome is None or outcome.get("unknown"):
        invoked = 0.0 if outcome is None else float(outcome["invoked"])
        return Request(op, invoked, None, Unknown())
    return Request(
        op, float(outcome["invoked"]), float(outcome["completed"]), returned_from_wire(outcome)
    )


def moves_of(verdict: Legal | End) -> list[int | RunnerStep | Cut]:
    """A legal order's moves (a verdict's, or one of its ends') as
    ``group_members`` replays them: a request
    by its index, a runner transition, the one cut at the kill's failpoint;
    the kill itself left out (the caller records it)."""
    moves: list[int | RunnerStep | Cut] = []
    for m in verdict.order:
        if m.request is not None:
            moves.append(m.request)
        elif m.step is not None:
            moves.append(m.step if m.crash_at is None else Cut(m.step, m.crash_at))
    return moves


def failed(checks: Sequence[GroupCheck]) -> list[GroupCheck]:
    """The checks whose group was not legal (illegal, or undecided)."""
    return [c for c in checks if isinstance(c.verdict, (Illegal, Undecided))]
