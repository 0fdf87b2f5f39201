"""Promotion itself: only after admission, at most once, atomically, and
only at a Safe Step Boundary (spec 4.6-4.8; the seed)."""

from __future__ import annotations

from typing import Any

from ..model.values import Event
from . import words
from .base import PROMOTED, Checker
from .tracker import Row, SessionShadow, StepCtx

AFTER_ADMISSION = "promotion-after-admission"
ONCE = "promoted-once"
ATOMIC = "promotion-atomic"
AT_BOUNDARY = "promotion-at-boundary"


class PromotionEventChecker(Checker):
    """Spec 4.7 and 4.8, judged at each promoted event against the shadow
    just before it."""

    ids = (AFTER_ADMISSION, ONCE)
    events = ("promoted",)

    def event(self, ctx: StepCtx, ev: Event, sh: SessionShadow) -> None:
        env = self.env
        x = ev.input or ""
        env.hit(AFTER_ADMISSION)
        env.hit(ONCE)
        seen = sh.visible.get(x)
        if seen is not None and seen.copied_from is None:
            env.fail(
                ONCE,
                (seen.step, ctx.index),
                f"input {x} was promoted again at seq {ev.seq} of session {sh.id} (step "
                f"{ctx.index}); it was already promoted at seq {seen.seq} (step {seen.step})",
            )
            return
        row = sh.pending.get(x)
        if row is not None and row.type != "compaction":
            return
        life = self.t.lives.get(x)
        if row is not None:
            why = f"it is {words.row(row)}, which never becomes a message"
            steps: tuple[int, ...] = (row.step, ctx.index)
        elif seen is not None:
            why = f"it is a fork's copy ({words.msg(seen)}) with no admission in this session"
            steps = (ctx.index,)
        elif life is None:
            why = "it was never admitted"
            steps = (ctx.index,)
        elif life.row.session != sh.id:
            first = f"{words.row(life.row)}, step {life.row.step}"
            why = f"it was admitted in session {life.row.session} ({first})"
            steps = (life.row.step, ctx.index)
        else:
            ended = "discarded by a committed revert" if life.state == "reverted" else life.state
            why = f"{words.row(life.row)} was {ended} at step {life.ended_step}"
            steps = (life.row.step, life.ended_step or -1, ctx.index)
        env.fail(
            AFTER_ADMISSION,
            steps,
            f"input {x} was promoted at seq {ev.seq} of session {sh.id} (step {ctx.index}) but "
            f"{why}: a promotion needs a pending admission in the same session",
        )


class AtomicChecker(Checker):
    """Spec 4.6: after promoted{x} at seq s, the pending inbox lacks x and the
    transcript shows x at seq s, with the pending row's type."""

    ids = (ATOMIC,)
    moved_only = True
    moves = PROMOTED  # its todo: this step's promoted events
    events = ("promoted",)

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.todo: list[tuple[Event, Row | None]] = []

    def event(self, ctx: StepCtx, ev: Event, sh: SessionShadow) -> None:
        row = sh.pending.get(ev.input or "")
        self.todo.append((ev, row if row is not None and row.type != "compaction" else None))

    def end(self, ctx: StepCtx) -> None:
        if not self.todo:
            return
        env = self.env
        checked: dict[str, tuple[dict[str, Any], set[str]]] = {}
        for ev, row in self.todo:
            if row is None:
                continue  # promotion-after-admission reports it
            sid = ev.session
            sh = self.t.sessions[sid]
            m = sh.visible.get(row.input)
            if m is None or m.seq != ev.seq:
                continue  # a later event of the step removed it again
            env.hit(ATOMIC)
            if sid not in checked:
                checked[sid] = (
                    {v.id: v for v in sh.view_transcript},
                    {v.input for v in sh.view_pending},
                )
            shown, pending = checked[sid]
            view = shown.get(row.input)
            if row.input in pending:
                env.fail(
                    ATOMIC,
                    (row.step, ctx.index),
                    f"{_promoted(row, ev, ctx)} it is still in the pending inbox of {sid}",
                )
            if view is None:
                env.fail(
                    ATOMIC,
                    (row.step, ctx.index),
                    f"{_promoted(row, ev, ctx)} the transcript of {sid} does not show it",
                )
            elif view.seq != ev.seq or view.type != row.type:
                env.fail(
                    ATOMIC,
                    (row.step, ctx.index),
                    f"{_promoted(row, ev, ctx)} the transcript of {sid} shows it as {view.type} "
                    f"at seq {view.seq}: the message must take the promotion's seq and the "
                    "input's type",
                )
        self.todo = []


def _promoted(row: Row, ev: Event, ctx: StepCtx) -> str:
    """The promotion, in words (for a violation's message only: formatted
    when one is found; the checker sees every promotion)."""
    return f"{words.row(row)} was promoted at seq {ev.seq} (step {ctx.index}) but"


class BoundaryChecker(Checker):
    """The seed: promotion happens only at a Safe Step Boundary. Never while
    the session's step call is still open (mid-step), and always right
    before a model call opens for that session."""

    ids = (AT_BOUNDARY,)
    moved_only = True
    moves = PROMOTED
    quiescent = True
    ops = None

    def end(self, ctx: StepCtx) -> None:
        if not ctx.promoted:
            return
        env = self.env
        for sid, batch in ctx.promoted.items():
            env.hit(AT_BOUNDARY)
            first = batch[0][0]
            c0 = ctx.calls_before.get(sid)
            if c0 is not None and ctx.answered is not c0:
                env.fail(
                    AT_BOUNDARY,
                    (ctx.index,),
                    f"input {first.input} was promoted at seq {first.seq} (step {ctx.index}) while "
                    f"{words.call(c0)} was still open: promotion never happens mid-step",
                )
                continue
            if ctx.crashed:
                continue  # the boundary's call may legitimately be lost with the process
            if ctx.new_step_call(sid) is None:
                env.fail(
                    AT_BOUNDARY,
                    (ctx.index,),
                    f"input {first.input} was promoted at seq {first.seq} of session {sid} (step "
                    f"{ctx.index}) but no model call followed: promotion happens only at a Safe "
                    "Step Boundary, just before a provider request",
                )
                continue
            if not self.t.emits_steps or self.policy.step_events == "on_response":
                # on_response (G2): the step's step_started comes with the
                # answer, after whatever was admitted while the call was open.
                continue
            # With step events at the call: the batch is one run of promoted
            # events that leads straight into the step it opens.
            events = ctx.by_session[sid]
            start = events.index(first)
            run_end = start
            while run_end < len(events) and events[run_end].type == "promoted":
                run_end += 1
            after = events[run_end] if run_end < len(events) else None
            stray = [e for e in events[run_end:] if e.type == "promoted"]
            if after is None or after.type != "step_started" or stray:
                nxt = stray[0] if stray else after
                desc = (
                    f"{nxt.type} at seq {nxt.seq}" if nxt is not None else "no step_started event"
                )
                env.fail(
                    AT_BOUNDARY,
                    (ctx.index,),
                    f"the promotions of session {sid} at step {ctx.index} (from seq {first.seq}) "
                    f"are followed by {desc}: a boundary's promotions lead straight into its step",
                )
