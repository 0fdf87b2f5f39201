"""The shrink engine (search/shrink/engine.py) on toy failures: what a new
driver relies on. The harness's own drivers are pinned in
test_shrink_pinned.py."""

from __future__ import annotations

from collections.abc import Callable

from inboxsim.search.shrink.engine import (
    Candidate,
    Judged,
    Shrinker,
    delete_chunks,
    delete_pairs,
    delete_segments,
    lower_setting,
    lower_values,
    minimize,
    zero_chunks,
)

HOUR = 3600.0
Fails = Callable[[Candidate], bool]


def shrinker(fails: Fails, start: Candidate, max_runs: int = 10_000) -> Shrinker:
    """A shrinker whose test keeps a candidate that ``fails``, keyed by
    (length, items): shorter first, then smaller items."""

    def test(cand: Candidate) -> Judged | None:
        return ((len(cand), cand), cand) if fails(cand) else None

    return Shrinker(test, start, (len(start), start), max_runs, HOUR)


def test_deletions_find_the_two_items_that_fail_together() -> None:
    s = shrinker(lambda c: 3 in c and 17 in c, tuple(range(20)))
    assert minimize(s, (delete_chunks, delete_pairs)).cur == (3, 17)
    assert s.key == (2, (3, 17))


def test_pairs_are_deleted_anywhere() -> None:
    # fails while the count of 7s is even and nonzero: a single 7 never goes
    s = shrinker(lambda c: c.count(7) % 2 == 0 and 7 in c, (7, 0, 7, 0, 7, 7))
    assert minimize(s, (delete_pairs,)).cur == (7, 7)


def test_values_zeroed_and_lowered_to_the_least_that_fails() -> None:
    s = shrinker(lambda c: any(v >= 5 for v in c), (1, 9, 2, 30))
    assert minimize(s, (delete_chunks, zero_chunks, lower_values)).cur == (5,)


def test_a_candidate_that_passes_or_is_not_smaller_is_never_kept() -> None:
    s = shrinker(lambda c: len(c) >= 3, (1, 2, 3))
    assert not s.attempt((1, 2))  # passes
    assert not s.attempt((1, 2, 3, 4))  # fails, but a larger key
    assert s.cur == (1, 2, 3) and s.runs == 2
    assert not s.attempt((1, 2))  # tried before: not run again
    assert s.runs == 2


def test_the_normal_form_is_kept() -> None:
    """The test may return the candidate as the run consumed it (a seed's
    decisions are cut at the failure): that is what is kept and edited."""

    def test(cand: Candidate) -> Judged | None:
        if 9 not in cand:
            return None
        normal = cand[: cand.index(9) + 1]
        return (len(normal), normal), normal

    s = Shrinker(test, (0, 9, 1, 2, 3), (5, (0, 9, 1, 2, 3)), 100, HOUR)
    assert s.attempt((9, 1, 2, 3))
    assert s.cur == (9,)


def test_the_budget_stops_the_search_and_progress_sees_every_run() -> None:
    seen: list[int] = []
    s = shrinker(lambda c: 3 in c and 17 in c, tuple(range(20)), max_runs=5)
    s.progress = lambda sh: seen.append(sh.runs)
    minimize(s, (delete_chunks, delete_pairs))
    assert s.runs == 5 and s.spent()
    assert seen == [1, 2, 3, 4, 5]
    assert 3 in s.cur and 17 in s.cur


def test_segments_delete_whole_steps() -> None:
    """Items grouped in steps by marks (step i ends at marks[i]): a step's
    items go together; the first step (a run's hello) stays."""
    marks: dict[Candidate, tuple[int, ...]] = {}
    start = (1, 1, 2, 2, 3, 3)

    def test(cand: Candidate) -> Judged | None:
        if cand.count(3) != 2:
            return None
        ends, n = [], 0
        for i, v in enumerate(cand):
            if i + 1 == len(cand) or cand[i + 1] != v:
                n = i + 1
                ends.append(n)
        marks[cand] = tuple(ends)
        return (len(cand), cand), cand

    test(start)
    s = Shrinker(test, start, (len(start), start), 100, HOUR)
    assert minimize(s, (lambda sh: delete_segments(sh, marks),)).cur == (1, 1, 3, 3)


def test_a_setting_the_test_reads_is_lowered() -> None:
    """A knob of the test (a cap on actions, say): lowered while the current
    candidate still fails with a smaller key under it."""
    cap = [40]

    def test(cand: Candidate) -> Judged | None:
        if cap[0] < 6:
            return None
        return (cap[0], cand), cand

    s = Shrinker(test, (1,), (40, (1,)), 100, HOUR)
    assert lower_setting(s, cap, (1, 2, 4, 8, 16, 32))
    assert cap == [8] and s.key == (8, (1,))
    assert lower_setting(s, cap, (1, 2, 4, 8, 16, 32))  # 7 (one less) still fails
    assert cap == [7]
    assert lower_setting(s, cap, (1, 2, 4, 8, 16, 32))
    assert cap == [6]
    assert not lower_setting(s, cap, (1, 2, 4, 8, 16, 32))
    assert cap == [6]
