"""The runner as the harness sees it: wakes, drains, boundaries, model calls.

Theory of operation (spec 3.4-3.8, adapter protocol "Quiescence").

The runner is asynchronous: a request does its own part (an admission, which
records its wake, an answer settling its call, an interrupt) and the runner
goes on later, in the background, one transition at a time; it takes each
recorded wake (``State.wakes``) as a transition too. Each active execution is either
parked at its one open model call (``State.runs``) or has a next transition
(``State.work``, a :class:`~inboxsim.model.state.Work` whose ``at`` names it).
A transition reads the state when it runs and does one thing:

==========  ==================================================================
``wake``    a wake a request recorded is taken (the rules below): a request
            admits, then wakes; the two are not one step (spec 3.6)
``start``   the execution begins (``execution_started``)
``drain``   the drain's head: a pending manual compaction opens its call, or
            a Safe Step Boundary reads its batch, or the drain is over
``promote`` one input of the batch becomes visible (``promoted``)
``reread``  an idle boundary that promoted queued input reads the steers that
            arrived meanwhile, and promotes them too (spec 3.4 step 4)
``open``    the boundary's step call opens (``step_started`` under G4)
``stepped`` after an answered step: a pending compaction opens its call, or
            the next boundary reads its batch, or the drain is over
``compacted`` after an answered compaction call: likewise
``failed``  the execution ends after a failed step (``execution_failed``)
==========  ==================================================================

A decision (is anything promotable? is a compaction due?) is taken by the
transition that acts on it, so what it read is still true when it acts. A
boundary's read is one transition (spec A6: the read is atomic and the batch
is exactly the inputs admitted before it); its promotions are one transition
each, so an admission may land between them and, being after the read, waits
for the next boundary. A captured input that is no longer promotable when its
turn comes (a committed revert removed it, a barrier now holds it) is skipped.
The failpoints sit between transitions: ``after_admit`` right after a
request's new admission, ``mid_promotion`` after a boundary's first
``promote`` that promoted, ``after_promotion`` before its ``open``.

The rules each transition applies:

- ``wake`` on an idle session starts an execution with an unforced drain, but
  only if some pending row exists; on an active one it rings the doorbell.
  ``resume`` starts a forced drain, or joins the active execution.
- A drain runs a pending manual compaction first (a ``compaction`` call,
  step 0), then, if forced or something is promotable, runs steps: the first
  boundary has scope ``input``, later ones ``steer``. Each Safe Step Boundary
  promotes (scope ``steer``: every pending steer in admission order; scope
  ``input``: all steers if any, else the oldest queued input), resets the step
  to 1 if it promoted anything, and opens one ``step`` call.
- After each answered step a pending compaction runs; then the drain goes on
  while the step needs continuation (``tool`` on a non-final step) or a steer
  is pending, and starts a new run of steps while promotable input remains.
- When a drain ends a rung doorbell gives exactly one follow-up drain; else
  the execution succeeds. ``error`` on a step fails it and the execution (a
  rung doorbell then starts a new execution); on a compaction it fails the
  compaction and the drain goes on.
- ``interrupt`` fails the open call, ends the execution and drops its doorbell;
  pending input stays. An execution woken but not yet begun (``start``) just
  ends: nothing of it was written. A wake recorded but not yet taken is no
  doorbell yet: taken after the interrupt, it starts a successor (spec 3.7).

Run one transition after another as soon as each is enabled and this is the
synchronous runner of the adapter protocol (:func:`quiesce`), which is how
``apply`` runs it.
"""

from __future__ import annotations

from collections.abc import Callable
from json.encoder import encode_basestring

from .state import At, Phase, Run, Tx, Work
from .store import SessionLog
from .values import Receipt

# --- what is promotable: the barrier and delivery rules --------------------


def _blocked(row: Receipt, barrier: Receipt | None, tx: Tx) -> bool:
    """Is this input held back by the compaction barrier (invariant 10)?"""
    if barrier is None:
        return False
    return tx.policy.barrier_blocks == "all" or row.admitted_seq > barrier.admitted_seq


