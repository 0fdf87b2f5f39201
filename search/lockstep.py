"""Lockstep conformance: drive the reference model and a target with the same
requests and stop at the first observable difference
(``docs/cli.md``, "Lockstep: what conformance compares").

:class:`LockstepTarget` is itself a :class:`~.target.Target`: the simulator,
the scenario runner or the explorer drive it exactly as they drive one
target. Each request goes to the model and to the target; their replies and
observations are normalized and compared; the first difference raises
:class:`.divergence.Divergence`. Otherwise the **target's** reply and observation are
returned, so that the caller's view, its next requests and the invariant
checkers all work on the target's own trace.

Normalizations (the contract's list, implemented here and in :class:`.side.Side`,
nowhere else):

- **IDs.** An ID the harness sent (a session, an input, a fork child) is
  compared as it is. Any other ID is the implementation's (an omitted input's
  ID, a barrier's, a call's): each side numbers them ``gen:1``, ``gen:2``, …
  by order of first appearance in the compared values, which are walked in the
  same order on both sides (reply, then each compared session's pending rows
  and transcript in sorted session order, then the open calls). A fork's
  copied message is named by its session and its ``copied_from`` root
  (``copy:<session>:<root>``). A request that names an ID the target
  generated (``answer``'s call, a revert or fork boundary, a retry of a
  generated input ID) is translated to the model's ID of the same name before
  the model sees it.
- **Sequence numbers** (``admitted_seq``, ``seq``) are dropped: the lists
  they order are compared in order.
- **Times** become their rank among the distinct times that side has shown
  so far in compared values (pending rows and visible messages), so only
  their order within each side counts (the contract's "times compare only by
  order within each side"). Receipt times are not compared across sides.
- **Replies**: success or error code (or the failpoint a crash happened at);
  for receipts ``input``, ``session``, ``type``, ``data``, ``delivery``. The
  exact-retry rule is checked on each side against itself: when the model
  answers with the receipt it gave earlier for the same input (it judged an
  exact retry, or a barrier request coalesced), the target's receipt must equal,
  field for field and raw, the receipt the target gave for that input before.
  ``hello`` results are not compared (names and feature lists differ by
  design); ``log`` results are not compared (events, below); ``messages``,
  ``pending`` and ``calls`` results are normalized like the observations.
- **Pending inbox**: per session, (input, type, delivery, time rank) in order.
- **Transcript**: per session, user and synthetic messages only, (id, type,
  time rank, copied_from) in order.
- **Open calls**: (call, session, kind, step, final, context), oldest first;
  the context keeps only messages the side has shown as user or synthetic
  (IDs it never showed are kept, so an invented ID still diverges). When the
  target's ``hello`` reports a step allowance other than the one sent,
  ``final`` is not compared and ``allowance`` is recorded as not testable.

**Legal ends.** A concurrent group (:meth:`LockstepTarget.group_steps`) may
have legal orders that leave the model in states nothing the target showed
tells apart (a doorbell one order rang and another did not). Each is carried
(:class:`Carried`: the model's state and both sides' normalizers as of it);
every later step is compared from each, the ends it cannot follow are
dropped, and it diverges only when none follows (the first end's difference
is reported). The steps the caller gets follow the first end's order; where
the target judges the run (:meth:`LockstepTarget.judging`), each end has its
own copy of the checkers, the steps follow the first end whose order they
accept, an end whose checkers fire is dropped, and a violation is reported
only when every end's checkers fire.

**Events are not compared**, neither payloads nor types: the contract does
not list them among the compared things, and the protocol says event types an
implementation does not emit are judged per adapter ("the harness judges what
an adapter reports"). They stay in the target's trace, where every invariant
is judged; a difference only in events is the checkers' to find.

**Features.** The ``hello`` reply returned to the caller is the target's, with
its ``features`` narrowed to those both sides list (in the target's order),
so a caller that chooses operations from ``hello`` skips on both sides what
either side lacks. :meth:`LockstepTarget.features` gives that set,
:func:`needs` what an operation requires, :meth:`LockstepTarget.testable` /
:meth:`LockstepTarget.skip` let a caller skip and record an operation as not
testable; sending one anyway raises :class:`NotTestable` (recorded too).
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from ..errors import HarnessError
from ..model import Event, Hello, Ok, Op, Receipt, Reply, State
from ..sim.workload import NO_METADATA
from ..targets.group import GroupReply, GroupSteps, Member
from ..targets.target import ModelTarget, Target, group_members, observe
from ..trace.record import (
    NOTHING,
    MessageView,
    Observed,
    PendingView,
    Step,
    group_of,
    observed_wire,
    reply_wire,
)
from . import canon
from .divergence import Divergence, NotLinearizable, request_line
from .groups import history, moves_of, renamed
from .history import Group, Msg, Row, Shown
from .linearize import ENDS, End, Legal, Verdict, end_key, linearize
from .placement import abreast, group_reply, member_said, place_events, rows_and_messages
from .side import Side

# The hello feature each operation needs (docs/protocol.md, "Features").
OP_FEATURE = {
    "synthetic": "synthetic",
    "compact": "compaction",
    "fork": "fork",
    "revert_stage": "revert",
    "revert_clear": "revert",
    "revert_commit": "revert",
    "resume": "resume",
    "interrupt": "interrupt",
    "crash": "crash_op",
}
# A target's concurrent groups (and the pause points that schedule them) are
# judged by the linearizability search against the model in process, not by a
# model op: the model's hello does not list them, and they are tested all the same.
JUDGED_BY_THE_SEARCH = ("group", "pause_points")
REFERENCES = ("input", "message", "before", "call")  # request fields that may carry a generated ID


def needs(op: Op | str, crash_at: str | None = None) -> tuple[str, ...]:
    """The ``hello`` features an operation needs (``failpoints`` for a ``crash_at``)."""
    name = op if isinstance(op, str) else op.OP
    out = [OP_FEATURE[name]] if name in OP_FEATURE else []
    if crash_at is not None:
        out.append("failpoints")
    return tuple(out)


class NotTestable(HarnessError):
    """An operation was sent that one side's ``hello`` features do not allow."""


