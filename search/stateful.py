"""Hypothesis stateful testing over any target, judged by the same checkers.

:class:`InboxMachine` is a :class:`~hypothesis.stateful.RuleBasedStateMachine`
whose rules are protocol operations -- steer and queue prompts, synthetic
input, answers (stop, tool, error), compaction, interrupts, resume, forks,
reverts (stage, commit, clear), kills, failpoint crashes and exact retries --
sent to a :class:`~inboxsim.targets.target.Target` (the reference model by
default), with the invariant :class:`~inboxsim.invariants.Monitor` judging
every step. Driving a :class:`~inboxsim.search.lockstep.LockstepTarget` makes it
a lockstep conformance test too: the first difference from the model raises
:class:`~inboxsim.search.divergence.Divergence` inside the rule, which Hypothesis
shrinks like any failure.

:func:`hunt` runs a machine class under a wall-time budget and reports the
first detection (what kind, after how long and how many examples) and the
length of the example Hypothesis shrank it to. It is what the mutant
benchmark uses for the Hypothesis side (:func:`.mutants.hypothesis_detection`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from ..invariants import Monitor
from ..model import (
    FAILPOINTS,
    Answer,
    Compact,
    Crashed,
    Create,
    Fork,
    Hello,
    Interrupt,
    Op,
    Policy,
    Prompt,
    Resume,
    RevertClear,
    RevertCommit,
    RevertStage,
    Synthetic,
)
from ..policy_file import load_policy
from ..targets.target import ModelTarget, Target, hello_op
from ..trace.record import Step, StepKind
from ..trace.view import View
from .divergence import Divergence

SESSIONS = ("s1", "s2")
CHILDREN = ("f1", "f2")
IDS = ("u1", "u2", "u3")
sessions = st.sampled_from(SESSIONS)
parents = st.sampled_from((*SESSIONS, "f1"))  # a fork of a fork names the root
input_ids = st.none() | st.sampled_from(IDS)
texts = st.sampled_from(("a", "b"))
deliveries = st.sampled_from((None, "steer", "queue"))
# Mostly no failpoint (a failpoint crash costs an adapter a restart); None
# first, so that a shrunk example asks for no crash it does not need.
crashes = st.sampled_from((None, None, None, None, None, None, None, None, None, *FAILPOINTS))
resumes = st.none() | st.just(False)


class InboxMachine(RuleBasedStateMachine):
    """A target under ``POLICY``, every step judged by the Monitor.

    Adapt it: subclass with another ``POLICY`` (a preset or a Policy), or
    override :meth:`target` to drive your own
    :class:`~inboxsim.targets.target.Target` (a ``LockstepTarget`` around an
    ``AdapterTarget`` tests an implementation against the model).
    """

    POLICY: str | Policy = "g4"
    STEP_LIMIT = 4
    ONLY_EXPECTED = False  # judge only the invariants the policy is expected to keep
    _noted = False  # hunt(): this example's first failure is recorded

    def target(self, policy: Policy) -> Target:
        return ModelTarget(policy, self.STEP_LIMIT)

    def __init__(self) -> None:
        super().__init__()
        policy = self.POLICY if isinstance(self.POLICY, Policy) else load_policy(self.POLICY)
        self.driven = self.target(policy)
        self.now = 0
        self.steps: list[Step] = []
        self.view = View()
        self.sent: list[Prompt | Synthetic] = []
        self.violations: list[Any] = []
        # How long the example is, counted as shrink.size_of counts a trace:
        # operations are requests other than hello and create (the one that
        # diverged included), faults are kills and failpoint requests.
        self.operations = 0
        self.faults = 0
        reply, observed = self.driven.request(hello_op(0, self.STEP_LIMIT))
        self.monitor = Monitor(
            policy,
            dict(reply.result),  # type: ignore[union-attr]
            only_expected=self.ONLY_EXPECTED,
        )
        self._record("hello", hello_op(0, self.STEP_LIMIT), None, reply, observed)

    # --- plumbing ----------------------------------------------------------------

    def _record(
        self, label: str, op: Op | None, crash_at: str | None, reply: Any, observed: Any
    ) -> None:
        kind: StepKind = "request" if op is not None else "crash"
        step = Step(len(self.steps), "safety", kind, label, op, crash_at, reply, observed)
        self.steps.append(step)
        self.view.absorb(observed)
        self.violations.extend(self.monitor.feed(step))

    def _tick(self) -> int:
        self.now += 1
        return self.now

    def _restart(self) -> None:
        op = hello_op(self.now, self.STEP_LIMIT)
        reply, observed = self.driven.request(op)
        self._record("restart", op, None, reply, observed)

    def _send(self, label: str, op: Op, crash_at: str | None = None) -> None:
        if not isinstance(op, (Hello, Create)):
            self.operations += 1
        if crash_at is not None:
            self.faults += 1
        reply, observed = self.driven.request(op, crash_at)
        self._record(label, op, crash_at, reply, observed)
        if isinstance(reply, Crashed):
            self._restart()

    # --- rules -------------------------------------------------------------------------

    @initialize()
    def create_sessions(self) -> None:
        for session in SESSIONS:
            self._send("create", Create(self._tick(), session=session))

    def _prompt(
        self,
        session: str,
        input: str | None,
        text: str,
        delivery: str | None,
        resume: bool | None,
        crash_at: str | None,
    ) -> None:
        op = Prompt(
            self._tick(), session=session, input=input, text=text, delivery=delivery, resume=resume
        )
        self.sent.append(op)
        self._send("prompt", op, crash_at)

    @rule(
        session=sessions,
        input=input_ids,
        text=texts,
        explicit=st.booleans(),
        resume=resumes,
        crash_at=crashes,
    )
    def steer(
        self,
        session: str,
        input: str | None,
        text: str,
        explicit: bool,
        resume: bool | None,
        crash_at: str | None,
    ) -> None:
        """A steer prompt (``delivery = "steer"``, or left to its default)."""
        self._prompt(session, input, text, "steer" if explicit else None, resume, crash_at)

    @rule(session=sessions, input=input_ids, text=texts, resume=resumes, crash_at=crashes)
    def queue(
        self, session: str, input: str | None, text: str, resume: bool | None, crash_at: str | None
    ) -> None:
        """A queued prompt."""
        self._prompt(session, input, text, "queue", resume, crash_at)

    @rule(session=sessions, input=input_ids, background=st.booleans(), delivery=deliveries)
    def synthetic(
        self, session: str, input: str | None, background: bool, delivery: str | None
    ) -> None:
        if background:
            op = Synthetic(
                self._tick(),
                session=session,
                input=input,
                text="done",
                description="background",
                metadata={"job": 1},
                delivery="steer",
            )
        else:
            op = Synthetic(self._tick(), session=session, input=input, text="a", delivery=delivery)
        self.sent.append(op)
        self._send("synthetic", op)

    @precondition(lambda self: bool(self.view.calls))
    @rule(
        which=st.integers(0, 3), finish=st.sampled_from(("stop", "tool", "error")), crash_at=crashes
    )
    def answer(self, which: int, finish: str, crash_at: str | None) -> None:
        call = self.view.calls[which % len(self.view.calls)]
        self._send(
            "answer." + finish, Answer(self._tick(), call=call.call, finish=finish), crash_at
        )

    @rule(session=sessions, input=st.none() | st.sampled_from(("c1", "c2")))
    def compact(self, session: str, input: str | None) -> None:
        self._send("compact", Compact(self._tick(), session=session, input=input))

    @rule(session=sessions)
    def interrupt(self, session: str) -> None:
        self._send("interrupt", Interrupt(self._tick(), session=session))

    @rule(session=sessions, crash_at=crashes)
    def resume(self, session: str, crash_at: str | None) -> None:
        self._send("resume", Resume(self._tick(), session=session), crash_at)

    @rule(parent=parents, child=st.sampled_from(CHILDREN), before=st.none() | st.integers(0, 7))
    def fork(self, parent: str, child: str, before: int | None) -> None:
        """A fork, whole or before one of the parent's visible messages."""
        messages = self.view.transcript.get(parent, ())
        cut = messages[before % len(messages)].id if before is not None and messages else None
        self._send("fork", Fork(self._tick(), session=parent, child=child, before=cut))

    @rule(session=sessions, which=st.integers(0, 7))
    def revert_stage(self, session: str, which: int) -> None:
        messages = self.view.transcript.get(session, ())
        message = messages[which % len(messages)].id if messages else "m-missing"
        self._send("revert.stage", RevertStage(self._tick(), session=session, message=message))

    @rule(session=sessions)
    def revert_commit(self, session: str) -> None:
        self._send("revert.commit", RevertCommit(self._tick(), session=session))

    @rule(session=sessions)
    def revert_clear(self, session: str) -> None:
        self._send("revert.clear", RevertClear(self._tick(), session=session))

    # A kill only when something is at stake (an open call or pending input):
    # a kill of an idle target tests little and costs an adapter a restart.
    @precondition(lambda self: bool(self.view.calls) or any(self.view.pending.values()))
    @rule()
    def crash(self) -> None:
        self._tick()
        self.faults += 1
        self._record("kill", None, None, None, self.driven.kill())
        self._restart()

    @precondition(lambda self: bool(self.sent))
    @rule(which=st.integers(0, 11))
    def retry(self, which: int) -> None:
        old = self.sent[-1 - which % len(self.sent)]
        now = self._tick()
        if isinstance(old, Prompt):
            op: Op = Prompt(
                now,
                old.session,
                old.input,
                old.text,
                old.files,
                old.agents,
                old.metadata,
                old.delivery,
                old.resume,
            )
        else:
            op = Synthetic(
                now,
                old.session,
                old.input,
                old.text,
                old.description,
                old.metadata,
                old.delivery,
                old.resume,
            )
        self._send("retry", op)

    # --- the checkers ---------------------------------------------------------------------

    @invariant()
    def no_violation(self) -> None:
        assert not self.violations, [f"{v.invariant}: {v.message}" for v in self.violations]

    def teardown(self) -> None:
        try:
            found = list(self.monitor.finish(False))
        finally:
            self.driven.close()
        assert not found, [f"{v.invariant}: {v.message}" for v in found]