def _promotable(log: SessionLog, tx: Tx) -> list[Receipt]:
    # Open point A12 (spec section 5), decided as G4's runner does it: a
    # staged revert holds nothing back; only a synthetic input's wake is
    # suppressed (``apply._synthetic``). So a synthetic admitted under a
    # staged revert while a step runs is promoted at that drain's next
    # boundary, and the commit then removes it with the rest of the history
    # past the boundary (``tests/test_model_open_points.py``).
    barrier = log.barrier()
    rows = [r for r in log.pending if r.type != "compaction" and not _blocked(r, barrier, tx)]
    if tx.policy.lifecycles == "parallel":
        # Seed candidate C's first draft: each kind keeps its own order and
        # prompts are served before synthetics.
        rows.sort(key=lambda r: r.type != "user")
    return rows


def _has_promotable(log: SessionLog, tx: Tx) -> bool:
    return bool(_promotable(log, tx))


def _has_promotable_steer(log: SessionLog, tx: Tx) -> bool:
    return any(r.delivery == "steer" for r in _promotable(log, tx))


def _compaction_due(log: SessionLog, tx: Tx) -> bool:
    barrier = log.barrier()
    if barrier is None:
        return False
    if tx.policy.barrier_blocks == "after":
        # G5: steers admitted before the barrier are delivered first.
        return not any(
            r.delivery == "steer" and r.admitted_seq < barrier.admitted_seq
            for r in log.pending
            if r.type != "compaction"
        )
    return True


# --- doorbells -------------------------------------------------------------------


def _with_doorbell(run: Run) -> Run:
    return Run(run.call, run.phase, run.forced, run.step, run.cont, True)


# --- what requests do to the runner -------------------------------------------


WAKE = "wake"  # the runner transition that takes a recorded wake


def record_wake(tx: Tx, session: str) -> None:
    """A request's wake: recorded with its admission, taken by the runner
    as a transition of its own (``take_wake``). Admission then wake, as the
    spec has it (3.6), not one atomic step: so an interrupt, or the end of
    the execution, may fall between the two, and a wake taken after an
    interrupt starts a successor (spec 3.7: "wakes recorded during cleanup
    start a successor execution")."""
    tx.wakes.append(session)


def take_wake(tx: Tx, session: str) -> None:
    """The runner takes the oldest wake recorded for ``session``."""
    tx.wakes.remove(session)
    wake(tx, session)


def wake(tx: Tx, session: str) -> None:
    run = tx.runs.get(session)
    work = tx.work.get(session)
    if run is not None:
        tx.runs[session] = _with_doorbell(run)
    elif work is not None:
        tx.work[session] = work._replace(doorbell=True)
    elif tx.log(session).pending:
        _start_execution(tx, session, forced=False)


def resume(tx: Tx, session: str) -> None:
    if session not in tx.runs and session not in tx.work:
        _start_execution(tx, session, forced=True)


def _start_execution(tx: Tx, session: str, forced: bool) -> None:
    tx.work[session] = Work("start", forced, False)


def answer(tx: Tx, run: Run, finish: str) -> None:
    """Settle the open call of ``run``; the runner takes it from there."""
    session = run.call.session
    del tx.runs[session]
    if run.call.kind == "compaction":
        _settle_compaction(tx, session, failed=finish == "error", error="model call failed")
        after = Work("compacted", run.forced, run.doorbell, run.step, run.cont, run.phase)
    elif finish == "error":
        if tx.policy.step_events == "on_response":
            _step_started(tx, session, run.step, run.call.final)
        text = f'{{"error":"model call failed","step":{run.step}}}'
        tx.append(session, "step_failed", None, text)
        after = Work("failed", run.forced, run.doorbell, run.step)
    else:
        if tx.policy.step_events == "on_response":
            _step_started(tx, session, run.step, run.call.final)
        # Canonical text of {"step", "finish"}, written directly (hot path).
        text = f'{{"finish":{encode_basestring(finish)},"step":{run.step}}}'
        tx.append(session, "step_ended", None, text)
        cont = finish == "tool" and not run.call.final
        after = Work("stepped", run.forced, run.doorbell, run.step, cont)
    tx.work[session] = after


def interrupt(tx: Tx, session: str) -> bool:
    """Stop the active execution, keeping every pending input (spec 3.7)."""
    run = tx.runs.pop(session, None)
    work = tx.work.pop(session, None)
    if run is None and work is None:
        return False
    if run is not None and run.call.kind == "compaction":
        _settle_compaction(tx, session, failed=True, error="Compaction cancelled")
    elif run is not None and tx.policy.step_events == "at_call":
        # on_response: the step never started in the log, so it gets no event.
        tx.append(session, "step_failed", None, f'{{"error":"interrupted","step":{run.step}}}')
    if work is None or work.at != "start":
        _execution_event(tx, session, "execution_interrupted", {"reason": "user"})
    return True


