"""Running a scenario against a target: a pure judging core and a thin shell.

The shell (:func:`run_scenario`, :func:`execute`) sends the scenario's steps to
a :class:`~inboxsim.targets.target.Target`, restarting it with ``hello`` after every
crash (a failpoint reached, or a ``kill`` step), records the run as a
:class:`~inboxsim.trace.record.Trace` (phase ``safety``, decision ``scenario step
N``) and feeds every recorded step to the invariant monitor. The core
(:func:`check_step`) judges one step's expectations from what was observed and
touches nothing else.

A scenario fails when an expectation fails or an invariant is violated (or,
for a scenario with ``expect_violation``, when that invariant is *not*
violated). Every failure names the scenario step it belongs to.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import __version__
from ..errors import HarnessError
from ..invariants import Monitor
from ..invariants.monitor import MonitorFactory
from ..model import OPS, Crashed, Err, Ok, Op, Policy, Reply
from ..targets.target import ModelTarget, Target, hello_op
from ..trace.record import Observed, Step, Trace, TraceHeader, trace_hash
from ..trace.view import View
from .load import LoadedScenario, resolve_policy
from .names import Names
from .schema import CallExpect, Scenario, StepSpec

# Request fields that carry an ID the target may have generated or copied.
REFERENCE_FIELDS = ("input", "message", "before")

TargetFactory = Callable[[Policy, int], Target]


@dataclass(frozen=True, slots=True)
class Failure:
    """One failed expectation or violated invariant; ``step`` is the scenario
    step number (1-based), or None for the scenario as a whole."""

    step: int | None
    message: str
    invariant: str | None = None
    violation: bool = False  # an invariant violated, rather than an expectation failed

    def __str__(self) -> str:
        where = f"step {self.step}" if self.step is not None else "scenario"
        return f"{where}: {self.message}"


@dataclass(frozen=True, slots=True)
class ScenarioResult:
    name: str
    origin: str
    policy: str
    failures: tuple[Failure, ...]
    trace: Trace
    trace_hash: str
    invariants_checked: bool
    steps_run: int
    violations: tuple[Any, ...] = field(default=())
    exercised: tuple[str, ...] = ()  # the invariants the run reached a step to judge
    seconds: float = field(default=0.0, compare=False)  # wall time (reporting only)
    expected_violation: str | None = None  # the file's expect_violation

    @property
    def passed(self) -> bool:
        return not self.failures

    @property
    def verdict(self) -> str:
        """The result in words; a pass that rests on an expected violation
        says so (such a file documents a bug, it does not test for its absence)."""
        if not self.passed:
            return f"FAIL ({len(self.failures)})"
        if self.expected_violation is not None:
            return f"pass (violates {self.expected_violation}, as expected)"
        return "pass"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "file": self.origin,
            "policy": self.policy,
            "passed": self.passed,
            "expect_violation": self.expected_violation,
            "steps": self.steps_run,
            "trace_hash": self.trace_hash,
            "invariants_checked": self.invariants_checked,
            "failures": [
                {"step": f.step, "message": f.message, "invariant": f.invariant}
                for f in self.failures
            ],
        }


def default_monitor() -> MonitorFactory | None:
    """The invariant checkers' Monitor (``None`` from a caller's factory means
    no checkers: the runner then judges expectations only and says so)."""
    return Monitor


def model_target(policy: Policy, step_limit: int) -> Target:
    return ModelTarget(policy, step_limit)


def run_scenario(
    loaded: LoadedScenario,
    policy: Policy | None = None,
    target_factory: TargetFactory = model_target,
    monitor: MonitorFactory | None = Monitor,
) -> ScenarioResult:
    """Run one scenario. ``policy`` overrides the file's; ``monitor`` judges
    each step: by default the invariant checkers (every one; only those the
    file's own policy keeps for a file that says ``invariants = "expected"``
    and runs under that policy), ``None`` none."""
    scenario = loaded.scenario
    chosen = policy if policy is not None else resolve_policy(scenario.policy, loaded.origin)
    factory = monitor
    if monitor is Monitor and policy is None:
        if scenario.invariants == "expected":
            # A file written for its policy's own rules, where they depart
            # from g4's: judged by the invariants that policy keeps.
            factory = functools.partial(Monitor, only_expected=True)
    started = time.perf_counter()
    target = target_factory(chosen, scenario.step_limit)
    try:
        result = execute(scenario, loaded.origin, chosen, target, factory)
    finally:
        target.close()
    return dataclasses.replace(result, seconds=time.perf_counter() - started)


class _Run:
    """The shell's bookkeeping for one run: trace, view, names, monitor."""

    def __init__(self, policy: Policy, target: Target, monitor: Any, scenario: Scenario) -> None:
        self.policy = policy
        self.target = target
        self.monitor = monitor
        self.steps: list[Step] = []
        self.labels: list[int | None] = []  # trace index -> scenario step number
        self.view = View()
        # IDs are named step by step, as the renderer does, so that an ID the
        # target generated before the file names it literally is still gen:N.
        self.names = Names()
        self.violations: list[Any] = []
        self.events: list[Any] = []  # every event observed, in order (for log's symbolic after)

    def record(self, number: int | None, decision: str, step: Step) -> None:
        self.steps.append(step)
        self.labels.append(number)
        self.events.extend(step.observed.events)
        self.view.absorb(step.observed)
        self.names.absorb(step.reply, step.observed)
        if self.monitor is not None:
            self.violations.extend(self.monitor.feed(step))

    def request(
        self, number: int | None, decision: str, op: Op, crash_at: str | None
    ) -> tuple[Reply, Observed]:
        reply, observed = self.target.request(op, crash_at)
        self.record(
            number,
            decision,
            Step(len(self.steps), "safety", "request", decision, op, crash_at, reply, observed),
        )
        return reply, observed

    def restart(self, number: int, now: int, step_limit: int) -> Observed:
        _, observed = self.request(
            number, f"scenario step {number} restart", hello_op(now, step_limit), None
        )
        return observed


