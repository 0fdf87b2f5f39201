"""The protocol's concurrent step (docs/protocol.md, "Groups and pause points"):
the ``group`` request and its result validate strictly, the quick request
check agrees with pydantic on groups, the model adapter serves groups (and
replays them after a kill), and the group driver judges every group the
model serves as legal and a target that lies about one as illegal.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from inboxsim.model import FAILPOINTS, G4, Answer, Create, Prompt, Synthetic
from inboxsim.search.groups import GroupDriver
from inboxsim.search.linearize import Illegal
from inboxsim.targets.adapter import AdapterTarget
from inboxsim.targets.group import GroupReply
from inboxsim.targets.protocol import REQUEST, RESULTS
from inboxsim.targets.request_check import valid
from inboxsim.targets.target import ModelTarget
from tests.group_scenario_helpers import SwappedReceipts

MODEL = [sys.executable, "-m", "inboxsim.targets.model_adapter", "--no-fsync", "--groups"]


def member(rid: int, op: str = "prompt", now: int = 5, **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"rid": rid, "op": op, "now": now}
    if op == "prompt":
        base.update(session="s1", text="hi")
    return {**base, **fields}


def group(*members: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"rid": 1, "op": "group", "now": 5, "requests": list(members), **fields}


def pydantic_accepts(doc: Any) -> bool:
    try:
        REQUEST.validate_python(doc)
    except ValidationError:
        return False
    return True


GOOD = group(member(2, input="a"), member(3, input="a"), member(4, "calls"), schedule=[3, 0, 7])


def test_a_group_takes_the_quick_path_and_validates() -> None:
    assert valid(GOOD) and pydantic_accepts(GOOD)


@pytest.mark.parametrize(
    "doc",
    [
        group(),  # no requests
        group(member(2, "hello")),  # hello, crash and group are not members
        group(member(2, "crash")),
        group(group(member(3))),
        group(member(2), schedule=[-1]),
        group(member(2), schedule=[True]),
        group(member(2, text=1)),
        group(member(2), crash_at="after_admit"),  # failpoints go on members
    ],
)
def test_malformed_groups_are_refused_by_both_checks(doc: dict[str, Any]) -> None:
    assert not pydantic_accepts(doc)
    assert not valid(doc)


@settings(max_examples=150, deadline=None)
@given(
    path=st.sampled_from(["requests", "schedule", "now", "op", "extra"]),
    index=st.integers(0, 2),
    value=st.one_of(st.none(), st.booleans(), st.integers(-2, 2), st.text(max_size=3)),
)
def test_the_quick_check_is_never_more_lenient_on_groups(path: str, index: int, value: Any) -> None:
    doc: dict[str, Any] = {**GOOD, "requests": [dict(m) for m in GOOD["requests"]]}
    if path == "requests":
        doc["requests"][index]["now"] = value
    elif path == "schedule":
        doc["schedule"] = [*doc["schedule"], value]
    else:
        doc[path] = value
    if valid(doc):
        assert pydantic_accepts(doc)


def test_a_group_result_needs_invoke_times_and_an_outcome_shape() -> None:
    ok = {"rid": 2, "ok": True, "result": {}, "invoked": 0, "completed": 1.5}
    lost = {"rid": 3, "unknown": True, "invoked": 0.25}
    RESULTS["group"].validate_python({"outcomes": [ok, lost], "pauses": [{"point": "x"}]})
    with pytest.raises(ValidationError):
        RESULTS["group"].validate_python({"outcomes": [{"rid": 2, "ok": True}]})


def schedule(rng: random.Random) -> list[int]:
    return [rng.randrange(1000) for _ in range(24)]


def race(now: int, rng: random.Random) -> list[Any]:
    """Prompts and a notice racing on one session, some retrying one ID."""
    ops: list[Any] = []
    for _ in range(rng.randrange(2, 5)):
        ident = rng.choice(["a", "b", None])
        if rng.random() < 0.25:
            ops.append(Synthetic(now, session="s1", input=ident, text="done"))
        else:
            ops.append(Prompt(now, session="s1", input=ident, text="t"))
    return ops


def drive(driver: GroupDriver, seed: int, groups: int) -> None:
    rng = random.Random(seed)
    assert driver.run([Create(1, session="s1")]).legal
    for k in range(groups):
        now = 10 + k
        ops = race(now, rng)
        ops += [Answer(now, call=c.call, finish="stop") for c in driver.state.open_calls()]
        check = driver.run(ops, schedule(rng))
        assert check.legal, check.explain()


@pytest.mark.parametrize("seed", range(6))
def test_every_group_the_model_target_serves_is_legal(seed: int) -> None:
    drive(GroupDriver(ModelTarget(G4, 4), G4, 4), seed, 6)


def test_the_model_adapter_serves_groups_and_keeps_them_across_a_kill(tmp_path: Path) -> None:
    with AdapterTarget(MODEL, tmp_path / "d", 4) as target:
        driver = GroupDriver(target, G4, 4)
        drive(driver, 11, 5)
        assert {"group", "pause_points"} <= target.features
        before = driver.state
        target.kill()  # restarts on the journal: the groups replay
        driver.state = before.crashed()
        drive_after = driver.run([Prompt(99, session="s1", input="z", text="t")])
        assert drive_after.legal, drive_after.explain()


def test_the_schedule_picks_the_interleaving_and_replays_it() -> None:
    ops = [Prompt(5, session="s1", input=x, text="t") for x in ("a", "b", "c")]

    def pauses(choices: list[int]) -> list[Any]:
        target = ModelTarget(G4, 4)
        target.request(Create(1, session="s1"))
        return target.group(list(ops), choices)[0].pauses

    assert pauses([2, 1, 0]) == pauses([2, 1, 0])
    assert pauses([2, 1, 0]) != pauses([0, 0, 0])


def test_a_target_that_swaps_two_receipts_is_not_linearizable() -> None:
    driver = GroupDriver(SwappedReceipts(G4, 4), G4, 4)
    assert driver.run([Create(1, session="s1")]).legal
    ops = [Prompt(5, session="s1", input=x, text=x) for x in ("a", "b")]
    check = driver.run(ops, [0, 0])
    assert isinstance(check.verdict, Illegal)
    text = check.explain()
    assert "not linearizable" in text and "why each failed" in text
    assert "the target's interleaving: r0 request" in text


# --- a kill while a group is in flight ------------------------------------------------


def drive_kills(driver: GroupDriver, seed: int, groups: int) -> int:
    """Groups that each carry one failpoint on a random member; returns how
    many groups were killed (every one judged legal)."""
    rng = random.Random(seed)
    assert driver.run([Create(1, session="s1")]).legal
    kills = 0
    for k in range(groups):
        now = 10 + k
        ops = race(now, rng)
        ops += [Answer(now, call=c.call, finish="stop") for c in driver.state.open_calls()]
        points: list[str | None] = [None] * len(ops)
        points[rng.randrange(len(ops))] = rng.choice(FAILPOINTS)
        check = driver.run(ops, schedule(rng), points)
        assert check.legal, check.explain()
        kills += check.group.killed
    return kills


@pytest.mark.parametrize("seed", range(4))
def test_groups_killed_at_a_members_failpoint_are_legal(seed: int) -> None:
    assert drive_kills(GroupDriver(ModelTarget(G4, 4), G4, 4), seed, 8) > 0


def test_a_killed_group_answers_the_members_in_flight_as_unknown() -> None:
    target = ModelTarget(G4, 4)
    target.request(Create(1, session="s1"))
    ops = [Prompt(5, session="s1", input=x, text="t") for x in ("a", "b", "c")]
    # b first (dies right after its admission), then nothing else is placed
    reply, _ = target.group(ops, [1], [None, "after_admit", None])
    assert reply.killed
    assert [o.get("unknown", False) for o in reply.outcomes] == [True, True, True]
    assert [r.input for r in target.state.store.sessions["s1"].pending] == ["b"]
    assert not target.state.runs and not target.state.work  # crashed
    # a runner failpoint armed by a placed member: a completes, then the boundary dies
    target = ModelTarget(G4, 4)
    target.request(Create(1, session="s1"))
    reply, _ = target.group(ops[:2], [0, 0, 0, 0, 0], ["mid_promotion", None])
    assert reply.killed and reply.outcomes[0]["ok"] and reply.outcomes[1]["ok"]
    assert [m.id for m in target.state.store.sessions["s1"].transcript] == ["a"]
    # a failpoint never reached leaves the group whole
    reply, _ = ModelTarget(G4, 4).group([Create(5, session="s9")], [], ["after_admit"])
    assert not reply.killed and reply.outcomes[0]["ok"]


def test_the_model_adapter_dies_at_a_members_failpoint_and_replays_it(tmp_path: Path) -> None:
    with AdapterTarget(MODEL, tmp_path / "d", 4) as target:
        driver = GroupDriver(target, G4, 4)
        assert drive_kills(driver, 3, 6) > 0


class ForgetsAtKill(ModelTarget):
    """A target whose kill loses everything the group did, acknowledged or not."""

    def group(
        self, ops: list[Any], schedule: list[int], crash_at: Any = ()
    ) -> tuple[GroupReply, Any]:
        before = self.state
        reply, observed = super().group(ops, schedule, crash_at)
        if reply.killed:
            self.state = before.crashed()
        return reply, observed


def test_a_kill_that_loses_an_acknowledged_admission_is_not_linearizable() -> None:
    driver = GroupDriver(ForgetsAtKill(G4, 4), G4, 4)
    assert driver.run([Create(1, session="s1")]).legal
    ops = [Prompt(5, session="s1", input=x, text=x) for x in ("a", "b")]
    check = driver.run(ops, [0, 0, 0], [None, "after_admit"])  # a completes, b dies
    assert check.group.killed and isinstance(check.verdict, Illegal)
    text = check.explain()
    assert "r0 prompt session=s1 input=a 'a': invoked 0, completed 1, target receipt a" in text
    assert "r1 prompt session=s1 input=b 'b': invoked 0, completed never, target unknown" in text
    assert "the group: 2 requests issued together, then the target was killed:" in text
    assert "what the target showed after it (restarted):\n  s1: pending []; transcript []" in text
    assert "-> log of s1: model [admitted:a], target nothing more at that place" in text
    assert "the kill: r1 asked to crash at after_admit, and died there" in text


class KilledAfterwards(ModelTarget):
    """A target killed right after serving a group, before its response (a
    kill the harness made, every member already done): says so or not."""

    def __init__(self, says: bool) -> None:
        super().__init__(G4, 4)
        self.says = says

    def group(
        self, ops: list[Any], schedule: list[int], crash_at: Any = ()
    ) -> tuple[GroupReply, Any]:
        reply, observed = super().group(ops, schedule, crash_at)
        self.kill()
        return reply._replace(killed=self.says), observed


@pytest.mark.parametrize("says", [True, False])
def test_a_group_cut_by_a_kill_is_judged_with_it(says: bool) -> None:
    """The open call the group made died with the kill: legal only when the
    driver knows the group was killed (``GroupReply.killed``)."""
    driver = GroupDriver(KilledAfterwards(says), G4, 4)
    assert driver.run([Create(1, session="s1")]).legal
    check = driver.run([Prompt(5, session="s1", input=x, text=x) for x in ("a", "b")], [0, 0])
    assert check.group.killed == says
    assert check.legal == says, check.explain()
