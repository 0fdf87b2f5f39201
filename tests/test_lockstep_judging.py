"""The checkers judge a concurrent group along every legal end lockstep
carries (issue 19): a target is correct for a group when some legal order
replays its replies and observations and the invariants hold along it.

The group below (s1 runs call-1; an answer to it, an interrupt, a steer u5
and a queued u2 at once; the target takes the interrupt before the answer)
has two legal ends whose orders give different trace steps: along the
search's first, the runner is still busy after the interrupt's step; along
the other it is not. A checker that rejects the first order alone must not
fail the run (the other order is legal and clean; its steps are the ones
recorded); one that rejects both fails it, naming the first order's
violation and how many orders were judged. The real checkers judge both
ends too: receipts of concurrent exact retries that differ are
``concurrent-retry`` (and ``retry-same-receipt``) along each.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from inboxsim.invariants import Monitor
from inboxsim.invariants.base import Violation
from inboxsim.model import G4, Answer, Create, Hello, Interrupt, Ok, Op, Policy, Prompt
from inboxsim.search.lockstep import LockstepTarget
from inboxsim.targets.group import GroupReply
from inboxsim.targets.target import ModelTarget
from inboxsim.trace.record import Observed, Step, group_of

from .test_lockstep_ends import Grouping

# the interrupt first, then the answer (an error: the call is gone), u5, u2
SCHEDULE = [0, 1, 0, 0]
RULE = "scripted-rule"


class Scripted(Monitor):
    """The real checkers and one scripted rule: ``fires(step)`` says where
    it breaks (a test's stand-in for a checker that rejects some orders)."""

    fires: Callable[[Step], bool] = staticmethod(lambda step: False)

    def feed(self, step: Step) -> list[Violation]:
        found = super().feed(step)
        if type(self).fires(step):
            found.append(Violation(RULE, (step.index,), f"the rule rejects step {step.index}"))
        return found

    def clone(self) -> Monitor:
        copy = super().clone()
        copy.__class__ = type(self)
        return copy


def _busy_interrupt(step: Step) -> bool:
    mark = group_of(step.decision)
    return isinstance(step.request, Interrupt) and mark is not None and mark.busy


def _any_interrupt(step: Step) -> bool:
    return isinstance(step.request, Interrupt)


class Driven:
    """A lockstep target driven as ``sim.run`` drives it: each step recorded
    and fed to the monitor the target judges with; stops at a violation."""

    def __init__(self, lock: LockstepTarget, monitor: Callable[..., Any] | None) -> None:
        self.lock = lock
        reply, observed = lock.request(Hello(0, step_limit=3))
        assert isinstance(reply, Ok)
        self.checks = None if monitor is None else lock.judging(monitor(G4, reply.result))
        self.steps: list[Step] = []
        self.found: list[Violation] = []
        self._record(
            Step(0, "safety", "request", "hello", Hello(0, step_limit=3), None, reply, observed)
        )

    def _record(self, step: Step) -> None:
        self.steps.append(step)
        if self.checks is not None:
            self.found.extend(self.checks.feed(step))

    def request(self, op: Op) -> None:
        reply, observed = self.lock.request(op)
        self._record(Step(len(self.steps), "safety", "request", op.OP, op, None, reply, observed))

    def group(self, ops: list[Op], schedule: list[int]) -> list[Step]:
        served = self.lock.group_steps(ops, schedule)
        assert served.failure is None
        steps = served.steps(len(self.steps), "race", ops)
        for step in steps:
            self._record(step)
            if self.found:
                break
        return steps


def _drive(
    monitor: Callable[..., Any] | None, target: ModelTarget | None = None, retry: bool = False
) -> Driven:
    lock = LockstepTarget(ModelTarget(G4, 3), target or Grouping(G4, 3))
    run = Driven(lock, monitor)
    run.request(Create(1, session="s1"))
    run.request(Prompt(2, session="s1", input="m1", text="a"))
    assert isinstance(lock.target, ModelTarget)
    call = lock.target.state.runs["s1"].call.call
    ops: list[Op] = [
        Answer(3, call=call, finish="stop"),
        Interrupt(3, session="s1"),
        Prompt(3, session="s1", input="u5", text="c"),
        Prompt(3, session="s1", input="u2", text="a", delivery="queue"),
    ]
    if retry:  # an exact retry of u5 at once
        ops.append(Prompt(3, session="s1", input="u5", text="c"))
    run.group(ops, SCHEDULE + ([0] if retry else []))
    return run


def _scripted(fires: Callable[[Step], bool]) -> type[Scripted]:
    return type("Rule", (Scripted,), {"fires": staticmethod(fires)})


def _interrupt_busy(steps: list[Step]) -> bool:
    (step,) = [s for s in steps if isinstance(s.request, Interrupt)]
    mark = group_of(step.decision)
    return mark is not None and mark.busy


def test_the_search_s_first_order_leaves_the_runner_busy_after_the_interrupt() -> None:
    """The premise: judged along the first end alone (no monitor), the
    recorded interrupt is busy, so the scripted rule rejects it."""
    alone = _drive(None)
    assert _interrupt_busy(alone.steps)
    assert len(alone.lock.others) == 1  # the other legal end, carried
    rule = _scripted(_busy_interrupt)(G4, alone.steps[0].reply.result)  # type: ignore[union-attr]
    found = [v.invariant for s in alone.steps for v in rule.feed(s)]
    assert found == [RULE]


def test_a_group_holds_when_another_legal_order_passes_the_checkers() -> None:
    run = _drive(_scripted(_busy_interrupt))
    assert run.found == []
    assert not _interrupt_busy(run.steps)  # the order recorded is the one accepted
    assert not run.lock.others  # the rejected end is dropped, its checkers with it


def test_a_group_is_violated_when_every_legal_order_fails_the_checkers() -> None:
    run = _drive(_scripted(_any_interrupt))
    assert [v.invariant for v in run.found] == [RULE]
    (v,) = run.found
    assert "every one of the 2 legal orders of the group at step 3" in v.message
    assert _interrupt_busy(run.steps)  # reported along the search's first order


class Unequal(Grouping):
    """A target whose later exact retry in a group gets a receipt of another
    time (its own clock): ``concurrent-retry`` along any order."""

    def group(self, ops: list[Op], schedule: list[int], *more: Any) -> tuple[GroupReply, Observed]:
        served, observed = super().group(ops, schedule, *more)
        outcomes = list(served.outcomes)
        last = outcomes[-1]
        assert last is not None and last["ok"]
        outcomes[-1] = {**last, "result": {**last["result"], "time": last["result"]["time"] + 1}}
        return served._replace(outcomes=outcomes), observed


def _only_expected(policy: Policy, hello: dict[str, Any]) -> Monitor:
    return Monitor(policy, hello, only_expected=True)


def test_the_real_checkers_judge_every_legal_order_and_name_the_invariant() -> None:
    held = _drive(_only_expected, retry=True)
    assert held.found == []
    run = _drive(_only_expected, Unequal(G4, 3), retry=True)
    assert {v.invariant for v in run.found} == {"concurrent-retry", "retry-same-receipt"}
    for v in run.found:
        assert "every one of the 2 legal orders of the group at step 3" in v.message


class Remembering(Scripted):
    """A scripted rule with memory: after a busy interrupt in a group, the
    next request outside a group breaks it (a checker whose verdict on a
    later step depends on the order a group was judged along)."""

    always = False

    def feed(self, step: Step) -> list[Violation]:
        found = Monitor.feed(self, step)
        if _busy_interrupt(step) or (type(self).always and isinstance(step.request, Interrupt)):
            self.__dict__["owed"] = True
        elif self.__dict__.get("owed") and group_of(step.decision) is None:
            found.append(Violation(RULE, (step.index,), f"the rule rejects step {step.index}"))
        return found

    def clone(self) -> Monitor:
        copy = super().clone()
        if "owed" in self.__dict__:
            copy.__dict__["owed"] = self.__dict__["owed"]
        return copy


class RememberingAlways(Remembering):
    always = True


def test_a_later_step_drops_the_ends_whose_checkers_fire_and_holds_on_another() -> None:
    run = _drive(Remembering)
    assert run.found == [] and _interrupt_busy(run.steps)  # both orders pass the group
    assert len(run.lock.others) == 1
    run.request(Create(4, session="s2"))
    assert run.found == []  # the first end's checkers fire; the other's do not
    assert not run.lock.others


def test_a_later_step_is_violated_when_every_end_s_checkers_fire() -> None:
    run = _drive(RememberingAlways)
    assert run.found == [] and len(run.lock.others) == 1
    run.request(Create(4, session="s2"))
    (v,) = run.found
    assert v.invariant == RULE and "each of the 2 legal ends carried" in v.message
