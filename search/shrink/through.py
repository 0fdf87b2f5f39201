"""Shrinking a failing seed through any target (an adapter in lockstep with
the model): the same decision-list candidates as :mod:`.seeds`, but each one
is run against targets that ``target`` (a run_seed ``target=`` factory, e.g.
conformance's lockstep factory) builds: real processes, real SIGKILLs.

"Still fails the same way" is the equality of a failure key:

- ``violated:<invariant>``: the run's first violation is that invariant;
- ``diverged:<op>:<part>``: the lockstep target raised a Divergence at a
  request of that kind (``prompt``, ``answer``, ``kill`` for a crash
  between requests, ...) in that compared part: ``reply``, ``retry`` (the
  exact-retry receipt rule), ``pending``, ``transcript`` or ``calls``. The
  session named by a pending/transcript part is left out: the shrinker may
  renumber which session shows the same bug.

A protocol error, an operation one side cannot test, or any other key is
"does not fail the same way", so the candidate is dropped. Each candidate
costs a real run, so whole runs of steps go first (half of them, then
quarters, ...), and the budget is smaller than on the model.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ...model import Policy
from ...sim import checkers
from ...sim.rng import replayer, seeded
from ...sim.run import RunOptions, RunResult, run
from ...trace.record import NOTHING, Phase, Step, StepKind
from ..divergence import Divergence
from .decisions import Recording
from .engine import (
    Candidate,
    Judged,
    Key,
    Shrinker,
    delete_chunks,
    delete_segment_runs,
    delete_segments,
    lower_setting,
    lower_values,
    minimize,
    zero_chunks,
)
from .size import Size, first_violation, size_of, upto_violation


def failure_key(failure: Any) -> str:
    """The key of a failure: a Divergence, a violation, or a RunResult."""
    if isinstance(failure, RunResult):
        first = first_violation(failure)
        return "" if first is None else failure_key(first)
    where = getattr(failure, "where", None)
    if isinstance(where, str) and hasattr(failure, "target_raw"):
        request = getattr(failure, "request", None)
        op = request.get("op", "?") if isinstance(request, dict) else "kill"
        return f"diverged:{op}:{where.split()[0] if where.split() else where}"
    return f"violated:{failure.invariant}"


@dataclass(frozen=True, slots=True)
class TargetFailure:
    """One run through a target: its failure key ('' when it held), what the
    failure said, the steps up to and including the failing one (for a
    divergence the last step is the request that diverged, with no reply),
    and the decisions consumed."""

    key: str
    message: str
    steps: tuple[Step, ...]
    decisions: tuple[int, ...]
    marks: tuple[int, ...]  # per step: decisions drawn by then
    stopped_in: str  # the phase of the failing step: "safety" or "liveness"
    result: RunResult | None  # None for a divergence (the run raised)
    where: str = ""  # a divergence's compared part, session included ("pending s1")


class _Tap:
    """A target wrapper that remembers the request in flight, so that the
    request a Divergence interrupted can be written into the scenario."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.last: tuple[Any, str | None] | None = None  # (op or None for a kill, crash_at)

    def request(self, op: Any, crash_at: str | None = None) -> Any:
        self.last = (op, crash_at)
        return self.inner.request(op, crash_at)

    def kill(self) -> Any:
        self.last = (None, None)
        return self.inner.kill()

    def close(self) -> None:
        self.inner.close()


def run_through(
    decisions: Sequence[int],
    policy: Policy,
    options: RunOptions,
    target: Callable[[Policy, int], Any],
    *,
    seed: int | None = None,
) -> TargetFailure:
    """Replay ``decisions`` (or, with ``seed``, run the seed live) against the
    targets ``target`` builds, and say how it failed. Every target built is
    closed, whatever happened."""

    ch = seeded(seed) if seed is not None else replayer(decisions)
    build_monitor, _ = checkers.monitor_for(None, options.only_expected)
    at: list[int] = []
    seen: list[Step] = []
    taps: list[_Tap] = []

    def monitor(policy: Policy, hello: dict[str, Any]) -> Any:
        return Recording(build_monitor(policy, hello), ch, at, seen)

    def factory(policy: Policy, step_limit: int) -> Any:
        taps.append(_Tap(target(policy, step_limit)))
        return taps[-1]

    try:
        try:
            r = run(policy, options, ch, monitor=monitor, target=factory)
        except Divergence as div:
            op, crash_at = taps[-1].last if taps and taps[-1].last else (None, None)
            phase = _phase_of(seen, options.ops)
            kind: StepKind = "crash" if op is None else "request"
            last = Step(len(seen), phase, kind, "diverged", op, crash_at, None, NOTHING)
            return TargetFailure(
                failure_key(div),
                div.summary,
                (*seen, last),
                tuple(ch.decisions),
                (*at, len(ch.decisions)),
                phase,
                None,
                div.where,
            )
    finally:
        for tap in taps:
            try:
                tap.close()
            except Exception:  # a broken target must not mask the verdict
                pass
    v = first_violation(r)
    if v is None:
        return TargetFailure("", "", r.trace.steps, r.decisions, tuple(at), "", r)
    steps = upto_violation(r.trace.steps, v)
    return TargetFailure(
        failure_key(v),
        f"{v.invariant}: {v.message}",
        steps,
        r.decisions,
        tuple(at),
        steps[-1].phase if steps else "safety",
        r,
    )


