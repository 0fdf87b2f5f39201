"""The one ID namespace, for good (spec 4.2 and 4.38; adapter protocol, "IDs
are one namespace"): the cases of ``id-namespace`` and ``admission-fresh-id``
that ``test_invariants`` (one case per invariant) does not reach.

Each case is a scenario played on the model (it stays quiet, and exercises
the invariant) and the same trace with one step edited to plant the fault
(it fires, naming the steps that prove it), as in ``test_invariants``. The
first four are the shrunk repros of issue 16, where an ID whose lifecycle
ended was treated as free for any session and kind; the allowed case (a new
input in its own session and kind) is quiet, and planting a conflict there
fires. The ``g2`` cases play under a policy with ``ended_ids =
"freed_by_revert"`` (OpenCode 1.18.33): an ID a committed revert truncated is
free there, and the same good trace judged under ``g4`` fires.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from inboxsim.invariants import Monitor, check_trace
from inboxsim.model import G4, PRESETS, Policy
from inboxsim.trace.record import Trace
from tests.invariant_traces import Ops, edit, err, ev, events, mv, ok, play, receipt, view

Case = tuple[Trace, Trace, tuple[int, ...]]
CASES: dict[str, tuple[str, Policy, Callable[[], Case]]] = {}
G2 = PRESETS["g2"]
# G4 but for the one field: a prompt under a staged revert commits it first,
# and the commit frees what it truncates.
G4_FREED = dataclasses.replace(G4, name="g4-freed", ended_ids="freed_by_revert")


def case(
    name: str, invariant: str, policy: Policy = G4
) -> Callable[[Callable[[], Case]], Callable[[], Case]]:
    def register(fn: Callable[[], Case]) -> Callable[[], Case]:
        CASES[name] = (invariant, policy, fn)
        return fn

    return register


def _barrier_consumed(o: Ops, *more: str) -> list[object]:
    """s1 (and ``more`` sessions); barrier c1 admitted in s1 and consumed."""
    return [o.create("s1"), *(o.create(s) for s in more), o.compact("s1", "c1"), "answer:stop"]


def _reverted(o: Ops, *inputs: str) -> list[object]:
    """s1 with a prompt of each of ``inputs``, each promoted and answered,
    then a revert to the last one staged and committed (its lifecycle ends)."""
    answered = [item for x in inputs for item in (o.prompt("s1", x), "answer:stop")]
    return [o.create(), *answered, o.stage("s1", inputs[-1]), o.commit("s1")]


def _next_seq(trace: Trace, index: int, session: str) -> int:
    """The seq the session's next event gets at step ``index`` (no fork gap)."""
    return sum(e.session == session for s in trace.steps[:index] for e in s.observed.events)


def _admitted_as(trace: Trace, index: int, session: str, kind: str, x: str) -> Trace:
    """Step ``index`` (a refused request) planted as a successful admission."""
    seq = _next_seq(trace, index, session)
    if kind == "compaction":
        planted = ev(session, seq, "compaction_admitted", index, x)
    else:
        planted = ev(session, seq, "admitted", index, x, type=kind, delivery="steer", data={})
    result = {
        "input": x,
        "session": session,
        "type": kind,
        "data": {},
        "delivery": None if kind == "compaction" else "steer",
        "admitted_seq": seq,
        "time": index,
    }
    return edit(trace, index, reply=ok(result), events=[planted])


@case("consumed barrier, prompt in its session", "id-namespace")
def _barrier_then_prompt() -> Case:
    o = Ops()
    good = play(*_barrier_consumed(o), o.prompt("s1", "c1", resume=False))  # type: ignore[arg-type]
    # 2: barrier c1; 3: consumed; 4: prompt_conflict
    return good, _admitted_as(good, 4, "s1", "user", "c1"), (2, 4)


@case("promoted synthetic, prompt under its staged revert", "id-namespace")
def _synthetic_then_prompt() -> Case:
    o = Ops()
    good = play(
        o.create(),
        o.synthetic("s1", "u1"),
        "answer:stop",
        o.stage("s1", "u1"),
        o.prompt("s1", "u1"),
    )  # 2: synthetic u1; 3: promoted; 4: staged; 5: prompt_conflict, nothing changes
    committed = _next_seq(good, 5, "s1")
    planted = [
        ev("s1", committed, "revert_committed", 5, to="u1"),
        ev("s1", committed + 1, "admitted", 5, "u1", type="user", delivery="steer", data={}),
    ]
    bad = edit(good, 5, reply=ok({**receipt(good, 2), "type": "user"}), events=planted)
    return good, bad, (2, 5)


@case("consumed barrier, barrier of another session", "id-namespace")
def _barrier_other_session() -> Case:
    o = Ops()
    good = play(*_barrier_consumed(o, "s2"), o.compact("s2", "c1"))  # type: ignore[arg-type]
    # 3: barrier c1 in s1; 4: consumed; 5: compaction_conflict
    return good, _admitted_as(good, 5, "s2", "compaction", "c1"), (3, 5)