# --- the transitions ------------------------------------------------------------


def _execution_event(tx: Tx, session: str, kind: str, data: dict[str, str] | None = None) -> None:
    """An ``execution_*`` event, under a policy that writes them (not G2)."""
    if tx.policy.step_events == "at_call":
        tx.append(session, kind, None, data)


def _start(tx: Tx, session: str, w: Work) -> None:
    _execution_event(tx, session, "execution_started")
    if tx.policy.abandoned_compaction == "settle":
        settle_abandoned(tx, session)
    tx.work[session] = Work("drain", w.forced, w.doorbell)


def settle_abandoned(tx: Tx, session: str) -> None:
    """Settle a compaction a crash cut short as failed (``abandoned_compaction
    = "settle"``): its barrier is pending and its last event is its start. Only
    called where no execution of this session is running it."""
    log = tx.log(session)
    barrier = log.barrier()
    if barrier is None:
        return
    last = [e.type for e in log.events if e.input == barrier.input][-1]
    if last == "compaction_started":
        _settle_compaction(tx, session, failed=True, error="Compaction abandoned")


def _drain(tx: Tx, session: str, w: Work) -> None:
    _start_drain(tx, session, w.forced, w.doorbell)


def _start_drain(tx: Tx, session: str, forced: bool, doorbell: bool) -> None:
    log = tx.log(session)
    if not forced and not log.pending:
        _drain_done(tx, session, doorbell)
    elif _compaction_due(log, tx):
        _open_compaction(tx, session, "start", forced=forced, step=0, cont=False, doorbell=doorbell)
    else:
        _after_start_compaction(tx, session, forced, doorbell)


def _after_start_compaction(tx: Tx, session: str, forced: bool, doorbell: bool) -> None:
    if forced or _has_promotable(tx.log(session), tx):
        _boundary(tx, session, "input", 1, forced, doorbell)
    else:
        _drain_done(tx, session, doorbell)


def _drain_done(tx: Tx, session: str, doorbell: bool) -> None:
    if doorbell:
        _start_drain(tx, session, forced=False, doorbell=False)
    else:
        _execution_event(tx, session, "execution_succeeded")


def _compacted(tx: Tx, session: str, w: Work) -> None:
    if w.phase == "start":
        _after_start_compaction(tx, session, w.forced, w.doorbell)
    else:
        _continue(tx, session, w.step, w.cont, w.forced, w.doorbell)


def _stepped(tx: Tx, session: str, w: Work) -> None:
    if _compaction_due(tx.log(session), tx):
        _open_compaction(
            tx,
            session,
            "after_step",
            forced=w.forced,
            step=w.step,
            cont=w.cont,
            doorbell=w.doorbell,
        )
    else:
        _continue(tx, session, w.step, w.cont, w.forced, w.doorbell)


def _continue(tx: Tx, session: str, step: int, cont: bool, forced: bool, doorbell: bool) -> None:
    log = tx.log(session)
    if cont or _has_promotable_steer(log, tx):
        _boundary(tx, session, "steer", step + 1, forced, doorbell)
    elif _has_promotable(log, tx):
        _boundary(tx, session, "input", 1, forced, doorbell)
    else:
        _drain_done(tx, session, doorbell)


def _failed(tx: Tx, session: str, w: Work) -> None:
    _execution_event(tx, session, "execution_failed", {"error": "model call failed"})
    if w.doorbell:
        wake(tx, session)


# --- boundaries and calls ----------------------------------------------------


def _batch(tx: Tx, session: str, scope: str) -> list[Receipt]:
    """The Safe Step Boundary's read (spec 3.4): the inputs it will promote."""
    rows = _promotable(tx.log(session), tx)
    steers = [r for r in rows if r.delivery == "steer"]
    if steers or scope == "steer":
        return steers[: tx.policy.steer_batch_cap]
    return [r for r in rows if r.delivery == "queue"][:1]


def _boundary(tx: Tx, session: str, scope: str, step: int, forced: bool, doorbell: bool) -> None:
    batch = _batch(tx, session, scope)
    reread = bool(batch) and batch[0].delivery == "queue"
    _promotions(tx, session, forced, doorbell, step, tuple(r.input for r in batch), False, reread)


_work = tuple.__new__  # a Work with every field given (see _promotions)