def execute(
    scenario: Scenario,
    origin: str,
    policy: Policy,
    target: Target,
    monitor_factory: MonitorFactory | None,
) -> ScenarioResult:
    """Drive ``target`` through ``scenario`` and judge it (see the module docstring)."""
    if any(step.op == "group" for step in scenario.step):
        raise HarnessError(
            f"{origin}: a scenario with a group step is judged by the linearizability search "
            "(search/group_scenario.py, as `inboxsim run` does), not step by step"
        )
    hello = hello_op(0, scenario.step_limit)
    reply, observed = target.request(hello)
    if not isinstance(reply, Ok):
        raise_failure = Failure(None, f"hello failed: {reply}")
        header = TraceHeader(None, policy.name, target.name, {}, __version__)
        trace = Trace(header, ())
        return ScenarioResult(
            scenario.name, origin, policy.name, (raise_failure,), trace, trace_hash(trace), False, 0
        )
    hello_result = dict(reply.result)
    monitor = monitor_factory(policy, hello_result) if monitor_factory is not None else None
    run = _Run(policy, target, monitor, scenario)
    run.record(None, "hello", Step(0, "safety", "request", "hello", hello, None, reply, observed))

    failures: list[Failure] = []
    results: dict[int, dict[str, Any]] = {}  # step number -> Ok result, for expect_same_receipt_as
    now = 0
    steps_run = 0
    for number, spec in enumerate(scenario.step, start=1):
        now = spec.now if spec.now is not None else now + 1
        decision = f"scenario step {number}"
        steps_run = number
        if spec.kill:
            observed = target.kill()
            run.record(
                number,
                decision,
                Step(len(run.steps), "safety", "crash", decision, None, None, None, observed),
            )
            run.restart(number, now, scenario.step_limit)
            failures += [
                Failure(number, m)
                for m in check_step(
                    spec, None, observed.events, run.view, run.names, results, policy
                )
            ]
            continue
        run.names.name(spec.input)
        op, problem = build_op(spec, now, run.view, run.names, run.events)
        if op is None:
            # The scenario cannot go on meaningfully (its call or message is not
            # there): a failure of the target, reported at this step.
            failures.append(Failure(number, problem or "cannot build the request"))
            break
        reply, observed = run.request(number, decision, op, spec.crash_at)
        if isinstance(reply, Ok):
            results[number] = reply.result
        if isinstance(reply, Crashed):
            run.restart(number, now, scenario.step_limit)
        failures += [
            Failure(number, m)
            for m in check_step(spec, reply, observed.events, run.view, run.names, results, policy)
        ]
    if monitor is not None:
        run.violations.extend(monitor.finish(False))
    failures += _judge_violations(scenario, run, monitor is not None)
    header = TraceHeader(
        None, policy.name, target.name, hello_result, __version__, {"scenario": scenario.name}
    )
    trace = Trace(header, tuple(run.steps))
    return ScenarioResult(
        scenario.name,
        origin,
        policy.name,
        tuple(failures),
        trace,
        trace_hash(trace),
        monitor is not None,
        steps_run,
        tuple(run.violations),
        tuple(sorted(getattr(monitor, "exercised", ()))),
        expected_violation=scenario.expect_violation,
    )


