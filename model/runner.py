"""The runner as the harness sees it: wakes, drains, boundaries, model calls.

Theory of operation (spec 3.4-3.8, adapter protocol "Quiescence"). Work runs
synchronously inside the request that made it ready, until every session is
idle or parked at one open model call; answering the call continues it.

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
  pending input stays.
"""

from __future__ import annotations

from .state import Run, Tx
from .store import SessionLog
from .values import Receipt

# --- what is promotable: the barrier and delivery rules --------------------


def _blocked(row: Receipt, barrier: Receipt | None, tx: Tx) -> bool:
    """Is this input held back by the compaction barrier (invariant 10)?"""
    if barrier is None:
        return False
    return tx.policy.barrier_blocks == "all" or row.admitted_seq > barrier.admitted_seq


def _promotable(log: SessionLog, tx: Tx) -> list[Receipt]:
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


# --- wake, resume, drains --------------------------------------------------


def wake(tx: Tx, session: str) -> None:
    run = tx.runs.get(session)
    if run is not None:
        tx.runs[session] = _with_doorbell(run)
    elif tx.log(session).pending:
        _start_execution(tx, session, forced=False)


def resume(tx: Tx, session: str) -> None:
    if session not in tx.runs:
        _start_execution(tx, session, forced=True)


def _with_doorbell(run: Run) -> Run:
    return Run(run.call, run.phase, run.forced, run.step, run.cont, True)


def _execution_event(tx: Tx, session: str, kind: str, data: dict[str, str] | None = None) -> None:
    """An ``execution_*`` event, under a policy that writes them (not G2)."""
    if tx.policy.step_events == "at_call":
        tx.append(session, kind, None, data)


def _start_execution(tx: Tx, session: str, forced: bool) -> None:
    _execution_event(tx, session, "execution_started")
    _start_drain(tx, session, forced, doorbell=False)


def _start_drain(tx: Tx, session: str, forced: bool, doorbell: bool) -> None:
    log = tx.log(session)
    if not forced and not log.pending:
        _drain_done(tx, session, doorbell)
    elif _compaction_due(log, tx):
        _open_compaction(tx, session, "start", forced, 0, False, doorbell)
    else:
        _after_start_compaction(tx, session, forced, doorbell)


def _after_start_compaction(tx: Tx, session: str, forced: bool, doorbell: bool) -> None:
    if forced or _has_promotable(tx.log(session), tx):
        _run_step(tx, session, "input", 1, forced, doorbell)
    else:
        _drain_done(tx, session, doorbell)


def _drain_done(tx: Tx, session: str, doorbell: bool) -> None:
    if doorbell:
        _start_drain(tx, session, forced=False, doorbell=False)
    else:
        _execution_event(tx, session, "execution_succeeded")
        tx.runs.pop(session, None)


# --- boundaries and calls ----------------------------------------------------


def _promote(tx: Tx, session: str, scope: str) -> int:
    """The Safe Step Boundary's promotion (spec 3.4); returns how many."""
    rows = _promotable(tx.log(session), tx)
    steers = [r for r in rows if r.delivery == "steer"]
    if steers or scope == "steer":
        batch = steers[: tx.policy.steer_batch_cap]
    else:
        batch = [r for r in rows if r.delivery == "queue"][:1]
    admission_time = tx.policy.promoted_event_time == "admission"
    for index, row in enumerate(batch):
        tx.append(session, "promoted", row.input, time=row.time if admission_time else None)
        if index == 0:
            tx.reach("mid_promotion")
    return len(batch)


def _run_step(tx: Tx, session: str, scope: str, step: int, forced: bool, doorbell: bool) -> None:
    if _promote(tx, session, scope):
        step = 1
    tx.reach("after_promotion")
    final = step >= tx.step_limit
    call = tx.open_call(session, "step", step, final)
    if tx.policy.step_events == "at_call":
        _step_started(tx, session, step, final)
    tx.runs[session] = Run(call, "step", forced, step, False, doorbell)


def _step_started(tx: Tx, session: str, step: int, final: bool) -> None:
    tx.append(
        session, "step_started", None, f'{{"final":{"true" if final else "false"},"step":{step}}}'
    )


def _open_compaction(
    tx: Tx, session: str, phase: str, forced: bool, step: int, cont: bool, doorbell: bool
) -> None:
    barrier = tx.log(session).barrier()
    assert barrier is not None
    call = tx.open_call(session, "compaction", 0, False)
    tx.append(session, "compaction_started", barrier.input, {"reason": "manual"})
    tx.runs[session] = Run(call, phase, forced, step, cont, doorbell)  # type: ignore[arg-type]


def answer(tx: Tx, run: Run, finish: str) -> None:
    """Settle the open call of ``run`` and run the drain on to quiescence."""
    session = run.call.session
    del tx.runs[session]
    if run.call.kind == "compaction":
        _settle_compaction(tx, session, failed=finish == "error", error="model call failed")
        if run.phase == "start":
            _after_start_compaction(tx, session, run.forced, run.doorbell)
        else:
            _continue(tx, session, run.step, run.cont, run.forced, run.doorbell)
    elif finish == "error":
        if tx.policy.step_events == "on_response":
            _step_started(tx, session, run.step, run.call.final)
        tx.append(session, "step_failed", None, {"step": run.step, "error": "model call failed"})
        _execution_event(tx, session, "execution_failed", {"error": "model call failed"})
        if run.doorbell:
            wake(tx, session)
    else:
        if tx.policy.step_events == "on_response":
            _step_started(tx, session, run.step, run.call.final)
        tx.append(session, "step_ended", None, {"step": run.step, "finish": finish})
        cont = finish == "tool" and not run.call.final
        if _compaction_due(tx.log(session), tx):
            _open_compaction(tx, session, "after_step", run.forced, run.step, cont, run.doorbell)
        else:
            _continue(tx, session, run.step, cont, run.forced, run.doorbell)


def _settle_compaction(tx: Tx, session: str, failed: bool, error: str) -> None:
    barrier = tx.log(session).barrier()
    assert barrier is not None
    if failed:
        tx.append(session, "compaction_failed", barrier.input, {"reason": "manual", "error": error})
    else:
        tx.append(session, "compaction_ended", barrier.input, {"reason": "manual"})


def _continue(tx: Tx, session: str, step: int, cont: bool, forced: bool, doorbell: bool) -> None:
    log = tx.log(session)
    if cont or _has_promotable_steer(log, tx):
        _run_step(tx, session, "steer", step + 1, forced, doorbell)
    elif _has_promotable(log, tx):
        _run_step(tx, session, "input", 1, forced, doorbell)
    else:
        _drain_done(tx, session, doorbell)


def interrupt(tx: Tx, session: str) -> bool:
    """Stop the active execution, keeping every pending input (spec 3.7)."""
    run = tx.runs.pop(session, None)
    if run is None:
        return False
    if run.call.kind == "compaction":
        _settle_compaction(tx, session, failed=True, error="Compaction cancelled")
    elif tx.policy.step_events == "at_call":
        # on_response: the step never started in the log, so it gets no event.
        tx.append(session, "step_failed", None, {"step": run.step, "error": "interrupted"})
    _execution_event(tx, session, "execution_interrupted", {"reason": "user"})
    return True
