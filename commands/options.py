"""Checks of the options several commands share (the seeded ones: ``sweep``,
``replay``, ``shrink``)."""

from __future__ import annotations

from ..errors import HarnessError
from ..model import Policy
from ..policy_file import load_policy
from ..sim.run import RunOptions


def model_only(target: str) -> None:
    """``--target``: only the reference model is available to seeded runs."""
    if target != "model":
        raise HarnessError(f"--target {target!r} is not available yet: only 'model' is")


def sim_inputs(
    policy: str, ops: int, target: str, only_expected: bool, concurrency: int = 1
) -> tuple[Policy, RunOptions]:
    """The policy and run options of a seeded command, its options checked."""
    model_only(target)
    options = RunOptions(ops=ops, only_expected=only_expected, concurrency=concurrency)
    return load_policy(policy), options