# --- hunting under a budget ---------------------------------------------------------


class OutOfBudget(BaseException):
    """Raised in a machine's constructor once the detection budget is spent.

    A BaseException (not an Exception) on purpose: Hypothesis counts only
    Exceptions as failures, so this one ends the whole run instead of being
    shrunk as a bug."""


@dataclass
class Failure:
    kind: str  # "divergence", "invariant", or "error" (anything else: not a kill)
    detail: str
    operations: int
    faults: int


@dataclass
class HuntResult:
    """What :func:`hunt` found: the first failure (``first``), when, and the
    example Hypothesis shrank it to (``shrunk``: the last failing example,
    which Hypothesis replays last; ``None`` if nothing failed)."""

    examples: int = 0  # examples started
    seconds: float = 0.0  # the whole hunt, shrinking included
    seconds_to_detect: float | None = None
    examples_to_detect: int | None = None
    first: Failure | None = None
    shrunk: Failure | None = None
    failures: list[Failure] = field(default_factory=list, repr=False)

    @property
    def found(self) -> bool:
        return self.first is not None

    def to_dict(self) -> dict[str, Any]:
        def side(f: Failure | None) -> dict[str, Any] | None:
            if f is None:
                return None
            return {
                "kind": f.kind,
                "detail": f.detail,
                "operations": f.operations,
                "faults": f.faults,
            }

        return {
            "found": self.found,
            "examples": self.examples,
            "seconds": round(self.seconds, 3),
            "seconds_to_detect": (
                round(self.seconds_to_detect, 3) if self.seconds_to_detect is not None else None
            ),
            "examples_to_detect": self.examples_to_detect,
            "first": side(self.first),
            "shrunk": side(self.shrunk),
        }