def _phase_of(seen: Sequence[Step], ops: int) -> Phase:
    """The phase of the step after ``seen``: liveness once the safety phase
    took its ``ops`` workload actions (hello and restarts are not actions)."""
    if any(s.phase == "liveness" for s in seen):
        return "liveness"
    actions = sum(1 for s in seen if s.decision not in ("hello", "restart"))
    return "liveness" if actions >= ops else "safety"


@dataclass(frozen=True, slots=True)
class ThroughShrink:
    """A failing run shrunk through a target: ``steps`` end at the failing
    step; ``ops`` is the RunOptions.ops the ``decisions`` replay with."""

    key: str
    message: str
    original: Size
    final: Size
    original_decisions: int
    final_decisions: int
    decisions: tuple[int, ...]
    steps: tuple[Step, ...]
    ops: int
    runs: int
    seconds: float
    where: str = ""

    def document(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "message": self.message,
            "replay_ops": self.ops,
            "original": {**self.original.to_dict(), "decisions": self.original_decisions},
            "final": {**self.final.to_dict(), "decisions": self.final_decisions},
            "runs": self.runs,
            "seconds": round(self.seconds, 3),
        }


def shrink_through(
    seed: int,
    policy: Policy,
    options: RunOptions,
    target: Callable[[Policy, int], Any],
    *,
    key: str | None = None,
    max_runs: int = 400,
    time_limit: float = 60.0,
    first: TargetFailure | None = None,
) -> ThroughShrink | None:
    """Run ``seed`` against ``target`` (a run_seed ``target=`` factory) and
    shrink its decision list while each candidate, run against fresh targets
    from the same factory, fails with the same :func:`failure_key` (``key``:
    default the seed's own). None when the seed does not fail. Each candidate
    costs a real run (adapter starts, crashes), hence the smaller default
    budget than :func:`~.seeds.shrink_run`'s."""
    started = time.perf_counter()
    if first is None:
        first = run_through((), policy, options, target, seed=seed)
    if not first.key:
        return None
    wanted = key or first.key
    if first.key != wanted:
        raise ValueError(f"seed {seed} fails as {first.key}, not {wanted}")
    best: dict[Candidate, tuple[TargetFailure, int]] = {}
    marks: dict[Candidate, tuple[int, ...]] = {}

    def actions(f: TargetFailure, cap: int) -> int:
        if f.stopped_in != "safety":
            return cap
        return max(1, sum(1 for s in f.steps if s.decision not in ("hello", "restart")))

    cap = [actions(first, options.ops)]

    def key_of(f: TargetFailure) -> Key:
        size = size_of(f.steps)
        return (size.operations + size.faults, size.steps, len(f.decisions), f.decisions)

    def test(cand: Candidate) -> Judged | None:
        # the liveness bound stays the original's when the cap lowers ops
        opts = replace(options, ops=cap[0], liveness_bound=options.bound())
        f = run_through(cand, policy, opts, target)
        if f.key != wanted:
            return None
        best[f.decisions] = (f, cap[0])
        marks[f.decisions] = f.marks
        return key_of(f), f.decisions

    def whole_steps(s: Shrinker) -> bool:
        before = s.cur
        improved = delete_segment_runs(s, marks)
        improved = delete_segments(s, marks) or improved
        if s.cur != before:
            cap[0] = actions(best[s.cur][0], cap[0])
        return improved

    def fewer_actions(s: Shrinker) -> bool:
        """A failure in the liveness phase: try fewer workload actions."""
        if best[s.cur][0].stopped_in != "liveness" or cap[0] <= 1:
            return False
        return lower_setting(s, cap, (1, 2, 4, 8, 16, 32))

    best[first.decisions] = (first, options.ops)
    marks[first.decisions] = first.marks
    search = Shrinker(test, first.decisions, key_of(first), max_runs, time_limit)
    minimize(search, (whole_steps, delete_chunks, zero_chunks, lower_values, fewer_actions))
    final, ops = best[search.cur]
    return ThroughShrink(
        key=wanted,
        message=final.message,
        original=size_of(first.steps),
        final=size_of(final.steps),
        original_decisions=len(first.decisions),
        final_decisions=len(final.decisions),
        decisions=final.decisions,
        steps=final.steps,
        ops=ops,
        runs=search.runs,
        seconds=time.perf_counter() - started,
        where=final.where,
    )


__all__ = [
    "TargetFailure",
    "ThroughShrink",
    "failure_key",
    "run_through",
    "shrink_through",
]