def _judge_violations(scenario: Scenario, run: _Run, checked: bool) -> list[Failure]:
    expected = scenario.expect_violation
    out: list[Failure] = []
    seen = False
    for v in run.violations:
        indices = [i for i in getattr(v, "steps", ()) if 0 <= i < len(run.labels)]
        numbers = [run.labels[i] for i in indices if run.labels[i] is not None]
        where = numbers[-1] if numbers else None
        if expected is not None and v.invariant == expected:
            seen = True
            continue
        out.append(
            Failure(where, f"invariant {v.invariant} violated: {v.message}", v.invariant, True)
        )
    if expected is not None and not seen:
        why = "" if checked else " (the invariant checkers are not available)"
        out.append(
            Failure(None, f"expected a violation of {expected}, none was found{why}", expected)
        )
    return out


# --- building a request ---------------------------------------------------------


def build_op(
    spec: StepSpec, now: int, view: View, names: Names, events: Sequence[Any] = ()
) -> tuple[Op | None, str | None]:
    """The request a step stands for, references resolved; or None and why.
    A log's ``after = "TYPE:INPUT"`` is the seq of the last such event seen in
    its session (seq values are the target's own, so a file names the event)."""
    assert spec.op is not None
    fields = spec.request_fields()
    if isinstance(fields.get("after"), str):
        kind, _, symbol = fields["after"].partition(":")
        seqs = [
            e.seq
            for e in events
            if e.session == fields.get("session")
            and e.type == kind
            and (not symbol or (e.input is not None and names.symbol(e.session, e.input) == symbol))
        ]
        if not seqs:
            return None, f"after = {fields['after']!r} names no event the target has shown"
        fields["after"] = seqs[-1]
    if spec.op == "answer" and "session" in fields:
        session = fields.pop("session")
        call = next((c for c in view.calls if c.session == session), None)
        if call is None:
            return None, f"answer: session {session!r} has no open call"
        fields["call"] = call.call
    session = fields.get("session")  # references are resolved in the op's session
    for key in REFERENCE_FIELDS:
        value = fields.get(key)
        if isinstance(value, str):
            resolved = names.resolve(session, value)
            if resolved is None:
                return None, f"{key} = {value!r} names nothing the target has shown"
            fields[key] = resolved
    kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()}
    return OPS[spec.op](now=now, **kwargs), None


# --- the pure core: judging one step ----------------------------------------------


