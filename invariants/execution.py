"""Wakes, drains and executions as the protocol shows them: admission wakes
an idle session, unforced wakes are lazy, one execution per session,
lifecycle pairs, coalesced follow-up drains, sessions that proceed
independently, work that needs a wake, and interrupts (spec 4.24-4.29; the
seed).

A session is *idle* at a step's start when it has no open call: the
adapter quiesces before it answers, so a busy session always waits on one.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any

from ..model.ops import Answer, Compact, Fork, Hello, Interrupt, Op, Prompt, Resume, Synthetic
from ..model.values import Call, Event
from . import words
from .base import Checker
from .tracker import EXEC_TYPES, INPUT_OF, TERMINALS, Row, SessionShadow, StepCtx, parse

WAKE = "wake-on-admission"
LAZY = "lazy-wake"
SINGLE = "single-execution"
LIFECYCLE = "execution-lifecycle"
FOLLOW_UP = "wake-follow-up"
INDEPENDENT = "sessions-independent"
NEEDS_WAKE = "work-needs-a-wake"

WAKING = (Prompt, Synthetic, Compact, Resume)
"""The requests that may wake the session they name (whether they must is
``WakeChecker``'s question)."""
INTERRUPT_KEEPS = "interrupt-keeps-input"
COMPACTION_ERROR = "compaction-error-continues"
IDLE_INTERRUPT = "idle-interrupt-noop"


def _work(ctx: StepCtx, sid: str) -> list[Event]:
    work = []  # (a loop: a comprehension is a call of its own in Python 3.11)
    for e in ctx.by_session.get(sid, ()):
        if e.type in EXEC_TYPES:
            work.append(e)
    return work


_SESSION_OF_CHANGE = itemgetter(0)
"""The session of a ``StepCtx.view_changes`` entry."""


class WakeChecker(Checker):
    """Spec 4.24 and 4.25, and the protocol's forced drain."""

    ids = (WAKE, LAZY)
    quiescent = True
    step_scoped = ("staged",)
    ops = (Prompt, Synthetic, Compact, Resume)
    answered = True

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.staged: str | None = None

    def begin(self, ctx: StepCtx) -> None:
        sh = self.t.sessions.get(ctx.session or "")
        self.staged = sh.staged if sh is not None else None

    def end(self, ctx: StepCtx) -> None:
        sid = ctx.session
        if not ctx.ok or ctx.crashed or sid is None or sid in ctx.calls_before:
            return  # only an idle session shows what a wake does
        env = self.env
        op = ctx.op
        opened = self.t.open.get(sid)
        work = _work(ctx, sid)
        if isinstance(op, Resume):
            env.hit(LAZY)
            if opened is None:
                env.fail(
                    LAZY,
                    (ctx.index,),
                    f"resume of idle session {sid} at step {ctx.index} made no model call: a "
                    "forced drain makes one call even with nothing promotable",
                )
            return
        wakes = self.t.wakes(ctx, self.staged)
        pending = ctx.at_wake.get(sid)
        if pending is None:  # it started no work: what is pending now
            sh = self.t.sessions.get(sid)
            pending = len(sh.pending) if sh is not None else 0
        started = bool(work) or opened is not None  # in words only in a violation's message
        env.hit(WAKE)
        # G5's empty compaction (empty_compaction = "fail") settles without a call.
        settled_empty = self.env.policy.empty_compaction == "fail" and any(
            e.type == "compaction_failed" for e in ctx.by_session.get(sid, ())
        )
        if wakes and pending:
            if opened is None and not settled_empty:
                env.fail(
                    WAKE,
                    (ctx.index,),
                    f"{_admission(ctx)} woke idle session {sid} with {pending} pending row(s), "
                    "but no execution started: admission with resume wakes execution",
                )
        elif wakes:
            env.hit(LAZY)
            if started:
                env.fail(
                    LAZY,
                    (ctx.index,),
                    f"{_admission(ctx)} woke idle session {sid} with nothing pending, yet it "
                    f"started work ({_started(work, opened)}): an unforced drain with no pending "
                    "rows starts nothing",
                )
        elif started:
            why = "resume: false" if getattr(op, "resume", None) is False else "a staged revert"
            env.fail(
                WAKE,
                (ctx.index,),
                f"{_admission(ctx)} must not wake session {sid} ({why}), yet it started work "
                f"({_started(work, opened)})",
            )


def _admission(ctx: StepCtx) -> str:
    """The step's request and the input it acknowledged, in words (for a
    violation's message only: formatted when one is found)."""
    op = ctx.op
    return f"{op.OP if op else 'request'} {ctx.result.get('input')} at step {ctx.index}"


def _started(work: list[Event], opened: Call | None) -> str:
    """The work a step started, in words: its first execution event, or the
    call it opened."""
    return work[0].type if work else words.call(opened) if opened is not None else ""


class SingleExecutionChecker(Checker):
    """Spec 4.26: at most one open call per session; a resume of a busy
    session joins it."""

    ids = (SINGLE,)
    still = (Resume,)  # no call opened or closed: only a resume joining one
    refused = ()

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)

    def end(self, ctx: StepCtx) -> None:
        env = self.env
        if ctx.calls_changed and self.t.open:
            env.hit(SINGLE)
            for sid, n in self.t.open_count.items():
                if n > 1:
                    env.fail(
                        SINGLE,
                        (ctx.index,),
                        f"session {sid} has {n} open model calls at step {ctx.index}: at most one "
                        "execution per session",
                    )
        if isinstance(ctx.op, Resume) and ctx.ok and ctx.session in ctx.calls_before:
            sid = ctx.session
            env.hit(SINGLE)
            before = ctx.calls_before[sid]
            after = self.t.open.get(sid)
            if ctx.by_session.get(sid) or after is None or after.call != before.call:
                env.fail(
                    SINGLE,
                    (ctx.index,),
                    f"resume of busy session {sid} at step {ctx.index} did not join "
                    f"{words.call(before)}: it appended events or replaced the call",
                )