@case("reverted prompt, synthetic in a fork", "id-namespace")
def _reverted_then_fork() -> Case:
    o = Ops()
    good = play(
        *_reverted(o, "u4", "u5"),  # type: ignore[arg-type]
        o.fork("s1", "f2"),
        o.synthetic("f2", "u5", resume=False),
    )  # 4: prompt u5; 6: staged; 7: committed (u5 ends); 8: fork; 9: synthetic_conflict
    return good, _admitted_as(good, 9, "f2", "synthetic", "u5"), (4, 9)


@case("allowed: a new barrier under its consumed ID", "id-namespace")
def _barrier_again() -> Case:
    o = Ops()
    good = play(*_barrier_consumed(o), o.compact("s1", "c1"))  # type: ignore[arg-type]
    # 2: barrier c1; 3: consumed; 4: a new barrier c1 (allowed)
    assert [e.type for e in events(good, 4)][0] == "compaction_admitted"
    return good, edit(good, 4, reply=err("compaction_conflict"), events=[]), (2, 4)


def _staged_then_prompt(kind: str, policy: Policy = G4) -> Trace:
    """u1 admitted as ``kind`` in s1 and promoted, a revert to it staged, and
    a prompt reusing u1 (2: u1; 3: promoted; 4: staged; 5: the prompt)."""
    o = Ops()
    first = o.prompt("s1", "u1") if kind == "user" else o.synthetic("s1", "u1")
    reuse = o.prompt("s1", "u1", resume=False)
    return play(o.create(), first, "answer:stop", o.stage("s1", "u1"), reuse, policy=policy)


@case("allowed: a prompt under the staged boundary's ID is a new input", "id-namespace")
def _boundary_prompt() -> Case:
    good = _staged_then_prompt("user")  # 5: revert_committed + a new admission of u1
    assert [e.type for e in events(good, 5)] == ["revert_committed", "admitted"]
    # Planted: judged as a retry of the boundary message (its old receipt, nothing appended).
    bad = edit(good, 5, reply=ok(receipt(good, 2)), events=[])
    return good, bad, (2, 5)


@case("a generated ID reuses an ID whose lifecycle ended", "id-namespace")
def _generated_collides() -> Case:
    o = Ops()
    good = play(*_reverted(o, "in-7"), o.prompt("s1", resume=False))  # type: ignore[arg-type]
    # 2: in-7 admitted (a client may send in-N); 5: it ends; 6: a generated ID
    (admitted,) = events(good, 6)
    assert admitted.input != "in-7"
    planted = dataclasses.replace(admitted, input="in-7")
    bad = edit(good, 6, reply=ok({**receipt(good, 6), "input": "in-7"}), events=[planted])
    return good, bad, (2, 6)


@case("a fork copy takes an ID whose lifecycle ended", "id-namespace")
def _copy_collides() -> Case:
    o = Ops()
    good = play(*_reverted(o, "m1", "m2"), o.fork("s1", "f1"))  # type: ignore[arg-type]
    # 4: m2; 7: m2 ends; 8: f1 copies m1 under a new ID
    (forked,) = events(good, 8)
    copy = view(good, 8, "transcript", "f1")[0]
    body = forked.data.replace(f'"id":"{copy.id}"', '"id":"m2"')
    bad = edit(
        good,
        8,
        events=[dataclasses.replace(forked, data=body)],
        transcript={"f1": (mv("m2", seq=copy.seq, time=copy.time, copied_from="m1"),)},
    )
    return good, bad, (8,)


@case("a fork copy's ID after a revert removed the copy", "id-namespace")
def _copy_reused() -> Case:
    o = Ops()
    good = play(o.create(), o.prompt("s1", "m1"), "answer:stop", o.fork("s1", "f1"))
    copy = view(good, 4, "transcript", "f1")[0].id
    good = play(
        o.create(),
        o.prompt("s1", "m1"),
        "answer:stop",
        o.fork("s1", "f1"),
        o.stage("f1", copy),
        o.commit("f1"),
        o.prompt("f1", copy, resume=False),
    )  # 4: fork copies m1; 6: the copy is removed; 7: prompt_conflict
    return good, _admitted_as(good, 7, "f1", "user", copy), (4, 7)


@case("an ended barrier ID admitted in another session", "admission-fresh-id")
def _fresh_other_session() -> Case:
    o = Ops()
    good = play(*_barrier_consumed(o, "s2"), o.compact("s1", "c1"))  # type: ignore[arg-type]
    # 3: barrier c1 in s1; 4: consumed; 5: the protocol's one exception: c1 again in s1
    assert [e.type for e in events(good, 5)][0] == "compaction_admitted"
    planted = [ev("s2", 0, "compaction_admitted", 5, "c1")]  # in s2 instead
    return good, edit(good, 5, events=planted), (3, 5)


