"""``apply(state, op) -> Outcome``: the model's one entry point, and its
fine-grained form.

Pure: no I/O, no clock (time is ``op.now``), no randomness. An error reply
returns the state it was given, unchanged (protocol "Errors"). A request that
reaches the failpoint named by ``crash_at`` returns the durable state at that
point with the volatile part dropped, the events appended until then, and a
:class:`~inboxsim.model.values.Crashed` reply (outcome unknown).

The fine-grained form separates a request from the runner, which a real
server runs in the background (``runner.py``): :func:`request` does the
request's own part and leaves the work it made ready in ``State.work``;
:func:`enabled` lists the runner transitions that may run next (one per
session with work) and :func:`advance` runs one of them. Any interleaving of
requests and enabled transitions is a legal history, and a kill may land
between any two (``State.crashed``); the failpoints are three such places
(``runner.py``). :func:`apply` is exactly a request followed by every
transition as soon as it is enabled, the synchronous runner of the adapter
protocol: the same states, replies and events.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from json.encoder import encode_basestring
from typing import Any, NamedTuple

from . import inbox, runner
from .ops import (
    Answer,
    Calls,
    Compact,
    CrashOp,
    Create,
    Fork,
    Hello,
    Interrupt,
    Log,
    Messages,
    Op,
    Pending,
    Prompt,
    Resume,
    RevertClear,
    RevertCommit,
    RevertStage,
    Synthetic,
)
from .policy import G4, Policy
from .state import CrashedAt, Failed, State, Tx
from .store import EMPTY_STORE, SessionLog
from .values import Crashed, Err, Event, Ok, Receipt, Reply, encode_json

PROTOCOL = 1
DEFAULT_STEP_LIMIT = 4
ALL_FEATURES = (
    "synthetic",
    "compaction",
    "fork",
    "revert",
    "resume",
    "interrupt",
    "crash_op",
    "failpoints",
)


class Outcome(NamedTuple):
    state: State
    reply: Reply
    events: tuple[Event, ...]


def initial_state(policy: Policy = G4, step_limit: int = DEFAULT_STEP_LIMIT) -> State:
    return State(policy, EMPTY_STORE, {}, step_limit, 0)


def features(policy: Policy) -> tuple[str, ...]:
    if policy.synthetic_delivery == "none":
        return tuple(f for f in ALL_FEATURES if f != "synthetic")
    return ALL_FEATURES


class Advanced(NamedTuple):
    state: State
    events: tuple[Event, ...]
    crashed: str | None = None  # the failpoint reached: ``state`` is then crashed


@dataclass(frozen=True, slots=True)
class RunnerStep:
    """The runner transition ``at`` of ``session``'s active execution."""

    session: str
    at: str

    def __str__(self) -> str:
        return f"runner {self.session}: {self.at}"


def apply(state: State, op: Op, crash_at: str | None = None) -> Outcome:
    """Apply one request to the model and run the runner to quiescence."""
    return _request(state, op, crash_at, quiesce=True)


def request(state: State, op: Op, crash_at: str | None = None) -> Outcome:
    """The request's own effect and reply; the runner is not run. Of the
    failpoints only ``after_admit`` lies in a request's own effect."""
    return _request(state, op, crash_at, quiesce=False)


def enabled(state: State) -> tuple[RunnerStep, ...]:
    """The runner transitions that may run next, by session name: each
    session's execution's next one, and the taking of a wake recorded there."""
    steps = [RunnerStep(sid, state.work[sid].at) for sid in state.work]
    steps += [RunnerStep(sid, runner.WAKE) for sid in set(state.wakes)]
    return tuple(sorted(steps, key=lambda s: (s.session, s.at != runner.WAKE)))