class LifecycleChecker(Checker):
    """Spec 4.27: one execution_started and one terminal event per busy
    period; promotions and calls happen inside one. Judged only once the
    target has shown execution events at all."""

    ids = (LIFECYCLE,)
    quiescent = True
    events = tuple(sorted(EXEC_TYPES | TERMINALS))

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.open_since: dict[str, int] = {}

    def event(self, ctx: StepCtx, ev: Event, sh: SessionShadow) -> None:
        env = self.env
        if ev.type == "execution_started":
            env.hit(LIFECYCLE)
            if sh.exec_open:
                env.fail(
                    LIFECYCLE,
                    (sh.exec_step, ctx.index),
                    f"session {sh.id} started a second execution at seq {ev.seq} (step "
                    f"{ctx.index}) while the one started at step {sh.exec_step} had no terminal "
                    "event",
                )
            self.open_since[sh.id] = ctx.index
        elif ev.type in TERMINALS:
            env.hit(LIFECYCLE)
            if not sh.exec_open:
                env.fail(
                    LIFECYCLE,
                    (ctx.index,),
                    f"{ev.type} at seq {ev.seq} of session {sh.id} (step {ctx.index}) ends no "
                    "execution",
                )
            self.open_since.pop(sh.id, None)
        elif self.t.emits_exec and not sh.exec_open:
            env.hit(LIFECYCLE)
            env.fail(
                LIFECYCLE,
                (ctx.index,),
                f"{ev.type} at seq {ev.seq} of session {sh.id} (step {ctx.index}) happened outside "
                "any execution",
            )

    def end(self, ctx: StepCtx) -> None:
        if not self.open_since:
            return  # no execution to wait on (most steps)
        if ctx.crashed:
            self.open_since.clear()  # the process died with them
            return
        if self.open_since.keys() <= self.t.open.keys():
            return  # every execution it waits on still has its call open
        for sid, since in list(self.open_since.items()):
            if sid not in self.t.open:
                self.env.fail(
                    LIFECYCLE,
                    (since, ctx.index),
                    f"session {sid} is idle after step {ctx.index} but the execution it started at "
                    f"step {since} has no terminal event",
                )
                del self.open_since[sid]


