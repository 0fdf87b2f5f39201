"""Planted bugs: the model with one bug patched in, driven through the real
pipeline (the random driver over ``ModelTarget``), and judged as g4.

Most invariants hold under every policy preset, so only a planted bug can
make them fire through the pipeline (the registry's ``planted_bug`` says
which kind). These mutants of the reference model show each such invariant
firing on realistic traces, not only on hand-edited ones; the SQLite mutant
catalogue (``inboxsim.conformance.mutants``) does the same for a real
implementation.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from typing import Any

import pytest

from inboxsim.invariants import REGISTRY, Monitor, Violation
from inboxsim.model import (
    G4,
    Hello,
    Policy,
    Prompt,
    RevertClear,
    RevertCommit,
    Synthetic,
    inbox,
    runner,
    store,
)
from inboxsim.model.state import State, Tx
from inboxsim.model.values import Err, Message, Ok, canonical_json, parse_json
from inboxsim.targets import target as target_mod
from inboxsim.trace.record import MessageView
from tests.invariant_driver import random_run
from tests.mutant_helpers import ids_freed_for_everyone

apply_mod = importlib.import_module(
    "inboxsim.model.apply"
)  # the package exports apply() by that name

Patch = Callable[[pytest.MonkeyPatch], Policy | None]
MUTANTS: dict[str, tuple[Patch, tuple[str, ...]]] = {}


def mutant(*fires: str) -> Callable[[Patch], Patch]:
    def register(fn: Patch) -> Patch:
        for invariant in fires:
            assert invariant in REGISTRY, invariant
        MUTANTS[fn.__name__] = (fn, fires)
        return fn

    return register


# --- promotion and delivery ---------------------------------------------------------


@mutant("steer-batch")
def one_steer_per_boundary(mp: pytest.MonkeyPatch) -> Policy:
    return dataclasses.replace(G4, steer_batch_cap=1)


@mutant("queue-waits-for-idle", "idle-boundary")
def queue_promotes_like_steer(mp: pytest.MonkeyPatch) -> None:
    def _batch(tx: Tx, session: str, scope: str) -> list[Any]:
        return runner._promotable(tx.log(session), tx)

    mp.setattr(runner, "_batch", _batch)


@mutant("background-completion")
def synthetic_waits_for_idle(mp: pytest.MonkeyPatch) -> None:
    original = runner._promotable

    def _promotable(log: Any, tx: Tx) -> list[Any]:
        rows = original(log, tx)
        if tx.runs.get(log.id) is not None or any(e.type == "step_ended" for e in tx.events):
            return [r for r in rows if r.type != "synthetic"]  # only an idle boundary takes them
        return rows

    mp.setattr(runner, "_promotable", _promotable)


@mutant("barrier-blocks-promotion", "barrier-holds-later-input")
def barrier_ignored(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(runner, "_blocked", lambda row, barrier, tx: False)
    original = runner._compaction_due
    mp.setattr(
        runner,
        "_compaction_due",
        lambda log, tx: original(log, tx) and not runner._has_promotable(log, tx),
    )


@mutant("step-allowance")
def no_step_reset(mp: pytest.MonkeyPatch) -> None:
    original = runner._promote
    mp.setattr(runner, "_promote", lambda tx, session, x: original(tx, session, x) and False)


@mutant("promoted-once", "promotion-atomic")
def promotion_keeps_the_row(mp: pytest.MonkeyPatch) -> None:
    original = store._PROJECTORS["promoted"]

    def _promoted(log: Any, event: Any, policy: Policy) -> Any:
        _, transcript, revert, fork_seq = original(log, event, policy)
        return log.pending, transcript, revert, fork_seq

    mp.setitem(store._PROJECTORS, "promoted", _promoted)


@mutant("promotion-after-admission")
def stale_promotion_after_revert(mp: pytest.MonkeyPatch) -> None:
    discarded: list[tuple[str, str]] = []
    committed = store._PROJECTORS["revert_committed"]
    promoted = store._PROJECTORS["promoted"]

    def _revert_committed(log: Any, event: Any, policy: Policy) -> Any:
        out = committed(log, event, policy)
        kept = {r.input for r in out[0]}
        discarded.extend((log.id, r.input) for r in log.pending if r.input not in kept)
        return out

    def _promoted(log: Any, event: Any, policy: Policy) -> Any:
        if log.pending_row(event.input) is None:  # a stale ID: write the message anyway
            msg = Message(event.input, "user", event.seq, event.time, "{}")
            return log.pending, log.transcript + (msg,), log.revert, log.fork_seq
        return promoted(log, event, policy)

    original = runner._promote

    def _promote(tx: Tx, session: str, input_id: str) -> bool:
        promoted = original(tx, session, input_id)
        stale = [x for s, x in discarded if s == session and tx.log(session).message(x) is None]
        if promoted and stale:
            discarded.remove((session, stale[0]))
            tx.append(session, "promoted", stale[0])
        return promoted

    mp.setitem(store._PROJECTORS, "revert_committed", _revert_committed)
    mp.setitem(store._PROJECTORS, "promoted", _promoted)
    mp.setattr(runner, "_promote", _promote)


@mutant("promotion-at-boundary")
def synthetic_promotes_on_admission(mp: pytest.MonkeyPatch) -> None:
    original = apply_mod._HANDLERS[Synthetic]

    def _synthetic(tx: Tx, op: Synthetic) -> Ok:
        result: Ok = original(tx, op)  # the receipt (its wire text written at once)
        input_id = result.result["input"]
        if op.session in tx.runs and tx.log(op.session).pending_row(input_id) is not None:
            tx.append(op.session, "promoted", input_id)
        return result

    mp.setitem(apply_mod._HANDLERS, Synthetic, _synthetic)


@mutant("call-context")
def stale_context(mp: pytest.MonkeyPatch) -> None:
    original = Tx.open_call

    def open_call(self: Tx, session: str, kind: Any, step: int, final: bool) -> Any:
        call = original(self, session, kind, step, final)
        return dataclasses.replace(call, context=call.context[:-1])

    mp.setattr(Tx, "open_call", open_call)


# --- admission and retries ------------------------------------------------------------


@mutant("retry-silent", "admission-fresh-id")
def retry_admits_again(mp: pytest.MonkeyPatch) -> None:
    original = inbox._judge

    def _judge(tx: Tx, record: Any, data: str, delivery: str, conflict: Any) -> Any:
        found = original(tx, record, data, delivery, conflict)
        if tx.log(record.session).pending_row(record.input) is not None:
            body = {
                "type": record.type,
                "data": parse_json(record.data),
                "delivery": record.delivery,
            }
            tx.append(record.session, "admitted", record.input, body)
        return found

    mp.setattr(inbox, "_judge", _judge)


@mutant("conflict-rejected")
def retry_compares_text_only(mp: pytest.MonkeyPatch) -> None:
    def _judge(tx: Tx, record: Any, data: str, delivery: str, conflict: Any) -> Any:
        if parse_json(record.data)["text"] == parse_json(data)["text"]:
            return record
        raise conflict

    mp.setattr(inbox, "_judge", _judge)


@mutant("id-namespace", "admission-fresh-id")
def per_session_ids(mp: pytest.MonkeyPatch) -> None:
    original = inbox.admit

    def admit(tx: Tx, op: Any) -> Any:
        owner = tx.store.owners.get(op.input or "")
        if owner is not None and owner.session != op.session:
            log = tx.session(op.session)
            data = canonical_json(op.payload())
            kind = "user" if isinstance(op, Prompt) else "synthetic"
            return inbox._admit_new(tx, log, op.input, kind, data, op.delivery or "steer")
        return original(tx, op)

    mp.setattr(inbox, "admit", admit)


mutant("id-namespace", "admission-fresh-id")(ids_freed_for_everyone)


@mutant("omitted-id-new-input")
def ids_from_content(mp: pytest.MonkeyPatch) -> None:
    original = inbox.admit
    mp.setattr(
        inbox,
        "admit",
        lambda tx, op: original(
            tx, op if op.input is not None else dataclasses.replace(op, input=f"h-{op.text}")
        ),
    )


@mutant("receipt-reflects-request")
def metadata_dropped(mp: pytest.MonkeyPatch) -> None:
    original = inbox._admit_new

    def _admit_new(tx: Tx, log: Any, input_id: str, kind: str, data: str, delivery: str) -> Any:
        return original(
            tx, log, input_id, kind, canonical_json({**parse_json(data), "metadata": {}}), delivery
        )

    mp.setattr(inbox, "_admit_new", _admit_new)


@mutant("admission-projects-row", "replay-matches-views")
def row_stamped_late(mp: pytest.MonkeyPatch) -> None:
    original = store._PROJECTORS["admitted"]

    def _admitted(log: Any, event: Any, policy: Policy) -> Any:
        pending, *rest = original(log, event, policy)
        last = dataclasses.replace(pending[-1], time=pending[-1].time + 1)
        return (pending[:-1] + (last,), *rest)

    mp.setitem(store._PROJECTORS, "admitted", _admitted)


@mutant("admission-before-wake")
def wake_before_admission(mp: pytest.MonkeyPatch) -> None:
    def _prompt(tx: Tx, op: Prompt) -> dict[str, Any]:
        if tx.session(op.session).revert is not None:
            inbox.revert_commit(tx, op.session)
        if op.resume is not False:
            runner.wake(tx, op.session)
            runner.quiesce(tx)  # the woken runner wins the race with the admission
        return inbox.admit(tx, op).to_wire()

    mp.setitem(apply_mod._HANDLERS, Prompt, _prompt)


@mutant("error-changes-nothing")
def error_after_write(mp: pytest.MonkeyPatch) -> None:
    original = target_mod.ModelTarget.request

    def request(self: Any, op: Any, crash_at: str | None = None) -> Any:
        reply, observed = original(self, op, crash_at)
        if isinstance(op, Prompt) and op.delivery == "queue" and observed.events:
            return Err("internal", "planted"), observed  # the write went through
        return reply, observed

    mp.setattr(target_mod.ModelTarget, "request", request)


# --- durability, transcript, views -------------------------------------------------------


@mutant("durability", "replay-matches-views")
def kill_loses_pending(mp: pytest.MonkeyPatch) -> None:
    def crashed(self: State) -> State:
        sessions = {
            sid: dataclasses.replace(
                log, pending=tuple(r for r in log.pending if r.type == "compaction")
            )
            for sid, log in self.store.sessions.items()
        }
        return State(
            self.policy, store.Store(sessions, self.store.owners), {}, self.step_limit, self.counter
        )

    mp.setattr(State, "crashed", crashed)


@mutant("transcript-order")
def transcript_by_id(mp: pytest.MonkeyPatch) -> None:
    original = target_mod.transcript_view
    mp.setattr(
        target_mod, "transcript_view", lambda log: tuple(sorted(original(log), key=lambda m: m.id))
    )


@mutant("pending-not-history")
def history_shows_pending(mp: pytest.MonkeyPatch) -> None:
    original = target_mod.transcript_view

    def transcript_view(log: Any) -> Any:
        extra = tuple(
            MessageView(r.input, r.type, r.admitted_seq, r.time)
            for r in log.pending
            if r.type != "compaction"
        )
        return original(log) + extra

    mp.setattr(target_mod, "transcript_view", transcript_view)


@mutant("seq-contiguous")
def seq_gap_after_a_step(mp: pytest.MonkeyPatch) -> None:
    original = store.project

    def project(log: Any, event: Any, policy: Policy) -> Any:
        out = original(log, event, policy)
        return (
            dataclasses.replace(out, next_seq=out.next_seq + 1)
            if event.type == "step_ended"
            else out
        )

    mp.setattr(store, "project", project)


# --- the barrier ---------------------------------------------------------------------


@mutant("single-barrier", "barrier-coalesces")
def barrier_not_coalesced(mp: pytest.MonkeyPatch) -> None:
    def compact(tx: Tx, op: Any) -> Any:
        log = tx.session(op.session)
        input_id = (
            op.input
            if op.input is not None and op.input not in tx.store.owners
            else tx.fresh_id("cmp-")
        )
        tx.append(log.id, "compaction_admitted", input_id)
        return tx.log(log.id).pending[-1]

    mp.setattr(inbox, "compact", compact)


@mutant("barrier-lifetime", "revert-truncates")
def revert_drops_the_barrier(mp: pytest.MonkeyPatch) -> None:
    original = store._PROJECTORS["revert_committed"]

    def _revert_committed(log: Any, event: Any, policy: Policy) -> Any:
        pending, *rest = original(log, event, policy)
        return (tuple(r for r in pending if r.type != "compaction"), *rest)

    mp.setitem(store._PROJECTORS, "revert_committed", _revert_committed)


@mutant("revert-truncates", "replay-matches-views")
def revert_keeps_pending(mp: pytest.MonkeyPatch) -> None:
    original = store._PROJECTORS["revert_committed"]

    def _revert_committed(log: Any, event: Any, policy: Policy) -> Any:
        _, *rest = original(log, event, policy)
        return (log.pending, *rest)

    mp.setitem(store._PROJECTORS, "revert_committed", _revert_committed)


# --- wakes, drains, executions ---------------------------------------------------------


@mutant("wake-on-admission")
def resume_false_wakes(mp: pytest.MonkeyPatch) -> None:
    original = apply_mod._HANDLERS[Prompt]
    mp.setitem(
        apply_mod._HANDLERS,
        Prompt,
        lambda tx, op: original(tx, dataclasses.replace(op, resume=None)),
    )


@mutant("lazy-wake")
def eager_wake(mp: pytest.MonkeyPatch) -> None:
    def wake(tx: Tx, session: str) -> None:
        run = tx.runs.get(session)
        if run is not None:
            tx.runs[session] = runner._with_doorbell(run)
        else:
            runner._start_execution(tx, session, forced=False)

    mp.setattr(runner, "wake", wake)


@mutant("single-execution")
def resume_restarts(mp: pytest.MonkeyPatch) -> None:
    def resume(tx: Tx, session: str) -> None:
        tx.runs.pop(session, None)  # drops the active execution instead of joining it
        runner._start_execution(tx, session, forced=True)

    mp.setattr(runner, "resume", resume)


@mutant("execution-lifecycle")
def no_terminal_event(mp: pytest.MonkeyPatch) -> None:
    def _drain_done(tx: Tx, session: str, doorbell: bool) -> None:
        if doorbell:
            runner._start_drain(tx, session, forced=False, doorbell=False)
        else:
            tx.runs.pop(session, None)

    mp.setattr(runner, "_drain_done", _drain_done)


@mutant("wake-follow-up")
def doorbell_dropped_on_error(mp: pytest.MonkeyPatch) -> None:
    original = runner.answer
    mp.setattr(
        runner,
        "answer",
        lambda tx, run, finish: original(
            tx, dataclasses.replace(run, doorbell=False) if finish == "error" else run, finish
        ),
    )


@mutant("wake-follow-up")
def forced_follow_up_drain(mp: pytest.MonkeyPatch) -> None:
    def _drain_done(tx: Tx, session: str, doorbell: bool) -> None:
        if doorbell:  # the follow-up runs like a resume: a call even with nothing to do
            runner._start_drain(tx, session, forced=True, doorbell=False)
        else:
            runner._execution_event(tx, session, "execution_succeeded")
            tx.runs.pop(session, None)

    mp.setattr(runner, "_drain_done", _drain_done)


@mutant("sessions-independent")
def wake_drains_every_session(mp: pytest.MonkeyPatch) -> None:
    original = runner.wake

    def wake(tx: Tx, session: str) -> None:
        original(tx, session)
        for other in sorted(tx.store.sessions):
            if other != session:
                original(tx, other)  # idle ones with pending input start too

    mp.setattr(runner, "wake", wake)


@mutant("work-needs-a-wake")
def revert_wakes(mp: pytest.MonkeyPatch) -> None:
    for op in (RevertClear, RevertCommit):
        original = apply_mod._HANDLERS[op]

        def handler(tx: Tx, op: Any, original: Any = original) -> dict[str, Any]:
            result: dict[str, Any] = original(tx, op)
            runner.wake(tx, op.session)
            return result

        mp.setitem(apply_mod._HANDLERS, op, handler)


@mutant("replay-starts-nothing")
def restart_resumes_pending(mp: pytest.MonkeyPatch) -> None:
    original = apply_mod._HANDLERS[Hello]

    def _hello(tx: Tx, op: Hello) -> dict[str, Any]:
        result: dict[str, Any] = original(tx, op)
        for session, log in sorted(tx.store.sessions.items()):
            if log.pending and session not in tx.runs:
                runner.resume(tx, session)
        return result

    mp.setitem(apply_mod._HANDLERS, Hello, _hello)


@mutant("compaction-error-continues")
def compaction_error_ends_drain(mp: pytest.MonkeyPatch) -> None:
    original = runner.answer

    def answer(tx: Tx, run: Any, finish: str) -> None:
        if run.call.kind != "compaction" or finish != "error":
            return original(tx, run, finish)
        session = run.call.session
        del tx.runs[session]
        runner._settle_compaction(tx, session, failed=True, error="model call failed")
        tx.append(session, "execution_failed", None, {"error": "compaction call failed"})

    mp.setattr(runner, "answer", answer)


@mutant("interrupt-keeps-input", "durability")
def interrupt_clears_pending(mp: pytest.MonkeyPatch) -> None:
    original = runner.interrupt

    def interrupt(tx: Tx, session: str) -> bool:
        done = original(tx, session)
        if done:
            log = tx.log(session)
            kept = tuple(r for r in log.pending if r.type == "compaction")
            tx.store = tx.store.with_session(dataclasses.replace(log, pending=kept))
        return done

    mp.setattr(runner, "interrupt", interrupt)


@mutant("interrupt-keeps-input")
def interrupt_cancels_the_waiting_barrier(mp: pytest.MonkeyPatch) -> None:
    original = runner.interrupt

    def interrupt(tx: Tx, session: str) -> bool:
        run = tx.runs.get(session)
        done = original(tx, session)
        if run is not None and run.call.kind == "step" and tx.log(session).barrier() is not None:
            runner._settle_compaction(tx, session, failed=True, error="Compaction cancelled")
        return done

    mp.setattr(runner, "interrupt", interrupt)


@mutant("idle-interrupt-noop")
def idle_interrupt_records(mp: pytest.MonkeyPatch) -> None:
    original = runner.interrupt

    def interrupt(tx: Tx, session: str) -> bool:
        if session not in tx.runs:
            tx.append(session, "other:idle_interrupt")
            return False
        return original(tx, session)

    mp.setattr(runner, "interrupt", interrupt)


# --- fork and revert ---------------------------------------------------------------


@mutant("fork-no-pending")
def fork_copies_pending(mp: pytest.MonkeyPatch) -> None:
    original = inbox.fork

    def fork(tx: Tx, op: Any) -> None:
        original(tx, op)
        for row in tx.log(op.session).pending:
            if row.type != "compaction":
                body = {"type": row.type, "data": parse_json(row.data), "delivery": row.delivery}
                tx.append(op.child, "admitted", tx.fresh_id("fork-"), body)

    mp.setattr(inbox, "fork", fork)


@mutant("fork-cutoff")
def fork_includes_its_boundary(mp: pytest.MonkeyPatch) -> None:
    original = inbox.fork

    def fork(tx: Tx, op: Any) -> None:
        log = tx.session(op.session)
        ids = [m.id for m in log.transcript]
        if op.before in ids:
            after = ids.index(op.before) + 1
            op = dataclasses.replace(op, before=ids[after] if after < len(ids) else None)
        original(tx, op)

    mp.setattr(inbox, "fork", fork)


@mutant("prompt-commits-revert")
def prompt_ignores_staged_revert(mp: pytest.MonkeyPatch) -> None:
    def _prompt(tx: Tx, op: Prompt) -> dict[str, Any]:
        receipt = inbox.admit(tx, op)
        if op.resume is not False:
            runner.wake(tx, op.session)
        return receipt.to_wire()

    mp.setitem(apply_mod._HANDLERS, Prompt, _prompt)


# --- liveness ----------------------------------------------------------------------


@mutant("live-all-promoted", "live-no-stranded-input")
def queued_input_never_promotes(mp: pytest.MonkeyPatch) -> None:
    original = runner._batch

    def _batch(tx: Tx, session: str, scope: str) -> list[Any]:
        return [r for r in original(tx, session, scope) if r.delivery == "steer"]

    mp.setattr(runner, "_batch", _batch)


@mutant("live-barriers-consumed")
def barrier_never_runs(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(runner, "_compaction_due", lambda log, tx: False)


# --- the tests ---------------------------------------------------------------------


def hunt(policy: Policy, wanted: tuple[str, ...], budget: int = 400) -> dict[str, Violation]:
    """Seeded random runs of the mutated model, judged as g4 while they run,
    until every wanted invariant fired once (or the budget runs out). A
    mutant may leave the model inconsistent enough to trip its own internal
    assertions; the run then ends there, judged so far."""
    first: dict[str, Violation] = {}
    for seed in range(budget):
        monitor: list[Monitor] = []

        def feed(step: Any, monitor: list[Monitor] = monitor) -> None:
            if not monitor:
                monitor.append(Monitor(G4, step.reply.result))
            for v in monitor[0].feed(step):
                first.setdefault(v.invariant, v)

        try:
            random_run(policy, seed, 40, on_step=feed)
        except AssertionError:
            continue
        for v in monitor[0].finish(True):
            first.setdefault(v.invariant, v)
        if all(w in first for w in wanted):
            break
    return first


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_planted_bug_fires_through_the_pipeline(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    patch, wanted = MUTANTS[name]
    policy = patch(monkeypatch) or G4
    first = hunt(policy, wanted)
    missing = [w for w in wanted if w not in first]
    assert not missing, f"{name} never broke {missing}; it broke {sorted(first)}"


def test_every_always_held_invariant_has_a_planted_bug_that_fires() -> None:
    """Each invariant that no preset departs from is shown firing by at
    least one of the mutants above."""
    from inboxsim.model import PRESETS

    shown = {w for _, wanted in MUTANTS.values() for w in wanted}
    always = {i.id for i in REGISTRY.values() if all(i.holds_under(p) for p in PRESETS.values())}
    assert always - shown == set()


def test_the_unpatched_model_breaks_nothing() -> None:
    assert hunt(G4, (), budget=100) == {}
