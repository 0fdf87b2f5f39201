"""The compaction barrier: one per session, blocking promotion until its
manual compaction ends or fails, consumed then, coalescing requests
(spec 4.9-4.12, 3.4 "G5 difference", 3.8; the seed)."""

from __future__ import annotations

from typing import Any

from ..model.ops import Compact
from ..model.values import Event
from . import words
from .base import EVENTS, VIEWS, Checker
from .tracker import INPUT_OF, Row, SessionShadow, StepCtx, parse

SINGLE = "single-barrier"
BLOCKS = "barrier-blocks-promotion"
HOLDS_LATER = "barrier-holds-later-input"
LIFETIME = "barrier-lifetime"
COALESCES = "barrier-coalesces"


class BarrierEventChecker(Checker):
    ids = (SINGLE, BLOCKS, HOLDS_LATER, LIFETIME)
    moved_only = True
    moves = EVENTS | VIEWS  # what its events noted, a pending view shown
    events = (
        "admitted",
        "compaction_admitted",
        "promoted",
        "compaction_ended",
        "compaction_failed",
    )

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.settled_at: dict[str, int] = {}  # session -> step its barrier was consumed
        self.touched: set[str] = set()

    def event(self, ctx: StepCtx, ev: Event, sh: SessionShadow) -> None:
        env = self.env
        b = sh.barrier
        if ev.type == "admitted":
            if b is not None:  # the barrier now holds this input back
                env.hit(BLOCKS)
                env.hit(HOLDS_LATER)
        elif ev.type == "compaction_admitted":
            if any(r.type != "compaction" for r in sh.pending.values()):
                env.hit(BLOCKS)  # the barrier now holds pending input back
            self.touched.add(sh.id)
            env.hit(SINGLE)
            if b is not None:
                env.fail(
                    SINGLE,
                    (b.step, ctx.index),
                    f"compaction barrier {ev.input} was admitted at seq {ev.seq} of session "
                    f"{sh.id} (step {ctx.index}) while {words.row(b)} was still pending: one "
                    "barrier per session",
                )
        elif ev.type == "promoted":
            if b is None:
                if self.settled_at.get(sh.id) == ctx.index:
                    env.hit(BLOCKS)  # promotion right after the barrier it waited for
                return
            env.hit(BLOCKS)
            env.hit(HOLDS_LATER)
            row = sh.pending.get(ev.input or "")
            what = words.row(row) if row is not None else f"input {ev.input}"
            env.fail(
                BLOCKS,
                (b.step, ctx.index),
                f"{what} was promoted at seq {ev.seq} (step {ctx.index}) while {words.row(b)} was "
                "pending: the barrier blocks promotion until its compaction ends or fails",
            )
            if row is not None and row.seq > b.seq:
                env.fail(
                    HOLDS_LATER,
                    (b.step, row.step, ctx.index),
                    f"{what} was promoted at seq {ev.seq} (step {ctx.index}) although it was "
                    f"admitted after {words.row(b)}, which was still pending",
                )
        else:
            self.touched.add(sh.id)
            reason = parse(ev.data).get("reason")
            env.hit(LIFETIME)
            if reason == "auto":
                return
            if b is None:
                env.fail(
                    LIFETIME,
                    (ctx.index,),
                    f"{ev.type} at seq {ev.seq} of session {sh.id} (step {ctx.index}) names "
                    f"{ev.input or 'no barrier'} but no compaction barrier is pending",
                )
            elif ev.input is not None and ev.input != b.input:
                env.fail(
                    LIFETIME,
                    (b.step, ctx.index),
                    f"{ev.type} at seq {ev.seq} of session {sh.id} (step {ctx.index}) names "
                    f"{ev.input}, but the pending barrier is {words.row(b)}",
                )
            else:
                self.settled_at[sh.id] = ctx.index

    def end(self, ctx: StepCtx) -> None:
        # settled_at serves later events of the same step only: empty between
        # steps, so that it holds no history (the explorer's merge key).
        self.settled_at.clear()
        # barrier-lifetime on the views: a compaction row appears only by its
        # admission and leaves only when its compaction ends or fails.
        sessions = self.touched
        for sid, which, _, _ in ctx.view_changes:
            if which == "pending":
                sessions.add(sid)
        for e in ctx.step.observed.events:
            if e.type == "revert_committed":
                sessions.update(ctx.by_session)
                break
        for sid in sessions:
            sh = self.t.sessions.get(sid)
            if sh is None:
                continue
            rows = []  # (a loop: a comprehension is a call of its own in Python 3.11)
            for v in sh.view_pending:
                if v.type == "compaction":
                    rows.append(v)
            if not rows and sh.barrier is None:
                continue  # no barrier, none shown: nothing to judge
            if len(rows) > 1:
                self.env.fail(
                    SINGLE,
                    (ctx.index,),
                    f"the pending inbox of {sid} shows {len(rows)} compaction barriers "
                    f"{words.ids([v.input for v in rows])} at step {ctx.index}",
                )
            self._lifetime(ctx, sh, set(map(INPUT_OF, rows)))
        if sessions:
            self.touched = set()

    def _lifetime(self, ctx: StepCtx, sh: SessionShadow, shown: set[str]) -> None:
        b: Row | None = sh.barrier
        if b is not None:
            self.env.hit(LIFETIME)
        if b is not None and b.input not in shown:
            self.env.fail(
                LIFETIME,
                (b.step, ctx.index),
                f"{words.row(b)} left the pending inbox of {sh.id} by step {ctx.index} without its "
                "manual compaction ending or failing",
            )
        for x in shown:
            if b is None or x != b.input:
                self.env.fail(
                    LIFETIME,
                    (ctx.index,),
                    f"compaction barrier {x} is in the pending inbox of {sh.id} at step "
                    f"{ctx.index} without a pending compaction admission",
                )


class CoalesceChecker(Checker):
    """Spec 4.12: compact while a barrier exists returns that barrier and
    appends nothing (under ``abandoned_compaction = "settle"``, unless the
    request first settled that barrier as abandoned)."""

    ids = (COALESCES,)
    step_scoped = ("barrier",)
    ops = (Compact,)
    answered = True

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.barrier: Row | None = None

    def begin(self, ctx: StepCtx) -> None:
        sh = self.t.sessions.get(ctx.session or "")
        self.barrier = sh.barrier if sh is not None else None

    def end(self, ctx: StepCtx) -> None:
        b = self.barrier
        if b is None or not ctx.ok:
            return
        if self.env.policy.abandoned_compaction == "settle" and any(
            e.type == "compaction_failed" and e.input == b.input for e in ctx.step.observed.events
        ):
            return  # G5: an abandoned barrier is settled first, then a new one admitted
        self.env.hit(COALESCES)
        got = ctx.result.get("input")
        fresh = [x for x, (_, r) in ctx.admitted.items() if r.type == "compaction"]
        if got != b.input or fresh:
            extra = f" and admitted {words.ids(fresh)}" if fresh else ""
            self.env.fail(
                COALESCES,
                (b.step, ctx.index),
                f"compact at step {ctx.index} returned {got}{extra} while {words.row(b)} was "
                "pending: requests coalesce into the existing barrier and append nothing",
            )
