"""A small driver for the reference model, so that model tests read as scenarios.

:class:`World` wraps :func:`inboxsim.model.apply`: it keeps the current state,
stamps every request with a clock that moves forward by ``tick`` per request,
and offers one method per protocol operation. The named methods assert that
the operation succeeded and return its ``result``; :meth:`World.rejects`
asserts an error code *and* that the state and logs did not change;
:meth:`World.crashes_at` asserts that a failpoint was reached.
"""

from __future__ import annotations

from typing import Any

from inboxsim.model import (
    OPS,
    PRESETS,
    Crashed,
    Err,
    Event,
    Ok,
    Op,
    Outcome,
    Policy,
    SessionLog,
    State,
    apply,
    initial_state,
)

Result = dict[str, Any]


def op_of(name: str, now: int, fields: dict[str, Any]) -> Op:
    """The operation ``name`` with ``fields``; ``None`` fields stay omitted and
    lists become tuples, as on the wire."""
    kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in fields.items() if v is not None}
    return OPS[name](now=now, **kwargs)


class World:
    """The model plus a clock: one request per method call."""

    def __init__(
        self,
        *sessions: str,
        policy: Policy | str = "g4",
        step_limit: int = 4,
        start: int = 1000,
        tick: int = 10,
    ) -> None:
        chosen = PRESETS[policy] if isinstance(policy, str) else policy
        self.state: State = initial_state(chosen, step_limit)
        self.now = start
        self.tick = tick
        self.last: Outcome | None = None
        for session in sessions or ("s1",):
            self.create(session)

    # --- sending requests ---------------------------------------------------

    def send(self, name: str, crash_at: str | None = None, **fields: Any) -> Outcome:
        """Apply one request at the current time, then move the clock on."""
        outcome = apply(self.state, op_of(name, self.now, fields), crash_at)
        self.now += self.tick
        self.state = outcome.state
        self.last = outcome
        return outcome

    def ok(self, name: str, **fields: Any) -> Result:
        outcome = self.send(name, **fields)
        assert isinstance(outcome.reply, Ok), f"{name} {fields} failed: {outcome.reply}"
        return outcome.reply.result

    def rejects(self, code: str, name: str, **fields: Any) -> Err:
        """The request fails with ``code`` and changes nothing at all."""
        before = self.state
        outcome = self.send(name, **fields)
        assert isinstance(outcome.reply, Err), f"{name} {fields} did not fail: {outcome.reply}"
        assert outcome.reply.code == code, outcome.reply
        assert outcome.state is before and outcome.events == ()
        return outcome.reply

    def read(self, name: str, **fields: Any) -> Result:
        """A read-only request (``calls``, ``log``, ``messages``, ``pending``):
        it must succeed and change nothing; the clock and :attr:`last` stay."""
        outcome = apply(self.state, op_of(name, self.now, fields))
        assert isinstance(outcome.reply, Ok), f"{name} {fields} failed: {outcome.reply}"
        assert outcome.events == () and outcome.state == self.state
        return outcome.reply.result

    def crashes_at(self, point: str, name: str, **fields: Any) -> Outcome:
        """The request dies at failpoint ``point``; volatile state is gone."""
        outcome = self.send(name, crash_at=point, **fields)
        assert outcome.reply == Crashed(point), outcome.reply
        assert not outcome.state.runs
        return outcome

    # --- one method per operation ---------------------------------------------

    def hello(self, step_limit: int | None = None) -> Result:
        return self.ok("hello", step_limit=step_limit)

    def create(self, session: str) -> Result:
        return self.ok("create", session=session)

    def prompt(
        self, session: str, input: str | None = None, text: str = "hello", **fields: Any
    ) -> Result:
        return self.ok("prompt", session=session, input=input, text=text, **fields)

    def synthetic(
        self, session: str, input: str | None = None, text: str = "notice", **fields: Any
    ) -> Result:
        return self.ok("synthetic", session=session, input=input, text=text, **fields)

    def compact(self, session: str, input: str | None = None) -> Result:
        return self.ok("compact", session=session, input=input)

    def resume(self, session: str) -> Result:
        return self.ok("resume", session=session)

    def interrupt(self, session: str) -> bool:
        return bool(self.ok("interrupt", session=session)["interrupted"])

    def fork(self, session: str, child: str, before: str | None = None) -> Result:
        return self.ok("fork", session=session, child=child, before=before)

    def revert_stage(self, session: str, message: str) -> Result:
        return self.ok("revert_stage", session=session, message=message)

    def revert_clear(self, session: str) -> Result:
        return self.ok("revert_clear", session=session)

    def revert_commit(self, session: str) -> Result:
        return self.ok("revert_commit", session=session)

    def crash(self) -> None:
        self.ok("crash")

    # --- model calls ------------------------------------------------------------

    def calls(self) -> list[Result]:
        """Every open call in protocol form, oldest first."""
        return list(self.read("calls")["calls"])

    def call(self, session: str) -> Result | None:
        """The open call of ``session``, if any."""
        found = [c for c in self.calls() if c["session"] == session]
        assert len(found) <= 1, found
        return found[0] if found else None

    def shape(self, session: str | None = None) -> list[tuple[str, str, int, bool, list[str]]]:
        """Open calls as (session, kind, step, final, context): what lockstep compares."""
        return [
            (c["session"], c["kind"], c["step"], c["final"], c["context"])
            for c in self.calls()
            if session is None or c["session"] == session
        ]

    def answer(self, finish: str = "stop", session: str | None = None) -> Result:
        """Answer the open call of ``session`` (or the only open call)."""
        calls = [c for c in self.calls() if session is None or c["session"] == session]
        assert len(calls) == 1, f"expected one open call, found {calls}"
        return self.ok("answer", call=calls[0]["call"], finish=finish)

    def answer_only_call(self, finish: str = "stop") -> Result:
        return self.answer(finish)

    def settle(self, session: str, finish: str = "stop", limit: int = 50) -> int:
        """Answer the session's calls with ``finish`` until it is idle; returns
        how many calls were answered."""
        for answered in range(limit):
            if self.call(session) is None:
                return answered
            self.answer(finish, session)
        raise AssertionError(f"{session} still busy after {limit} answers")

    # --- observing -------------------------------------------------------------

    def log(self, session: str) -> SessionLog:
        return self.state.store.sessions[session]

    def pending(self, session: str) -> list[str]:
        return [row["input"] for row in self.read("pending", session=session)["pending"]]

    def pending_rows(self, session: str) -> list[Result]:
        return list(self.read("pending", session=session)["pending"])

    def transcript(self, session: str) -> list[str]:
        return [m["id"] for m in self.messages(session)]

    def messages(self, session: str) -> list[Result]:
        return list(self.read("messages", session=session)["messages"])

    def wire_events(self, session: str, after: int | None = None) -> list[Result]:
        return list(self.read("log", session=session, after=after)["events"])

    def events(self, session: str) -> list[str]:
        """The types of every durable event of ``session``, in seq order."""
        return [e["type"] for e in self.wire_events(session)]

    def new_events(self) -> list[str]:
        """The types of the events the last request appended."""
        assert self.last is not None
        return [e.type for e in self.last.events]

    def appended(self) -> tuple[Event, ...]:
        assert self.last is not None
        return self.last.events
