"""Liveness, judged only at the end of a run whose liveness phase settled or
hit its bound (the seed): every admitted input that no revert discarded is
promoted exactly once, no session is left with promotable input and no
open call, and every barrier is consumed."""

from __future__ import annotations

from . import words
from .base import Checker

PROMOTED = "live-all-promoted"
STRANDED = "live-no-stranded-input"
BARRIERS = "live-barriers-consumed"


class LivenessChecker(Checker):
    ids = (PROMOTED, STRANDED, BARRIERS)
    ops = ()
    events = ()

    def finish(self, liveness: bool) -> None:
        if not liveness:
            return
        env = self.env
        t = self.t
        last = t.last_index
        for life in t.lives.values():
            r = life.row
            if r.type == "compaction":
                env.hit(BARRIERS)
                if life.state == "pending":
                    env.fail(
                        BARRIERS,
                        (r.step, last),
                        f"{words.row(r)} of session {r.session}, admitted at step {r.step}, was "
                        "never consumed: the run ended with the barrier still pending",
                    )
                continue
            env.hit(PROMOTED)
            if life.state == "pending":
                env.fail(
                    PROMOTED,
                    (r.step, last),
                    f"{words.row(r)} of session {r.session}, admitted at step {r.step}, was "
                    "never promoted by the end of the liveness phase",
                )
            elif life.promotions > 1:
                env.fail(
                    PROMOTED,
                    (r.step, life.promoted_step or last),
                    f"{words.row(r)} (session {r.session}) was promoted {life.promotions} times",
                )
        for sid, sh in t.sessions.items():
            env.hit(STRANDED)
            if not sh.pending:
                continue
            # Input behind a barrier counts: the barrier's compaction is work
            # the session still owes before that input can promote.
            waiting = [r for r in sh.pending.values() if r.type != "compaction"] or list(
                sh.pending.values()
            )
            if sid not in t.open:
                env.fail(
                    STRANDED,
                    (waiting[0].step, last),
                    f"session {sid} ended the run idle with pending {words.row(waiting[0])} and no "
                    "open call",
                )
