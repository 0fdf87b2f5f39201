"""The durable log and what it must explain: replay reproduces the observed
pending inbox and transcript and a restart starts nothing (spec 4.30), and
no admitted input is ever silently lost or duplicated, crashes included (the
seed).

What spec 4.30 asks, "replaying E into an empty store reproduces P and M
exactly and triggers no wake or model call", is judged in the two halves
the protocol shows: the views a target shows are, at every observation, the
fold of its own log by the protocol's rules (``ReplayChecker``: IDs, seqs,
types, deliveries, times; payloads are not in the views), and a restart,
which rebuilds the process from the same durable state, wakes nothing
(``RestartChecker``). The protocol cannot load a log into a fresh store, and
event data is free-form, so a target's log is never fed to the model's
projectors (the registry's unobservable list says so).
"""

from __future__ import annotations

from operator import attrgetter

from ..model.ops import Compact, CrashOp, Hello, Prompt, Synthetic
from . import words
from .base import EVENTS, VIEWS, Checker
from .tracker import INPUT_OF, Msg, Row, SessionShadow, StepCtx

REPLAY = "replay-matches-views"
RESTART = "replay-starts-nothing"
DURABLE = "durability"


_ID = attrgetter("id")
"""A message's ID (mapped over a view, as :data:`~.tracker.INPUT_OF`)."""


class ReplayChecker(Checker):
    """Folding the durable log (events in seq order) gives exactly the
    pending inbox and transcript the target shows."""

    ids = (REPLAY,)
    moved_only = True
    moves = EVENTS | VIEWS  # a log or a view moved

    def end(self, ctx: StepCtx) -> None:
        sessions = self.t.sessions
        for sid in ctx.sessions_moved:
            sh = sessions.get(sid)
            if sh is not None:
                self.env.hit(REPLAY)
                if sh.pending or sh.view_pending:
                    self._pending(ctx, sh)
                if sh.visible or sh.view_transcript:
                    self._transcript(ctx, sh)

    def _pending(self, ctx: StepCtx, sh: SessionShadow) -> None:
        view = sh.view_pending
        if len(sh.pending) == len(view):
            for r, v in zip(sh.pending.values(), view, strict=True):
                if (
                    r.input != v.input
                    or r.type != v.type
                    or r.delivery != v.delivery
                    or r.seq != v.admitted_seq
                    or r.time != v.time
                ):
                    break
            else:
                return
        rows = list(sh.pending.values())
        replayed = [f"{r.input}@{r.seq}" for r in rows]
        shown = [f"{v.input}@{v.admitted_seq}" for v in view]
        self.env.fail(
            REPLAY,
            (ctx.index,) + tuple(r.step for r in rows if r.input not in {v.input for v in view}),
            f"at step {ctx.index} the pending inbox of {sh.id} shows {words.ids(shown)} but "
            f"replaying its durable log gives {words.ids(replayed)}{_first_diff(rows, view)}",
        )

    def _transcript(self, ctx: StepCtx, sh: SessionShadow) -> None:
        view = sh.view_transcript
        admission_time = self.policy.visible_time == "admission"
        if len(sh.visible) == len(view):
            for m, v in zip(sh.visible.values(), view, strict=True):
                if m.id != v.id or m.seq != v.seq or m.type != v.type:
                    break
                row = m.row  # the time it must show: _visible_time's, written out
                if row is not None and v.time != (row.time if admission_time else m.time):
                    break
            else:
                return
        msgs = list(sh.visible.values())
        replayed = [f"{m.id}@{m.seq}" for m in msgs]
        shown = [f"{v.id}@{v.seq}" for v in view]
        detail = ""
        stamp = "admission" if admission_time else "promotion"
        for m, v in zip(msgs, view, strict=False):
            want = _visible_time(m, admission_time)
            if m.id == v.id and m.seq == v.seq and want is not None and v.time != want:
                detail = f"; {m.id} shows time {v.time} but its {stamp} was at {want}"
                break
        self.env.fail(
            REPLAY,
            (ctx.index,),
            f"at step {ctx.index} the transcript of {sh.id} shows {words.ids(shown)} but replaying "
            f"its durable log gives {words.ids(replayed)}{detail}",
        )


def _visible_time(m: Msg, admission_time: bool) -> int | None:
    """The time a promoted message must show under the policy's
    ``visible_time``; ``None`` for a fork's copy (its time is the original's)."""
    if m.row is None:
        return None
    return m.row.time if admission_time else m.time


def _first_diff(rows: list[Row], view: tuple[object, ...]) -> str:
    shown = {getattr(v, "input", None): v for v in view}
    for r in rows:
        v = shown.get(r.input)
        if v is None:
            return f"; {words.row(r)} is missing"
        wrong = [
            f"{name} {getattr(v, attr)!r} instead of {want!r}"
            for name, attr, want in (
                ("type", "type", r.type),
                ("delivery", "delivery", r.delivery),
                ("admitted_seq", "admitted_seq", r.seq),
                ("time", "time", r.time),
            )
            if getattr(v, attr) != want
        ]
        if wrong:
            return f"; {words.row(r)} shows {', '.join(wrong)}"
    return ""