def advance(state: State, step: RunnerStep, now: int, crash_at: str | None = None) -> Advanced:
    """Run one enabled runner transition; ``now`` stamps its events. When it
    reaches the failpoint ``crash_at`` (``mid_promotion``, ``after_promotion``)
    the process dies there: the durable state so far, crashed."""
    work = state.work.get(step.session)
    if step.at == runner.WAKE:
        if step.session not in state.wakes:
            raise ValueError(f"{step} is not enabled")
    elif work is None or work.at != step.at:
        raise ValueError(f"{step} is not enabled")
    tx = Tx(state, now, crash_at)
    try:
        if step.at == runner.WAKE:
            runner.take_wake(tx, step.session)
        else:
            runner.advance(tx, step.session)
    except CrashedAt as crash:
        return Advanced(tx.freeze().crashed(), tuple(tx.events), crash.point)
    return Advanced(tx.freeze(), tuple(tx.events))


def _request(state: State, op: Op, crash_at: str | None, quiesce: bool) -> Outcome:
    if isinstance(op, CrashOp):
        return _outcome(Outcome, (state.crashed(), Ok({}), ()))
    tx = Tx(state, op.now, crash_at)
    try:
        result = _HANDLERS[type(op)](tx, op)
        if quiesce:
            runner.quiesce(tx)
    except Failed as failure:
        # The traceback's frames hold the failure (``inbox.admit`` keeps its
        # conflict in a local): dropping it breaks that cycle, so the run's
        # steps, which the callers' frames reach, are freed by reference
        # counting instead of waiting for the cyclic collector.
        failure.__traceback__ = None
        return _outcome(Outcome, (state, Err(failure.code, failure.message), ()))
    except CrashedAt as crash:
        return _outcome(Outcome, (tx.freeze().crashed(), Crashed(crash.point), tuple(tx.events)))
    reply = result if isinstance(result, Ok) else Ok(result)
    return _outcome(Outcome, (tx.freeze(), reply, tuple(tx.events)))


# An Outcome built as the tuple it is: its class's own ``__new__`` is a Python
# function around this same call (~1.5 K instructions more a request).
_outcome = tuple.__new__


# --- one handler per operation ---------------------------------------------
# A handler returns the reply's result, or the whole reply when it writes the
# result's canonical text too (receipts and logs: see ``Ok.text``).


def _receipt_reply(receipt: Receipt) -> Ok:
    return Ok(receipt.to_wire(), receipt.wire_text())


def _hello(tx: Tx, op: Hello) -> Ok:
    if op.step_limit is not None:
        if (
            isinstance(op.step_limit, bool)
            or not isinstance(op.step_limit, int)
            or op.step_limit < 1
        ):
            raise Failed(
                "invalid_request", f"step_limit must be a positive integer, not {op.step_limit!r}"
            )
        tx.step_limit = op.step_limit
    implementation, offered = f"inboxsim-model ({tx.policy.name})", features(tx.policy)
    result = {
        "protocol": PROTOCOL,
        "implementation": implementation,
        "features": list(offered),
        "step_limit": tx.step_limit,
    }
    # Its text, as ``Ok.text`` says, encoded once per model and step limit: a
    # sweep's run says hello again at every restart.
    key = (implementation, offered, tx.step_limit)
    text = _HELLO_TEXT.get(key)
    if text is None:
        if len(_HELLO_TEXT) >= _HELLO_TEXT_MOST:  # any step limit is a key
            _HELLO_TEXT.clear()
        text = _HELLO_TEXT[key] = encode_json(result)
    return Ok(result, text)


_HELLO_TEXT: dict[tuple[str, tuple[str, ...], int], str] = {}
_HELLO_TEXT_MOST = 64


def _create(tx: Tx, op: Create) -> Ok:
    sid = op.session
    if sid not in tx.store.sessions:  # an existing ID is adopted
        tx.store = tx.store.with_session(SessionLog(sid))
    # Its text written at once (``Ok.text``): every run creates its sessions.
    text = '{"session":' + encode_basestring(sid) + "}" if type(sid) is str else None
    return Ok({"session": sid}, text)


def _prompt(tx: Tx, op: Prompt) -> Ok:
    log = tx.session(op.session)
    if log.revert is not None and tx.policy.staged_revert_prompt == "commits":
        # Judged as if the staged revert were committed just before: the
        # commit and the admission land together or not at all.
        inbox.revert_commit(tx, op.session)
    receipt = inbox.admit(tx, op)
    if op.resume is not False:
        runner.record_wake(tx, op.session)
    return _receipt_reply(receipt)


