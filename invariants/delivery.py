"""What a Safe Step Boundary promotes: steers together, queued input one at
a time at idle boundaries, one admission order, background completions at
the next boundary, and the step allowance (spec 4.13-4.16, 4.18; the seed).

A boundary is observed as the promotions of one session in one step and
the step call that follows them (or, without promotions, a step call that
opens). ``P0`` is the pending inbox just before the boundary's first
promotion: what the boundary read. A boundary is a *continuation* boundary
when it follows a step answered ``tool`` on a non-final call.
"""

from __future__ import annotations

from ..model.values import Call
from . import words
from .base import CRASHED, OPENED, PROMOTED, Checker
from .tracker import Row, StepCtx, Tracker

STEER_BATCH = "steer-batch"
IDLE = "idle-boundary"
FIFO = "queue-fifo"
WAITS = "queue-waits-for-idle"
ORDER = "shared-admission-order"
BACKGROUND = "background-completion"
ALLOWANCE = "step-allowance"


BOUNDARY = PROMOTED | OPENED | CRASHED
"""What a step moves when it shows a boundary (:func:`boundaries`; a kill
after promotion is a crash)."""


def boundaries(ctx: StepCtx) -> list[tuple[str, bool]]:
    """The sessions whose boundary a step shows (promotions, a step call
    opened, or a kill after promotion), each with whether it is complete
    (its call opened, or the kill came after the promotions)."""
    after_promotion = ctx.crash_point == "after_promotion"
    if not ctx.promoted and not ctx.new_calls and not after_promotion:
        return []  # most steps: no boundary (two checkers ask, every step)
    sessions = set(ctx.promoted)
    for c in ctx.new_calls:
        if c.kind == "step":
            sessions.add(c.session)
    if after_promotion:
        owner = ctx.answered.session if ctx.answered else ctx.session
        if owner is not None:
            sessions.add(owner)
    found = []  # (a loop: a comprehension is a call of its own in Python 3.11)
    for sid in sessions:
        found.append((sid, after_promotion or ctx.new_step_call(sid) is not None))
    return found


def _where(ctx: StepCtx, sid: str) -> str:
    """The boundary of ``sid`` in this step, in words (for a violation's
    message only: formatted when one is found)."""
    call = ctx.new_step_call(sid)
    return f"the boundary of session {sid} at step {ctx.index}" + (
        f" ({words.call(call)})" if call else ""
    )


def read_and_batch(t: Tracker, ctx: StepCtx, sid: str) -> tuple[list[Row], list[Row]]:
    """What the boundary of ``sid`` read (P0) and the rows it promoted."""
    p0 = ctx.p0.get(sid)
    if p0 is None:
        sh = t.sessions.get(sid)
        p0 = list(sh.pending.values()) if sh else []
    batch = []
    for _, row in ctx.promoted.get(sid, ()):
        if row is not None:
            batch.append(row)
    return p0, batch


def batch_parts(batch: list[Row]) -> tuple[list[str], list[Row]]:
    """A promoted batch's input IDs, in order, and its queued rows."""
    ids = []
    queued = []
    for row in batch:  # one loop for both lists: a boundary holds a row or two
        ids.append(row.input)
        if row.delivery == "queue":
            queued.append(row)
    return ids, queued


