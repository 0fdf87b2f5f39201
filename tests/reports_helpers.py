"""A checkers' module that finds nothing (for ``check``'s "fixed false alarm" case)."""

from __future__ import annotations

from typing import Any

from inboxsim.invariants import Violation as Violation


class Monitor:
    def __init__(self, policy: Any, hello: dict[str, Any], only_expected: bool = False) -> None:
        self.exercised: set[str] = set()

    def feed(self, step: Any) -> list[Violation]:
        return []

    def finish(self, liveness: bool) -> list[Violation]:
        return []