@case("an ended prompt ID admitted as another kind", "admission-fresh-id")
def _fresh_other_kind() -> Case:
    o = Ops()
    good = play(*_reverted(o, "u1"), o.prompt("s1", "u1", resume=False))  # type: ignore[arg-type]
    # 2: prompt u1; 5: it ends; 6: a new prompt u1 in s1 (the exception)
    (admitted,) = events(good, 6)
    planted = dataclasses.replace(admitted, data=admitted.data.replace('"user"', '"synthetic"'))
    return good, edit(good, 6, events=[planted]), (2, 6)


def _g2_reverted(o: Ops) -> list[object]:
    """s1 and s2; m1 and m2 promoted and answered in s1, then a revert to m1
    staged and committed under g2: m1 stays, m2 is truncated (freed)."""
    return [
        o.create("s1"),
        o.create("s2"),
        o.prompt("s1", "m1"),
        "answer:stop",
        o.prompt("s1", "m2"),
        "answer:stop",
        o.stage("s1", "m1"),
        o.commit("s1"),
    ]  # 5: prompt m2; 8: committed


@case("g2: a reverted prompt's ID reused in another session", "id-namespace", G2)
def _g2_freed_other_session() -> Case:
    o = Ops()
    good = play(*_g2_reverted(o), o.prompt("s2", "m2", resume=False), policy=G2)  # type: ignore[arg-type]
    # 9: m2 admitted in s2, a new input (OpenCode 1.18.33: no 409)
    assert [(e.type, e.session) for e in events(good, 9)] == [("admitted", "s2")]
    return good, edit(good, 9, reply=err("prompt_conflict"), events=[]), (5, 9)


@case("g2: a reverted prompt's ID admitted as a barrier elsewhere", "admission-fresh-id", G2)
def _g2_freed_other_kind() -> Case:
    o = Ops()
    good = play(*_g2_reverted(o), o.compact("s2", "m2"), policy=G2)  # type: ignore[arg-type]
    # 9: m2 admitted as s2's barrier. Planted: the boundary m1, still live in s1, instead.
    (admitted,) = [e for e in events(good, 9) if e.type == "compaction_admitted"]
    planted = dataclasses.replace(admitted, input="m1")
    return good, edit(good, 9, events=[planted]), (3, 9)


@case("g2: a consumed barrier's ID stays its session's", "id-namespace", G2)
def _g2_barrier_kept() -> Case:
    o = Ops()
    good = play(*_barrier_consumed(o, "s2"), o.compact("s2", "c1"), policy=G2)  # type: ignore[arg-type]
    assert getattr(good.steps[5].reply, "code", None) == "compaction_conflict"
    return good, _admitted_as(good, 5, "s2", "compaction", "c1"), (3, 5)


@case("freed by the staged revert a prompt commits", "id-namespace", G4_FREED)
def _freed_by_staged_commit() -> Case:
    good = _staged_then_prompt("synthetic", G4_FREED)
    # 5: the prompt commits the revert, which frees the synthetic u1: admitted as a prompt
    assert [e.type for e in events(good, 5)] == ["revert_committed", "admitted"]
    return good, edit(good, 5, reply=err("prompt_conflict"), events=[]), (2, 5)


@pytest.mark.parametrize("name", sorted(CASES))
def test_quiet_on_a_satisfying_trace(name: str) -> None:
    invariant, policy, fn = CASES[name]
    good, _, _ = fn()
    monitor = Monitor(policy, good.header.hello)
    found = [v for step in good.steps for v in monitor.feed(step)] + monitor.finish(False)
    assert found == []
    assert invariant in monitor.exercised


@pytest.mark.parametrize(
    ("name", "steps"),
    [
        ("g2: a reverted prompt's ID reused in another session", (5, 9)),
        ("g2: a reverted prompt's ID admitted as a barrier elsewhere", (5, 9)),
        ("freed by the staged revert a prompt commits", (2, 5)),
    ],
)
def test_a_freed_reuse_fires_where_ids_are_kept(name: str, steps: tuple[int, ...]) -> None:
    """The reuse ``ended_ids = "freed_by_revert"`` allows is a violation of
    the protocol's rule: the same good trace fires under ``g4``."""
    invariant, _, fn = CASES[name]
    good, _, _ = fn()
    found = check_trace(good, G4, False, invariants=[invariant])
    assert [v.steps for v in found] == [steps], found


@pytest.mark.parametrize("name", sorted(CASES))
def test_fires_on_a_violating_trace(name: str) -> None:
    invariant, policy, fn = CASES[name]
    _, bad, steps = fn()
    found = check_trace(bad, policy, False, invariants=[invariant])
    assert found, f"{invariant} stayed quiet on {name}"
    assert {v.invariant for v in found} == {invariant}
    assert found[0].steps == steps, found[0]
    assert len(found[0].message.split()) >= 8
