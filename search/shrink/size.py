"""How long a trace is, and where its failure ends it: what every shrink
driver orders its candidates by and reports."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...model import Create, Hello
from ...sim.run import RunResult
from ...trace.record import Step


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


def first_violation(result: RunResult) -> Any | None:
    return result.violations[0] if result.violations else None


__all__ = ["Size", "first_violation", "size_of", "upto_violation"]
