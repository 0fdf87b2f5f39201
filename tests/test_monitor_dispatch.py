"""The monitor calls only the hooks that care about a step: on a step that
moved nothing it leaves out the checkers whose ``end`` would have nothing to
judge there (``Checker.moved_only``, ``still``, ``refused``), and their
``begin``; on a step that moved something, those whose ``end`` judges only
what it did not move (``moves``); on a step not answered with a result the
``answered`` ones; on any but a refused one the ``refused_only`` ones; and
on a step in no concurrent group the ``grouped_only`` ones. Each of those
claims is checked here against the same checkers with the claims taken away
(every hook on every step of its types): the same violations at every step,
the same exercised invariants, and the same memory in every checker after
every step; and a claim made wrongly is shown to be caught."""

from __future__ import annotations

from typing import Any

import pytest

from inboxsim.invariants import CHECKERS, Monitor
from inboxsim.invariants import monitor as monitor_module
from inboxsim.invariants.base import OPENED
from inboxsim.model import PRESETS
from inboxsim.model.values import Err, Ok
from inboxsim.sim.run import RunOptions, run_seed
from inboxsim.trace.record import Step, group_of

EVERY_STEP = tuple(
    type(
        cls.__name__,
        (cls,),
        {
            "moved_only": False,
            "moves": 0,
            "still": None,
            "refused": None,
            "answered": False,
            "refused_only": False,
            "grouped_only": False,
        },
    )
    for cls in CHECKERS
)
"""The checkers without their claims: called on every step their types name."""


def _memory(monitor: Monitor) -> list[dict[str, Any]]:
    """What each checker remembers between steps (its attributes but the base's
    and the step-scoped ones)."""
    return [
        {k: v for k, v in c.__getstate__().items() if k not in ("env", "t", "policy")}
        for c in monitor.checkers
    ]


def _still(step: Step) -> bool:
    o = step.observed
    return step.kind != "crash" and not (
        o.events or o.pending or o.transcript or o.calls is not None
    )


def _first_difference(
    kinds: tuple[type, ...], preset: str, concurrency: int, counts: dict[str, int]
) -> tuple[int, int] | None:
    """Feed 12 seeds of ``preset`` to a monitor of ``kinds`` (the dispatch's
    claims as those classes make them) and to one of ``EVERY_STEP``; the
    first (seed, step) where their violations, exercised invariants or
    checkers' memory differ (step -1: at the end), or None. ``counts`` tallies
    the steps each claim left hooks out of."""
    policy = PRESETS[preset]
    for seed in range(12):
        trace = run_seed(seed, policy, RunOptions(ops=80, concurrency=concurrency)).trace
        hello = trace.header.hello
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(monitor_module, "CHECKERS", kinds)
            dispatched = Monitor(policy, hello)
            patch.setattr(monitor_module, "CHECKERS", EVERY_STEP)
            every = Monitor(policy, hello)
        for step in trace.steps:
            if (
                dispatched.feed(step) != every.feed(step)
                or dispatched.exercised != every.exercised
                or _memory(dispatched) != _memory(every)
            ):
                return seed, step.index
            refused = isinstance(step.reply, Err)
            still = _still(step)
            counts["refused"] += still and refused
            counts["still"] += still and not refused
            counts["unanswered"] += not still and not isinstance(step.reply, Ok)
            counts["solo"] += group_of(step.decision) is None
        if dispatched.finish(True) != every.finish(True):
            return seed, -1
    return None


@pytest.mark.parametrize(
    ("preset", "concurrency"), [("g4", 1), ("g2", 1), ("b", 1), ("g5", 4), ("c", 4)]
)
def test_hooks_left_out_would_have_judged_nothing(preset: str, concurrency: int) -> None:
    counts = dict.fromkeys(("refused", "still", "unanswered", "solo"), 0)
    assert _first_difference(CHECKERS, preset, concurrency, counts) is None
    # every kind of step a claim leaves hooks out of was judged: one that moved
    # nothing, refused or answered; one that moved, unanswered; one in no group
    assert all(counts.values()), counts


@pytest.mark.parametrize(
    ("checker", "claim", "value", "preset", "concurrency"),
    [
        ("ReuseChecker", "grouped_only", True, "g4", 1),  # judges retries sent alone
        ("ErrorChecker", "answered", True, "g4", 1),  # judges the refused
        ("ReuseChecker", "refused_only", True, "g4", 1),  # judges a retry's receipt
        ("DurabilityChecker", "refused_only", True, "g4", 1),  # judges receipts
        ("LifecycleChecker", "answered", True, "g4", 1),  # a crash ends its executions
        ("ConcurrentRetryChecker", "answered", True, "c", 4),  # a refused twin answers as the first
        ("AtomicChecker", "moves", OPENED, "g4", 1),  # judges promotions without a call
    ],
)
def test_a_wrong_claim_is_caught(
    checker: str, claim: str, value: Any, preset: str, concurrency: int
) -> None:
    """The comparison above is not blind: a claim made by a checker that
    does judge such steps shows as a difference."""
    wrong = tuple(
        type(cls.__name__, (cls,), {claim: value}) if cls.__name__ == checker else cls
        for cls in CHECKERS
    )
    counts = dict.fromkeys(("refused", "still", "unanswered", "solo"), 0)
    assert _first_difference(wrong, preset, concurrency, counts) is not None
