"""A small seeded random driver over ``ModelTarget``, for the invariant tests.

The simulator proper (``inboxsim.sim``) is written alongside the checkers, so
the invariant tests bring their own driver: it plays every protocol operation
with small ID pools (so that retries, conflicts and cross-session reuse
happen often), kills the target between requests, asks for failpoints, and
ends with a liveness phase that answers every call with ``stop`` and resumes
every session that still holds pending input.

``run_script`` plays a fixed list of operations instead: the hand-written
scenarios of the per-invariant tests.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from inboxsim.model import (
    Answer,
    Calls,
    Compact,
    Crashed,
    CrashOp,
    Create,
    Fork,
    Hello,
    Interrupt,
    Log,
    Messages,
    Ok,
    Op,
    Pending,
    Policy,
    Prompt,
    Resume,
    RevertClear,
    RevertCommit,
    RevertStage,
    Synthetic,
)
from inboxsim.model.ops import FAILPOINTS
from inboxsim.targets.target import ModelTarget
from inboxsim.trace.record import NOTHING, Observed, Step, Trace, TraceHeader

SESSIONS = ("s1", "s2", "s3")
INPUT_POOL = ("m1", "m2", "m3", "m4", "m5", "m6")
BARRIER_POOL = ("c1", "c2")
TEXTS = ("a", "b")


@dataclass
class Run:
    """A trace being recorded, with what the driver saw so far."""

    policy: Policy
    step_limit: int
    target: ModelTarget
    steps: list[Step] = field(default_factory=list)
    hello: dict[str, Any] = field(default_factory=dict)
    now: int = 0
    calls: tuple[Any, ...] = ()
    pending: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    transcript: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    phase: str = "safety"
    on_step: Callable[[Step], None] | None = None  # called with each step as it is recorded

    def record(
        self,
        kind: str,
        decision: str,
        op: Op | None,
        crash_at: str | None,
        reply: Any,
        observed: Observed,
    ) -> Step:
        step = Step(len(self.steps), self.phase, kind, decision, op, crash_at, reply, observed)  # type: ignore[arg-type]
        self.steps.append(step)
        if self.on_step is not None:
            self.on_step(step)
        for sid, rows in observed.pending:
            self.pending[sid] = rows
        for sid, msgs in observed.transcript:
            self.transcript[sid] = msgs
        if observed.calls is not None:
            self.calls = observed.calls
        return step

    def send(self, op: Op, crash_at: str | None = None, decision: str | None = None) -> Step:
        reply, observed = self.target.request(op, crash_at)
        step = self.record("request", decision or op.OP, op, crash_at, reply, observed)
        if isinstance(op, Hello) and isinstance(reply, Ok) and not self.hello:
            self.hello = dict(reply.result)
        if isinstance(reply, Crashed):
            self.restart()
        return step

    def kill(self) -> Step:
        step = self.record("crash", "kill", None, None, None, self.target.kill())
        self.restart()
        return step

    def restart(self) -> None:
        self.tick()
        self.send(Hello(self.now, step_limit=self.step_limit), decision="restart")

    def tick(self, upto: int = 3) -> int:
        self.now += upto
        return self.now

    def trace(self) -> Trace:
        header = TraceHeader(None, self.policy.name, self.target.name, self.hello, "test")
        return Trace(header, tuple(self.steps))


def start(
    policy: Policy, step_limit: int = 3, on_step: Callable[[Step], None] | None = None
) -> Run:
    run = Run(policy, step_limit, ModelTarget(policy, step_limit), on_step=on_step)
    run.send(Hello(0, step_limit=step_limit))
    return run


def run_script(
    policy: Policy, ops: Iterable[Op | str | tuple[Op, str]], step_limit: int = 3
) -> Run:
    """Play a fixed scenario. An item is an operation, ``(op, failpoint)``,
    ``"kill"``, or ``"answer:FINISH"`` (answer the oldest open call)."""
    run = start(policy, step_limit)
    for item in ops:
        if item == "kill":
            run.kill()
        elif isinstance(item, str) and item.startswith("answer:"):
            run.send(Answer(run.tick(1), call=run.calls[0].call, finish=item.split(":", 1)[1]))
        elif isinstance(item, tuple):
            op = item[0] if item[0].now >= run.now else dataclasses.replace(item[0], now=run.now)
            run.now = op.now
            run.send(op, crash_at=item[1])
        else:
            assert isinstance(item, Op)
            if item.now < run.now:  # the clock never runs backward
                item = dataclasses.replace(item, now=run.now)
            run.now = item.now
            run.send(item)
    return run


def settle(run: Run, bound: int = 400) -> bool:
    """The liveness phase: answer every call with ``stop`` and resume every
    session with pending input, until nothing is left or ``bound`` steps."""
    run.phase = "liveness"
    for _ in range(bound):
        if run.calls:
            run.send(Answer(run.tick(1), call=run.calls[0].call, finish="stop"))
            continue
        waiting = [sid for sid, rows in sorted(run.pending.items()) if rows]
        if not waiting:
            return True
        run.send(Resume(run.tick(1), session=waiting[0]))
    return False


# --- the random driver -------------------------------------------------------


def _maybe(rng: random.Random, p: float) -> bool:
    return rng.random() < p


def _pick(rng: random.Random, values: Sequence[Any]) -> Any:
    return values[rng.randrange(len(values))]


def random_run(
    policy: Policy,
    seed: int | random.Random,
    n_ops: int = 40,
    step_limit: int | None = None,
    liveness: bool = True,
    on_step: Callable[[Step], None] | None = None,
) -> Run:
    """A seeded random run over the model; deterministic in its arguments.
    ``seed`` may be a ``random.Random`` (Hypothesis passes its own)."""
    rng = seed if isinstance(seed, random.Random) else random.Random(seed)
    run = start(policy, step_limit if step_limit is not None else rng.choice((1, 2, 3)), on_step)
    features = set(run.hello.get("features", ()))
    created: list[str] = []
    forks = 0
    for _ in range(n_ops):
        now = run.tick(rng.choice((0, 1, 1, 2, 5)))
        roll = rng.random()
        sessions = created or list(SESSIONS[:1])
        sid = _pick(rng, sessions) if not _maybe(rng, 0.03) else "nosuch"
        crash_at = (
            _pick(rng, FAILPOINTS) if "failpoints" in features and _maybe(rng, 0.08) else None
        )
        op: Op
        if not created or roll < 0.06:
            new = _pick(rng, SESSIONS)
            op = Create(now, session=new)
            if new not in created:
                created.append(new)
            crash_at = None
        elif roll < 0.30:
            op = Prompt(
                now,
                session=sid,
                input=None if _maybe(rng, 0.3) else _pick(rng, INPUT_POOL),
                text=_pick(rng, TEXTS),
                metadata=_pick(rng, (None, None, {"k": 1}, {"k": 1.0}, {"k": 2})),
                delivery=_pick(rng, (None, "steer", "queue", "queue")),
                resume=_pick(rng, (None, None, True, False)),
            )
        elif roll < 0.42 and "synthetic" in features:
            op = Synthetic(
                now,
                session=sid,
                input=None if _maybe(rng, 0.3) else _pick(rng, INPUT_POOL),
                text=_pick(rng, TEXTS),
                description=_pick(rng, (None, "bg")),
                delivery=_pick(rng, (None, "steer", "queue")),
                resume=_pick(rng, (None, True, False)),
            )
        elif roll < 0.47:
            op = Compact(
                now, session=sid, input=_pick(rng, (None, None) + BARRIER_POOL + INPUT_POOL[:2])
            )
        elif roll < 0.70:
            if run.calls:
                call = _pick(rng, run.calls)
                finish = _pick(rng, ("stop", "stop", "tool", "tool", "tool", "error"))
                op = Answer(now, call=call.call, finish=finish)
            else:
                op = Resume(now, session=sid)
        elif roll < 0.75:
            op = Resume(now, session=sid)
        elif roll < 0.80:
            op = Interrupt(now, session=sid)
            crash_at = None
        elif roll < 0.84 and "fork" in features:
            forks += 1
            msgs = run.transcript.get(sid, ())
            before = _pick(rng, msgs).id if msgs and _maybe(rng, 0.6) else None
            op = Fork(now, session=sid, child=f"f{forks}", before=before)
            crash_at = None
            if isinstance(run.send(op).reply, Ok):
                created.append(f"f{forks}")
            continue
        elif roll < 0.90 and "revert" in features:
            msgs = run.transcript.get(sid, ())
            r = rng.random()
            if r < 0.5 and msgs:
                op = RevertStage(now, session=sid, message=_pick(rng, msgs).id)
            elif r < 0.75:
                op = RevertCommit(now, session=sid)
            else:
                op = RevertClear(now, session=sid)
            crash_at = None
        elif roll < 0.93:
            op = _pick(
                rng,
                (
                    Log(now, session=sid),
                    Messages(now, session=sid),
                    Pending(now, session=sid),
                    Calls(now),
                ),
            )
            crash_at = None
        elif "crash_op" in features and _maybe(rng, 0.3):
            # The protocol's crash operation: volatile state dropped in place.
            op = CrashOp(now)
            crash_at = None
        else:
            run.kill()
            continue
        run.send(op, crash_at=crash_at)
    if liveness:
        settle(run)
    return run


__all__ = ["Run", "random_run", "run_script", "settle", "start", "NOTHING"]
