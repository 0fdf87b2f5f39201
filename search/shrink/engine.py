"""The shrink engine: a failing input cut down by small edits to a minimal one
that still fails the same way. Every shrinker of the harness runs on it (a
seed's decision list, a scenario's steps, either on the model or through an
adapter); a driver says only what its candidates are and how to test one.

The API, in the order a driver uses it:

- a **candidate** is a tuple, hashable (the engine remembers what it tried);
  its items are what the driver edits: a seed's decisions (ints,
  :mod:`.decisions`), a scenario's steps (:mod:`.steps`), a group's members;
- the **test** (:data:`Test`) is the predicate "still fails the same way": it
  runs a candidate and returns None when it does not fail the same way, else
  ``(key, normal)``: the candidate's key in the driver's order (smaller is
  simpler; a key is a tuple, compared as tuples are) and its normal form (for
  a seed, the decisions the run actually drew). Only a strictly smaller key
  is kept, so every search ends;
- a :class:`Shrinker` holds the best candidate so far, its key, what was
  tried and the budget (most runs, a deadline); ``attempt`` tries one edit;
  ``progress``, when given, is called after every run (for a progress line);
- a **pass** (:data:`Pass`) tries one family of edits and says whether it
  kept one. The passes here edit any tuple: :func:`delete_chunks`,
  :func:`delete_pairs`, :func:`zero_chunks`, :func:`lower_values`,
  :func:`delete_segments` and :func:`delete_segment_runs` (given where each
  step's items begin in the candidate), :func:`lower_setting` (a knob the
  test reads, such as a cap on workload actions);
- :func:`minimize` runs the passes in order, round after round, until a round
  keeps nothing or the budget is spent.

A new driver (a concurrent group's failure, say) writes a test, picks a start
and a key, and calls ``minimize(Shrinker(test, start, key, runs, seconds),
(delete_chunks, delete_pairs))``; a pass of its own is any function of the
shrinker that edits ``s.cur`` through ``s.attempt``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

Candidate = tuple[Any, ...]
Key = tuple[Any, ...]
Judged = tuple[Key, Candidate]
Test = Callable[[Candidate], Judged | None]
"""Run a candidate: None when it does not fail the same way, else (key, normal form)."""
Marks = Mapping[Candidate, tuple[int, ...]]
"""Per candidate, where each step's items end: step ``i`` is ``cand[marks[i-1]:marks[i]]``."""


class Shrinker:
    """The best candidate so far (``cur``, its ``key``), what was tried, the
    budget; ``attempt`` tries one candidate."""

    def __init__(
        self,
        test: Test,
        start: Candidate,
        start_key: Key,
        max_runs: int,
        time_limit: float,
        *,
        runs: int = 0,
        progress: Callable[[Shrinker], None] | None = None,
    ) -> None:
        self.test = test
        self.cur = start
        self.key = start_key
        self.runs = runs  # the start's own run, when the driver counts it
        self.max_runs = max_runs
        self.deadline = time.perf_counter() + time_limit
        self.seen: set[Candidate] = {start}
        self.progress = progress

    def spent(self) -> bool:
        return self.runs >= self.max_runs or time.perf_counter() > self.deadline

    def attempt(self, cand: Candidate) -> bool:
        """Test ``cand`` (unless tried before or the budget is spent); keep
        its normal form if it fails the same way with a smaller key."""
        if cand in self.seen or self.spent():
            return False
        self.seen.add(cand)
        found = self._run(cand)
        if found is None or not found[0] < self.key:
            return False
        self.key, self.cur = found
        self.seen.add(self.cur)
        return True

    def retest(self) -> bool:
        """The test changed (a knob it reads moved): forget what was tried and
        test the current candidate again; keep it if its key got smaller."""
        self.seen = set()
        found = self._run(self.cur)
        if found is None or not found[0] < self.key:
            return False
        self.key, self.cur = found
        return True

    def _run(self, cand: Candidate) -> Judged | None:
        self.runs += 1
        found = self.test(cand)
        if self.progress is not None:
            self.progress(self)
        return found


Pass = Callable[[Shrinker], bool]


def minimize(s: Shrinker, passes: Sequence[Pass]) -> Shrinker:
    """Run every pass in order, round after round, until a round keeps no
    edit or the budget is spent; ``s`` then holds the result."""
    while not s.spent():
        improved = False
        for one in passes:
            improved = one(s) or improved
        if not improved:
            break
    return s


# --- the passes ----------------------------------------------------------------