class FollowUpChecker(Checker):
    """The seed and spec 4.26: wakes rung during an execution coalesce into
    at most one follow-up drain per drain, inside that execution.

    What a step's answer shows of it. A drain goes on while a continuation
    is due or input is promotable, and its follow-up drain (rung or not)
    is unforced: it takes whatever is pending and otherwise finds nothing.
    So when a step ends without error, a session that goes idle holds no
    pending row and owes no continuation (nothing was left for a follow-up
    that never ran), a step call that opens promoted input or continues a
    tool call (an extra drain would show as a call with nothing to do), and
    no new execution starts (coalesced drains settle once per execution,
    spec 4.27). When a step fails (and with it the execution), exactly one
    new execution starts if a wake was rung during it and input is pending;
    otherwise the session goes idle. A doorbell the tracker kept only because
    the trace cannot show whether a wake rang it (an interrupt in a busy
    concurrent group: ``SessionShadow.doorbell_kept``) allows that execution
    and does not owe it."""

    ids = (FOLLOW_UP,)
    quiescent = True
    step_scoped = ("pending",)
    ops = (Answer,)
    answered = True

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.pending = 0

    def begin(self, ctx: StepCtx) -> None:
        a = ctx.answered
        sh = self.t.sessions.get(a.session) if a is not None else None
        self.pending = len(sh.pending) if sh is not None else 0

    def end(self, ctx: StepCtx) -> None:
        a = ctx.answered
        if a is None or a.kind != "step" or not ctx.ok or ctx.crashed:
            return
        self.env.hit(FOLLOW_UP)
        if ctx.finish == "error":
            self._failed(ctx, a)
        else:
            self._ended(ctx, a)

    def _ended(self, ctx: StepCtx, a: Call) -> None:
        sid = a.session
        sh = self.t.sessions[sid]
        opened = self.t.open.get(sid)
        cont = self.t.continuation(ctx, sid) is not None
        rung = (sh.doorbell,) if sh.doorbell is not None else ()
        problems = []
        if ctx.exec_started.get(sid):
            problems.append("a new execution started: coalesced drains settle once per execution")
        if opened is None and (sh.pending or cont):
            left = (
                f"{words.ids(list(sh.pending))} pending"
                if sh.pending
                else "a continuation of its tool call due"
            )
            problems.append(
                f"the session went idle with {left}: the drain goes on, or its one follow-up "
                "drain takes it"
            )
        elif opened is not None and opened.kind == "step" and not cont:
            if not ctx.promoted.get(sid):
                problems.append(
                    f"{words.call(opened)} opened with nothing promoted and no continuation due: "
                    "a follow-up drain is unforced, and there is at most one per drain"
                )
        if problems:
            self.env.fail(
                FOLLOW_UP,
                (ctx.index,) + rung,
                f"{words.call(a)} ended at step {ctx.index} ({ctx.finish}), but "
                f"{'; and '.join(problems)}",
            )

    def _failed(self, ctx: StepCtx, a: Call) -> None:
        env = self.env
        sid = a.session
        sh = self.t.sessions[sid]
        rung = sh.doorbell
        opened = self.t.open.get(sid)
        starts = ctx.exec_started.get(sid, 0)
        if rung is not None and self.pending:
            if opened is None and not sh.doorbell_kept:
                env.fail(
                    FOLLOW_UP,
                    (rung, ctx.index),
                    f"{words.call(a)} failed at step {ctx.index}; a wake was rung during that "
                    f"execution (step {rung}) with {self.pending} row(s) pending, but no follow-up "
                    "drain started",
                )
            elif starts > 1:
                env.fail(
                    FOLLOW_UP,
                    (rung, ctx.index),
                    f"{words.call(a)} failed at step {ctx.index} and {starts} new executions "
                    "started: wakes coalesce into one follow-up drain",
                )
        elif opened is not None or starts:
            why = "no wake was rung during it" if rung is None else "nothing was pending"
            env.fail(
                FOLLOW_UP,
                (ctx.index,) + ((rung,) if rung is not None else ()),
                f"{words.call(a)} failed at step {ctx.index} and a new execution started although "
                f"{why}",
            )


