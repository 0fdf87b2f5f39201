"""The model's whole state, split into what survives a crash and what does not.

``State.store`` is durable (event logs and their projection). The rest is
volatile: ``State.runs`` holds the active executions parked at their one open
model call, with the follow-up doorbell and step counter; ``State.work`` holds
the active executions that are not parked, each at the point where the runner
goes on (:class:`Work`, the runner's pending work). An execution is in one of
the two, never both. ``State.wakes`` holds the wakes requests recorded that the
runner has not taken yet (a wake follows its admission; it is not atomic with
it). After :func:`~inboxsim.model.apply.apply` the runner has
run to quiescence, so ``work`` and ``wakes`` are empty; the fine-grained form
(:func:`~inboxsim.model.apply.request`, :func:`~inboxsim.model.apply.advance`)
leaves them filled between transitions. A crash is exactly :meth:`State.crashed`:
runs, work and wakes are dropped, nothing else changes.

:class:`Tx` is the scratchpad of one transition (a request, a runner step, or
``apply``'s request and the runner's steps after it). It is created, used and
frozen inside that call, so the model stays a pure function of its arguments
while the operation's code reads as a sequence of steps.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Literal, NamedTuple

from .frozen import fast_init
from .policy import Policy
from .store import SessionLog, Store, append
from .values import Call, Event

Phase = Literal["start", "step", "after_step"]
At = Literal["start", "drain", "promote", "reread", "open", "compacted", "stepped", "failed"]


@fast_init
@dataclass(frozen=True, slots=True)
class Run:
    """One active execution, parked at its open call.

    ``phase`` says where the drain resumes when the call is answered: a
    compaction at drain ``start``, a ``step``, or a compaction ``after_step``
    (which then continues with ``step`` and ``cont``, the step's continuation
    flag). ``doorbell`` is the coalesced follow-up wake.
    """

    call: Call
    phase: Phase
    forced: bool
    step: int
    cont: bool
    doorbell: bool


class Work(NamedTuple):  # a tuple: built at every runner transition
    """One active execution that is not parked at a call: the runner's next
    transition for it is ``at`` (``runner.py`` says what each one does).

    ``forced`` and ``doorbell`` are the execution's, as in :class:`Run`;
    ``step`` and ``cont`` the answered step's index and continuation flag
    (``stepped``, ``compacted``, and the boundary's step index for ``promote``,
    ``reread`` and ``open``); ``phase`` where the settled compaction ran
    (``compacted``). A boundary in progress keeps ``batch``, the inputs its
    read captured and not yet promoted, ``promoted``, whether it promoted any
    (the step resets to 1), and ``reread``, whether the steers admitted
    meanwhile are read again after the batch (an idle boundary's queued input).
    """

    at: At
    forced: bool
    doorbell: bool
    step: int = 0
    cont: bool = False
    phase: Phase = "start"
    batch: tuple[str, ...] = ()
    promoted: bool = False
    reread: bool = False


@fast_init
@dataclass(frozen=True, slots=True)
class State:
    policy: Policy
    store: Store
    runs: Mapping[str, Run]  # volatile, by session
    step_limit: int
    counter: int  # allocator of generated IDs and call order; never reused
    work: Mapping[str, Work] = field(default_factory=dict)  # volatile, by session
    # Volatile: the wakes requests recorded and the runner has not yet taken,
    # by session, in the order recorded (a session may have several).
    wakes: tuple[str, ...] = ()

    @property
    def busy(self) -> bool:
        """Does the runner have a transition left (work, or a wake to take)?"""
        return bool(self.work or self.wakes)

    def crashed(self) -> State:
        """The state after the process died and restarted."""
        return State(self.policy, self.store, {}, self.step_limit, self.counter, {})

    def open_calls(self) -> list[Call]:
        calls = [run.call for run in self.runs.values()]
        if len(calls) > 1:
            calls.sort(key=_OPENED)
        return calls


_OPENED = attrgetter("opened")


class Failed(Exception):
    """An operation refused with a protocol error code; nothing changes."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class CrashedAt(Exception):
    """The operation reached the failpoint it was asked to crash at."""

    def __init__(self, point: str) -> None:
        super().__init__(point)
        self.point = point


class Tx:
    """Mutable scratchpad of one operation; see the module docstring."""

    __slots__ = (
        "given",
        "policy",
        "store",
        "runs",
        "work",
        "wakes",
        "step_limit",
        "counter",
        "now",
        "crash_at",
        "events",
    )

    def __init__(self, state: State, now: int, crash_at: str | None) -> None:
        self.given = state
        self.policy = state.policy
        self.store = state.store
        # Copied by displays, not dict() and list(): no call of a type (~750
        # instructions less a transition, one per request of a sweep).
        self.runs = {**state.runs}
        self.work = {**state.work}
        self.wakes = [*state.wakes]
        self.step_limit = state.step_limit
        self.counter = state.counter
        self.now = now
        self.crash_at = crash_at
        self.events: list[Event] = []

    def freeze(self) -> State:
        """The state this transition leaves. A volatile mapping it left as it
        found it is the given state's own, not the copy (most requests touch
        no execution's entry), so an observer tells "unchanged" by identity."""
        given = self.given
        runs = given.runs if self.runs == given.runs else self.runs
        work = given.work if self.work == given.work else self.work
        return State(
            self.policy, self.store, runs, self.step_limit, self.counter, work, tuple(self.wakes)
        )

    def log(self, session: str) -> SessionLog:
        return self.store.sessions[session]

    def session(self, session: str) -> SessionLog:
        """The session's log, or ``session_not_found``."""
        log = self.store.sessions.get(session)
        if log is None:
            raise Failed("session_not_found", f"session {session!r} does not exist")
        return log

    def append(
        self,
        session: str,
        type_: str,
        input_id: str | None = None,
        data: object = None,
        time: int | None = None,
    ) -> Event:
        """Append an event stamped ``time`` (default: this request's ``now``)."""
        self.store, event = append(
            self.store,
            session,
            type_,
            self.now if time is None else time,
            input_id,
            "{}" if data is None else data,  # canonical text of {}
            self.policy,
        )
        self.events.append(event)
        return event

    def fresh_id(self, prefix: str) -> str:
        """A generated ID that collides with no ID ever admitted or copied
        (a client may send ``in-3`` itself)."""
        while True:
            self.counter += 1
            candidate = f"{prefix}{self.counter}"
            if candidate not in self.store.owners:
                return candidate

    def open_call(
        self, session: str, kind: Literal["step", "compaction"], step: int, final: bool
    ) -> Call:
        call = self.fresh_id("call-")  # the counter also orders the calls
        context = tuple(m.id for m in self.log(session).transcript)
        return Call(call, session, kind, step, final, context, self.counter)

    def reach(self, point: str) -> None:
        """Die here if this request asked to crash at ``point``. (The
        explorer's probe, ``search/world.py``, is a ``crash_at`` equal to no
        point, shown the transaction at each one it passes.)"""
        if self.crash_at == point:
            raise CrashedAt(point)
        passing = getattr(self.crash_at, "passing", None)
        if passing is not None:
            passing(self, point)
