"""The aggregate sequence (spec 4.1) and the fork's reserved gap (spec 4.33,
its sequence half)."""

from __future__ import annotations

from ..model.values import Event
from .base import Checker
from .tracker import SessionShadow, StepCtx

SEQ = "seq-contiguous"


class SequenceChecker(Checker):
    ids = (SEQ,)
    events = None  # every event

    def event(self, ctx: StepCtx, ev: Event, sh: SessionShadow) -> None:
        env = self.env
        env.hit(SEQ)
        if sh.n_events == 0:
            if ev.seq != 0:
                env.fail(
                    SEQ,
                    (ctx.index,),
                    f"the first {_where(ev, sh)} has seq {ev.seq}; a session's log starts at seq 0",
                )
            return
        if sh.n_events == 1 and sh.first_forked:
            # The fork reserves the child's sequence up to the parent cutoff:
            # the one legal gap, right after the forked event at seq 0. Where
            # the event names its cutoff, the gap ends exactly there.
            cut = sh.fork_seq
            if cut is not None and ev.seq != max(cut + 1, sh.last_seq + 1):
                env.fail(
                    SEQ,
                    (sh.last_event_step, ctx.index),
                    f"the {_where(ev, sh)} has seq {ev.seq}, but the forked event at seq "
                    f"{sh.last_seq} reserved the sequence up to its cutoff {cut}: the next seq is "
                    f"{max(cut + 1, sh.last_seq + 1)}",
                )
            elif ev.seq <= sh.last_seq:
                env.fail(
                    SEQ,
                    (sh.last_event_step, ctx.index),
                    f"the {_where(ev, sh)} has seq {ev.seq}, not after the forked event at seq "
                    f"{sh.last_seq}",
                )
            return
        if ev.seq != sh.last_seq + 1:
            what = "skips" if ev.seq > sh.last_seq + 1 else "repeats or runs backward from"
            env.fail(
                SEQ,
                (sh.last_event_step, ctx.index),
                f"the {_where(ev, sh)} has seq {ev.seq}, which {what} the previous event's seq "
                f"{sh.last_seq}: the aggregate sequence must grow by exactly one",
            )


def _where(ev: Event, sh: SessionShadow) -> str:
    """The event, in words (for a violation's message only: formatted when
    one is found; this checker sees every event)."""
    return f"{ev.type} event of session {sh.id}"