class IndependenceChecker(Checker):
    """Spec 4.26 ("different sessions proceed independently") and 4.28 ("no
    wake recorded before the interrupt starts a successor"), judged on what
    each request changed. A request touches only the sessions it names (an
    answer: its call's session; a fork: the parent and the child). In an
    idle session only a request that may wake it (a prompt, synthetic or
    compact into it, or its resume; whether it must is ``WakeChecker``'s)
    starts work: an execution, a promotion or a model call. No progress
    happens between requests, so a wake kept across an interrupt could only
    show at a later request, and would show here. Crashes and ``hello``
    are ``RestartChecker``'s."""

    ids = (INDEPENDENT, NEEDS_WAKE)
    ops = None

    def end(self, ctx: StepCtx) -> None:
        op = ctx.op
        if ctx.crashed or op is None or isinstance(op, Hello):
            return
        sid = ctx.session
        sessions = self.t.sessions
        moved = ctx.by_session or ctx.view_changes or ctx.calls_changed
        if not moved and ctx.answered is None and not isinstance(op, Fork):
            # Most steps: one session named (or none), nothing moved, so
            # nothing to judge but whether each invariant was reachable.
            env = self.env
            if len(sessions) > (sid is not None):
                env.hit(INDEPENDENT)
            if (
                sid is not None
                and sid in sessions
                and sid not in ctx.calls_before
                and not ctx.busy_before
                and not isinstance(op, WAKING)
            ):
                env.hit(NEEDS_WAKE)  # known and idle: nothing started (_idle)
            return
        if isinstance(op, Fork):
            named = {op.child} if sid is None else {sid, op.child}
        elif ctx.answered is not None:
            named = {ctx.answered.session} if sid is None else {sid, ctx.answered.session}
        else:
            named = set() if sid is None else {sid}
        if len(sessions) > len(named):
            self.env.hit(INDEPENDENT)
        # Only a session the request does not name can show a change it must
        # not make: its events, a view, or a call open before or after (on a
        # step that moved none of them, most of a sweep's, none can).
        if moved and (
            not named.issuperset(ctx.by_session)
            or not named.issuperset(map(_SESSION_OF_CHANGE, ctx.view_changes))
            or (ctx.calls_changed and _calls_moved(ctx.calls_before, self.t.open, named))
        ):
            self._others(ctx, op, named)
        if isinstance(op, WAKING) or ctx.busy_before:
            return
        before = ctx.calls_before
        for each in sorted(named) if len(named) > 1 else named:
            if each in sessions and each not in before:  # known and idle
                self._idle(ctx, op, each)

    def _others(self, ctx: StepCtx, op: Op, named: set[str]) -> None:
        """What the request changed in sessions it does not name."""
        changed: dict[str, list[str]] = {}
        for sid, evs in ctx.by_session.items():
            if sid not in named:
                changed.setdefault(sid, []).append(
                    f"appended {', '.join(f'{e.type} (seq {e.seq})' for e in evs[:3])}"
                )
        for sid, which, old, new in ctx.view_changes:
            if sid not in named and old != new:
                changed.setdefault(sid, []).append(f"changed its {which}")
        for sid in set(ctx.calls_before) | set(self.t.open) if ctx.calls_changed else ():
            before, after = ctx.calls_before.get(sid), self.t.open.get(sid)
            if sid in named or (before and before.call) == (after and after.call):
                continue
            if before is not None:
                changed.setdefault(sid, []).append(f"closed {words.call(before)}")
            if after is not None:
                changed.setdefault(sid, []).append(f"opened {words.call(after)}")
        for sid, how in sorted(changed.items()):
            self.env.fail(
                INDEPENDENT,
                (ctx.index,),
                f"{op.OP} at step {ctx.index}, for {words.ids(sorted(named))}, changed session "
                f"{sid}: it {'; '.join(how)}: a request changes only the sessions it names, and "
                "sessions proceed independently",
            )

    def _idle(self, ctx: StepCtx, op: Op, sid: str) -> None:
        """A request that does not wake ``sid`` (known, and idle) starts no work there.
        A group member after one that left the runner busy did not start
        quiescent: a wake an earlier member recorded may be taken in its step
        (an admission, then its wake, spec 3.6), so it is not judged."""
        self.env.hit(NEEDS_WAKE)
        if not ctx.by_session and not ctx.new_calls:
            return  # nothing started anywhere
        work = _work(ctx, sid)
        call = next((c for c in ctx.new_calls if c.session == sid), None)
        if work or call is not None:
            started = f"{work[0].type} at seq {work[0].seq}" if work else words.call(call)  # type: ignore[arg-type]
            self.env.fail(
                NEEDS_WAKE,
                (ctx.index,),
                f"{op.OP} at step {ctx.index} started work in idle session {sid} ({started}), "
                f"but {op.OP} does not wake a session: only a prompt, synthetic or compact into "
                "it, or its resume, starts an idle session's work",
            )


