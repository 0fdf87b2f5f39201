"""One run: a seed's swarm, its safety phase, its liveness phase, judged.

Theory of operation (after TigerBeetle's VOPR):

1. The chooser draws the seed's swarm configuration (:mod:`.swarm`).
2. ``hello`` with the swarm's step limit; its result goes into the trace
   header and configures the checkers.
3. **Safety phase**, faults on: ``ops`` workload actions (:mod:`.workload`).
   A request that crashes at a failpoint, and a kill between requests, are
   each followed by a restart step (``hello`` again with the step limit).
4. **Liveness phase**, faults off: the harness plays a patient user and
   model. It answers open calls (``stop``, sometimes ``tool``) oldest first,
   and resumes sessions that still have pending input, until the target is
   quiet (no open call, no pending row) or the step bound is hit.
5. The checkers see every step as it happens; the run stops at the first
   violation, keeping the trace up to it. At the end they judge liveness; a
   run that did not settle and that the checkers did not flag gets a
   ``liveness.settles`` violation saying what was stuck.

Everything that shapes the trace comes from the chooser: no wall clock (``now``
is a virtual clock advanced by drawn increments), no hash-ordered iteration.
Wall time is measured only for reporting and never enters the trace or hash.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .. import __version__
from ..errors import HarnessError
from ..invariants.monitor import MonitorFactory
from ..model import Answer, Crashed, Ok, Op, Policy, Prompt, Resume
from ..targets.target import ModelTarget, Target, hello_op
from ..trace.encode import StepText, step_text, trace_hash_of
from ..trace.probes import ProbeFold
from ..trace.record import (
    Observed,
    Phase,
    Step,
    StepKind,
    Trace,
    TraceHeader,
    group_label,
    unseen,
)
from ..trace.view import View
from . import checkers
from .checkers import ViolationFactory
from .rng import Chooser, RandomLike, driven_by, replayer, seeded
from .swarm import Swarm, draw_races, draw_swarm
from .workload import Action, Workload

LIVENESS_TOOL_RATE = 0.1
TargetFactory = Callable[[Policy, int], Target]


@dataclass(frozen=True, slots=True)
class RunOptions:
    """What a run is asked to do besides its seed and policy."""

    ops: int = 100
    """Workload actions in the safety phase (restarts not counted)."""
    liveness_bound: int | None = None
    """Most steps the liveness phase may take to settle; default ``50 + 4 * ops``."""
    only_expected: bool = False
    """Judge only the invariants the policy is expected to keep. By default
    every invariant is judged, so a sweep shows where a policy departs from
    them (``g2``'s admission-time stamps break monotonic visible time)."""
    concurrency: int = 1
    """Most requests in a concurrent group; 1 (the default) sends every
    request alone, exactly as before groups existed (same trace hashes)."""

    def bound(self) -> int:
        return self.liveness_bound if self.liveness_bound is not None else 50 + 4 * self.ops

    def to_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"ops": self.ops}
        if self.liveness_bound is not None:
            doc["liveness_bound"] = self.liveness_bound
        if self.only_expected:
            doc["only_expected"] = True
        if self.concurrency > 1:
            doc["concurrency"] = self.concurrency
        return doc


@dataclass(frozen=True, slots=True)
class RunResult:
    """Everything a run produced (see :func:`run`)."""

    seed: int | None
    policy: str
    options: dict[str, Any]
    swarm: dict[str, Any]
    decisions: tuple[int, ...]
    trace: Trace
    trace_hash: str
    texts: tuple[StepText, ...]  # per step: request, reply, observed as canonical JSON
    violations: tuple[Any, ...]
    probes: dict[str, int]
    liveness: str  # "settled", "unsettled", or "stopped" (a violation came first)
    exercised: tuple[str, ...]
    seconds: float = field(compare=False)

    @property
    def ops(self) -> int:
        """Steps in the trace (requests, kills and restarts, both phases)."""
        return len(self.trace.steps)

    @property
    def verdict(self) -> str:
        if self.violations:
            return "violated"
        return "held"