class BoundaryContentChecker(Checker):
    """What a boundary promotes given what else was waiting: every steer
    together, one queued input at an idle boundary, queued input never at a
    continuation, background completions at the drain's next boundary. It
    needs the whole boundary and the runner quiescent after it, so a busy
    group member is not judged by it (:class:`AdmissionOrderChecker` is)."""

    ids = (STEER_BATCH, IDLE, WAITS, BACKGROUND)
    moved_only = True
    moves = BOUNDARY
    quiescent = True
    ops = None

    def end(self, ctx: StepCtx) -> None:
        for sid, complete in boundaries(ctx):
            self._boundary(ctx, sid, complete)

    def _boundary(self, ctx: StepCtx, sid: str, complete: bool) -> None:
        env = self.env
        t = self.t
        p0, batch = read_and_batch(t, ctx, sid)
        promotable = t.promotable(p0)
        # (Loops, not comprehensions, here and in AdmissionOrderChecker: a
        # comprehension is a call of its own in Python 3.11, and a boundary holds
        # a row or two.)
        steers: list[Row] = []
        queued: list[Row] = []
        for row in promotable:
            if row.delivery == "steer":
                steers.append(row)
            elif row.delivery == "queue":
                queued.append(row)
        cont = t.continuation(ctx, sid)
        ids, queue_promoted = batch_parts(batch)

        # steer-batch: every promotable steer, together, and nothing else.
        if steers:
            env.hit(STEER_BATCH)
            expected = self._ordered(steers)[: self.policy.steer_batch_cap]
            want = {r.input for r in expected}
            left = [r for r in expected if r.input not in ids] if complete else []
            extra = [r for r in batch if r.input not in want]
            if left or extra:
                parts = []
                if left:
                    parts.append(f"left {', '.join(words.row(r) for r in left)} pending")
                if extra:
                    parts.append(f"also promoted {', '.join(words.row(r) for r in extra)}")
                env.fail(
                    STEER_BATCH,
                    (ctx.index,) + tuple(r.step for r in left + extra),
                    f"{_where(ctx, sid)} {' and '.join(parts)}: steers promote together at the "
                    "next boundary, and only they",
                )

        # idle-boundary: an idle boundary with no steer promotes one queued input.
        if queued and not steers and cont is None:
            env.hit(IDLE)
            if complete and len(batch) != 1:
                env.fail(
                    IDLE,
                    (ctx.index,) + tuple(r.step for r in queued[:1]),
                    f"{_where(ctx, sid)} promoted {words.ids(ids)} while {words.row(queued[0])} "
                    "waited at an idle boundary: queued input promotes exactly one at a time there",
                )
        if len(queue_promoted) > 1:
            env.fail(
                IDLE,
                (ctx.index,),
                f"{_where(ctx, sid)} promoted {len(queue_promoted)} queued inputs "
                f"{words.ids([r.input for r in queue_promoted])}: queued input promotes one at a "
                "time",
            )

        if queued and (cont is not None or steers):
            env.hit(WAITS)
        for q in queue_promoted:
            # queue-waits-for-idle: never at a continuation, never past a steer.
            if cont is not None:
                step, tool_call = cont
                env.fail(
                    WAITS,
                    (q.step, step, ctx.index),
                    f"{words.row(q)} was promoted at step {ctx.index} while the drain still needed "
                    f"continuation after a tool call ({words.call(tool_call)} answered 'tool' at "
                    f"step {step})",
                )
            if steers:
                env.fail(
                    WAITS,
                    (q.step, ctx.index),
                    f"{words.row(q)} was promoted at step {ctx.index} while steer "
                    f"{words.row(steers[0])} was pending: queued input waits for an idle boundary",
                )

        # background-completion: a synthetic steer admitted during an open
        # step reaches the transcript at the drain's next boundary.
        sh = t.sessions.get(sid)
        if sh is not None and sh.bg and complete:
            env.hit(BACKGROUND)
            waiting = {r.input: r for r in promotable}
            for x, (bg_row, admitted_at) in sh.bg.items():
                r = waiting.get(x)
                if r is bg_row and x not in ids:
                    env.fail(
                        BACKGROUND,
                        (admitted_at, ctx.index),
                        f"background completion {words.row(r)}, admitted at step {admitted_at} "
                        "while a step was running, was not promoted at the drain's next boundary "
                        f"(step {ctx.index})",
                    )

    def _ordered(self, rows: list[Row]) -> list[Row]:
        if self.policy.lifecycles == "parallel":
            # Seed candidate C's first draft: prompts before synthetics.
            return sorted(rows, key=lambda r: r.type != "user")
        return rows