def _calls_moved(before: dict[str, Call], after: dict[str, Call], named: set[str]) -> bool:
    """Did a session not in ``named`` open or close a call (the open calls
    before and after a step)? Another session's call open throughout (most
    steps that moved a call) is no change."""
    for sid, call in before.items():
        if sid not in named:
            still = after.get(sid)
            if still is None or still.call != call.call:
                return True
    for sid in after:
        if sid not in named and sid not in before:
            return True
    return False


class CompactionErrorChecker(Checker):
    """Adapter protocol ("Rules the protocol pins down") and spec 3.8:
    ``error`` on a compaction call fails the compaction (its barrier is
    consumed) and the drain goes on. Within the answering step the session
    logs compaction_failed and no execution_failed or execution_interrupted;
    a step call is open after it if input is promotable or the compaction
    followed a step that needed continuation; otherwise (the session idle)
    the execution succeeds. An implementation that emits no execution
    events is judged only on the step call."""

    ids = (COMPACTION_ERROR,)
    step_scoped = ("barrier", "waiting", "cont")
    ops = (Answer,)
    answered = True

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.barrier: Row | None = None
        self.waiting: list[Row] = []
        self.cont: int | None = None

    def begin(self, ctx: StepCtx) -> None:
        a = ctx.answered
        sh = self.t.sessions.get(a.session) if a is not None else None
        if sh is None:
            self.barrier, self.waiting, self.cont = None, [], None
            return
        self.barrier = sh.barrier
        # Once the barrier is consumed nothing holds pending input back.
        self.waiting = waiting = []
        for r in sh.pending.values():
            if r.type != "compaction":
                waiting.append(r)
        self.cont = sh.cont[0] if sh.cont is not None else None

    def end(self, ctx: StepCtx) -> None:
        a = ctx.answered
        if a is None or a.kind != "compaction" or ctx.finish != "error":
            return
        if not ctx.ok or ctx.crashed:
            return
        env = self.env
        env.hit(COMPACTION_ERROR)
        sid = a.session
        evs = ctx.by_session.get(sid, [])
        b = self.barrier
        what = f"{words.call(a)} was answered error at step {ctx.index}"
        steps = ((b.step,) if b is not None else ()) + (ctx.index,)
        problems: list[str] = []
        if self.t.emits_exec:
            failed = any(
                e.type == "compaction_failed" and parse(e.data).get("reason") != "auto" for e in evs
            )
            if not failed:
                held = words.row(b) if b is not None else "its barrier"
                problems.append(f"no compaction_failed consumed {held}")
            ended = [e.type for e in evs if e.type in ("execution_failed", "execution_interrupted")]
            if ended:
                problems.append(f"the execution ended with {ended[0]}")
        opened = self.t.open.get(sid)
        stepping = opened is not None and opened.kind == "step"
        if not stepping and (self.waiting or self.cont is not None):
            why = (
                f"{words.ids([r.input for r in self.waiting])} was pending"
                if self.waiting
                else f"the step answered at step {self.cont} needed a continuation"
            )
            problems.append(f"no step call was open after it although {why}")
            if self.cont is not None and not self.waiting:
                steps = steps + (self.cont,)
        elif (
            opened is None
            and self.t.emits_exec
            and not any(e.type == "execution_succeeded" for e in evs)
        ):
            problems.append("the session went idle without execution_succeeded")
        if problems:
            env.fail(
                COMPACTION_ERROR,
                steps,
                f"{what}: {'; '.join(problems)}: an error on a compaction call fails the "
                "compaction, consumes its barrier, and the drain goes on",
            )


