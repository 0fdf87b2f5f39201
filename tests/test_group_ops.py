"""Reverts, compactions and interrupts inside concurrent groups, on the model
target: every group the model serves, with or without a kill mid-group, is
judged legal by the linearizability search (revert_stage names a message or
an input ID, so the split into parts and the ID match must hold for it), and
a target that lies about one of these requests is judged illegal.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from inboxsim.model import (
    FAILPOINTS,
    G4,
    PRESETS,
    Answer,
    Compact,
    Create,
    Interrupt,
    Op,
    Prompt,
    RevertClear,
    RevertCommit,
    RevertStage,
    State,
    Synthetic,
)
from inboxsim.search.groups import GroupDriver
from inboxsim.search.linearize import Illegal, linearize, split
from inboxsim.targets.group import GroupReply
from inboxsim.targets.target import ModelTarget

SESSIONS = ("s1", "s2")


def visible(state: State, session: str) -> list[str]:
    return [m.id for m in state.store.sessions[session].transcript]


def mix(rng: random.Random, now: int, state: State) -> list[Op]:
    """A group of 2 to 5 requests aimed at reverts, compactions and interrupts."""
    ops: list[Op] = []
    for _ in range(rng.randrange(2, 6)):
        sid = rng.choice(SESSIONS)
        kind = rng.choice(["prompt", "prompt", "synthetic", "compact", "interrupt", "revert"])
        if kind == "prompt":
            ident = rng.choice([None, f"p{now}", "p-shared"])
            ops.append(
                Prompt(
                    now, session=sid, input=ident, text="t", delivery=rng.choice([None, "queue"])
                )
            )
        elif kind == "synthetic":
            ops.append(Synthetic(now, session=sid, text="done"))
        elif kind == "compact":
            ops.append(Compact(now, session=sid, input=rng.choice([None, f"c{now}"])))
        elif kind == "interrupt":
            ops.append(Interrupt(now, session=sid))
        elif visible(state, sid) and rng.random() < 0.6:
            ops.append(RevertStage(now, session=sid, message=rng.choice(visible(state, sid))))
        else:
            ops.append(rng.choice([RevertCommit, RevertClear])(now, session=sid))
    for call in state.open_calls():
        if rng.random() < 0.7:
            ops.append(Answer(now, call=call.call, finish=rng.choice(["stop", "tool", "error"])))
    rng.shuffle(ops)
    return ops


def drive(seed: int, policy: str, groups: int = 8, kills: bool = True) -> int:
    rng = random.Random(seed)
    chosen = PRESETS[policy]
    driver = GroupDriver(ModelTarget(chosen, 3), chosen, 3)
    for sid in SESSIONS:
        assert driver.run([Create(1, session=sid)]).legal
    killed = 0
    for k in range(groups):
        ops = mix(rng, 10 + k, driver.state)
        if policy == "g2":
            ops = [op for op in ops if not isinstance(op, Synthetic)] or ops[:1]
        points: list[str | None] = [None] * len(ops)
        if kills and rng.random() < 0.3:
            points[rng.randrange(len(ops))] = rng.choice(FAILPOINTS)
        schedule = [rng.randrange(1000) for _ in range(30)]
        check = driver.run(ops, schedule, points)
        assert check.legal, check.explain()
        killed += check.group.killed
    return killed


@pytest.mark.parametrize("policy", ["g4", "g5", "g2"])
@pytest.mark.parametrize("seed", range(5))
def test_groups_with_reverts_compactions_and_interrupts_are_legal(seed: int, policy: str) -> None:
    drive(seed, policy)


def test_the_workload_reaches_what_it_aims_at() -> None:
    """Not vacuous: kills happen and reverts stage real messages."""
    assert sum(drive(seed, "g4") for seed in range(5)) > 0
    staged = sum(
        isinstance(op, RevertStage)
        for seed in range(5)
        for op in mix(random.Random(seed), 9, _busy())
    )
    assert staged > 0


def _busy() -> State:
    driver = GroupDriver(ModelTarget(G4, 3), G4, 3)
    driver.run([Create(1, session="s1")])
    driver.run([Create(1, session="s2")])
    driver.run([Prompt(2, session="s1", input="m", text="m")])
    driver.run([Prompt(3, session="s2", input="n", text="n")])
    return driver.state


class Lies(ModelTarget):
    """The model, except that the group member ``op`` answers ``lie(result)``."""

    def __init__(self, op: type, lie: Any) -> None:
        super().__init__(G4, 3)
        self.op, self.lie = op, lie

    def group(self, ops: list[Any], schedule: list[int], *more: Any) -> tuple[GroupReply, Any]:
        reply, observed = super().group(ops, schedule, *more)
        for op, outcome in zip(ops, reply.outcomes, strict=True):
            if isinstance(op, self.op) and outcome is not None and outcome.get("ok"):
                outcome["result"] = self.lie(outcome["result"])
        return reply, observed


def judged(target: ModelTarget, ops: list[Op]) -> str:
    driver = GroupDriver(target, G4, 3)
    for step in (
        [Create(1, session="s1")],
        [Create(1, session="s2")],
        [Prompt(2, session="s1", input="m", text="m")],  # s1: an open call over m
    ):
        assert driver.run(step).legal
    check = driver.run(ops, [1, 0, 1, 0])
    assert isinstance(check.verdict, Illegal), check.explain()
    return check.explain()


def test_an_interrupt_that_denies_stopping_a_running_call_is_illegal() -> None:
    why = judged(
        Lies(Interrupt, lambda r: {"interrupted": False}),
        [Interrupt(5, session="s1"), Prompt(5, session="s2", input="x", text="x")],
    )
    assert """-> r0's reply: model {"interrupted":true}, target {"interrupted":false}""" in why


