"""The log judgements (``invariants/log.py``): each id fires on a hand-broken
log, naming the lines that prove it, and stays quiet on good logs (model runs
of every preset, and a hand-built one that exercises each rule)."""

from __future__ import annotations

import dataclasses

import pytest

from inboxsim.invariants import REGISTRY, expected
from inboxsim.invariants.log import LOG_JUDGED, judge_log
from inboxsim.model import G4, PRESETS, Event, Policy
from inboxsim.sim.run import RunOptions, run_seed

GOOD = [
    Event("s", 0, "admitted", 10, "a", "{}"),
    Event("s", 1, "execution_started", 11, None, "{}"),
    Event("s", 2, "promoted", 11, "a", "{}"),
    Event("s", 3, "admitted", 12, "b", "{}"),
    Event("s", 4, "compaction_admitted", 12, "c", "{}"),
    Event("s", 5, "compaction_started", 13, "c", "{}"),
    Event("s", 6, "compaction_ended", 14, "c", "{}"),
    Event("s", 7, "promoted", 15, "b", "{}"),
]


def lines(events: list[Event]) -> list[tuple[int, Event]]:
    return list(enumerate(events, start=1))


def found(events: list[Event], policy: Policy = G4) -> dict[str, list[list[int]]]:
    out: dict[str, list[list[int]]] = {}
    for v in judge_log(lines(events), policy):
        out.setdefault(v.invariant, []).append(v.lines)
    return out


def test_every_log_judgement_is_a_registered_invariant() -> None:
    assert LOG_JUDGED and all(i in REGISTRY for i in LOG_JUDGED)


def test_quiet_on_a_good_handmade_log() -> None:
    assert found(GOOD) == {}


@pytest.mark.parametrize("policy", sorted(PRESETS))
def test_quiet_on_model_logs_for_what_the_policy_keeps(policy: str) -> None:
    for seed in range(5):
        steps = run_seed(seed, PRESETS[policy], RunOptions(ops=60)).trace.steps
        events = [ev for step in steps for ev in step.observed.events]
        assert events
        kept = expected(PRESETS[policy])  # g2 stamps admission time: no monotonic time
        assert {i: v for i, v in found(events, PRESETS[policy]).items() if i in kept} == {}


def test_replay_fires_on_a_promotion_never_admitted() -> None:
    broken = [*GOOD, Event("s", 8, "promoted", 16, "zz", "{}")]
    assert found(broken) == {"replay-matches-views": [[9]]}


def test_replay_fires_on_a_second_promotion_of_one_admission() -> None:
    broken = [*GOOD, Event("s", 8, "promoted", 16, "a", "{}")]
    assert found(broken) == {"replay-matches-views": [[9]]}


def test_replay_fires_on_a_compaction_of_no_pending_barrier() -> None:
    broken = [*GOOD, Event("s", 8, "compaction_started", 16, "c", "{}")]
    assert found(broken) == {"replay-matches-views": [[9]]}


def test_monotonic_fires_when_now_runs_backward() -> None:
    broken = [*GOOD, Event("s", 8, "execution_started", 9, None, "{}")]
    assert found(broken) == {"monotonic-visible-time": [[8, 9]]}


def test_monotonic_fires_on_promotion_times_backward_only_under_promotion_time() -> None:
    # Two sessions interleaved: each session's own times move forward, but
    # session t's second promotion is stamped before its first.
    broken = [
        Event("t", 0, "admitted", 1, "x", "{}"),
        Event("t", 1, "admitted", 1, "y", "{}"),
        Event("t", 2, "promoted", 5, "x", "{}"),
        dataclasses.replace(GOOD[0], time=6),
        Event("t", 3, "promoted", 5, "y", "{}"),
    ]
    assert found(broken) == {}  # equal times: not backward
    broken[4] = dataclasses.replace(broken[4], time=4)
    assert found(broken) == {"monotonic-visible-time": [[3, 5], [3, 5]]}
    # g2 stamps admission time: only the now-never-decreases part applies
    assert PRESETS["g2"].visible_time != "promotion"
    assert found(broken, PRESETS["g2"]) == {"monotonic-visible-time": [[3, 5]]}
