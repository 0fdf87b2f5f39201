"""A checkers' module (``Monitor``, ``Violation``) whose monitor kills the
worker process judging its ninth run: a sweep's local worker dying
mid-batch, after some batches were written (tests/test_sim_sweep.py)."""

from __future__ import annotations

import os
from typing import Any

from inboxsim.invariants import Monitor as _Monitor
from inboxsim.invariants import Violation

__all__ = ["Monitor", "Violation"]

_RUNS = 0


def Monitor(*args: Any, **kw: Any) -> _Monitor:  # noqa: N802 - stands in for the class
    global _RUNS
    _RUNS += 1
    if _RUNS == 9:
        os._exit(7)
    return _Monitor(*args, **kw)
