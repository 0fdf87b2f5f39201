"""The runner: executions, the G4 drain loop, promotion at Safe Step Boundaries.

Everything here except the durable writes is volatile (process memory): the
active executions, their open model calls, the doorbell, the step counter and
the drain position. An execution is a Python generator that yields each model
call it opens and receives the harness's answer; so a drain reads like the
spec's pseudo-code, and a restart (a new process) simply begins with none.

Quiescence: every entry point (wake, resume, answer, interrupt) advances the
affected execution until it waits on an open call or has settled.
"""

from __future__ import annotations

import threading
from collections.abc import Generator
from typing import Any

import interleave
from common import MUTANT, AdapterError, crash_now, invalid
from storage import Store

Drain = Generator[dict[str, Any], str, Any]
FINISHES = ("stop", "tool", "error")


class Interrupted(Exception):
    """Thrown into an execution by ``interrupt``."""


class StepFailed(Exception):
    """A step call was answered with ``error``: the execution fails."""


class Execution:
    def __init__(self, sid: str) -> None:
        self.sid = sid
        self.doorbell = False
        self.forced_follow_up = False  # (mutant resume-forces-follow-up)
        self.call: dict[str, Any] | None = None
        self.gen: Drain | None = None


class Runner:
    def __init__(self, store: Store) -> None:
        self._store = store
        self.step_limit = 10
        self.now = 0
        # The failpoint armed by the request this thread serves: a group's
        # members each run in a thread of their own, and only the member that
        # carries ``crash_at`` (and the runner work it does) may reach it.
        self._armed = threading.local()
        self.execs: dict[str, Execution] = {}
        self.waiting: list[str] = []  # (mutant one-session-at-a-time: sessions held back)
        self.calls: dict[str, dict[str, Any]] = {}
        self.call_count = 0
        # One runner serves every session's thread; a session's runner lock
        # does not cover what sessions share: the call counter.
        self.counter_lock = threading.Lock()

    @property
    def failpoint(self) -> str | None:
        point: str | None = getattr(self._armed, "point", None)
        return point

    @failpoint.setter
    def failpoint(self, point: str | None) -> None:
        self._armed.point = point

    @property
    def store(self) -> Store:
        """This thread's connection: a group member's own, or the process's."""
        mine: Store | None = interleave.member_store()
        return mine if mine is not None else self._store

    # --- durable writes of the runner -------------------------------------

    def event(self, sid: str, kind: str, input_id: str | None = None, **data: Any) -> None:
        with self.store.tx():
            self.store.append(sid, kind, self.now, input_id, **data)

    def promote_one(self, row: dict[str, Any], last: bool = False) -> bool:
        """One promotion = one transaction: promoted event, pending row out,
        message in. The boundary read ``row`` earlier, so the transaction
        reads it again: if it is no longer promotable it is skipped, and the
        message is made of the row taken out (a committed revert may have
        ended the lifecycle read and a retry admitted the ID again since)."""
        sid = row["session_id"]
        if MUTANT == "promotion-not-atomic":  # the pending row goes first, the message later
            with self.store.tx():
                seq = self.store.append(sid, "promoted", self.now, row["id"])
                self.store.delete_pending(row["id"])
            self.fire("mid_promotion")
        with self.store.tx():
            if MUTANT not in ("promotion-not-atomic", "race-promote-trusts-batch"):
                current = self.still_promotable(row)
                if current is None:
                    return False
                row = current
            if MUTANT != "promotion-not-atomic":
                seq = self.store.append(sid, "promoted", self.now, row["id"])
            if MUTANT == "race-boundary-clears-steers" and last and row["delivery"] == "steer":
                # the batch was every pending steer: clear them (by session, not by ID)
                self.store.db.execute(
                    "DELETE FROM session_pending WHERE session_id = ? AND delivery = 'steer'",
                    (sid,),
                )
            elif MUTANT not in ("promotion-not-atomic", "double-promotion-after-crash"):
                self.store.delete_pending(row["id"])
            self.store.insert_message(
                {
                    "id": row["id"],
                    "session_id": sid,
                    "type": row["type"],
                    "seq": seq,
                    "time_created": row["time_created"]
                    if MUTANT == "message-time-is-admission"
                    else self.now,
                    "data": row["data"],
                    "delivery": row["delivery"],
                    "admitted_seq": row["admitted_seq"],
                    "admitted_time": row["time_created"],
                }
            )
        self.fire("mid_promotion")
        return True

    def still_promotable(self, row: dict[str, Any]) -> dict[str, Any] | None:
        """The row as it is now, when still pending with the delivery the
        boundary read (a prompt's committed revert may have removed it since,
        and a retry admitted the ID again, maybe queued) and not held by a
        barrier (one may have been admitted since: under G4 it holds every
        input back); None otherwise."""
        current = self.store.pending_row(row["id"])
        if current is None or current["delivery"] != row["delivery"]:
            return None
        if self.store.barrier(row["session_id"]) is not None and MUTANT != "barrier-ignored":
            return None
        return current

    def settle_barrier(self, barrier: dict[str, Any], kind: str, **data: Any) -> None:
        """Compaction ended or failed: the event and the barrier's removal, together."""
        with self.store.tx():
            self.store.append(
                barrier["session_id"], kind, self.now, barrier["id"], reason="manual", **data
            )
            self.store.delete_pending(barrier["id"])

    def fire(self, point: str) -> None:
        if self.failpoint == point:
            crash_now(point)

    # --- promotion ---------------------------------------------------------------

    def promotable(self, sid: str) -> bool:
        if self.store.barrier(sid) is not None and MUTANT != "barrier-ignored":
            return False
        return any(r["type"] != "compaction" for r in self.store.pending(sid))

    def promote(self, sid: str, scope: str) -> int:
        """G4 ``promote(session, scope)``: returns how many inputs became visible."""
        with self.store.snapshot():  # the boundary's read: the barrier and the batch at one moment
            batch, reread = self.batch(sid, scope)
        count = self.promote_batch(batch)
        if reread:  # queued input went first: the steers admitted meanwhile follow it
            batch = self.store.steers(sid)
            if MUTANT == "one-steer-per-boundary":
                batch = batch[:1]
            count += self.promote_batch(batch)
        return count

    def batch(self, sid: str, scope: str) -> tuple[list[dict[str, Any]], bool]:
        """The boundary's batch, and whether it is queued input (then a reread follows)."""
        if self.store.barrier(sid) is not None and MUTANT != "barrier-ignored":
            return [], False
        if MUTANT == "steer-waits-for-idle" and scope == "steer":
            return [], False
        if MUTANT == "admission-order-ignores-delivery" and scope == "input":
            return [r for r in self.store.pending(sid) if r["type"] != "compaction"], False
        batch = self.store.steers(sid)
        if MUTANT == "one-steer-per-boundary":
            batch = batch[:1]
        if batch or not (scope == "input" or MUTANT == "queue-promotes-mid-turn"):
            return batch, False
        queued = self.store.oldest_queued(sid)
        if queued is None:
            return [], False
        if MUTANT == "queue-batch":
            return [r for r in self.store.pending(sid) if r["delivery"] == "queue"], True
        return [queued], True

    def promote_batch(self, rows: list[dict[str, Any]]) -> int:
        count = 0
        for i, row in enumerate(rows):
            count += self.promote_one(row, last=i == len(rows) - 1)
        self._settle_batch(rows)
        return count

    def _settle_batch(self, rows: list[dict[str, Any]]) -> None:
        """(Mutant double-promotion-after-crash: the batch's pending rows go at its end.)"""
        if MUTANT == "double-promotion-after-crash" and rows:
            with self.store.tx():
                for row in rows:
                    self.store.delete_pending(row["id"])

    # --- calls ------------------------------------------------------------------------

    def open_call(
        self,
        ex: Execution,
        kind: str,
        step: int,
        final: bool,
        event: str,
        input_id: str | None,
        data: dict[str, Any],
    ) -> dict[str, Any]:
        """A model call opens: its event (``step_started``, ``compaction_started``)
        and its context (the transcript now) in one transaction, so a revert
        another request commits lands before both or after both."""
        if MUTANT == "race-call-counter-unlocked":  # counted, and read back after the write
            self.call_count += 1
        else:
            with self.counter_lock:
                self.call_count += 1
                number = self.call_count
        with self.store.tx():
            self.store.append(ex.sid, event, self.now, input_id, **data)
            context = [
                m["id"] for m in self.store.messages(ex.sid) if m["type"] in ("user", "synthetic")
            ]
        if MUTANT == "race-call-counter-unlocked":
            number = self.call_count
        return {
            "call": f"sq_call_{self.store.boot}_{number}",
            "session": ex.sid,
            "kind": kind,
            "step": step,
            "final": final,
            "context": context,
        }

    def step_call(self, ex: Execution, step: int, final: bool) -> Drain:
        data = {"step": step, "final": final}
        call = self.open_call(ex, "step", step, final, "step_started", None, data)
        try:
            finish = yield call
        except Interrupted:
            self.event(ex.sid, "step_failed", step=step, error="Step interrupted")
            raise
        if finish == "error" and MUTANT == "error-as-stop":  # a failed call read as a reply
            finish = "stop"
        if finish == "error":
            self.event(ex.sid, "step_failed", step=step, error="model call failed")
            raise StepFailed("model call failed")
        if finish == "tool" and final and MUTANT != "tool-on-final-continues":
            finish = "stop"
        self.event(ex.sid, "step_ended", step=step, finish=finish)
        return finish

    def run_pending_compaction(self, ex: Execution) -> Drain:
        barrier = self.store.barrier(ex.sid)
        if barrier is None:
            return
        started = {"reason": "manual"}
        call = self.open_call(
            ex, "compaction", 0, False, "compaction_started", barrier["id"], started
        )
        try:
            finish = yield call
        except Interrupted:
            if MUTANT != "interrupt-keeps-barrier":  # (the mutant leaves it unsettled)
                self.settle_barrier(barrier, "compaction_failed", error="Compaction cancelled")
            raise
        if finish == "error":
            if MUTANT == "barrier-kept-on-error":  # the failure is logged, the barrier stays
                self.event(
                    ex.sid,
                    "compaction_failed",
                    barrier["id"],
                    reason="manual",
                    error="compaction call failed",
                )
                return
            self.settle_barrier(barrier, "compaction_failed", error="compaction call failed")
            if MUTANT == "compaction-error-ends-drain":
                raise StepFailed("compaction call failed")
        else:
            self.settle_barrier(barrier, "compaction_ended")

    # --- the drain loop ------------------------------------------------------------

    def run_steps(self, ex: Execution) -> Drain:
        step, scope = 1, "input"
        while True:
            if MUTANT == "promotion-listener-before-commit":  # notified before the commit
                self.fire("after_promotion")
            if self.promote(ex.sid, scope) > 0 and MUTANT != "no-step-reset":
                step = 1
            self.fire("after_promotion")
            final = step >= self.step_limit - (1 if MUTANT == "final-off-by-one" else 0)
            finish = yield from self.step_call(ex, step, final)
            if MUTANT != "compaction-only-at-drain-start":  # (the mutant skips this check)
                yield from self.run_pending_compaction(ex)
            if finish != "tool" and not self.store.steers(ex.sid):
                return
            step, scope = step + 1, "steer"

    def drain(self, ex: Execution, force: bool) -> Drain:
        if not force and not self.store.pending(ex.sid):
            return
        if MUTANT != "barrier-ignored":  # (the mutant runs the compaction only after a step)
            yield from self.run_pending_compaction(ex)
        if not force and not self.promotable(ex.sid):
            return
        while True:
            yield from self.run_steps(ex)
            if not self.promotable(ex.sid):
                return

    def execution(self, ex: Execution, force: bool) -> Drain:
        self.event(ex.sid, "execution_started")
        try:
            while True:
                ex.doorbell = False
                yield from self.drain(ex, force)
                if not ex.doorbell:
                    break
                if MUTANT == "terminal-per-drain":  # each drain settles the execution
                    self.event(ex.sid, "execution_succeeded")
                # the follow-up runs like a resume (mutants)
                force = MUTANT == "follow-up-drain-forced" or ex.forced_follow_up
        except StepFailed as failed:
            self.event(ex.sid, "execution_failed", error=str(failed))
            return "failed"
        except Interrupted:
            self.event(ex.sid, "execution_interrupted", reason="user")
            return "interrupted"
        self.event(ex.sid, "execution_succeeded")
        return "succeeded"

    # --- driving executions (quiescence) ------------------------------------------

    def start(self, sid: str, force: bool) -> None:
        ex = Execution(sid)
        ex.gen = self.execution(ex, force)
        self.execs[sid] = ex
        self.advance(ex, lambda gen: next(gen))

    def advance(self, ex: Execution, step: Any) -> None:
        """Run the execution until it opens a call or settles."""
        assert ex.gen is not None
        try:
            call = step(ex.gen)
        except StopIteration as stop:
            if not (MUTANT == "ended-execution-kept" and stop.value != "succeeded"):
                self.execs.pop(ex.sid, None)  # (the mutant keeps a failed or interrupted one)
            if stop.value == "failed" and ex.doorbell and MUTANT != "doorbell-dropped-on-failure":
                self.wake(ex.sid)
            if MUTANT == "one-session-at-a-time" and self.waiting and not self.execs:
                self.start(self.waiting.pop(0), force=False)
            return
        ex.call = call
        self.calls[call["call"]] = call

    def wake(self, sid: str) -> None:
        """Advisory wake: ring the doorbell of an active execution, or start an unforced one."""
        if MUTANT == "race-wake-without-runner-lock":  # a flag, so no lock to ring it
            active = self.execs.get(sid)
            if active is not None:
                active.doorbell = True
                return
        with interleave.holding("runner", ("runner", sid)):
            self._wake(sid)

    def _wake(self, sid: str) -> None:
        active = self.execs.get(sid)
        if active is not None:
            active.doorbell = True
            if MUTANT == "steer-promotes-mid-step" and active.call is not None:
                if active.call["kind"] == "step":  # visible at once, not at the next boundary
                    self.promote(sid, "steer")
            return
        if not self.store.pending(sid):
            return
        if MUTANT == "one-session-at-a-time" and self.execs:  # one runner for all sessions
            if sid not in self.waiting:
                self.waiting.append(sid)
            return
        self.start(sid, force=False)

    def resume(self, sid: str) -> None:
        """Forced drain, or join the active execution."""
        if MUTANT == "resume-as-wake":
            self.wake(sid)
            return
        idle = sid not in self.execs
        with interleave.holding("runner", ("runner", sid)):
            if MUTANT != "race-resume-check-outside-lock":  # (the mutant trusts its early look)
                idle = sid not in self.execs
            if idle:
                self.start(sid, force=True)
            elif MUTANT == "resume-forces-follow-up":  # joined, but as a forced follow-up drain
                self.execs[sid].doorbell = True
                self.execs[sid].forced_follow_up = True

    def answer(self, call_id: Any, finish: Any) -> None:
        call = self.calls.get(call_id) if isinstance(call_id, str) else None
        if call is None:  # (one lookup: a racing answer or interrupt may take it meanwhile)
            raise invalid(f"call {call_id} is not open")
        if finish not in FINISHES:
            raise invalid("finish must be stop, tool or error")
        sid = call["session"]
        with interleave.holding("runner", ("runner", sid)):
            if call_id not in self.calls:  # an interrupt took it meanwhile
                raise invalid(f"call {call_id} is not open")
            self.calls.pop(call_id)
            ex = self.execs[sid]
            ex.call = None
            self.advance(ex, lambda gen: gen.send(finish))

    def interrupt(self, sid: str) -> bool:
        taken = None
        if MUTANT == "race-interrupt-pops-before-lock":  # off the running table, then cancelled
            taken = self.execs.pop(sid, None)
        with interleave.holding("runner", ("runner", sid)):
            return self._interrupt(sid, taken)

    def _interrupt(self, sid: str, taken: Execution | None) -> bool:
        ex = taken if MUTANT == "race-interrupt-pops-before-lock" else self.execs.get(sid)
        if ex is None:
            if MUTANT == "idle-interrupt-appends":
                self.event(sid, "execution_interrupted", reason="user")
            return False
        if MUTANT == "interrupt-clears-inbox":
            with self.store.tx():
                self.store.db.execute(
                    "DELETE FROM session_pending WHERE session_id = ? AND type != 'compaction'",
                    (sid,),
                )
        rung, ex.doorbell = ex.doorbell, False
        if ex.call is not None:
            if MUTANT != "interrupt-leaves-call-open":  # (the mutant leaves it listed)
                self.calls.pop(ex.call["call"], None)
            ex.call = None
        self.advance(ex, lambda gen: gen.throw(Interrupted()))
        if MUTANT == "interrupt-keeps-doorbell" and rung:  # a wake rung before it survives
            self.wake(sid)
        return True

    def open_calls(self) -> list[dict[str, Any]]:
        return list(self.calls.values())


def check_failpoint(point: Any) -> str | None:
    if point is None:
        return None
    if point not in ("after_admit", "mid_promotion", "after_promotion"):
        raise AdapterError("invalid_request", f"unknown failpoint {point}")
    return str(point)
