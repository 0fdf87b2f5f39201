"""Shrinking: a failing run (or scenario file) cut down to a minimal one that
still fails the same way, written as a scenario file a person can read.

Seeds. A run is fully described by its decision list (:mod:`.rng`), and any
edited list still replays validly (a missing draw reads as 0, values are
clamped). So the shrinker is a plain delta debugger over that list, in the
style of Hypothesis' passes, keeping an edit when the replayed run's *first*
violation is still the same invariant:

1. delete chunks of decisions, of decreasing size (half the list ... 1);
2. zero chunks (0 is the simplest choice: no kill, no crash, the first
   family, the first session; in the swarm draws that come first, 0 turns an
   optional family off or a fault rate to 0 -- fine while the invariant
   still fails);
3. lower single values (to 0, halved, minus one).

After every accepted edit the list is replaced by the decisions the replay
actually consumed (the run stops at its violation, so everything after it
goes). Edits are judged by the order (operations, steps, decisions length,
decisions), so every kept edit is strictly simpler and the loop ends. The
result is rendered with :func:`~inboxsim.scenarios.render.write_scenario`,
steps up to the violation only, ``expect_violation`` set, so the file is a
regression test by itself.

Scenario files. The steps are the unit: delete chunks of steps, drop
``crash_at``, drop ``now`` and optional request fields, as long as running
the scenario (expectations stripped) still violates the same invariant; the
minimal scenario's trace is rendered the same way.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..invariants import Monitor
from ..model import Create, Hello, Policy
from ..scenarios.load import LoadedScenario, load_scenario, load_text, resolve_policy
from ..scenarios.render import write_scenario
from ..scenarios.runner import run_scenario
from ..scenarios.schema import Scenario
from ..sim import checkers
from ..sim.rng import Chooser, replayer, seeded
from ..sim.run import RunOptions, RunResult, run, run_seed
from ..trace.record import NOTHING, Phase, Step, StepKind
from .lockstep import Divergence

DEFAULT_MAX_RUNS = 20_000
DEFAULT_TIME_LIMIT = 60.0
DEFAULT_OPTIONS = RunOptions()


# --- measuring a trace ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Size:
    """How long a trace is: all steps (hellos, restarts and kills included),
    operations (requests other than ``hello`` and ``create``), and faults
    (kills, and requests asked to crash at a failpoint)."""

    steps: int
    operations: int
    faults: int

    def to_dict(self) -> dict[str, int]:
        return {"steps": self.steps, "operations": self.operations, "faults": self.faults}

    def __str__(self) -> str:
        return f"{self.steps} steps, {self.operations} operations, {self.faults} faults"


def size_of(steps: Sequence[Step]) -> Size:
    ops = faults = 0
    for s in steps:
        if s.kind == "crash":
            faults += 1
            continue
        if s.crash_at is not None:
            faults += 1
        if s.request is not None and not isinstance(s.request, (Hello, Create)):
            ops += 1
    return Size(len(steps), ops, faults)


def upto_violation(steps: Sequence[Step], violation: Any) -> tuple[Step, ...]:
    """The steps up to (and including) the last step the violation names."""
    named = [i for i in getattr(violation, "steps", ()) if 0 <= i < len(steps)]
    if not named:
        return tuple(steps)
    return tuple(steps[: max(named) + 1])


# --- the result -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ShrinkResult:
    invariant: str
    message: str
    original: Size
    final: Size  # the written scenario
    decided: Size  # the decisions' replay, before the step-level phase
    original_decisions: int
    final_decisions: int
    decisions: tuple[int, ...]  # replays to a run of size ``decided``
    steps: tuple[Step, ...]  # the minimal trace, up to the violation
    runs: int
    seconds: float
    text: str  # the scenario file
    verified: bool | None  # the written scenario, run, violates the invariant (None: not checked)
    ops: int  # the decisions replay (run_decisions) with RunOptions(ops=ops)
    also: tuple[str, ...] = ()  # other invariants the same last step violates

    def document(self) -> dict[str, Any]:
        return {
            "invariant": self.invariant,
            "also_violated": list(self.also),
            "replay_ops": self.ops,
            "message": self.message,
            "original": {**self.original.to_dict(), "decisions": self.original_decisions},
            "final": self.final.to_dict(),
            "decisions": {**self.decided.to_dict(), "decisions": self.final_decisions},
            "runs": self.runs,
            "seconds": round(self.seconds, 3),
            "verified": self.verified,
        }


# --- the generic passes ---------------------------------------------------------

Key = tuple[Any, ...]


class Search:
    """Keeps the current best candidate and the budget; ``attempt`` tries one."""

    def __init__(
        self,
        test: Callable[[tuple[Any, ...]], tuple[Key, tuple[Any, ...]] | None],
        start: tuple[Any, ...],
        start_key: Key,
        max_runs: int,
        time_limit: float,
    ) -> None:
        self.test = test
        self.cur = start
        self.key = start_key
        self.runs = 0
        self.max_runs = max_runs
        self.deadline = time.perf_counter() + time_limit
        self.seen: set[tuple[Any, ...]] = {start}

    def spent(self) -> bool:
        return self.runs >= self.max_runs or time.perf_counter() > self.deadline

    def attempt(self, cand: tuple[Any, ...]) -> bool:
        if cand in self.seen or self.spent():
            return False
        self.seen.add(cand)
        self.runs += 1
        found = self.test(cand)
        if found is None:
            return False
        key, normal = found
        if key < self.key:
            self.cur, self.key = normal, key
            self.seen.add(normal)
            return True
        return False


def _chunk_sizes(n: int) -> list[int]:
    sizes, k = [], max(1, n // 2)
    while k > 8:
        sizes.append(k)
        k //= 2
    sizes.extend(s for s in (8, 4, 3, 2, 1) if s <= max(1, n))
    return sizes


def delete_pass(s: Search) -> bool:
    improved = False
    for k in _chunk_sizes(len(s.cur)):
        stride = 1 if k <= 8 else max(1, k // 2)
        i = len(s.cur) - k
        while i >= 0 and not s.spent():
            cur = s.cur
            if s.attempt(cur[:i] + cur[i + k :]):
                improved = True
                i = min(i, len(s.cur) - k)
            else:
                i -= stride
    return improved


class _Marking:
    """Wraps a monitor to note, per step, how many decisions were drawn by
    then: step ``i`` came from decisions ``[at[i-1], at[i])``."""

    def __init__(self, inner: Any, ch: Chooser, at: list[int]) -> None:
        self.inner, self.ch, self.at = inner, ch, at

    def feed(self, step: Step) -> Any:
        self.at.append(len(self.ch.decisions))
        return self.inner.feed(step)

    def finish(self, liveness: bool) -> Any:
        return self.inner.finish(liveness)

    @property
    def exercised(self) -> Any:
        return self.inner.exercised


def _actions_needed(result: RunResult, options: RunOptions) -> int:
    """Workload actions the run took before stopping in its safety phase, or
    ``options.ops`` when it got to the liveness phase."""
    steps = result.trace.steps
    if not steps or steps[-1].phase != "safety" or not result.violations:
        return options.ops
    restarts = sum(1 for s in steps if s.decision == "restart")
    return max(1, len(steps) - 1 - restarts)


def _cap_pass(s: Search, cap: list[int], best: dict[tuple[int, ...], RunResult]) -> bool:
    """For a violation in the liveness phase: try fewer workload actions
    (the safety phase always runs all of them), smallest first."""
    steps = best[s.cur].trace.steps
    if not steps or steps[-1].phase != "liveness" or cap[0] <= 1:
        return False
    return _lower_cap(s, cap, (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64))


def _lower_cap(s: Search, cap: list[int], ks: tuple[int, ...]) -> bool:
    """Try the workload-action caps ``ks`` (and half and one less than the
    current one) below the current cap, smallest first; keep the first that
    still fails with a smaller key. Results cached under another cap do not
    carry over, so the cache is cleared at every change of cap."""
    old = cap[0]
    for k in sorted({*ks, old // 2, old - 1}):
        if k >= old or s.spent():
            continue
        cap[0] = k
        s.seen = set()
        s.runs += 1
        found = s.test(s.cur)
        if found is not None and found[0] < s.key:
            s.key, s.cur = found
            return True
    cap[0] = old
    s.seen = set()
    return False


def _step_pass(s: Search, marks: dict[tuple[int, ...], tuple[int, ...]]) -> bool:
    """Delete the decisions of whole steps (one operation, a kill), last first,
    then pairs of neighbouring steps."""
    improved = False
    for width in (1, 2):
        j = len(marks.get(s.cur, ())) - width
        while j >= 1 and not s.spent():
            at = marks.get(s.cur)
            if at is None or j + width >= len(at) + 1:
                j = min(j, len(at or ()) - width)
                if at is None:
                    break
                continue
            lo, hi = at[j - 1], at[min(j + width, len(at)) - 1]
            if hi > lo and s.attempt(s.cur[:lo] + s.cur[hi:]):
                improved = True
                j = min(j, len(marks.get(s.cur, ())) - width)
            else:
                j -= 1
    return improved


def _zero_pass(s: Search) -> bool:
    improved = False
    for k in (8, 4, 2, 1):
        i = len(s.cur) - k
        while i >= 0 and not s.spent():
            cur = s.cur
            if any(cur[i : i + k]) and s.attempt(cur[:i] + (0,) * k + cur[i + k :]):
                improved = True
                i = min(i, len(s.cur) - k)
            else:
                i -= 1
    return improved


def _lower_pass(s: Search) -> bool:
    improved = False
    i = len(s.cur) - 1
    while i >= 0 and not s.spent():
        cur = s.cur
        if i < len(cur) and cur[i] > 1:
            for lower in (cur[i] // 2, cur[i] - 1):
                if s.attempt(cur[:i] + (lower,) + cur[i + 1 :]):
                    improved = True
                    break
        i -= 1
    return improved


# --- seeds ------------------------------------------------------------------------


def _narrowed(
    only: tuple[str, ...], only_expected: bool
) -> Callable[[Policy, dict[str, Any]], Any]:

    def build(policy: Policy, hello: dict[str, Any]) -> Any:
        return Monitor(policy, hello, only_expected, invariants=only)

    return build


def first_violation(result: RunResult) -> Any | None:
    return result.violations[0] if result.violations else None


def shrink_run(
    result: RunResult,
    policy: Policy,
    options: RunOptions,
    *,
    invariant: str | None = None,
    max_runs: int = DEFAULT_MAX_RUNS,
    time_limit: float = DEFAULT_TIME_LIMIT,
    name: str | None = None,
    source: str | None = None,
    verify: bool = True,
    expect: bool = False,
    steps_phase: bool = True,
    only: tuple[str, ...] | None = None,
    **run_kw: Any,
) -> ShrinkResult:
    """Shrink a failing run (any run: a seed's, a replayed one, one Hypothesis
    drove) to a minimal decision list whose first violation is ``invariant``
    (default: the run's own first one), then the rendered scenario's steps
    (:func:`minimize_steps`; ``steps_phase=False`` skips it).

    The file is written as a regression test: without ``expect_violation``,
    so ``inboxsim run`` on it fails while the bug is there and passes once
    it is fixed. ``expect=True`` writes ``expect_violation`` instead (a
    document of a design's known counterexample: it passes while the
    violation is there).

    ``only``: judge only these invariants (the default checkers), so that an
    invariant another one usually precedes can be the run's first violation
    and be shrunk on its own."""
    started = time.perf_counter()
    first = first_violation(result)
    if first is None:
        raise ValueError("the run violated no invariant: nothing to shrink")
    target = invariant or first.invariant
    best: dict[tuple[int, ...], RunResult] = {}

    def key_of(r: RunResult) -> Key:
        size = size_of(r.trace.steps)
        return (size.operations + size.faults, size.steps, len(r.decisions), r.decisions)

    # Candidates run with at most as many workload actions as the best run so
    # far needed (a run that needs more cannot be simpler); a run that stopped
    # at its violation before that cap is the same run under any larger cap,
    # so the result still replays under ``options``.
    cap = [_actions_needed(result, options)]
    marks: dict[tuple[int, ...], tuple[int, ...]] = {}
    custom_checkers = run_kw.pop("checkers_module", None)
    build_monitor, _ = checkers.monitor_for(custom_checkers, options.only_expected)
    if only is not None and custom_checkers is None:
        build_monitor = _narrowed(only, options.only_expected)

    def test(cand: tuple[Any, ...]) -> tuple[Key, tuple[Any, ...]] | None:
        ch = replayer(cand)
        at: list[int] = []

        def monitor(policy: Policy, hello: dict[str, Any]) -> Any:
            return _Marking(build_monitor(policy, hello), ch, at)

        opts = replace(options, ops=cap[0], liveness_bound=options.bound())
        r = run(policy, opts, ch, monitor=monitor, **run_kw)
        v = first_violation(r)
        if v is None or v.invariant != target:
            return None
        best[r.decisions] = r
        marks[r.decisions] = tuple(at)
        return key_of(r), r.decisions

    start = result
    if first.invariant != target:
        raise ValueError(f"the run's first violation is {first.invariant}, not {target}")
    best[start.decisions] = start
    test(start.decisions)  # its step marks
    search = Search(test, start.decisions, key_of(start), max_runs, time_limit)
    while not search.spent():
        before = search.cur
        improved = _step_pass(search, marks)
        if search.cur != before:
            cap[0] = _actions_needed(best[search.cur], options)
        improved = delete_pass(search) or improved
        improved = _zero_pass(search) or improved
        improved = _lower_pass(search) or improved
        improved = _cap_pass(search, cap, best) or improved
        if not improved:
            break
    final = best[search.cur]
    violation = first_violation(final)
    assert violation is not None  # every kept candidate failed
    steps = upto_violation(final.trace.steps, violation)
    decided = size_of(steps)
    message = violation.message

    def render(steps: Sequence[Step], expect_violation: str | None) -> str:
        return write_scenario(
            steps,
            policy,
            name=name or f"shrunk-{policy.name}-{target}",
            source=source or "inboxsim shrink: a minimal failing run",
            expect_violation=expect_violation,
        )

    runs = search.runs
    # The scenario runner judges with the default checkers on the model: the
    # step phase applies only when the run was judged the same way.
    same_judge = run_kw.get("target") is None and custom_checkers is None
    if steps_phase and same_judge and not options.only_expected and not search.spent():
        # The decision list cannot drop a step whose decisions also steer
        # later draws (a session index, a family pick); the scenario's steps
        # can. The judge: running the scenario still violates ``target``.
        import tomllib

        left = max(0.0, search.deadline - time.perf_counter())
        table = tomllib.loads(render(steps, None))
        found = minimize_steps(table, policy, target, "<shrink>", max(1, max_runs - runs), left)
        runs += found.runs
        v = _scenario_violation(found.result, target) if found.result is not None else None
        if v is not None:
            better = upto_violation(found.result.trace.steps, v)
            new = size_of(better)
            if (new.operations + new.faults, new.steps) < (
                decided.operations + decided.faults,
                decided.steps,
            ):
                steps, message = better, v.message
    text = render(steps, target if expect else None)
    verified = verify_scenario(text, target, policy) if verify else None
    return ShrinkResult(
        invariant=target,
        message=message,
        original=size_of(upto_violation(result.trace.steps, first)),
        final=size_of(steps),
        decided=decided,
        original_decisions=len(result.decisions),
        final_decisions=len(final.decisions),
        decisions=final.decisions,
        steps=steps,
        runs=runs,
        seconds=time.perf_counter() - started,
        text=text,
        verified=verified,
        ops=cap[0] if steps and steps[-1].phase == "liveness" else options.ops,
        also=tuple(sorted({v.invariant for v in final.violations} - {target})),
    )


def shrink_seed(
    seed: int, policy: Policy, options: RunOptions = DEFAULT_OPTIONS, **kw: Any
) -> ShrinkResult | None:
    """Run ``seed`` and shrink it; None when it violates nothing."""
    result = run_seed(seed, policy, options)
    if not result.violations:
        return None
    kw.setdefault("name", f"shrunk-{policy.name}-seed-{seed}")
    kw.setdefault("source", f"inboxsim shrink {seed} --policy {policy.name} --ops {options.ops}")
    return shrink_run(result, policy, options, **kw)


def verify_scenario(text: str, invariant: str, policy: Policy | None = None) -> bool:
    """The scenario ``text`` loads, and running it violates ``invariant``
    (and no expectation of it fails). Holds for both forms: a regression
    test (that fails, on ``invariant`` only) and an ``expect_violation``
    document (that passes)."""

    loaded = load_text(text, "<shrunk>")
    result = run_scenario(loaded, policy)
    # Another invariant broken by the same step is a failure of the file too
    # (a scenario expects one violation), but the counterexample stands.
    return not [f for f in result.failures if f.invariant is None] and any(
        v.invariant == invariant for v in result.violations
    )


# --- scenario files -----------------------------------------------------------------

_STEP_KEEP = {"op", "kill", "session", "call", "now"}


@dataclass(frozen=True, slots=True)
class ScenarioShrink:
    invariant: str | None  # None: the scenario violates no invariant
    original_steps: int
    final_steps: int
    original: Size | None
    final: Size | None
    runs: int
    seconds: float
    text: str | None
    passed: bool  # the original scenario passed
    verified: bool | None

    def document(self) -> dict[str, Any]:
        return {
            "invariant": self.invariant,
            "passed": self.passed,
            "original": {
                **(self.original.to_dict() if self.original else {}),
                "scenario_steps": self.original_steps,
            },
            "final": {
                **(self.final.to_dict() if self.final else {}),
                "scenario_steps": self.final_steps,
            },
            "runs": self.runs,
            "seconds": round(self.seconds, 3),
            "verified": self.verified,
        }


def _scenario_violation(result: Any, invariant: str | None) -> Any | None:
    for v in result.violations:
        if invariant is None or v.invariant == invariant:
            return v
    return None


def shrink_scenario_file(
    path: str,
    policy: Policy | None = None,
    *,
    max_runs: int = 5_000,
    time_limit: float = DEFAULT_TIME_LIMIT,
    expect: bool = False,
) -> ScenarioShrink:
    """Shrink a scenario file that violates an invariant (or that expects
    one): delete steps, simplify answers, drop crash_at, now and optional
    fields, while the scenario (expectations stripped) still violates the
    same invariant. ``expect``: write ``expect_violation`` (see
    :func:`shrink_run`)."""
    import tomllib

    started = time.perf_counter()
    loaded = load_scenario(path)
    chosen = policy or resolve_policy(loaded.scenario.policy, loaded.origin)
    first_run = run_scenario(loaded, chosen)
    target = loaded.scenario.expect_violation
    if target is None or _scenario_violation(first_run, target) is None:
        v = _scenario_violation(first_run, None)
        target = v.invariant if v is not None else None
    n_steps = len(loaded.scenario.step)
    if target is None:
        return ScenarioShrink(
            None,
            n_steps,
            n_steps,
            None,
            None,
            1,
            time.perf_counter() - started,
            None,
            first_run.passed,
            None,
        )
    with open(path, "rb") as handle:
        table = tomllib.load(handle)
    found = minimize_steps(table, chosen, target, loaded.origin, max_runs, time_limit)
    final_run = found.result if found.result is not None else first_run
    violation = _scenario_violation(final_run, target)
    steps = upto_violation(final_run.trace.steps, violation)
    text = write_scenario(
        steps,
        chosen,
        name=f"{loaded.scenario.name}-min",
        source=f"inboxsim shrink {path}: minimal steps violating {target}",
        step_limit=loaded.scenario.step_limit,
        expect_violation=target if expect else None,
    )
    verified = verify_scenario(text, target, chosen)
    return ScenarioShrink(
        target,
        n_steps,
        found.steps,
        size_of(upto_violation(first_run.trace.steps, _scenario_violation(first_run, target))),
        size_of(steps),
        found.runs + 1,
        time.perf_counter() - started,
        text,
        first_run.passed,
        verified,
    )


@dataclass(frozen=True, slots=True)
class _Minimized:
    steps: int  # scenario steps of the minimal candidate
    result: Any  # its ScenarioResult (None: the start did not fail, nothing kept)
    runs: int


def minimize_steps(
    table: dict[str, Any],
    policy: Policy,
    target: str,
    origin: str,
    max_runs: int,
    time_limit: float,
) -> _Minimized:
    """The step-level passes over a parsed scenario table: delete chunks of
    steps, then any two steps together (a ``create`` and the one request
    that uses its session are rarely neighbours), simplify each answer's
    ``finish`` to ``stop`` and drop ``crash_at``, ``now`` and optional fields,
    as long as running the candidate (expectations stripped) still violates
    ``target``. Every kept edit is strictly smaller under the order
    (operations + faults, steps, fields, text), so the loop ends."""

    header = {
        k: v
        for k, v in table.items()
        if k not in ("step", "expect_violation", "breaker", "carries")
    }
    steps0 = tuple(
        tuple(sorted((k, freeze(v)) for k, v in s.items() if not k.startswith("expect_")))
        for s in table["step"]
    )
    results: dict[tuple[Any, ...], Any] = {}

    def build(cand: tuple[Any, ...]) -> LoadedScenario | None:
        if not cand:
            return None
        doc = dict(header)
        doc["step"] = [{k: thaw(v) for k, v in s} for s in cand]
        try:
            return LoadedScenario(Scenario.model_validate(doc), origin)
        except Exception:  # an edit the schema refuses is just not a candidate
            return None

    def key_of(cand: tuple[Any, ...], r: Any) -> Key:
        size = size_of(r.trace.steps)
        return (size.operations + size.faults, len(cand), sum(len(s) for s in cand), repr(cand))

    def test(cand: tuple[Any, ...]) -> tuple[Key, tuple[Any, ...]] | None:
        sc = build(cand)
        if sc is None:
            return None
        r = run_scenario(sc, policy)
        if _scenario_violation(r, target) is None:
            return None
        results[cand] = r
        return key_of(cand, r), cand

    start = test(steps0)
    if start is None:  # the stripped expectations mattered; shrink nothing
        return _Minimized(len(steps0), None, 1)
    search = Search(test, steps0, start[0], max_runs, time_limit)
    search.runs = 1
    while not search.spent():
        improved = delete_pass(search)
        improved = _pair_pass(search) or improved
        improved = _answer_pass(search) or improved
        improved = field_pass(search) or improved
        if not improved:
            break
    return _Minimized(len(search.cur), results[search.cur], search.runs)


def _pair_pass(s: Search) -> bool:
    """Delete two steps at once, anywhere (last pairs first)."""
    improved = False
    j = len(s.cur) - 1
    while j >= 1 and not s.spent():
        i = j - 1
        while i >= 0 and not s.spent():
            cur = s.cur
            if j < len(cur) and s.attempt(cur[:i] + cur[i + 1 : j] + cur[j + 1 :]):
                improved = True
                break
            i -= 1
        j = min(j - 1, len(s.cur) - 1)
    return improved


def _answer_pass(s: Search) -> bool:
    """An answer's ``finish`` simplified to ``stop`` (the plainest answer)."""
    improved = False
    for i in range(len(s.cur) - 1, -1, -1):
        cur = s.cur
        if i >= len(cur):
            continue
        step = dict(cur[i])
        if step.get("op") == "answer" and step.get("finish") not in (None, "stop"):
            step["finish"] = "stop"
            cand_step = tuple(sorted(step.items()))
            improved = s.attempt(cur[:i] + (cand_step,) + cur[i + 1 :]) or improved
    return improved


def field_pass(s: Search) -> bool:
    """Drop crash_at, now and optional request fields, one at a time."""
    improved = False
    i = len(s.cur) - 1
    while i >= 0 and not s.spent():
        cur = s.cur
        if i >= len(cur):
            i -= 1
            continue
        step = cur[i]
        for j in range(len(step) - 1, -1, -1):
            name = step[j][0]
            if name in _STEP_KEEP - {"now"}:
                continue
            cand_step = step[:j] + step[j + 1 :]
            if s.attempt(cur[:i] + (cand_step,) + cur[i + 1 :]):
                improved = True
                break
        i -= 1
    return improved


def freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return ("__dict__", tuple(sorted((k, freeze(v)) for k, v in value.items())))
    if isinstance(value, list):
        return ("__list__", tuple(freeze(v) for v in value))
    return value


def thaw(value: Any) -> Any:
    if isinstance(value, tuple) and len(value) == 2 and value[0] == "__dict__":
        return {k: thaw(v) for k, v in value[1]}
    if isinstance(value, tuple) and len(value) == 2 and value[0] == "__list__":
        return [thaw(v) for v in value[1]]
    return value


__all__ = [
    "TargetFailure",
    "ThroughShrink",
    "failure_key",
    "run_through",
    "shrink_through",
    "Size",
    "size_of",
    "ShrinkResult",
    "ScenarioShrink",
    "shrink_run",
    "shrink_seed",
    "shrink_scenario_file",
    "verify_scenario",
]


# --- through any target (an adapter in lockstep with the model) -------------------
#
# The same delta debugging over a seed's decision list, but each candidate is
# run against targets that ``target`` (a run_seed ``target=`` factory, e.g.
# conformance's lockstep factory) builds -- real processes, real SIGKILLs.
#
# "Still fails the same way" is the equality of a failure key:
#
# - ``violated:<invariant>``: the run's first violation is that invariant;
# - ``diverged:<op>:<part>``: the lockstep target raised a Divergence at a
#   request of that kind (``prompt``, ``answer``, ``kill`` for a crash
#   between requests, ...) in that compared part: ``reply``, ``retry`` (the
#   exact-retry receipt rule), ``pending``, ``transcript`` or ``calls``. The
#   session named by a pending/transcript part is left out: the shrinker may
#   renumber which session shows the same bug.
#
# A protocol error, an operation one side cannot test, or any other key is
# "does not fail the same way", so the candidate is dropped.


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


class _Recording(_Marking):
    """A marking monitor that also keeps every step it was fed."""

    def __init__(self, inner: Any, ch: Chooser, at: list[int], steps: list[Step]) -> None:
        super().__init__(inner, ch, at)
        self.steps = steps

    def feed(self, step: Step) -> Any:
        self.steps.append(step)
        return super().feed(step)


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
        return _Recording(build_monitor(policy, hello), ch, at, seen)

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
            except Exception:  # noqa: BLE001 - a broken target must not mask the verdict
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
    budget than :func:`shrink_run`'s."""
    started = time.perf_counter()
    if first is None:
        first = run_through((), policy, options, target, seed=seed)
    if not first.key:
        return None
    wanted = key or first.key
    if first.key != wanted:
        raise ValueError(f"seed {seed} fails as {first.key}, not {wanted}")
    best: dict[tuple[int, ...], tuple[TargetFailure, int]] = {}
    marks: dict[tuple[int, ...], tuple[int, ...]] = {}

    def actions(f: TargetFailure, cap: int) -> int:
        if f.stopped_in != "safety":
            return cap
        return max(1, sum(1 for s in f.steps if s.decision not in ("hello", "restart")))

    cap = [actions(first, options.ops)]

    def key_of(f: TargetFailure) -> Key:
        size = size_of(f.steps)
        return (size.operations + size.faults, size.steps, len(f.decisions), f.decisions)

    def test(cand: tuple[Any, ...]) -> tuple[Key, tuple[Any, ...]] | None:
        # the liveness bound stays the original's when the cap lowers ops
        opts = replace(options, ops=cap[0], liveness_bound=options.bound())
        f = run_through(cand, policy, opts, target)
        if f.key != wanted:
            return None
        best[f.decisions] = (f, cap[0])
        marks[f.decisions] = f.marks
        return key_of(f), f.decisions

    best[first.decisions] = (first, options.ops)
    marks[first.decisions] = first.marks
    search = Search(test, first.decisions, key_of(first), max_runs, time_limit)
    while not search.spent():
        before = search.cur
        improved = _step_chunk_pass(search, marks)
        improved = _step_pass(search, marks) or improved
        if search.cur != before:
            cap[0] = actions(best[search.cur][0], cap[0])
        improved = delete_pass(search) or improved
        improved = _zero_pass(search) or improved
        improved = _lower_pass(search) or improved
        improved = _through_cap_pass(search, cap, best) or improved
        if not improved:
            break
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


def _step_chunk_pass(s: Search, marks: dict[tuple[int, ...], tuple[int, ...]]) -> bool:
    """Delete runs of whole steps, half of them first, then quarters, down to
    single steps, never the first (hello) nor the last (the failing one):
    with a real run per candidate, big cuts first save most runs."""
    improved = False
    at = marks.get(s.cur, ())
    width = max(1, (len(at) - 2) // 2)
    while width >= 1 and not s.spent():
        j = len(marks.get(s.cur, ())) - 1 - width
        while j >= 1 and not s.spent():
            at = marks.get(s.cur, ())
            if j + width > len(at) - 1:
                j = len(at) - 1 - width
                continue
            lo, hi = at[j - 1], at[j + width - 1]
            if hi > lo and s.attempt(s.cur[:lo] + s.cur[hi:]):
                improved = True
            else:
                j -= width
        width //= 2
    return improved


def _through_cap_pass(
    s: Search, cap: list[int], best: dict[tuple[int, ...], tuple[TargetFailure, int]]
) -> bool:
    """A failure in the liveness phase: try fewer workload actions."""
    if best[s.cur][0].stopped_in != "liveness" or cap[0] <= 1:
        return False
    return _lower_cap(s, cap, (1, 2, 4, 8, 16, 32))
