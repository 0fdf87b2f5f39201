"""A seed's decision list as a shrink candidate.

A run is fully described by its decision list (:mod:`inboxsim.sim.rng`), and
any edited list still replays validly (a missing draw reads as 0, values are
clamped). So a seed shrinks by the engine's plain passes over that list, in
the style of Hypothesis' passes: delete chunks of decisions; zero chunks (0 is
the simplest choice: no kill, no crash, the first family, the first session;
in the swarm draws that come first, 0 turns an optional family off or a fault
rate to 0, fine while the run still fails); lower single values. A test
returns as the normal form the decisions the replay actually drew (the run
stops at its failure, so everything after it goes).

The decisions of one step are found through :class:`Marking`, a monitor
wrapper that notes, per step, how many decisions were drawn by then: the
engine's segment passes delete whole steps with them.
"""

from __future__ import annotations

from typing import Any

from ...sim.rng import Chooser
from ...trace.record import Step


class Marking:
    """Wraps a monitor to note, per step, how many decisions were drawn by
    then: step ``i`` came from decisions ``[at[i-1], at[i])``."""

    def __init__(self, inner: Any, ch: Chooser, at: list[int]) -> None:
        self.inner, self.ch, self.at = inner, ch, at

    def feed(self, step: Step) -> Any:
        self.at.append(len(self.ch.decisions))
        return self.inner.feed(step)

    def finish(self, liveness: bool) -> Any:
        return self.inner.finish(liveness)

    @property
    def exercised(self) -> Any:
        return self.inner.exercised


class Recording(Marking):
    """A marking monitor that also keeps every step it was fed (a run that
    raises, such as a lockstep divergence, leaves no trace otherwise)."""

    def __init__(self, inner: Any, ch: Chooser, at: list[int], steps: list[Step]) -> None:
        super().__init__(inner, ch, at)
        self.steps = steps

    def feed(self, step: Step) -> Any:
        self.steps.append(step)
        return super().feed(step)


__all__ = ["Marking", "Recording"]