def _synthetic(tx: Tx, op: Synthetic) -> Ok:
    receipt = inbox.admit(tx, op)
    if op.resume is not False and tx.log(op.session).revert is None:
        runner.record_wake(tx, op.session)
    return _receipt_reply(receipt)


def _compact(tx: Tx, op: Compact) -> Ok:
    settle = tx.policy.abandoned_compaction == "settle"
    if settle and op.session in tx.store.sessions and op.session not in tx.runs:
        runner.settle_abandoned(tx, op.session)  # before another compaction is admitted
    receipt = inbox.compact(tx, op)
    runner.record_wake(tx, op.session)
    return _receipt_reply(receipt)


def _resume(tx: Tx, op: Resume) -> dict[str, Any]:
    tx.session(op.session)
    runner.resume(tx, op.session)
    return {}


def _interrupt(tx: Tx, op: Interrupt) -> Ok:
    if op.session not in tx.store.sessions and tx.policy.interrupt_unknown == "no_op":
        interrupted = False  # delegated without a lookup (open point A10)
    else:
        tx.session(op.session)
        interrupted = runner.interrupt(tx, op.session)
    # Its text written at once (``Ok.text``): one of two.
    return Ok({"interrupted": interrupted}, _INTERRUPTED_TEXT[interrupted])


_INTERRUPTED_TEXT = {True: '{"interrupted":true}', False: '{"interrupted":false}'}


def _calls(tx: Tx, op: Calls) -> dict[str, Any]:
    calls = sorted((run.call for run in tx.runs.values()), key=lambda c: c.opened)
    return {"calls": [c.to_wire() for c in calls]}


def _answer(tx: Tx, op: Answer) -> dict[str, Any]:
    if op.finish not in ("stop", "tool", "error"):
        raise Failed("invalid_request", f"finish must be stop, tool or error, not {op.finish!r}")
    for run in tx.runs.values():
        if run.call.call == op.call:
            runner.answer(tx, run, op.finish)
            return {}
    raise Failed("invalid_request", f"call {op.call!r} is not open")


def _fork(tx: Tx, op: Fork) -> dict[str, Any]:
    inbox.fork(tx, op)
    return {"session": op.child}


def _revert_stage(tx: Tx, op: RevertStage) -> dict[str, Any]:
    inbox.revert_stage(tx, op.session, op.message)
    return {}


def _revert_clear(tx: Tx, op: RevertClear) -> dict[str, Any]:
    inbox.revert_clear(tx, op.session)
    return {}


def _revert_commit(tx: Tx, op: RevertCommit) -> dict[str, Any]:
    inbox.revert_commit(tx, op.session)
    return {}


def _log(tx: Tx, op: Log) -> Ok:
    after = -1 if op.after is None else op.after
    events = [e for e in tx.session(op.session).events if e.seq > after]
    return Ok(
        {"events": [e.to_wire() for e in events]},
        '{"events":[' + ",".join([e.wire_text() for e in events]) + "]}",
    )


def _messages(tx: Tx, op: Messages) -> dict[str, Any]:
    return {"messages": [m.to_wire() for m in tx.session(op.session).transcript]}


def _pending(tx: Tx, op: Pending) -> dict[str, Any]:
    rows = tx.session(op.session).pending
    return {
        "pending": [
            {
                "input": r.input,
                "type": r.type,
                "delivery": r.delivery,
                "admitted_seq": r.admitted_seq,
                "time": r.time,
            }
            for r in rows
        ]
    }


_HANDLERS: dict[type, Callable[[Tx, Any], dict[str, Any] | Ok]] = {
    Hello: _hello,
    Create: _create,
    Prompt: _prompt,
    Synthetic: _synthetic,
    Compact: _compact,
    Resume: _resume,
    Interrupt: _interrupt,
    Calls: _calls,
    Answer: _answer,
    Fork: _fork,
    RevertStage: _revert_stage,
    RevertClear: _revert_clear,
    RevertCommit: _revert_commit,
    Log: _log,
    Messages: _messages,
    Pending: _pending,
}