class AdmissionOrderChecker(Checker):
    """One admission order at a boundary: its batch promoted in seq order,
    the oldest promotable queued input first, no queued input ahead of an
    older one of the other kind. Each is a fact of the batch and of what the
    boundary read (P0) alone, whatever else ran beside it, so it judges a
    busy group member too (not ``quiescent``)."""

    ids = (FIFO, ORDER)
    moved_only = True
    moves = BOUNDARY
    ops = None

    def end(self, ctx: StepCtx) -> None:
        for sid, _ in boundaries(ctx):
            self._order(ctx, sid)

    def _order(self, ctx: StepCtx, sid: str) -> None:
        env = self.env
        p0, batch = read_and_batch(self.t, ctx, sid)
        promotable = self.t.promotable(p0)
        queued = []
        mixed = False  # rows of more than one kind
        for r in promotable:
            if r.delivery == "queue":
                queued.append(r)
            if r.type != promotable[0].type:
                mixed = True
        ids, queue_promoted = batch_parts(batch)
        # queue-fifo: the oldest promotable queued input goes first.
        for q in queue_promoted:
            if len(queued) > 1:
                env.hit(FIFO)
            oldest = queued[0] if queued else None
            if oldest is not None and oldest.input != q.input:
                env.fail(
                    FIFO,
                    (oldest.step, q.step, ctx.index),
                    f"{words.row(q)} was promoted at step {ctx.index} while the older queued "
                    f"{words.row(oldest)} stayed pending: queued input promotes in admission order",
                )
        # shared-admission-order: prompts and synthetics share one order.
        if mixed or len(batch) > 1:
            env.hit(ORDER)
        for a, b in zip(batch, batch[1:], strict=False):
            if b.seq < a.seq:
                env.fail(
                    ORDER,
                    (a.step, b.step, ctx.index),
                    f"{_where(ctx, sid)} promoted {words.row(a)} before {words.row(b)}: prompt and "
                    "synthetic input share one admission order",
                )
        for q in queue_promoted:
            older = [r for r in queued if r.seq < q.seq and r.type != q.type and r.input not in ids]
            if older:
                env.fail(
                    ORDER,
                    (older[0].step, q.step, ctx.index),
                    f"{words.row(q)} was promoted at step {ctx.index} ahead of the older "
                    f"{words.row(older[0])}: prompt and synthetic input share one admission order",
                )


class AllowanceChecker(Checker):
    """Spec 4.18 and the protocol's call fields: a boundary that promoted
    input opens step 1; otherwise the next step (1 for a new execution);
    ``final`` marks the allowance's last step; a compaction call is step 0."""

    ids = (ALLOWANCE,)
    moved_only = True
    moves = OPENED  # judges the calls opened
    quiescent = True
    ops = None

    def end(self, ctx: StepCtx) -> None:
        for c in ctx.new_calls:
            self._call(ctx, c)

    def _call(self, ctx: StepCtx, c: Call) -> None:
        env = self.env
        env.hit(ALLOWANCE)
        if c.kind == "compaction":
            if c.step != 0 or c.final:
                env.fail(
                    ALLOWANCE,
                    (ctx.index,),
                    f"{words.call(c)} opened at step {ctx.index} with step {c.step}, final "
                    f"{c.final}: a compaction call is step 0 and never final",
                )
            return
        sid = c.session
        sh = self.t.sessions.get(sid)
        promoted = len(ctx.promoted.get(sid, ()))
        fresh = (
            sid not in ctx.calls_before
            or ctx.exec_started.get(sid)
            or (
                ctx.answered is not None
                and ctx.answered.session == sid
                and ctx.answered.kind == "step"
                and ctx.finish == "error"
            )
        )
        prev = None if (fresh or sh is None) else sh.last_step
        if promoted:
            want, why = 1, f"its boundary promoted {promoted} input(s)"
        elif prev is None:
            want, why = 1, "it is the first step of an execution"
        else:
            want, why = prev + 1, f"the previous step was {prev} and nothing was promoted"
        if c.step != want:
            env.fail(
                ALLOWANCE,
                (ctx.index,),
                f"{words.call(c)} opened at step {ctx.index} as step {c.step}, but {why}: it must "
                f"be step {want}",
            )
        limit = self.t.step_limit
        if isinstance(limit, int) and c.final != (c.step >= limit):
            env.fail(
                ALLOWANCE,
                (ctx.index,),
                f"{words.call(c)} opened at step {ctx.index} with final {c.final} at step {c.step} "
                f"of an allowance of {limit}: only the allowance's last step is final",
            )