class _Recorder:
    """The run's imperative shell: keeps the steps and feeds every observer."""

    __slots__ = ("steps", "view", "probes", "monitor", "violations")

    def __init__(self, monitor: Any) -> None:
        self.steps: list[Step] = []
        self.probes = ProbeFold()
        # The probes keep the harness's view of the target up to date (they
        # need it as it was before each step); the workload reads the same one.
        self.view = self.probes.view
        self.monitor = monitor
        self.violations: list[Any] = []

    def add(
        self,
        phase: Phase,
        decision: str,
        op: Op | None,
        crash_at: str | None,
        reply: Any,
        observed: Observed,
    ) -> bool:
        """Record a step; True when the checkers found a violation (stop)."""
        kind: StepKind = "request" if op is not None else "crash"
        step = Step(len(self.steps), phase, kind, decision, op, crash_at, reply, observed)
        self.steps.append(step)
        self.probes.feed(step)
        if self.monitor is not None:
            found = self.monitor.feed(step)
            if found:
                self.violations.extend(found)
                return True
        return False


def run(
    policy: Policy,
    options: RunOptions,
    ch: Chooser,
    *,
    seed: int | None = None,
    monitor: MonitorFactory | None = None,
    violation: ViolationFactory | None = None,
    checkers_module: str | None = None,
    target: TargetFactory | None = None,
    version: str | None = None,
) -> RunResult:
    """Run once with the choices ``ch`` makes (live or replayed).

    ``monitor(policy, hello_result)`` builds the checkers for the run and
    ``violation`` the ``liveness.settles`` violation the run adds itself; both
    default to those of ``checkers_module`` (default :mod:`inboxsim.invariants`),
    judging every invariant or, with ``options.only_expected``, those the
    policy is expected to keep. ``target``
    builds what the run drives from the policy and the swarm's step limit
    (default: the reference model in process). ``version`` is the harness
    version the trace header records, and so part of the trace hash (default:
    the installed ``inboxsim.__version__``); a fixed string pins hashes
    across releases (``tests/test_pinned_hashes.py``).
    """
    if monitor is None or violation is None:
        default_monitor, default_violation = checkers.monitor_for(
            checkers_module, options.only_expected
        )
        monitor = monitor or default_monitor
        violation = violation or default_violation
    started = time.perf_counter()
    swarm = draw_swarm(ch)
    races = draw_races(ch, options.concurrency) if options.concurrency > 1 else None
    driven = (target or ModelTarget)(policy, swarm.step_limit)
    if races is not None and not callable(getattr(driven, "group_steps", None)):
        raise HarnessError(f"{driven.name} cannot serve concurrent groups (--concurrency)")
    hello = hello_op(0, swarm.step_limit)
    reply, observed = driven.request(hello)
    hello_result = reply.result  # type: ignore[union-attr]
    header = TraceHeader(
        seed, policy.name, driven.name, hello_result, version or __version__, options.to_dict()
    )
    checks = monitor(policy, hello_result)  # a lockstep target judges along its legal ends
    rec = _Recorder(driven.judging(checks) if hasattr(driven, "judging") else checks)
    stopped = rec.add("safety", "hello", hello, None, reply, observed)
    now = 0
    if not stopped:
        stopped, now = _safety(
            rec,
            driven,
            Workload(
                swarm,
                ch,
                hello_result.get("features", ()),
                races,
                bool(getattr(driven, "group_kills", False)),
            ),
            ch,
            swarm,
            options.ops,
            now,
        )
    liveness = "stopped"
    if not stopped:
        settled, stopped = _liveness(
            rec, driven, ch, swarm, options.bound(), now, hello_result.get("features", ())
        )
        if not stopped:
            liveness = "settled" if settled else "unsettled"
            found = list(rec.monitor.finish(True))
            if not settled and not found:
                found.append(violation("liveness.settles", _last(rec.steps), _stuck(rec.view)))
            rec.violations.extend(found)
    driven.close()
    steps = tuple(rec.steps)
    texts = tuple(map(step_text, steps))
    return RunResult(
        seed=seed,
        policy=policy.name,
        options=options.to_dict(),
        swarm=swarm.to_dict() | ({"races": races.to_dict()} if races else {}),
        decisions=tuple(ch.decisions),
        trace=Trace(header, steps),
        trace_hash=trace_hash_of(header, steps, texts),
        texts=texts,
        violations=tuple(rec.violations),
        probes=dict(rec.probes.hits),
        liveness=liveness,
        exercised=tuple(sorted(rec.monitor.exercised)),
        seconds=time.perf_counter() - started,
    )