def check_step(
    spec: StepSpec,
    reply: Reply | None,
    events: Sequence[Any],
    view: View,
    names: Names,
    results: dict[int, dict[str, Any]],
    policy: Policy | None = None,
) -> list[str]:
    """Every expectation of ``spec`` that the observations contradict.

    Under a policy whose runner writes its lifecycle events otherwise
    (``step_events = "on_response"``, G2), ``expect_events`` is judged on the
    inbox's own events only: the ``execution_*`` and ``step_*`` events a
    scenario lists are the G4 runner's, and their G2 timing is the
    invariants' to judge."""
    out: list[str] = []
    if spec.expect_error is not None:
        if not (isinstance(reply, Err) and reply.code == spec.expect_error):
            out.append(f"expected error {spec.expect_error}, got {_show(reply)}")
    if spec.expect_ok is not None and isinstance(reply, Ok) != spec.expect_ok:
        out.append(f"expected {'success' if spec.expect_ok else 'no success'}, got {_show(reply)}")
    result = reply.result if isinstance(reply, Ok) else None
    if spec.expect_result is not None:
        if result is None:
            out.append(f"expected result {spec.expect_result}, got {_show(reply)}")
        else:
            out += _subset("result", spec.expect_result, result)
    if spec.expect_receipt is not None:
        want = spec.expect_receipt.model_dump(exclude_none=True)
        if result is None:
            out.append(f"expected a receipt {want}, got {_show(reply)}")
        else:
            seen = dict(result)
            if isinstance(seen.get("input"), str):
                seen["input"] = names.symbol(seen.get("session"), seen["input"])
            out += _subset("receipt", want, seen)
    if spec.expect_same_receipt_as is not None:
        original = results.get(spec.expect_same_receipt_as)
        if original is None:
            out.append(f"step {spec.expect_same_receipt_as} returned no receipt to compare with")
        elif result != original:
            out.append(
                f"expected the receipt of step {spec.expect_same_receipt_as} {original}, "
                f"got {_show(reply)}"
            )
    session = spec.state_session
    if spec.expect_pending is not None and session is not None:
        got = [names.symbol(session, r.input) for r in view.pending.get(session, ())]
        if got != spec.expect_pending:
            out.append(f"expected pending {spec.expect_pending} in {session}, got {got}")
    if spec.expect_transcript is not None and session is not None:
        got = [names.symbol(session, m.id) for m in view.transcript.get(session, ())]
        if got != spec.expect_transcript:
            out.append(f"expected transcript {spec.expect_transcript} in {session}, got {got}")
    if spec.expect_calls is not None:
        out += _check_calls(spec.expect_calls, view, names)
    if spec.expect_events is not None:
        # other:<native> events are the implementation's own (adapter protocol,
        # "An event is"): a scenario, written in the protocol's vocabulary,
        # cannot expect them.
        types = [e.type for e in events if not e.type.startswith("other:")]
        wanted = list(spec.expect_events)
        if policy is not None and policy.step_events == "on_response":
            types, wanted = _inbox_events(types), _inbox_events(wanted)
        if types != wanted:
            out.append(f"expected events {wanted}, got {types}")
    if spec.expect_log is not None:
        logged = [
            e["type"] + (f":{names.symbol(spec.session, e['input'])}" if e.get("input") else "")
            for e in (result or {}).get("events", ())
            if not e["type"].startswith("other:")
        ]
        wanted = list(spec.expect_log)
        if policy is not None and policy.step_events == "on_response":
            logged, wanted = _inbox_events(logged), _inbox_events(wanted)
        if result is None or logged != wanted:
            shown = logged if result is not None else _show(reply)
            out.append(f"expected log {wanted}, got {shown}")
    return out


def _inbox_events(types: list[str]) -> list[str]:
    return [t for t in types if not t.startswith(("execution_", "step_"))]


def _check_calls(expected: list[CallExpect], view: View, names: Names) -> list[str]:
    got = [
        {
            "session": c.session,
            "kind": c.kind,
            "step": c.step,
            "final": c.final,
            "context": [names.symbol(c.session, m) for m in c.context],
        }
        for c in view.calls
    ]
    wants = [e.model_dump(exclude_none=True) for e in expected]
    if len(got) != len(wants) or any(
        any(g.get(k) != v for k, v in w.items()) for g, w in zip(got, wants, strict=False)
    ):
        return [f"expected open calls {wants}, got {got}"]
    return []


def _subset(what: str, want: dict[str, Any], got: dict[str, Any]) -> list[str]:
    wrong = {k: got.get(k, "<absent>") for k, v in want.items() if got.get(k) != v}
    if wrong:
        return [f"expected {what} {want}, but {wrong}"]
    return []


def _show(reply: Reply | None) -> str:
    if reply is None:
        return "no reply"
    if isinstance(reply, Ok):
        return f"success {reply.result}"
    if isinstance(reply, Err):
        return f"error {reply.code}"
    return f"a crash at {reply.point}"
