"""The monitor calls only the hooks that care about a step: on a step that
moved nothing it leaves out the checkers whose ``end`` would have nothing to
judge there (``Checker.moved_only``, ``still``, ``refused``), and their
``begin``. Each of those claims is checked here against the same checkers
with the claims taken away (every hook on every step of its types): the
same violations at every step, the same exercised invariants, and the same
memory in every checker after every step."""

from __future__ import annotations

from typing import Any

import pytest

from inboxsim.invariants import CHECKERS, Monitor
from inboxsim.invariants import monitor as monitor_module
from inboxsim.model import PRESETS
from inboxsim.model.values import Err
from inboxsim.sim.run import RunOptions, run_seed
from inboxsim.trace.record import Step

EVERY_STEP = tuple(
    type(cls.__name__, (cls,), {"moved_only": False, "still": None, "refused": None})
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


@pytest.mark.parametrize(
    ("preset", "concurrency"), [("g4", 1), ("g2", 1), ("b", 1), ("g5", 4), ("c", 4)]
)
def test_hooks_left_out_would_have_judged_nothing(
    preset: str, concurrency: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    policy = PRESETS[preset]
    refused = answered = 0
    for seed in range(12):
        trace = run_seed(seed, policy, RunOptions(ops=80, concurrency=concurrency)).trace
        hello = trace.header.hello
        dispatched = Monitor(policy, hello)
        with monkeypatch.context() as patch:
            patch.setattr(monitor_module, "CHECKERS", EVERY_STEP)
            every = Monitor(policy, hello)
        for step in trace.steps:
            assert dispatched.feed(step) == every.feed(step), (seed, step.index)
            assert dispatched.exercised == every.exercised, (seed, step.index)
            assert _memory(dispatched) == _memory(every), (seed, step.index)
            if _still(step):
                refused += isinstance(step.reply, Err)
                answered += not isinstance(step.reply, Err)
        assert dispatched.finish(True) == every.finish(True)
    assert refused and answered  # both kinds of step that moved nothing were judged
