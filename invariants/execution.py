"""Wakes, drains and executions as the protocol shows them: admission wakes
an idle session, unforced wakes are lazy, one execution per session,
lifecycle pairs, coalesced follow-up drains, and interrupts
(spec 4.24-4.29; the seed).

A session is *idle* at a step's start when it has no open call: the
adapter quiesces before it answers, so a busy session always waits on one.
"""

from __future__ import annotations

from typing import Any

from ..model.ops import Answer, Compact, Interrupt, Prompt, Resume, Synthetic
from ..model.values import Event
from . import words
from .base import Checker
from .tracker import EXEC_TYPES, TERMINALS, SessionShadow, StepCtx

WAKE = "wake-on-admission"
LAZY = "lazy-wake"
SINGLE = "single-execution"
LIFECYCLE = "execution-lifecycle"
FOLLOW_UP = "wake-follow-up"
INTERRUPT_KEEPS = "interrupt-keeps-input"
IDLE_INTERRUPT = "idle-interrupt-noop"


def _work(ctx: StepCtx, sid: str) -> list[Event]:
    return [e for e in ctx.by_session.get(sid, ()) if e.type in EXEC_TYPES]


class WakeChecker(Checker):
    """Spec 4.24 and 4.25, and the protocol's forced drain."""

    ids = (WAKE, LAZY)
    ops = (Prompt, Synthetic, Compact, Resume)

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
        pending = ctx.at_wake.get(sid, 0)
        what = f"{op.OP if op else 'request'} {ctx.result.get('input')} at step {ctx.index}"
        started = work[0].type if work else (words.call(opened) if opened else "")
        env.hit(WAKE)
        if wakes and pending:
            if opened is None:
                env.fail(
                    WAKE,
                    (ctx.index,),
                    f"{what} woke idle session {sid} with {pending} pending row(s), but no "
                    "execution started: admission with resume wakes execution",
                )
        elif wakes:
            env.hit(LAZY)
            if started:
                env.fail(
                    LAZY,
                    (ctx.index,),
                    f"{what} woke idle session {sid} with nothing pending, yet it started work "
                    f"({started}): an unforced drain with no pending rows starts nothing",
                )
        elif started:
            why = "resume: false" if getattr(op, "resume", None) is False else "a staged revert"
            env.fail(
                WAKE,
                (ctx.index,),
                f"{what} must not wake session {sid} ({why}), yet it started work ({started})",
            )


class SingleExecutionChecker(Checker):
    """Spec 4.26: at most one open call per session; a resume of a busy
    session joins it."""

    ids = (SINGLE,)

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
        if ctx.crashed:
            self.open_since.clear()  # the process died with them
            return
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
    """The seed and spec 4.26: wakes during an active execution coalesce
    into one follow-up drain. When a step fails (and with it the
    execution), exactly one new execution starts if a wake was rung during
    it and input is pending; otherwise the session goes idle."""

    ids = (FOLLOW_UP,)
    ops = (Answer,)

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.pending = 0

    def begin(self, ctx: StepCtx) -> None:
        a = ctx.answered
        sh = self.t.sessions.get(a.session) if a is not None else None
        self.pending = len(sh.pending) if sh is not None else 0

    def end(self, ctx: StepCtx) -> None:
        a = ctx.answered
        if a is None or a.kind != "step" or ctx.finish != "error" or not ctx.ok:
            return
        env = self.env
        env.hit(FOLLOW_UP)
        sid = a.session
        sh = self.t.sessions[sid]
        rung = sh.doorbell
        opened = self.t.open.get(sid)
        starts = ctx.exec_started.get(sid, 0)
        if rung is not None and self.pending:
            if opened is None:
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


class InterruptChecker(Checker):
    """Spec 4.28 and 4.29: an interrupt stops the execution without deleting
    pending input or starting a successor; an idle interrupt changes nothing;
    an unknown session is session_not_found."""

    ids = (INTERRUPT_KEEPS, IDLE_INTERRUPT)
    ops = (Interrupt,)

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.known = False
        self.rows: list[Any] = []
        self.shown: set[str] = set()

    def begin(self, ctx: StepCtx) -> None:
        sh = self.t.sessions.get(ctx.session or "")
        self.known = sh is not None
        self.rows = [r for r in sh.pending.values() if r.type != "compaction"] if sh else []
        self.shown = {v.input for v in sh.view_pending if v.type != "compaction"} if sh else set()

    def end(self, ctx: StepCtx) -> None:
        env = self.env
        sid = ctx.session or ""
        reply = ctx.reply
        if not self.known:
            env.hit(IDLE_INTERRUPT)
            if getattr(reply, "code", None) != "session_not_found":
                env.fail(
                    IDLE_INTERRUPT,
                    (ctx.index,),
                    f"interrupt of unknown session {sid} at step {ctx.index} did not fail with "
                    "session_not_found",
                )
            return
        if ctx.crashed:
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