# --- the lockstep target -------------------------------------------------------


@dataclass(slots=True)
class Carried:
    """A legal end of the groups so far that no observation has told apart
    from the one compared with (a doorbell the order found rang and the
    target's did not, say): the model's state there and each side's
    normalizer as of it. Every later step is compared from each; an end it
    cannot follow is dropped, and the step diverges only when none can."""

    state: State | None  # None: the model is not in process (no groups)
    m: Side
    t: Side
    # The checkers along this end's orders, where the lockstep target judges
    # (:meth:`LockstepTarget.judging`); None where its caller judges alone.
    monitor: Any = None

    def key(self) -> tuple[Any, ...]:
        """What of this end a later comparison can tell apart from another:
        the model's pending rows, transcripts, ID owners, staged reverts and
        runner work, each generated ID by its label; not what none reads (the
        log's runner events and seqs, the ID counter); and, where the end has
        its own checkers, everything of theirs a later verdict reads (the
        explorer's merge key of the model and the monitor, ``canon``). Ends
        alike in it are one: carrying both could only ever keep both."""
        state, name = self.state, self.m.label
        if state is None:
            return ()
        judged = () if self.monitor is None else (canon.compute(state, self.monitor).digest,)

        def n(ident: str | None) -> str | None:
            return None if ident is None else name.get(ident, ident)

        sessions = tuple(
            (
                sid,
                tuple((n(r.input), r.type, r.data, r.delivery, r.time) for r in log.pending),
                tuple(
                    (n(m.id), m.type, m.time, m.data, n(m.copied_from), _receipt(m.receipt, n))
                    for m in log.transcript
                ),
                n(log.revert),
                log.fork_seq is None,
            )
            for sid, log in sorted(state.store.sessions.items())
        )
        owners = tuple(sorted(((n(x), o) for x, o in state.store.owners.items()), key=_first))
        runs = tuple(
            (c.session, n(c.call), c.kind, c.step, c.final, tuple(n(x) for x in c.context))
            + (r.phase, r.forced, r.step, r.cont, r.doorbell)
            for r in sorted(state.runs.values(), key=lambda r: r.call.opened)
            for c in (r.call,)
        )
        work = tuple(
            (sid, w._replace(batch=tuple(n(x) or "" for x in w.batch)))
            for sid, w in sorted(state.work.items())
        )
        return sessions, owners, runs, work, state.wakes, state.step_limit, judged


def _receipt(r: Receipt | None, n: Callable[[str | None], str | None]) -> tuple[Any, ...]:
    return () if r is None else (n(r.input), r.session, r.type, r.data, r.delivery, r.time)


def _first(pair: tuple[Any, Any]) -> Any:
    return pair[0]


def distinct(ends: Sequence[Carried]) -> list[Carried]:
    """``ends`` without those alike (:meth:`Carried.key`) to an earlier one."""
    seen: set[tuple[Any, ...]] = set()
    out = []
    for end in ends:
        key = end.key()
        if key not in seen:
            seen.add(key)
            out.append(end)
    return out


