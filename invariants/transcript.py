"""The visible transcript: pending input is not history, order is promotion
order, visible time never runs backward, and a model call sees exactly the
transcript (spec 4.5, 4.17; the seed)."""

from __future__ import annotations

from typing import Any

from ..trace.record import MessageView
from . import words
from .base import OPENED, VIEWS, Checker
from .tracker import StepCtx

NOT_HISTORY = "pending-not-history"
ORDER = "transcript-order"
MONOTONIC = "monotonic-visible-time"
CONTEXT = "call-context"

MESSAGE_TYPES = ("user", "synthetic")


class NotHistoryChecker(Checker):
    """Spec 4.5: no ID is pending and visible at once, in any sessions."""

    ids = (NOT_HISTORY,)
    moved_only = True
    moves = VIEWS

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.pending_at: dict[str, str] = {}
        self.visible_at: dict[str, str] = {}

    def end(self, ctx: StepCtx) -> None:
        if not ctx.view_changes:
            return
        fresh: list[tuple[str, str, str]] = []
        for sid, which, old, new in ctx.view_changes:
            index = self.pending_at if which == "pending" else self.visible_at
            for v in old:
                key = v.input if which == "pending" else v.id
                if index.get(key) == sid:
                    del index[key]
            for v in new:
                key = v.input if which == "pending" else v.id
                index[key] = sid
                fresh.append((which, key, sid))
        for which, key, sid in fresh:
            self.env.hit(NOT_HISTORY)
            other = (self.visible_at if which == "pending" else self.pending_at).get(key)
            if other is not None:
                p, v = (sid, other) if which == "pending" else (other, sid)
                self.env.fail(
                    NOT_HISTORY,
                    (ctx.index,),
                    f"input {key} is pending in session {p} and visible in the transcript of "
                    f"session {v} at step {ctx.index}: pending input is not history",
                )
                return


class TranscriptViewChecker(Checker):
    """Spec 4.17 and the seed's two transcript rules, judged on every new
    transcript view: seqs ascend and follow promotion order; visible times
    never run backward."""

    ids = (ORDER, MONOTONIC)
    moved_only = True
    moves = VIEWS

    def end(self, ctx: StepCtx) -> None:
        for sid, which, _, new in ctx.view_changes:
            if which == "transcript" and new:
                self._view(ctx, sid, new)

    def _view(self, ctx: StepCtx, sid: str, view: tuple[MessageView, ...]) -> None:
        env = self.env
        sh = self.t.sessions[sid]
        env.hit(ORDER)
        env.hit(MONOTONIC)
        prev: MessageView | None = None
        prev_promoted = -1
        prev_msg = None
        for m in view:
            shadow = sh.visible.get(m.id)
            if prev is not None:
                if m.seq <= prev.seq:
                    env.fail(
                        ORDER,
                        (ctx.index,),
                        f"the transcript of {sid} at step {ctx.index} lists {m.id} (seq {m.seq}) "
                        f"after {prev.id} (seq {prev.seq}): the transcript is ordered by seq",
                    )
                    return
                if m.time < prev.time:
                    steps = [ctx.index] + [s.step for s in (shadow, prev_msg) if s is not None]
                    env.fail(
                        MONOTONIC,
                        steps,
                        f"in the transcript of {sid} at step {ctx.index}, {m.id} (time {m.time}) "
                        f"follows {prev.id} (time {prev.time}): visible timestamps run backward",
                    )
                    return
            if shadow is not None and shadow.row is not None:
                if shadow.seq < prev_promoted:
                    env.fail(
                        ORDER,
                        (ctx.index, shadow.step),
                        f"the transcript of {sid} at step {ctx.index} lists {m.id} (promoted at "
                        f"seq {shadow.seq}, step {shadow.step}) after a message promoted later: "
                        "transcript order equals promotion order",
                    )
                    return
                prev_promoted = shadow.seq
            prev, prev_msg = m, shadow


class ContextChecker(Checker):
    """The seed: the context a model call carries is the visible transcript
    (user and synthetic messages, in order) at its boundary."""

    ids = (CONTEXT,)
    moved_only = True
    moves = OPENED  # judges the calls opened

    def end(self, ctx: StepCtx) -> None:
        for c in ctx.new_calls:
            self.env.hit(CONTEXT)
            sh = self.t.sessions.get(c.session)
            view = sh.view_transcript if sh is not None else ()
            want = [m.id for m in view if m.type in MESSAGE_TYPES]
            shown = set(want)
            # IDs the harness cannot know (an implementation's assistant
            # messages) are left out; any input ID it knows is judged.
            got = [x for x in c.context if x in shown or x in self.t.lives or x in self.t.owners]
            if got != want:
                missing = [x for x in want if x not in got]
                extra = [x for x in got if x not in shown]
                detail = []
                if missing:
                    detail.append(f"misses {words.ids(missing)}")
                if extra:
                    detail.append(f"carries {words.ids(extra)}, which are not visible")
                if not detail:
                    detail.append(f"lists {words.ids(got)} out of order")
                self.env.fail(
                    CONTEXT,
                    (ctx.index,),
                    f"{words.call(c)} opened at step {ctx.index} {' and '.join(detail)}: its "
                    f"context must equal the transcript {words.ids(want)} at that boundary",
                )
