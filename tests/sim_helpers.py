"""Helpers for the simulator tests: the checkers, or a stand-in until they land.

The simulator is written against ``inboxsim.invariants`` (Monitor, Violation).
While that package is being written, the simulator's tests use the real
checkers when they import, and otherwise this small stand-in that judges only
the monotonic visible timestamps (the invariant ``g2`` breaks), so that the
run loop, its stop-at-first-violation and its liveness verdict are tested
either way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from inboxsim.model import Policy
from inboxsim.trace.record import Step


@dataclass(frozen=True, slots=True)
class StubViolation:
    invariant: str
    steps: tuple[int, ...]
    message: str


class StubMonitor:
    """Judges one invariant: each session's visible messages carry
    non-decreasing times in transcript order."""

    def __init__(self, policy: Policy, hello: dict[str, Any], only_expected: bool = False) -> None:
        # Takes only_expected like the real Monitor, so that it can stand in
        # for it as a checkers' module (sim.checkers.monitor_for).
        self.exercised: set[str] = set()

    def feed(self, step: Step) -> list[StubViolation]:
        found = []
        for session, messages in step.observed.transcript:
            times = [m.time for m in messages]
            if len(times) > 1:
                self.exercised.add("visible_time.monotonic")
            if any(a > b for a, b in zip(times, times[1:], strict=False)):
                found.append(
                    StubViolation(
                        "visible_time.monotonic",
                        (step.index,),
                        f"{session}: visible message times {times} decrease",
                    )
                )
        return found

    def finish(self, liveness: bool) -> list[StubViolation]:
        return []


def checkers() -> dict[str, Any]:
    """Keyword arguments for ``run``: the real checkers, or the stand-in."""
    return {"checkers_module": checkers_module()}


def real_checkers() -> bool:
    try:
        from inboxsim.invariants import Monitor  # noqa: F401
    except ImportError:
        return False
    return True


# The names a checkers' module provides (``sim.checkers.load``), so that this
# module can stand in for inboxsim.invariants in sweeps, worker processes too.
Monitor = StubMonitor
Violation = StubViolation


def checkers_module() -> str:
    """The module sweeps in these tests take their checkers from."""
    return "inboxsim.invariants" if real_checkers() else "tests.sim_helpers"


# --- monitors for explore --jobs (importable by worker processes) ------------------


class NoPickle:
    """A monitor that cannot be sent to a worker (it holds a lambda)."""

    def __init__(self, policy: Any, hello: dict[str, Any]) -> None:
        self.hook = lambda: None

    def feed(self, step: Any) -> list[Any]:
        return []


class DiesInWorkers:
    """A monitor that kills the process judging it, unless it is the search's own."""

    def __init__(self, policy: Any, hello: dict[str, Any]) -> None:
        import os

        self.home = os.getpid()

    def feed(self, step: Any) -> list[Any]:
        import os

        if os.getpid() != self.home:
            os._exit(3)
        return []