@contextlib.contextmanager
def _shrink_limit(seconds: float) -> Iterator[None]:
    """Hypothesis' shrink-time cap, set for one hunt (the engine documents
    MAX_SHRINKING_SECONDS as the knob to monkeypatch)."""
    from hypothesis.internal.conjecture import engine

    old = engine.MAX_SHRINKING_SECONDS
    engine.MAX_SHRINKING_SECONDS = seconds  # type: ignore[assignment]
    try:
        yield
    finally:
        engine.MAX_SHRINKING_SECONDS = old


def _classify(exc: BaseException) -> tuple[str, str]:
    if isinstance(exc, Divergence):
        return "divergence", exc.summary
    if isinstance(exc, AssertionError):
        text = str(exc)
        return "invariant", text.splitlines()[0][:300] if text else "assertion failed"
    return "error", f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]


def hunt(
    machine: type[InboxMachine],
    *,
    detect_seconds: float = 60.0,
    shrink_seconds: float = 60.0,
    steps: int = 40,
    max_examples: int = 100_000,
    clock: Callable[[], float] = time.perf_counter,
) -> HuntResult:
    """Run ``machine`` under Hypothesis (derandomized, no database) until it
    fails or ``detect_seconds`` pass; then let Hypothesis shrink for at most
    ``shrink_seconds``. ``steps`` is the most rule steps in one example.
    Never raises for the machine's failures: they are the result."""
    result = HuntResult()
    started = clock()

    def note(exc: BaseException, m: InboxMachine) -> None:
        if m._noted:
            return  # one failure per example: the first exception it raised
        m._noted = True
        kind, detail = _classify(exc)
        failure = Failure(kind, detail, getattr(m, "operations", 0), getattr(m, "faults", 0))
        result.failures.append(failure)
        if result.first is None:
            result.first = failure
            result.seconds_to_detect = clock() - started
            result.examples_to_detect = result.examples
        result.shrunk = failure  # Hypothesis replays the minimal example last

    class Hunted(machine):  # type: ignore[valid-type, misc]
        def __init__(self) -> None:
            if result.first is None and clock() - started > detect_seconds:
                raise OutOfBudget()
            result.examples += 1
            try:
                super().__init__()
            except Exception as exc:
                note(exc, self)
                raise

        # Every failure is seen where it happens: a divergence or a protocol
        # error in the target (the proxy), a violation as the Monitor reports
        # it. (Rules themselves are not wrapped: Hypothesis finds them by
        # their decorators.)
        def target(self, policy: Policy) -> Target:
            return _Noting(super().target(policy), lambda exc: note(exc, self))

        def _record(
            self, label: str, op: Op | None, crash_at: str | None, reply: Any, observed: Any
        ) -> None:
            super()._record(label, op, crash_at, reply, observed)
            if self.violations:
                v = self.violations[0]
                note(AssertionError(f"{v.invariant}: {v.message}"), self)

        def teardown(self) -> None:
            if getattr(self, "_noted", False):
                self.driven.close()  # judged already: the example failed
                return
            try:
                super().teardown()
            except Exception as exc:
                note(exc, self)
                raise

    config = settings(
        max_examples=max_examples,
        stateful_step_count=steps,
        deadline=None,
        database=None,
        derandomize=True,
        report_multiple_bugs=False,
        print_blob=False,
        suppress_health_check=list(HealthCheck),
    )
    with _shrink_limit(shrink_seconds), contextlib.redirect_stdout(_Discard()):
        try:
            run_state_machine_as_test(Hunted, settings=config)
        except OutOfBudget:
            pass
        except Exception:  # noqa: BLE001 - the failure itself is recorded by note()
            pass
    result.seconds = clock() - started
    return result


class _Noting:
    """A target that tells ``seen`` about every exception it raises."""

    def __init__(self, inner: Target, seen: Callable[[BaseException], None]) -> None:
        self.inner = inner
        self.name = inner.name
        self.seen = seen

    def request(self, op: Op, crash_at: str | None = None) -> Any:
        try:
            return self.inner.request(op, crash_at)
        except Exception as exc:
            self.seen(exc)
            raise

    def kill(self) -> Any:
        try:
            return self.inner.kill()
        except Exception as exc:
            self.seen(exc)
            raise

    def close(self) -> None:
        self.inner.close()


class _Discard:
    """A stdout that drops Hypothesis' falsifying-example report (the
    result carries what was found)."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


__all__ = [
    "CHILDREN",
    "IDS",
    "SESSIONS",
    "Failure",
    "HuntResult",
    "InboxMachine",
    "OutOfBudget",
    "hunt",
]