class DurabilityChecker(Checker):
    """Every input whose admission was acknowledged, and every input whose
    admission event exists, is at every observation exactly once pending or
    visible in its session, unless a committed revert discarded it (or, for
    a barrier, its compaction ended or failed). Crashes change nothing. (A
    fork's copy acknowledged by a retry judged from the message, under
    ``retry_after_promotion = "message"``, has no admission: it is visible.)"""

    ids = (DURABLE,)
    # a step that moved nothing: only an admitting request's receipt to judge
    still = (Prompt, Synthetic, Compact)
    refused = ()

    def _reconciled_copy(self, session: str, x: str) -> bool:
        if self.env.policy.retry_after_promotion != "message":
            return False
        sh = self.t.sessions.get(session)
        msg = sh.visible.get(x) if sh is not None else None
        return msg is not None and msg.copied_from is not None

    def end(self, ctx: StepCtx) -> None:
        env = self.env
        op = ctx.op
        if ctx.ok and isinstance(op, (Prompt, Synthetic, Compact)):
            env.hit(DURABLE)
            x = ctx.result.get("input") or ""
            life = self.t.lives.get(x)
            if life is None and self._reconciled_copy(ctx.session or "", x):
                return
            if life is None or life.row.session != ctx.session:
                env.fail(
                    DURABLE,
                    (ctx.index,),
                    f"{op.OP} at step {ctx.index} acknowledged input {x} in session {ctx.session}, "
                    "but no admission event for it exists in that session's durable log",
                )
        sessions = self.t.sessions
        for sid in ctx.sessions_moved:  # (none if neither a log nor a view moved)
            sh = sessions.get(sid)
            if sh is not None and (
                sh.pending or sh.visible or sh.view_pending or sh.view_transcript
            ):
                self._session(ctx, sh)

    def _session(self, ctx: StepCtx, sh: SessionShadow) -> None:
        env = self.env
        env.hit(DURABLE)
        once = set(map(INPUT_OF, sh.view_pending))
        once.update(map(_ID, sh.view_transcript))
        if (
            len(once) == len(sh.view_pending) + len(sh.view_transcript)
            and once.issuperset(sh.pending)
            and once.issuperset(sh.visible)
        ):
            return  # each input shown once, every row and message among them
        count: dict[str, int] = {}
        for v in sh.view_pending:
            count[v.input] = count.get(v.input, 0) + 1
        for m in sh.view_transcript:
            count[m.id] = count.get(m.id, 0) + 1
        crash = f" (last crash at step {self.t.last_crash})" if self.t.last_crash >= 0 else ""
        for x, n in count.items():
            if n > 1:
                env.fail(
                    DURABLE,
                    (ctx.index,),
                    f"input {x} appears {n} times in the pending inbox and transcript of {sh.id} "
                    f"at step {ctx.index}{crash}: an input is never duplicated",
                )
        for r in sh.pending.values():
            if r.input not in count:
                life = self.t.lives.get(r.input)
                acked = (
                    f" and acknowledged at step {life.acked_step}"
                    if life and life.acked_step is not None
                    else ""
                )
                env.fail(
                    DURABLE,
                    (r.step, ctx.index, self.t.last_crash),
                    f"{words.row(r)}, admitted at step {r.step}{acked}, is gone from session "
                    f"{sh.id} at step "
                    f"{ctx.index}{crash}: it is neither pending nor visible, and no committed "
                    "revert discarded it",
                )
        for msg in sh.visible.values():
            if msg.row is not None and msg.id not in count:
                env.fail(
                    DURABLE,
                    (msg.row.step, msg.step, ctx.index, self.t.last_crash),
                    f"{words.row(msg.row)}, promoted at step {msg.step}, is gone from the "
                    f"transcript of {sh.id} at step {ctx.index}{crash}, and no committed revert "
                    "discarded it",
                )


class RestartChecker(Checker):
    """Spec 4.30's second half and 3.6 ("replay never wakes"): a crash loses
    every open call, and the restarted process, rebuilt from the durable
    log, starts no execution and opens no call by itself. A kill or the
    ``crash`` operation appends nothing at all, and neither does any
    ``hello`` (the restart's own request). A failpoint crash shows the
    request's durable effects and the restart in one observation: the
    restart's share is judged where it shows, in an open call or an event
    of a session the request did not name."""

    ids = (RESTART,)
    ops = None
    still = refused = (Hello,)  # besides a crash (which moves), only hello

    def end(self, ctx: StepCtx) -> None:
        op = ctx.op
        if not ctx.crashed and not isinstance(op, Hello):
            return
        env = self.env
        env.hit(RESTART)
        if ctx.crashed:
            how = f"a failpoint at {ctx.crash_point}" if ctx.crash_point else "a kill"
            if isinstance(op, CrashOp):
                how = "the crash operation"
        else:
            how = "a restart's hello" if self.t.last_crash >= 0 else "hello"
        events = list(ctx.step.observed.events)
        if ctx.crash_point is not None:
            named = {ctx.session, getattr(op, "child", None)}
            if ctx.answered is not None:
                named.add(ctx.answered.session)
            events = [e for e in events if e.session not in named]
        opened = list(self.t.open.values()) if ctx.crashed else ctx.new_calls
        if not events and not opened:
            return
        listed = ", ".join(f"{e.type} (seq {e.seq} of {e.session})" for e in events[:3])
        if ctx.crashed:
            parts = [f"{listed} {'was' if len(events) == 1 else 'were'} appended"] if events else []
            parts += [f"{words.call(opened[0])} is open"] if opened else []
            what = f"after {how} at step {ctx.index}, {' and '.join(parts)}"
        else:
            parts = [f"appended {listed}"] if events else []
            parts += [f"opened {words.call(opened[0])}"] if opened else []
            what = f"{how} at step {ctx.index} {' and '.join(parts)}"
        env.fail(
            RESTART,
            (ctx.index,),
            f"{what}: a restart replays the durable log and starts nothing (no wake, no model "
            "call)",
        )