def _chunk_sizes(n: int) -> list[int]:
    sizes, k = [], max(1, n // 2)
    while k > 8:
        sizes.append(k)
        k //= 2
    sizes.extend(s for s in (8, 4, 3, 2, 1) if s <= max(1, n))
    return sizes


def delete_chunks(s: Shrinker, keep: int = 0) -> bool:
    """Delete chunks of items, of decreasing size (half the candidate ... 1),
    last first; big chunks move by half their size, small ones by one. The
    last ``keep`` items are never deleted (a failure's own step, say)."""
    improved = False
    for k in _chunk_sizes(len(s.cur) - keep):
        stride = 1 if k <= 8 else max(1, k // 2)
        i = len(s.cur) - keep - k
        while i >= 0 and not s.spent():
            cur = s.cur
            if s.attempt(cur[:i] + cur[i + k :]):
                improved = True
                i = min(i, len(s.cur) - keep - k)
            else:
                i -= stride
    return improved


def delete_pairs(s: Shrinker) -> bool:
    """Delete two items at once, anywhere (last pairs first): two that only
    matter together (a ``create`` and the request that uses its session) are
    rarely neighbours."""
    improved = False
    j = len(s.cur) - 1
    while j >= 1 and not s.spent():
        i = j - 1
        while i >= 0 and not s.spent():
            cur = s.cur
            if j < len(cur) and s.attempt(cur[:i] + cur[i + 1 : j] + cur[j + 1 :]):
                improved = True
                break
            i -= 1
        j = min(j - 1, len(s.cur) - 1)
    return improved


def zero_chunks(s: Shrinker) -> bool:
    """Set chunks of 8, 4, 2 and 1 integers to 0 (the simplest choice)."""
    improved = False
    for k in (8, 4, 2, 1):
        i = len(s.cur) - k
        while i >= 0 and not s.spent():
            cur = s.cur
            if any(cur[i : i + k]) and s.attempt(cur[:i] + (0,) * k + cur[i + k :]):
                improved = True
                i = min(i, len(s.cur) - k)
            else:
                i -= 1
    return improved


def lower_values(s: Shrinker) -> bool:
    """Lower single integers above 1: halved, else minus one."""
    improved = False
    i = len(s.cur) - 1
    while i >= 0 and not s.spent():
        cur = s.cur
        if i < len(cur) and cur[i] > 1:
            for lower in (cur[i] // 2, cur[i] - 1):
                if s.attempt(cur[:i] + (lower,) + cur[i + 1 :]):
                    improved = True
                    break
        i -= 1
    return improved


def delete_segments(s: Shrinker, marks: Marks) -> bool:
    """Delete the items of whole steps (``marks``), last first, then of pairs
    of neighbouring steps."""
    improved = False
    for width in (1, 2):
        j = len(marks.get(s.cur, ())) - width
        while j >= 1 and not s.spent():
            at = marks.get(s.cur)
            if at is None or j + width >= len(at) + 1:
                j = min(j, len(at or ()) - width)
                if at is None:
                    break
                continue
            lo, hi = at[j - 1], at[min(j + width, len(at)) - 1]
            if hi > lo and s.attempt(s.cur[:lo] + s.cur[hi:]):
                improved = True
                j = min(j, len(marks.get(s.cur, ())) - width)
            else:
                j -= 1
    return improved


def delete_segment_runs(s: Shrinker, marks: Marks) -> bool:
    """Delete runs of whole steps (``marks``), half of them first, then
    quarters, down to single steps, never the first nor the last: where each
    run is costly, big cuts first save most runs."""
    improved = False
    at = marks.get(s.cur, ())
    width = max(1, (len(at) - 2) // 2)
    while width >= 1 and not s.spent():
        j = len(marks.get(s.cur, ())) - 1 - width
        while j >= 1 and not s.spent():
            at = marks.get(s.cur, ())
            if j + width > len(at) - 1:
                j = len(at) - 1 - width
                continue
            lo, hi = at[j - 1], at[j + width - 1]
            if hi > lo and s.attempt(s.cur[:lo] + s.cur[hi:]):
                improved = True
            else:
                j -= width
        width //= 2
    return improved


def lower_setting(s: Shrinker, setting: list[int], tries: Sequence[int]) -> bool:
    """Lower a knob the test reads (``setting[0]``, say a cap on workload
    actions): try ``tries`` (and half and one less than the current value)
    below it, smallest first, and keep the first under which the current
    candidate fails the same way with a smaller key. What was tried under
    another value does not carry over, so it is forgotten at every change."""
    old = setting[0]
    for k in sorted({*tries, old // 2, old - 1}):
        if k >= old or s.spent():
            continue
        setting[0] = k
        if s.retest():
            return True
    setting[0] = old
    s.seen = set()
    return False


__all__ = [
    "Candidate",
    "Judged",
    "Key",
    "Marks",
    "Pass",
    "Shrinker",
    "Test",
    "delete_chunks",
    "delete_pairs",
    "delete_segment_runs",
    "delete_segments",
    "lower_setting",
    "lower_values",
    "minimize",
    "zero_chunks",
]