class Judged(NamedTuple):
    """A group as the search judged it from one legal end carried: the
    requests in that end's model terms, the target's views before the
    group, the IDs matched so far, the group and the verdict."""

    end: Carried
    ops: list[Op]
    pending: dict[str, tuple[PendingView, ...]]
    transcript: dict[str, tuple[MessageView, ...]]
    ids: dict[str, str]
    group: Group
    verdict: Verdict


class LockstepTarget:
    """The model and a target driven together (see the module docstring)."""

    def __init__(
        self,
        model: Target,
        target: Target,
        *,
        history: int = 200,
        free: bool = False,
        kills: bool = False,
    ) -> None:
        self.model = model
        self.target = target
        self.name = f"lockstep({target.name} vs {model.name})"
        self.harness: set[str] = set()
        self.m = Side(self.harness)
        self.t = Side(self.harness)
        self.steps = 0
        self.history: list[str] = []
        self._keep = history
        self.not_testable: dict[str, str] = {}  # feature (or rule) -> why
        self.skipped: list[str] = []  # requests skipped as not testable
        self._final = True  # compare calls' final flag (the allowance is testable)
        # The target's replies in order (canonical JSON), for the rerun that
        # tells a nondeterministic target from a failing one.
        self.replies: list[str] = []
        # Groups run free (no schedule: the target's threads interleave as they
        # will) even where the target has pause points.
        self.free = free
        # Kills mid-group are asked for: conformance asks by default
        # (--no-group-kills: never); other callers ask when they mean it.
        self.kills = kills
        self._hello_seen = False
        # The other legal ends carried, the first compared with aside (Carried).
        self.others: list[Carried] = []
        # The checkers along the end compared with, where this target judges
        # (``judging``); each other end carried has its own copy.
        self.monitor: Any = None
        self._next = 0  # the index of the next trace step to judge
        # A group's steps, judged along each end when it was served: each
        # with the violations to report when the run records it.
        self._prejudged: deque[tuple[Step, list[Any]]] = deque()

    # --- features ---------------------------------------------------------

    def features(self) -> frozenset[str]:
        """The features both sides listed in their last ``hello`` (empty before one)."""
        return frozenset(self.m.features) & frozenset(self.t.features)

    def testable(self, op: Op | str, crash_at: str | None = None) -> bool:
        """Can this request be sent to both sides? (Before any ``hello``: yes.)"""
        if not self._hello_seen:
            return True
        have = self.features()
        return all(f in have for f in needs(op, crash_at)) and not self._refused_metadata(op)

    def _refused_metadata(self, op: Op | str) -> bool:
        """A request with metadata to a target whose hello lists ``no_metadata``."""
        return NO_METADATA in self.t.features and bool(getattr(op, "metadata", None))

    def skip(self, op: Op | str, crash_at: str | None = None) -> str:
        """Record a request as not testable, and return why (for the caller's report)."""
        name = op if isinstance(op, str) else op.OP
        missing = [f for f in needs(op, crash_at) if f not in self.features()]
        reasons = [f"{f} not in the {self._lacking(f)}'s hello features" for f in missing]
        if self._refused_metadata(op):
            missing.append("metadata")
            reasons.append("it carries metadata and the target's hello lists no_metadata")
        why = f"{name}{' crash_at=' + crash_at if crash_at else ''}: " + ", ".join(reasons)
        for f in missing:
            self.not_testable.setdefault(f, why)
        self.skipped.append(why)
        return why

    def _lacking(self, feature: str) -> str:
        return "target" if feature not in self.t.features else "model"

    # --- the Target protocol ----------------------------------------------

    def request(self, op: Op, crash_at: str | None = None) -> tuple[Reply, Observed]:
        if not self.testable(op, crash_at):
            raise NotTestable(self.skip(op, crash_at))
        wire = op.to_wire()
        if crash_at is not None:
            wire["crash_at"] = crash_at
        self._remember_harness_ids(op)
        ends = self._ends()
        answers = []
        for end in ends:  # the model's answer from each legal end carried
            self._take(end)
            answers.append(self.model.request(self._translate(op), crash_at))
            end.state = self._state()
        t_reply, t_obs = self.target.request(op, crash_at)
        if not isinstance(op, Hello):  # a hello names the implementation: not compared
            said = ends[0].t.norm_reply(op, t_reply, self._final)
            self.replies.append(json.dumps(said, sort_keys=True, default=str))
        reply = self._follow(ends, answers, op, wire, t_reply, t_obs)
        assert reply is not None
        return reply, t_obs

    @property
    def group_kills(self) -> bool:
        """A kill mid-group is sent when asked for and the target serves groups
        and failpoints."""
        return self.kills and "group" in self.t.features and "failpoints" in self.features()

    def group_steps(
        self, ops: list[Op], schedule: list[int], crash_at: Sequence[str | None] = ()
    ) -> GroupSteps:
        """A concurrent group (issue 19): sent to the target as one ``group``
        (with the schedule, used where it has pause points), judged by the
        linearizability search from the model's state (``linearize.py``), and
        returned as trace steps along the order found: the target's replies,
        each with the target's own events the order places there, and the
        target's views after the last. With no
        legal order, the steps follow the group's order, the last carrying the
        target's observation, and the failure is a :class:`NotLinearizable`."""
        model = self.model
        if not isinstance(model, ModelTarget):
            raise HarnessError("a concurrent group needs the reference model in process")
        for op in ops:
            if not self.testable(op):
                raise NotTestable(self.skip(op))
            self._remember_harness_ids(op)
        if "group" not in self.t.features:
            raise NotTestable(f"group: not in the target's hello features ({self.target.name})")
        sent = None if self.free else schedule
        more = (list(crash_at),) if any(crash_at) else ()
        served, t_obs = self.target.group(list(ops), sent, *more)  # type: ignore[attr-defined]
        killed = served.killed or any(o is None or o.get("unknown") for o in served.outcomes)
        # Judged from each legal end carried; the first it is legal from is
        # compared with, and every end of every legal judgement is carried on.
        judged = [self._judge(end, ops, served.outcomes, t_obs, killed) for end in self._ends()]
        legal = [j for j in judged if isinstance(j.verdict, Legal)]
        chosen = legal[0] if legal else judged[0]
        self._take(chosen.end)
        carried = self._carry(legal)
        self.others = [c for c, _, _ in carried]
        model_ops, group, verdict, ids = chosen.ops, chosen.group, chosen.verdict, chosen.ids
        before = model.state
        replies = [group_reply(o) for o in served.outcomes]
        self.steps += 1
        if not isinstance(verdict, Legal):
            self.replies.extend(member_said(o, self.t.label) for o in served.outcomes)
            # No order places anything: the group's order, everything the
            # target showed on its first success (so the checkers see every
            # admission with the replies after it), the runner busy until the last.
            carrier = next((i for i, r in enumerate(replies) if isinstance(r, Ok)), 0)
            members = [
                Member(i, reply, self._shown(t_obs) if i == carrier else NOTHING, i < len(ops) - 1)
                for i, reply in enumerate(replies)
            ]
            failure = NotLinearizable(
                group,
                verdict,
                self.steps - 1,
                tuple(self.history[-self._keep :]),
                self.target.name,
                self.model.name,
            )
            return GroupSteps(members, served.pauses, failure)
        now = max(op.now for op in ops)
        steps, state = group_members(before, model_ops, moves_of(verdict), now, busy_end=killed)
        model.state = verdict.state if killed else state
        for m_id, t_id in verdict.ids.items():  # both sides name the new IDs alike from now on
            if t_id not in self.t.label and m_id not in self.m.label:
                self.m.id(m_id)
                self.t.id(t_id)
        self.replies.extend(member_said(o, self.t.label) for o in served.outcomes)
        m_obs = observe(before, model.state, tuple(e for s in steps for e in s.observed.events))
        self.m.absorb(m_obs)
        names = {**ids, **verdict.ids}
        along = self._along(chosen, names, steps, self.t, replies, t_obs, served, killed)
        if self.monitor is None or not self.others:
            if self.others:  # the ends alike to the one compared with, or to each other, are one
                self.others = distinct([Carried(model.state, self.m, self.t), *self.others])[1:]
            return along
        # Judging along the ends (``judging``): each legal end's order is
        # judged by its own copy of the checkers before the steps go back.
        first = Carried(model.state, self.m, self.t, chosen.end.monitor)
        candidates = [(first, along)]
        for c, j, end in carried:
            assert j.end.state is not None  # carried only with the model in process
            end_steps, _ = group_members(j.end.state, j.ops, moves_of(end), now, busy_end=killed)
            names = {**j.ids, **end.ids}
            c.monitor = j.end.monitor
            candidates.append(
                (c, self._along(j, names, end_steps, c.t, replies, t_obs, served, killed))
            )
        return self._prejudge(candidates, ops, crash_at)

    def _along(
        self,
        judged: Judged,
        names: dict[str, str],
        steps: Sequence[Member],
        t: Side,
        replies: Sequence[Reply],
        t_obs: Observed,
        served: GroupReply,
        killed: bool,
    ) -> GroupSteps:
        """The group's trace steps along one legal end's order (``steps``:
        the model's members along it), the target's side ``t`` as of that end."""
        # The target shows nothing between a group's requests: each member
        # carries the target's own events, cut where the model's order puts
        # each folded event (the search matched those one for one, in order);
        # the last carries the rest and the target's views after the group
        # (with a kill, the model's: the kill's own step shows the target's).
        # A member is busy where the runner is mid-work after it along the
        # order found: where the model's is, and before the last member
        # wherever the target's events so far are not abreast of the model's
        # (its runner lags the order: an execution's end logged after a later
        # admission has not shown yet, so the step is not quiescent). A member
        # both sides show alike, after which the model's runner is idle (a
        # leading error, a read), is not busy: a request after it starts from
        # an idle runner, as it would alone.
        placed = place_events(t_obs.events, [m.observed.events for m in steps])
        members = []
        so_far: list[Event] = []
        ours: list[Event] = []
        for k, member in enumerate(steps):
            so_far.extend(placed[k])
            ours.extend(member.observed.events)
            lags = k < len(steps) - 1 and not abreast(so_far, ours)
            if k == len(steps) - 1 and not killed:  # the target's own views after the group
                obs = _shown(Observed(tuple(placed[k])), t)
            else:  # the model's, each row and message as the target shows it
                rows, msgs = rows_and_messages(judged.pending, judged.transcript, t, so_far)
                shown = renamed(member.observed, names)
                obs = Observed(
                    tuple(placed[k]),
                    tuple(
                        (sid, tuple(rows.get(r.input, r) for r in view))
                        for sid, view in shown.pending
                    ),
                    tuple(
                        (sid, tuple(msgs.get(x.id, x) for x in view))
                        for sid, view in shown.transcript
                    ),
                    shown.calls,
                )
            members.append(
                Member(
                    member.position,
                    replies[member.position],
                    obs,
                    member.busy or lags,
                )
            )
        if killed:  # the kill's own step: what the restarted target shows
            return GroupSteps(members, served.pauses, kill=_shown(NOTHING, t))
        return GroupSteps(members, served.pauses)

    def _shown(self, observed: Observed) -> Observed:
        """``observed``'s events with every view the target shows now."""
        return _shown(observed, self.t)

    def _judge(
        self,
        end: Carried,
        ops: Sequence[Op],
        outcomes: Sequence[dict[str, Any] | None],
        t_obs: Observed,
        killed: bool,
    ) -> Judged:
        """The group as the search judges it from one legal end (its target
        side takes in what the target showed)."""
        self._take(end)
        assert end.state is not None
        model_ops = [self._translate(op) for op in ops]
        pending, transcript = dict(self.t.pending), dict(self.t.transcript)
        self.t.absorb(t_obs)
        touched = {e.session for e in t_obs.events} | {s for s, _ in t_obs.pending}
        touched |= {s for s, _ in t_obs.transcript} | set(end.state.store.sessions)
        after = {
            sid: Shown(
                tuple(
                    Row(r.input, r.type, r.delivery, r.admitted_seq, r.time)
                    for r in self.t.pending.get(sid, ())
                ),
                tuple(
                    Msg(m.id, m.type, m.seq, m.time, m.copied_from)
                    for m in self.t.transcript.get(sid, ())
                ),
                next((c for c in self.t.calls if c.session == sid), None),
                tuple(e for e in t_obs.events if e.session == sid),
            )
            for sid in sorted(touched)
            if sid in self.t.pending or sid in self.t.transcript
        }
        ids = {m: t for name, t in self.t.raw.items() if (m := self.m.raw.get(name)) is not None}
        group = history(end.state, model_ops, outcomes, after, ids, killed)
        return Judged(end, model_ops, pending, transcript, ids, group, linearize(group, ends=True))

    def _carry(self, legal: Sequence[Judged]) -> list[tuple[Carried, Judged, End]]:
        """The legal ends to carry beside the first legal judgement's first
        (at most ``ENDS`` in all): each with its sides as of that end, its new
        IDs named alike on both; with the judgement and the end it came from.
        Ends alike in state and IDs reached from two earlier ends are one,
        unless the checkers judge along the ends: each earlier end's checkers
        have their own memory, so both go on (until :func:`distinct`)."""
        every = [
            (j, end)
            for j in legal
            if isinstance(j.verdict, Legal)
            for end in j.verdict.ends or (End(j.verdict.state, j.verdict.ids),)
        ]
        judging = self.monitor is not None

        def key(j: Judged, end: End) -> tuple[Any, ...]:
            return (id(j), end_key(end)) if judging else end_key(end)

        seen = {key(*every[0])} if every else set()  # the end compared with
        carried: list[tuple[Carried, Judged, End]] = []
        for j, end in every[1:]:
            k = key(j, end)
            if k in seen or j.end.state is None:
                continue
            seen.add(k)
            m, t = j.end.m.copy(), j.end.t.copy()
            for m_id, t_id in end.ids.items():
                if t_id not in t.label and m_id not in m.label:
                    m.id(m_id)
                    t.id(t_id)
            m.absorb(observe(j.end.state, end.state, ()))
            carried.append((Carried(end.state, m, t), j, end))
        return carried[: ENDS - 1]

    def kill(self) -> Observed:
        ends = self._ends()
        answers: list[tuple[Reply | None, Observed]] = []
        for end in ends:
            self._take(end)
            answers.append((None, self.model.kill()))
            end.state = self._state()
        t_obs = self.target.kill()
        self._follow(ends, answers, None, None, None, t_obs)
        return t_obs

    # --- the checkers along the legal ends ---------------------------------------

    def judging(self, monitor: Any) -> Any:
        """Judge the run's trace with ``monitor`` along every legal end
        carried (``docs/cli.md``, "Lockstep: what conformance compares"):
        what the run feeds its monitor from now on. Each end has its own copy
        of the checkers; a group's steps are judged along each end's order
        before they go back (the first end whose order the checkers accept is
        the one returned and compared with), every other step by each end's
        copy; an end whose checkers fire is dropped, as one a comparison
        cannot follow, and a violation is reported only when every end's
        checkers fire (the first end's). A monitor that cannot be copied
        (no ``clone``) judges the first end's order alone, as it is."""
        if not callable(getattr(monitor, "clone", None)):
            return monitor
        self.monitor = monitor
        return EndChecks(self)

    def judge(self, step: Step) -> list[Any]:
        """The violations the run's step ``step`` reveals along every end."""
        self._next = step.index + 1
        if self._prejudged:  # a group's step, judged when the group was served
            pre, found = self._prejudged.popleft()
            same = (pre.index, pre.request, pre.reply, pre.observed) == (
                step.index,
                step.request,
                step.reply,
                step.observed,
            )
            if not same or group_of(pre.decision) != group_of(step.decision):
                raise HarnessError(
                    f"step {step.index} is not the group's step {pre.index} "
                    "judged along its legal ends"
                )
            return found
        ends = self._ends()
        if len(ends) == 1:
            alone: list[Any] = self.monitor.feed(step)
            return alone
        founds = [end.monitor.feed(step) for end in ends]
        kept = [end for end, f in zip(ends, founds, strict=True) if not f]
        if not kept:
            return _every_end(founds[0], f"each of the {len(ends)} legal ends carried")
        self._take(kept[0])
        self.others = kept[1:]
        return []

    def finish_checks(self, liveness: bool) -> list[Any]:
        """The run's end judged along every end: the first that holds, or the
        first end's violations when none does."""
        ends = self._ends()
        founds = [end.monitor.finish(liveness) for end in ends]
        for end, found in zip(ends, founds, strict=True):
            if not found:
                self._take(end)
                self.others = []
                return []
        if len(ends) == 1:
            return list(founds[0])
        return _every_end(founds[0], f"each of the {len(ends)} legal ends carried")

    def _prejudge(
        self,
        candidates: Sequence[tuple[Carried, GroupSteps]],
        ops: Sequence[Op],
        crash_at: Sequence[str | None],
    ) -> GroupSteps:
        """A group's steps along each legal end, judged by a copy of the
        checkers of the end it came from, in the search's order: the first
        end the checkers accept is compared with and its steps go back, the
        others they accept are carried, those they reject dropped. When they
        reject every end, the first end's steps go back with its violations."""
        first = self._next
        kept: list[tuple[Carried, GroupSteps, list[Step]]] = []
        rejected: list[tuple[Step, list[Any]]] = []
        for k, (end, along) in enumerate(candidates):
            end.monitor = end.monitor.clone()
            steps = along.steps(first, "", ops, crash_at)
            judged = []
            for step in steps:
                found = end.monitor.feed(step)
                judged.append((step, found))
                if found:
                    break
            if not judged or not judged[-1][1]:
                kept.append((end, along, steps))
            elif k == 0:
                rejected = judged
        if not kept:
            end, along = candidates[0]
            self._take(end)
            self.others = []
            why = f"every one of the {len(candidates)} legal orders of the group at step {first}"
            self._prejudged = deque((step, _every_end(found, why)) for step, found in rejected)
            return along
        end, along, steps = kept[0]
        self._take(end)
        self.others = distinct([c for c, _, _ in kept])[1:]
        self._prejudged = deque((step, []) for step in steps)
        return along

    # --- the legal ends carried -------------------------------------------------

    def _ends(self) -> list[Carried]:
        """The legal end compared with, then the others carried."""
        return [Carried(self._state(), self.m, self.t, self.monitor), *self.others]

    def _state(self) -> State | None:
        return self.model.state if isinstance(self.model, ModelTarget) else None

    def _take(self, end: Carried) -> None:
        """Compare from ``end`` from now on."""
        self.m, self.t, self.monitor = end.m, end.t, end.monitor
        if end.state is not None and isinstance(self.model, ModelTarget):
            self.model.state = end.state

    def _follow(
        self,
        ends: list[Carried],
        answers: Sequence[tuple[Reply | None, Observed]],
        op: Op | None,
        wire: dict[str, Any] | None,
        t_reply: Reply | None,
        t_obs: Observed,
    ) -> Reply | None:
        """Compare the target's step with the model's from each legal end
        (each already moved on by its answer); keep the ends that agree, the
        first compared with from now on. When none does, the first end's
        divergence is raised: what no legal end of the earlier groups follows."""
        step, lines = self.steps, list(self.history) if len(ends) > 1 else []
        kept: list[Carried] = []
        reply = t_reply
        failure: Divergence | None = None
        for end, (m_reply, m_obs) in zip(ends, answers, strict=True):
            self._take(end)
            if len(ends) > 1:
                self.steps, self.history = step, list(lines)
            said = t_reply
            if isinstance(op, Hello):
                said = self._hello(op, m_reply, t_reply)  # type: ignore[arg-type]
            try:
                self._compare(op, wire, m_reply, m_obs, said, t_obs)
            except Divergence as exc:
                failure = failure or exc
                continue
            reply = said if not kept else reply
            kept.append(end)
        if not kept:
            self._take(ends[0])
            assert failure is not None
            raise failure
        self._take(kept[0])
        self.others = distinct(kept)[1:] if len(kept) > 1 else []
        return reply

    def close(self) -> None:
        try:
            self.target.close()
        finally:
            self.model.close()

    # --- requests ---------------------------------------------------------------

    def _remember_harness_ids(self, op: Op) -> None:
        for attr in ("session", "child", "input"):
            value = getattr(op, attr, None)
            if isinstance(value, str) and value not in self.t.label:
                self.harness.add(value)

    def _translate(self, op: Op) -> Op:
        """The request as the model must see it: target-generated IDs -> the model's."""
        changes = {}
        for attr in REFERENCES:
            value = getattr(op, attr, None)
            if not isinstance(value, str):
                continue
            name = self.t.label.get(value)
            if name is None:
                continue
            raw = self.m.raw.get(name)
            if raw is not None and raw != value:
                changes[attr] = raw
        return replace(op, **changes) if changes else op  # type: ignore[arg-type]

    def model_op(self, op: Op) -> Op:
        """``op`` as the model names it: what a scenario file of the run says."""
        return self._translate(op)

    def _hello(self, op: Hello, m_reply: Reply, t_reply: Reply) -> Reply:
        self._hello_seen = True
        if isinstance(m_reply, Ok):
            self.m.features = tuple(m_reply.result.get("features", ()))
        if not isinstance(t_reply, Ok):
            return t_reply
        result = t_reply.result
        self.t.features = tuple(result.get("features", ()))
        self.t.step_limit = result.get("step_limit")
        if op.step_limit is not None and self.t.step_limit != op.step_limit:
            self._final = False
            self.not_testable.setdefault(
                "allowance",
                f"the target reports step_limit {self.t.step_limit}, "
                f"the harness sent {op.step_limit}",
            )
        for f in self.t.features:
            if f == NO_METADATA:
                # A restriction, not a feature: the workload sends neither side metadata.
                self.not_testable.setdefault(
                    "metadata", "the target's hello lists no_metadata: its prompts take none"
                )
            elif f not in self.m.features and f not in JUDGED_BY_THE_SEARCH:
                self.not_testable.setdefault(f, f"{f} not in the model's hello features")
        for f in self.m.features:
            if f not in self.t.features:
                self.not_testable.setdefault(f, f"{f} not in the target's hello features")
        both = [f for f in self.t.features if f in self.m.features or f == NO_METADATA]
        return Ok({**result, "features": both})

    # --- comparing ----------------------------------------------------------------

    def _compare(
        self,
        op: Op | None,
        wire: dict[str, Any] | None,
        m_reply: Reply | None,
        m_obs: Observed,
        t_reply: Reply | None,
        t_obs: Observed,
    ) -> None:
        step = self.steps
        self.steps += 1
        line = f"{step}: {request_line(wire)}"

        def diverge(where: str, mv: Any, tv: Any) -> Divergence:
            return Divergence(
                step,
                wire,
                where,
                mv,
                tv,
                _raw(m_reply, m_obs),
                _raw(t_reply, t_obs),
                tuple(self.history),
                self.target.name,
                self.model.name,
                self.m.views(),
                self.t.views(),
            )

        touched = self.m.absorb(m_obs) | self.t.absorb(t_obs)
        if op is None or isinstance(op, Hello):  # a (re)start: compare everything
            touched |= set(self.m.pending) | set(self.t.pending)
            touched |= set(self.m.transcript) | set(self.t.transcript)
        # reply first: generated IDs are named by order of appearance
        mr = self.m.norm_reply(op, m_reply, self._final)
        tr = self.t.norm_reply(op, t_reply, self._final)
        if mr != tr:
            raise diverge("reply", mr, tr)
        if isinstance(m_reply, Ok) and isinstance(t_reply, Ok) and isinstance(mr, dict):
            receipt = mr.get("receipt")
            if receipt is not None:
                key = receipt["input"]
                m_before = self.m.receipts.get(key)
                t_before = self.t.receipts.get(key)
                if m_before == m_reply.result and t_before is not None:
                    if t_reply.result != t_before:
                        raise diverge(
                            "retry receipt (an exact retry must return the original "
                            "receipt field for field, on the target's own side)",
                            {"original": m_before, "retry": m_reply.result},
                            {"original": t_before, "retry": t_reply.result},
                        )
                self.m.receipts[key] = m_reply.result
                self.t.receipts[key] = t_reply.result
        for sid in sorted(touched):
            mp = self.m.norm_pending(self.m.pending.get(sid, ()))
            tp = self.t.norm_pending(self.t.pending.get(sid, ()))
            if mp != tp:
                raise diverge(f"pending {sid}", mp, tp)
            mt = self.m.norm_transcript(sid, self.m.transcript.get(sid, ()))
            tt = self.t.norm_transcript(sid, self.t.transcript.get(sid, ()))
            if mt != tt:
                raise diverge(f"transcript {sid}", mt, tt)
        if m_obs.calls is not None or t_obs.calls is not None or op is None:
            mc = self.m.norm_calls(self.m.calls, self._final)
            tc = self.t.norm_calls(self.t.calls, self._final)
            if mc != tc:
                raise diverge("calls", mc, tc)
        self.history.append(line)
        if len(self.history) > self._keep:
            del self.history[0]