def _safety(
    rec: _Recorder,
    target: Target,
    workload: Workload,
    ch: Chooser,
    swarm: Swarm,
    ops: int,
    now: int,
) -> tuple[bool, int]:
    """The fault phase; returns (stopped by a violation, the clock)."""
    tick = swarm.tick + 1
    racing = workload.races is not None  # a sequential run asks no race question
    for _ in range(ops):
        now += ch.below(tick)
        raced = workload.race(rec.view, now) if racing else None
        if raced is not None:
            if _group(rec, target, workload, ch, *raced):
                return True, now
            last = rec.steps[-1]
            if last.kind == "crash" or isinstance(last.reply, Crashed):  # killed mid-group
                if _restart(rec, target, swarm, now, "safety"):
                    return True, now
            continue
        action, client = workload.next(rec.view, now)
        if action.op is None:
            if rec.add("safety", action.label, None, None, None, target.kill()):
                return True, now
            if _restart(rec, target, swarm, now, "safety"):
                return True, now
            continue
        reply, observed = target.request(action.op, action.crash_at)
        crashed = isinstance(reply, Crashed)
        if rec.add("safety", action.label, action.op, action.crash_at, reply, observed):
            return True, now
        workload.learn(
            client, action, "unknown" if crashed else ("ok" if hasattr(reply, "result") else "err")
        )
        if crashed and _restart(rec, target, swarm, now, "safety"):
            return True, now
    return False, now


SCHEDULE_DRAWS = 6  # schedule values drawn per request of a group
SCHEDULE_SPAN = 1024  # each below this (a target takes it modulo its options)


def _group(
    rec: _Recorder, target: Any, workload: Workload, ch: Chooser, race: str, actions: list[Action]
) -> bool:
    """A concurrent group: its schedule drawn from the seed, its requests
    recorded as steps along the order the target reports they took effect
    (``group_steps``); True when the checkers found a violation (stop)."""
    ops = [a.op for a in actions if a.op is not None]
    schedule = [ch.below(SCHEDULE_SPAN) for _ in range(SCHEDULE_DRAWS * len(ops))]
    crash_at = [a.crash_at for a in actions if a.op is not None]
    more = (crash_at,) if any(crash_at) else ()  # a target without kills need not take them
    members, _, failure, crash, kill = target.group_steps(ops, schedule, *more)
    first = len(rec.steps)
    learnt = set()
    for m in members:
        action = actions[m.position]
        label = group_label(first, race, m.busy)
        in_flight = unseen(m.reply)  # killed in flight, took effect (trace.record.UNSEEN)
        point = action.crash_at if in_flight else None
        if rec.add("safety", label, action.op, point, m.reply, m.observed):
            return True
        outcome = "unknown" if in_flight else "ok" if isinstance(m.reply, Ok) else "err"
        workload.learn(m.position % workload.swarm.clients, action, outcome)
        learnt.add(m.position)
    if crash is not None:  # killed mid-group: the member that died in its admission
        action = actions[crash.position]
        label = group_label(first, race)  # its Crashed reply says it died
        if rec.add("safety", label, action.op, action.crash_at, crash.reply, crash.observed):
            return True
    if kill is not None:  # killed mid-group, the kill a step of its own
        if rec.add("safety", group_label(first, race), None, None, None, kill):
            return True
    if crash is not None or kill is not None:
        for k, sent in enumerate(actions):
            if k not in learnt:
                workload.learn(k % workload.swarm.clients, sent, "unknown")
    if failure is not None:
        raise failure  # no legal order, and no checker named what broke
    return False