class InterruptChecker(Checker):
    """Spec 4.28 and 4.29: an interrupt stops the execution without deleting
    pending input or starting a successor; an idle interrupt changes nothing;
    an unknown session is session_not_found (a no-op under ``interrupt_unknown
    = "no_op"``). The one row an interrupt may
    remove is the barrier of the compaction call it cancels (spec 3.8: an
    interrupted manual compaction fails, and its barrier is consumed); a
    barrier waiting behind an interrupted step stays."""

    ids = (INTERRUPT_KEEPS, IDLE_INTERRUPT)
    quiescent = True
    step_scoped = ("known", "rows", "shown")
    ops = (Interrupt,)

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.known = False
        self.rows: list[Any] = []
        self.shown: set[str] = set()

    def begin(self, ctx: StepCtx) -> None:
        sh = self.t.sessions.get(ctx.session or "")
        self.known = sh is not None
        running = ctx.calls_before.get(ctx.session or "")
        if sh is None:
            self.rows, self.shown = [], set()
        elif running is None or running.kind != "compaction":
            self.rows = list(sh.pending.values())
            self.shown = set(map(INPUT_OF, sh.view_pending))
        else:  # the input, not the barrier of the compaction call it cancels
            keep = ("user", "synthetic")
            self.rows = [r for r in sh.pending.values() if r.type in keep]
            self.shown = {v.input for v in sh.view_pending if v.type in keep}

    def end(self, ctx: StepCtx) -> None:
        env = self.env
        sid = ctx.session or ""
        reply = ctx.reply
        if not self.known:
            env.hit(IDLE_INTERRUPT)
            if env.policy.interrupt_unknown == "no_op":  # open point A10, G5's rule
                quiet = ctx.ok and ctx.result.get("interrupted") is False
                if not quiet or ctx.step.observed.events:
                    env.fail(
                        IDLE_INTERRUPT,
                        (ctx.index,),
                        f"interrupt of unknown session {sid} at step {ctx.index} was not a no-op "
                        "(interrupt_unknown = no_op)",
                    )
                return
            if getattr(reply, "code", None) != "session_not_found":
                env.fail(
                    IDLE_INTERRUPT,
                    (ctx.index,),
                    f"interrupt of unknown session {sid} at step {ctx.index} did not fail with "
                    "session_not_found",
                )
            return
        if ctx.crashed or ctx.unseen:  # no reply to judge (a kill mid-group: unseen)
            return
        if sid not in ctx.calls_before:
            env.hit(IDLE_INTERRUPT)
            changed = (
                bool(ctx.step.observed.events)
                or any(o != n for _, _, o, n in ctx.view_changes)
                or ctx.new_calls
            )
            if not ctx.ok or ctx.result.get("interrupted") is not False or changed:
                env.fail(
                    IDLE_INTERRUPT,
                    (ctx.index,),
                    f"interrupt of idle session {sid} at step {ctx.index} was not a no-op: it "
                    + (
                        "changed the inbox or appended events"
                        if changed
                        else "did not answer interrupted: false"
                    ),
                )
            return
        env.hit(INTERRUPT_KEEPS)
        sh = self.t.sessions[sid]
        problems = []
        if not ctx.ok or ctx.result.get("interrupted") is not True:
            problems.append("it did not answer interrupted: true for a busy session")
        lost = [r for r in self.rows if r.input not in sh.pending]
        if lost:
            problems.append(f"it deleted pending {', '.join(words.row(r) for r in lost)}")
        shown_now = {v.input for v in sh.view_pending}
        hidden = sorted(self.shown - shown_now)
        if hidden and not lost:
            problems.append(f"the pending inbox no longer shows {words.ids(hidden)}")
        if ctx.promoted.get(sid):
            problems.append(
                f"it promoted {words.ids([e.input or '' for e, _ in ctx.promoted[sid]])}"
            )
        if sid in self.t.open:
            problems.append(f"a successor started ({words.call(self.t.open[sid])})")
        if problems:
            env.fail(
                INTERRUPT_KEEPS,
                (ctx.index,) + tuple(r.step for r in lost),
                f"interrupt of session {sid} at step {ctx.index}: {'; '.join(problems)}: an "
                "interrupt stops work but keeps every pending input",
            )