def _every_end(found: Sequence[Any], judged: str) -> list[Any]:
    """The first end's violations, saying that every end was judged."""
    return [
        replace(
            v,
            message=f"{v.message} (judged along {judged}: the checkers reject each; "
            "this is the first's violation)",
        )
        for v in found
    ]


class EndChecks:
    """The run's monitor where a lockstep target judges along its legal ends
    (:meth:`LockstepTarget.judging`)."""

    def __init__(self, lock: LockstepTarget) -> None:
        self._lock = lock

    @property
    def exercised(self) -> set[str]:
        """The invariants exercised along the end compared with."""
        found: set[str] = self._lock.monitor.exercised
        return found

    def feed(self, step: Step) -> list[Any]:
        return self._lock.judge(step)

    def finish(self, liveness: bool) -> list[Any]:
        return self._lock.finish_checks(liveness)


def _shown(observed: Observed, t: Side) -> Observed:
    """``observed``'s events with every view the target's side ``t`` shows."""
    return Observed(
        observed.events,
        tuple((sid, t.pending[sid]) for sid in sorted(t.pending)),
        tuple((sid, t.transcript[sid]) for sid in sorted(t.transcript)),
        t.calls,
    )


def _raw(reply: Reply | None, observed: Observed) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    if reply is not None:
        doc["reply"] = reply_wire(reply)
    obs = observed_wire(observed)
    obs.pop("events", None)  # not compared; kept in the trace
    if obs:
        doc["observed"] = obs
    return doc


__all__ = [
    "EndChecks",
    "LockstepTarget",
    "NotTestable",
    "needs",
]
