"""The one source of randomness of a run, and the record of what it drew.

Every choice the simulator makes goes through a :class:`Chooser`, and every
choice is recorded as one small non-negative integer: the index that was
chosen. The list of those integers, the run's *decisions*, is a complete
description of the run: replaying it (:func:`replayer`) gives the same run
without the generator that first produced it.

Why indices rather than raw generator output: a shrinker edits the decision
list (deletes stretches, lowers values) and expects every edited list to still
describe a valid run. So a replayed value is clamped into the range of the
choice being made, and a missing value (the list ran out) reads as 0, the
simplest choice. Choices are ordered so that 0 is the simplest: the first
option of a pick, ``False`` for a chance, the smallest number.

Live draws use only ``random()`` of the injected object, so anything with a
``random() -> float`` method drives a run: a seeded :class:`random.Random` in a
sweep, or Hypothesis' ``st.randoms(use_true_random=False)``, whose floats
shrink toward 0.0, that is toward the simplest choice.
"""

from __future__ import annotations

import random
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from itertools import accumulate
from math import trunc  # int(x) for a float, without the call of a type: ~500 instructions less
from typing import Protocol, TypeVar

T = TypeVar("T")
U = TypeVar("U")


class RandomLike(Protocol):
    def random(self) -> float: ...


class Chooser:
    """Makes and records choices; live (from a generator) or replayed.

    Hot path: a run makes about ten choices per operation, so the methods are
    small and avoid allocation.
    """

    __slots__ = ("_rng", "_random", "_script", "_at", "decisions", "_record")

    def __init__(self, rng: RandomLike | None, script: Sequence[int] | None = None) -> None:
        self._rng = rng
        # Live draws call these directly (a sweep makes ~1,000 choices a seed).
        self._random = rng.random if rng is not None and script is None else None
        self._script = script
        self._at = 0
        self.decisions: list[int] = []
        self._record = self.decisions.append

    def below(self, n: int) -> int:
        """An integer in ``[0, n)``; ``n`` must be at least 1."""
        if n <= 1:
            # Only one possible answer: nothing to decide, nothing recorded,
            # so the decision list holds real choices only.
            return 0
        draw = self._random
        if draw is not None:
            value = trunc(draw() * n)
            if value >= n:  # random() < 1.0, but a foreign Random-like may misbehave
                value = n - 1
        else:
            value = self._replayed(n)
        self._record(value)
        return value

    def _replayed(self, n: int) -> int:
        """The next recorded value, clamped into ``[0, n)`` (0 once the list ran out)."""
        script = self._script
        assert script is not None
        at = self._at
        value = script[at] if at < len(script) else 0
        self._at = at + 1
        return 0 if value < 0 else (n - 1 if value >= n else value)

    def chance(self, p: float) -> bool:
        """True with probability ``p``. Certain outcomes draw nothing."""
        if p <= 0.0:
            return False
        if p >= 1.0:
            return True
        draw = self._random
        value = (1 if draw() < p else 0) if draw is not None else self._replayed(2)
        self._record(value)
        return value == 1

    def pick(self, options: Sequence[T]) -> T:
        """One of ``options`` (not empty), uniformly: ``options[below(len)]``,
        written out (the workload's commonest choice)."""
        n = len(options)
        if n <= 1:
            return options[0]
        draw = self._random
        if draw is not None:
            value = trunc(draw() * n)
            if value >= n:
                value = n - 1
        else:
            value = self._replayed(n)
        self._record(value)
        return options[value]

    def pick_or(self, p: float, other: U, options: Sequence[T]) -> T | U:
        """``other`` with probability ``p``, else one of ``options`` (not
        empty): ``other if chance(p) else pick(options)`` in one call, the
        same draws recorded (the workload's session and ID choices)."""
        if p >= 1.0:
            return other
        if p > 0.0:
            draw = self._random
            value = (1 if draw() < p else 0) if draw is not None else self._replayed(2)
            self._record(value)
            if value == 1:
                return other
        return self.pick(options)

    def weighted(self, weights: Sequence[int]) -> int:
        """An index into ``weights`` drawn in proportion to them (their sum is
        positive). A replayed index may land on a zero weight: still a valid
        choice, just one the live generator would not have made."""
        return self.weighted_by(cumulative(weights))

    def weighted_by(self, sums: Sequence[int]) -> int:
        """:meth:`weighted` given the weights' running sums
        (:func:`cumulative`), which a caller drawing from one fixed list of
        weights many times computes once: the draw is then two bisections in
        C rather than a Python loop over the weights.

        The same index as walking the weights and subtracting each from the
        target until it falls below one: the weights are integers, so each
        subtraction is exact and "below the i-th weight after subtracting
        those before it" is "below the i-th running sum"."""
        n = len(sums)
        if n <= 1:
            return 0
        draw = self._random
        if draw is not None:
            total = sums[-1]
            index = bisect_right(sums, draw() * total)
            if index >= n:  # a float edge reached the total: the last positive weight
                index = bisect_left(sums, total)
        else:
            index = self._replayed(n)
        self._record(index)
        return index

    @property
    def replaying(self) -> bool:
        return self._script is not None


def cumulative(weights: Sequence[int]) -> tuple[int, ...]:
    """The running sums of ``weights``, as :meth:`Chooser.weighted_by` takes them."""
    return tuple(accumulate(weights))


def seeded(seed: int) -> Chooser:
    """The chooser of a sweep: a :class:`random.Random` seeded with ``seed``
    (an integer seed hashes the same on every machine and under every
    ``PYTHONHASHSEED``)."""
    return Chooser(random.Random(seed))


def replayer(decisions: Sequence[int]) -> Chooser:
    """A chooser that replays a recorded (possibly edited) decision list."""
    return Chooser(None, tuple(decisions))


def driven_by(rng: RandomLike) -> Chooser:
    """A chooser over any ``random()``-providing object, e.g. Hypothesis'
    ``st.randoms(use_true_random=False)``."""
    return Chooser(rng)