def _restart(rec: _Recorder, target: Target, swarm: Swarm, now: int, phase: Phase) -> bool:
    """The restart after a crash: ``hello`` again, with the step limit."""
    op = hello_op(now, swarm.step_limit)
    reply, observed = target.request(op)
    return rec.add(phase, "restart", op, None, reply, observed)


def _liveness(
    rec: _Recorder,
    target: Target,
    ch: Chooser,
    swarm: Swarm,
    bound: int,
    now: int,
    features: Sequence[str] = ("resume",),
) -> tuple[bool, bool]:
    """Faults off, drive to quiet; returns (settled, stopped by a violation).

    An idle session with pending input is woken by ``resume``; a target
    without that feature (OpenCode 1.18.33 has no resume route) is woken the
    way its clients wake it, by an exact retry of a pending prompt."""
    view, tick = rec.view, swarm.tick + 1
    for _ in range(bound):
        op: Op
        if view.calls:
            call = view.calls[0]
            finish = "tool" if ch.chance(LIVENESS_TOOL_RATE) else "stop"
            now += ch.below(tick)
            op, label = Answer(now, call=call.call, finish=finish), "liveness.answer." + finish
        else:
            session = next((s for s in view.sessions if view.pending.get(s)), None)
            if session is None:
                return True, False
            now += ch.below(tick)
            op, label = Resume(now, session=session), "liveness.resume"
            if "resume" not in features:
                op, label = _wake_by_retry(rec.steps, session, view, now), "liveness.retry"
        reply, observed = target.request(op)
        if rec.add("liveness", label, op, None, reply, observed):
            return view.quiet(), True
    return view.quiet(), False


def _wake_by_retry(steps: Sequence[Step], session: str, view: View, now: int) -> Op:
    """An exact retry, with resume, of the session's oldest pending prompt (its
    first admitted request, found in the trace); a prompt is admitted under the
    ID its receipt names, so a prompt sent without one is retried with it."""
    first = view.pending[session][0]
    for step in steps:
        op, reply = step.request, step.reply
        if (
            isinstance(op, Prompt)
            and isinstance(reply, Ok)
            and reply.result.get("input") == first.input
            and reply.result.get("session") == session
        ):
            return replace(op, now=now, input=first.input, resume=None)
    raise HarnessError(
        f"liveness: the target has no resume and no prompt admitted {first.input!r} "
        f"in {session} is in the trace to retry"
    )


def _last(steps: Sequence[Step], n: int = 5) -> tuple[int, ...]:
    return tuple(s.index for s in steps[-n:])


def _stuck(view: View) -> str:
    """What kept the target from settling, in words."""
    parts = []
    for call in view.calls:
        parts.append(
            f"call {call.call} of {call.session} ({call.kind}, step {call.step}) still open"
        )
    for sid in view.sessions:
        rows = view.pending.get(sid, ())
        if rows:
            listed = ", ".join(f"{r.input} ({r.type}, {r.delivery})" for r in rows)
            parts.append(f"{sid} still has pending {listed}")
    return "did not settle within the liveness bound: " + "; ".join(parts)


# --- entry points ------------------------------------------------------------


def run_seed(seed: int, policy: Policy, options: RunOptions = RunOptions(), **kw: Any) -> RunResult:
    """One seed's run (what a sweep does for each seed)."""
    return run(policy, options, seeded(seed), seed=seed, **kw)


def run_decisions(
    decisions: Sequence[int], policy: Policy, options: RunOptions = RunOptions(), **kw: Any
) -> RunResult:
    """Replay a recorded decision list. An edited list (shorter, values out of
    range) still gives a valid run: a missing draw reads as 0 and every value
    is clamped into the range of its choice."""
    return run(policy, options, replayer(decisions), **kw)


def run_random(
    rng: RandomLike, policy: Policy, options: RunOptions = RunOptions(), **kw: Any
) -> RunResult:
    """A run driven by any ``random()`` provider, e.g. Hypothesis'
    ``st.randoms(use_true_random=False)``, so Hypothesis can shrink it."""
    return run(policy, options, driven_by(rng), **kw)


__all__ = ["RunOptions", "RunResult", "run", "run_seed", "run_decisions", "run_random"]
