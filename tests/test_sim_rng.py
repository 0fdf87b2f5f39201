"""The chooser: recorded decisions, replay, and what an edited list means."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from inboxsim.model import G4
from inboxsim.sim.rng import Chooser, driven_by, replayer, seeded
from inboxsim.sim.run import RunOptions, run_decisions, run_random
from tests.sim_helpers import checkers


def _script(ch: Chooser) -> list[object]:
    """A fixed program of choices of every kind."""
    out: list[object] = []
    for i in range(200):
        out.append(ch.below(1 + i % 7))
        out.append(ch.chance(0.3))
        out.append(ch.pick("abcde"))
        out.append(ch.weighted([0, 3, 0, 5, 1]))
    return out


def test_replaying_the_decisions_repeats_every_choice() -> None:
    live = seeded(7)
    made = _script(live)
    again = replayer(live.decisions)
    assert _script(again) == made
    assert again.decisions == live.decisions


def test_a_pick_or_is_a_chance_then_a_pick() -> None:
    """``pick_or(p, other, options)`` draws and records what ``other if
    chance(p) else pick(options)`` does, live and replayed (an edited list
    too: clamped values, a list that runs out), certain and one-option cases
    included; and ``pick`` is ``options[below(len(options))]``."""

    def program(ch: Chooser, fused: bool) -> list[object]:
        out: list[object] = []
        for i in range(300):
            p = (0.0, 0.2, 0.5, 1.0, 0.9)[i % 5]
            options = "abcde"[: 1 + i % 5]
            if fused:
                out.append(ch.pick_or(p, None, options))
                out.append(ch.pick(options))
            else:
                out.append(None if ch.chance(p) else options[ch.below(len(options))])
                out.append(options[ch.below(len(options))])
        return out

    for make in (lambda: seeded(5), lambda: replayer([3, -1, 9, 1, 0, 2] * 40)):
        fused, plain = make(), make()
        assert program(fused, True) == program(plain, False)
        assert fused.decisions == plain.decisions and len(plain.decisions) > 200


def test_the_same_seed_makes_the_same_choices() -> None:
    assert _script(seeded(11)) == _script(seeded(11))
    assert _script(seeded(11)) != _script(seeded(12))


def test_live_weighted_choice_never_picks_a_zero_weight() -> None:
    ch = seeded(3)
    assert {ch.weighted([0, 2, 0, 1, 0]) for _ in range(2000)} == {1, 3}


def test_a_missing_draw_reads_as_zero_and_values_are_clamped() -> None:
    ch = replayer([7, -3, 5, 9])
    assert ch.below(3) == 2  # clamped down
    assert ch.below(3) == 0  # clamped up
    assert ch.chance(0.5) is True  # any positive value is True
    assert ch.weighted([1, 1]) == 1
    assert ch.below(10) == 0 and ch.chance(0.9) is False and ch.pick("xyz") == "x"  # ran out
    assert ch.decisions == [2, 0, 1, 1, 0, 0, 0]


def test_choices_with_one_outcome_draw_nothing() -> None:
    ch = seeded(1)
    assert (ch.below(1), ch.chance(0.0), ch.chance(1.0), ch.pick("a"), ch.weighted([4])) == (
        0,
        False,
        True,
        "a",
        0,
    )
    assert ch.decisions == []


def test_any_random_like_object_drives_a_chooser() -> None:
    class Constant:
        def random(self) -> float:
            return 0.999

    ch = driven_by(Constant())
    assert (ch.below(4), ch.chance(0.5), ch.weighted([1, 0, 2, 0])) == (3, False, 2)


@settings(max_examples=15, deadline=None)
@given(st.randoms(use_true_random=False))
def test_hypothesis_randoms_drive_a_whole_run(rng: random.Random) -> None:
    result = run_random(rng, G4, RunOptions(ops=25), **checkers())
    assert result.trace.steps[0].decision == "hello"
    replayed = run_decisions(result.decisions, G4, RunOptions(ops=25), **checkers())
    assert replayed.trace_hash == result.trace_hash