def _promotions(
    tx: Tx,
    session: str,
    forced: bool,
    doorbell: bool,
    step: int,
    batch: tuple[str, ...],
    promoted: bool,
    reread: bool,
) -> None:
    """The boundary goes on with ``batch`` left to promote."""
    at: At = "promote" if batch else "reread" if reread else "open"
    # Every field given: built as the tuple it is (Work's own __new__ is a
    # Python function around this same call), once per boundary transition.
    tx.work[session] = _work(
        Work, (at, forced, doorbell, step, False, "start", batch, promoted, reread)
    )


def _promote(tx: Tx, session: str, input_id: str) -> bool:
    """Promote one captured input, if it is still promotable (spec 3.4)."""
    log = tx.log(session)
    row = log.pending_row(input_id)
    if row is None or row.type == "compaction" or _blocked(row, log.barrier(), tx):
        return False
    admission_time = tx.policy.promoted_event_time == "admission"
    tx.append(session, "promoted", input_id, time=row.time if admission_time else None)
    return True


def _promote_next(tx: Tx, session: str, w: Work) -> None:
    promoted = _promote(tx, session, w.batch[0])
    if promoted and not w.promoted:
        tx.reach("mid_promotion")
    batch, promoted = w.batch[1:], w.promoted or promoted
    _promotions(tx, session, w.forced, w.doorbell, w.step, batch, promoted, w.reread)


def _reread(tx: Tx, session: str, w: Work) -> None:
    steers = tuple(r.input for r in _batch(tx, session, "steer"))
    _promotions(tx, session, w.forced, w.doorbell, w.step, steers, w.promoted, False)


def _open(tx: Tx, session: str, w: Work) -> None:
    tx.reach("after_promotion")
    # Open point A18 (spec section 5): the runner counts promoted rows, not
    # their types, so a boundary that promotes only synthetic input resets
    # the allowance like a prompt (``test_a_synthetic_steer_joins_an_active_continuation``).
    step = 1 if w.promoted else w.step
    final = step >= tx.step_limit
    call = tx.open_call(session, "step", step, final)
    if tx.policy.step_events == "at_call":
        _step_started(tx, session, step, final)
    tx.runs[session] = Run(call, "step", w.forced, step, False, w.doorbell)


def _step_started(tx: Tx, session: str, step: int, final: bool) -> None:
    tx.append(
        session, "step_started", None, f'{{"final":{"true" if final else "false"},"step":{step}}}'
    )


def _open_compaction(
    tx: Tx, session: str, phase: Phase, *, forced: bool, step: int, cont: bool, doorbell: bool
) -> None:
    barrier = tx.log(session).barrier()
    assert barrier is not None
    if tx.policy.empty_compaction == "fail" and not tx.log(session).transcript:
        # G5: "Nothing to compact yet"; no call, and the drain goes on as
        # after a failed compaction call.
        _settle_compaction(tx, session, failed=True, error="Nothing to compact yet")
        tx.work[session] = Work("compacted", forced, doorbell, step, cont, phase)
        return
    call = tx.open_call(session, "compaction", 0, False)
    tx.append(session, "compaction_started", barrier.input, '{"reason":"manual"}')
    tx.runs[session] = Run(call, phase, forced, step, cont, doorbell)


def _settle_compaction(tx: Tx, session: str, failed: bool, error: str) -> None:
    barrier = tx.log(session).barrier()
    assert barrier is not None
    if failed:
        tx.append(session, "compaction_failed", barrier.input, {"reason": "manual", "error": error})
    else:
        tx.append(session, "compaction_ended", barrier.input, '{"reason":"manual"}')


# --- running the transitions ----------------------------------------------------------

_TRANSITIONS: dict[str, Callable[[Tx, str, Work], None]] = {
    "start": _start,
    "drain": _drain,
    "promote": _promote_next,
    "reread": _reread,
    "open": _open,
    "compacted": _compacted,
    "stepped": _stepped,
    "failed": _failed,
}


def advance(tx: Tx, session: str) -> None:
    """Run the session's next runner transition. The execution leaves
    ``work`` first: a transition that puts it nowhere has ended it."""
    w = tx.work.pop(session)
    _TRANSITIONS[w.at](tx, session, w)


def quiesce(tx: Tx) -> None:
    """Run transitions until every session is idle or parked at a call; the
    request's wakes first (taken at once, as a synchronous runner does)."""
    while tx.wakes:
        take_wake(tx, tx.wakes[0])
    while tx.work:
        advance(tx, min(tx.work))