def test_a_compaction_receipt_of_the_wrong_kind_is_illegal() -> None:
    why = judged(
        Lies(Compact, lambda r: {**r, "type": "user"}),
        [Compact(5, session="s1", input="c"), Prompt(5, session="s1", input="x", text="x")],
    )
    assert "-> r0's reply: receipt type model compaction, target user" in why


def test_a_revert_refused_that_the_model_takes_is_illegal() -> None:
    class Refuses(ModelTarget):
        def group(self, ops: list[Any], schedule: list[int], *more: Any) -> tuple[GroupReply, Any]:
            reply, observed = super().group(ops, schedule, *more)
            for op, outcome in zip(ops, reply.outcomes, strict=True):
                if isinstance(op, RevertStage) and outcome is not None:
                    outcome.pop("result", None)
                    outcome.update(ok=False, error={"code": "message_not_found", "message": "no"})
            return reply, observed

    why = judged(
        Refuses(G4, 3),
        [RevertStage(5, session="s1", message="m"), Prompt(5, session="s1", input="x", text="x")],
    )
    assert "-> r0's reply: model {}, target message_not_found" in why


def test_parts_that_match_times_apart_are_searched_again_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Found by this file's workload under g5: a retry of an input admitted
    before the group, answered with the time of its re-admission after a
    promotion, matched time 14 to 16 in s2's part while s1's part matched
    15 to 15, so the merged order failed its replay. The group is then
    searched whole, and judged legal."""
    import importlib

    import inboxsim.search.groups as groups

    linearize_module = importlib.import_module("inboxsim.search.linearize")  # the module

    fallbacks = []

    def judge(group: Any, **options: Any) -> Any:
        verdict = linearize(group, **options)
        if len(split(group)) > 1 and len(verdict.parts) == 1:
            fallbacks.append(verdict)
        return verdict

    monkeypatch.setattr(groups, "linearize", judge)
    # Wakes taken as late as they can be, the first order found rarely
    # matches times apart: this case was found with wakes tried in turn.
    monkeypatch.setattr(linearize_module, "WAKES_LAST", False)
    drive(11, "g5")  # (seed 1 before a prompt's wake became a transition of its own)
    assert fallbacks


# The search carries every legal end forward (issue 19): seeds whose groups
# leave what no observation shows (two revert_stage of one session: which
# message is staged) and were judged illegal at a later group when the
# search carried one end only.
@pytest.mark.parametrize(("seed", "policy"), [(57, "g5"), (6, "g4"), (6, "g5")])
def test_a_later_group_is_judged_from_every_legal_end_of_the_earlier(
    seed: int, policy: str
) -> None:
    drive(seed, policy)


def test_two_revert_stages_of_one_session_leave_two_ends() -> None:
    driver = GroupDriver(ModelTarget(G4, 3), G4, 3)
    steps: list[list[Op]] = [
        [Create(1, session="s1")],
        [Prompt(2, session="s1", input="a", text="a")],
        [Interrupt(3, session="s1")],
        [Prompt(4, session="s1", input="b", text="b")],
        [Interrupt(5, session="s1")],
    ]
    for step in steps:
        assert driver.run(step).legal
    staged = [RevertStage(6, session="s1", message="a"), RevertStage(6, session="s1", message="b")]
    check = driver.run(staged, [0, 1, 0, 1])
    assert check.legal, check.explain()
    # Nothing shows which stage came last: both ends are carried.
    assert len(driver.others) == 1
    ends = {end.store.sessions["s1"].revert for end in (driver.state, driver.others[0].state)}
    assert ends == {"a", "b"}
    # A commit then shows which: the step is legal from either, and one end is left.
    commit = driver.run([RevertCommit(7, session="s1")])
    assert commit.legal, commit.explain()
    assert driver.others == ()
