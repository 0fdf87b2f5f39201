"""The simulator's link to the invariant checkers (``inboxsim.invariants``).

The run loop feeds every step to a monitor and stops at the first violation.
The checkers are imported plainly (``invariants`` is a layer below ``sim``);
a sweep may instead name another module with the same two names (a test's
stub, a deliberately weakened checker), sent to workers by name: that one is
imported when named, and a missing one is one clear harness error rather than
an import traceback from deep in a worker.

The interface the run loop relies on::

    Violation(invariant: str, steps: tuple[int, ...], message: str)
    m = Monitor(policy, hello_result)
    m.feed(step) -> list[Violation]
    m.finish(liveness: bool) -> list[Violation]
    m.exercised: set[str]

and, for the checkers' module a sweep names, a third argument
``Monitor(policy, hello_result, only_expected)``: a sweep judges every
invariant by default, so that it shows where a policy departs from them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, Protocol

from .. import invariants
from ..errors import HarnessError
from ..invariants.monitor import MonitorFactory, MonitorLike
from ..model import Policy

ViolationFactory = Callable[[str, tuple[int, ...], str], Any]


class CheckersMonitor(Protocol):
    """A checkers' module's ``Monitor``: a :data:`MonitorFactory` that also
    takes ``only_expected`` (judge only the invariants the policy is expected
    to keep)."""

    def __call__(
        self, policy: Policy, hello: dict[str, Any], only_expected: bool = False
    ) -> MonitorLike: ...


DEFAULT = "inboxsim.invariants"


def load(module: str | None = None) -> tuple[CheckersMonitor, ViolationFactory]:
    """``Monitor`` and ``Violation`` from the checkers' module (by default
    :mod:`inboxsim.invariants`; another module with the same two names can
    stand in, e.g. a test's stub or a deliberately weakened checker), or a
    HarnessError saying why they are not available."""
    name = module or DEFAULT
    if name == DEFAULT:
        return invariants.Monitor, invariants.Violation
    try:
        found = importlib.import_module(name)
        return found.Monitor, found.Violation
    except (ImportError, AttributeError) as exc:
        raise HarnessError(
            f"the invariant checkers are not available ({name}: {exc}); "
            "a run cannot be judged without them"
        ) from None


def monitor_for(module: str | None, only_expected: bool) -> tuple[MonitorFactory, ViolationFactory]:
    """The run's monitor factory from the checkers' module: every invariant,
    or (``only_expected``) only those the policy is expected to keep."""
    monitor, violation = load(module)

    def build(policy: Policy, hello: dict[str, Any]) -> MonitorLike:
        return monitor(policy, hello, only_expected)

    return build, violation
