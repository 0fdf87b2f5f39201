"""The linearizability checker (``search/``): hand-built histories that must
be legal and histories that must not, each failure's explanation checked;
and every history the fine-grained model itself produces under a random
interleaving, with or without a kill, judged legal.
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inboxsim.model import (
    PRESETS,
    Answer,
    Call,
    Calls,
    Compact,
    Err,
    Event,
    Fork,
    Interrupt,
    Messages,
    Ok,
    Op,
    Pending,
    Prompt,
    Resume,
    RevertClear,
    RevertCommit,
    RevertStage,
    State,
    Synthetic,
    apply,
)
from inboxsim.search import (
    Group,
    Illegal,
    Legal,
    Request,
    Row,
    Shown,
    Undecided,
    Unknown,
    linearize,
    shown_from_wire,
    split,
)
from tests.group_helpers import NOW, created, simulate
from tests.linearize_helpers import S1, ev, msg, prompt, receipt, row


def step_call(*context: str, call: str = "t-call", step: int = 1) -> Call:
    return Call(call, S1, "step", step, False, context, 0)


def group(
    *requests: tuple[Op, float, float | None, Any],
    after: Shown,
    killed: bool = False,
    before: State | None = None,
) -> Group:
    return Group(
        before or created(S1),
        tuple(Request(op, a, b, r) for op, a, b, r in requests),
        {S1: after},
        killed,
    )


def legal(g: Group) -> Legal:
    verdict = linearize(g)
    assert isinstance(verdict, Legal), verdict.explain(g)
    assert linearize(g, memo=False).__class__ is Legal  # the plain search agrees
    return verdict


def illegal(g: Group) -> str:
    verdict = linearize(g)
    assert isinstance(verdict, Illegal), f"judged legal: {verdict}"
    assert linearize(g, memo=False).__class__ is Illegal
    return verdict.explain(g)


def moves(g: Group, verdict: Legal) -> list[str]:
    return [
        m.describe(g).split(" ")[0] if m.request is not None else m.describe(g)
        for m in verdict.order
    ]


# --- legal histories ----------------------------------------------------------------


def test_two_concurrent_prompts_on_an_idle_session_join_one_call() -> None:
    """Spec A6: both admitted before the boundary read; one call holds both."""
    g = group(
        (prompt("a"), 0, 3, receipt("a", 0)),
        (prompt("b"), 1, 2, receipt("b", 1)),
        after=Shown(
            (),
            (msg("a", 3), msg("b", 4)),
            step_call("a", "b"),
            (
                ev(0, "admitted", "a"),
                ev(1, "admitted", "b"),
                ev(3, "promoted", "a"),
                ev(4, "promoted", "b"),
            ),
        ),
    )
    order = moves(g, legal(g))
    assert order.index("r1") < order.index("runner s1: drain")  # both before the read
    assert order.count("runner s1: wake") == 2  # each prompt's, taken as late as it can be
    order = [m for m in order if m != "runner s1: wake"]
    assert order[-3:] == ["runner s1: promote", "runner s1: promote", "runner s1: open"]


def test_compactions_the_target_ran_by_itself_are_not_inbox_history() -> None:
    auto = '{"reason":"auto"}'
    g = group(
        (prompt("x"), 0, 2, receipt("x", 0)),
        after=Shown(
            (),
            (msg("x", 4),),
            step_call("x"),
            (
                ev(0, "admitted", "x"),
                Event(S1, 2, "compaction_started", NOW, None, auto),
                Event(S1, 3, "compaction_ended", NOW, None, auto),
                ev(4, "promoted", "x"),
            ),
        ),
    )
    legal(g)


def test_the_runner_may_lag_behind_completed_requests() -> None:
    """Even one after the other, a slow runner reads both in one batch."""
    g = group(
        (prompt("a"), 0, 1, receipt("a", 0)),
        (prompt("b"), 2, 3, receipt("b", 1)),
        after=Shown((), (msg("a", 3), msg("b", 4)), step_call("a", "b")),
    )
    legal(g)


def test_concurrent_exact_retries_give_one_admission_and_identical_receipts() -> None:
    """Spec invariant 22."""
    g = group(
        (prompt("x"), 0, 2, receipt("x", 0)),
        (prompt("x"), 1, 3, receipt("x", 0)),
        after=Shown(
            (), (msg("x", 2),), step_call("x"), (ev(0, "admitted", "x"), ev(2, "promoted", "x"))
        ),
    )
    legal(g)


def test_generated_ids_are_matched_by_the_search_not_by_order() -> None:
    """Two prompts without IDs; the target named the second one admitted first."""
    g = group(
        (prompt(None, "one", resume=False), 0, 3, receipt("T2", 1, "one")),
        (prompt(None, "two", resume=False), 1, 2, receipt("T1", 0, "two")),
        after=Shown((row("T1", 0), row("T2", 1)), ()),
    )
    verdict = legal(g)
    assert sorted(verdict.ids.values()) == ["T1", "T2"]
    assert (
        verdict.state.store.sessions[S1].pending[0].data
        == '{"agents":[],"files":[],"metadata":{},"text":"two"}'
    )


@pytest.mark.parametrize(
    "after",
    [
        Shown((row("x", 0),), ()),  # killed right after the admission (after_admit)
        Shown((), ()),  # killed before it took effect
        Shown((), (msg("x", 2),)),  # killed after the promotion, before the call opened
    ],
    ids=["after_admit", "no_effect", "after_promotion"],
)
def test_a_request_in_flight_at_a_kill_took_effect_up_to_a_crash_point_or_none(
    after: Shown,
) -> None:
    g = group((prompt("x"), 0, None, Unknown()), after=after, killed=True)
    verdict = legal(g)
    assert verdict.order[-1].kill


def test_a_read_concurrent_with_an_admission_may_see_it_or_not() -> None:
    for seen in ([], [{"input": "x", "type": "user", "delivery": "steer", "admitted_seq": 0,
                       "time": NOW}]):  # fmt: skip
        g = group(
            (prompt("x", resume=False), 0, 3, receipt("x", 0)),
            (Pending(NOW, session=S1), 1, 2, Ok({"pending": seen})),
            after=Shown((row("x", 0),), ()),
        )
        legal(g)


# --- illegal histories --------------------------------------------------------------


def test_a_racing_retry_that_admits_twice_is_illegal() -> None:
    g = group(
        (prompt("x", resume=False), 0, 2, receipt("x", 0)),
        (prompt("x", resume=False), 1, 3, receipt("x", 1)),
        after=Shown((row("x", 0),), (), None, (ev(0, "admitted", "x"), ev(1, "admitted", "x"))),
    )
    why = illegal(g)
    assert "receipt admitted_seq: model seq 0 is target seq 0 elsewhere, not 1" in why


def racing_conflict() -> Group:
    """Two concurrent exact retries, one answered as a conflict."""
    return group(
        (prompt("x", resume=False), 0, 2, receipt("x", 0)),
        (prompt("x", resume=False), 1, 3, Err("prompt_conflict", "taken")),
        after=Shown((row("x", 0),), ()),
    )


def test_a_reply_that_no_order_produces_is_illegal() -> None:
    why = illegal(racing_conflict())
    assert "r1's reply: model receipt x (user, steer), target prompt_conflict" in why


def test_a_retry_receipt_that_differs_from_the_first_is_illegal() -> None:
    g = group(
        (prompt("x", resume=False), 0, 2, receipt("x", 0)),
        (prompt("x", resume=False), 1, 3, receipt("x", 0, delivery="queue")),
        after=Shown((row("x", 0),), ()),
    )
    assert "receipt delivery model steer, target queue" in illegal(g)


def test_real_time_order_is_respected() -> None:
    """r1's reply needs r1 first, but r0 completed before r1 was invoked."""
    requests = [
        (prompt("x", "a", resume=False), 0, 1, Err("prompt_conflict", "taken")),
        (prompt("x", "b", resume=False), 2, 3, receipt("x", 0, "b")),
    ]
    after = Shown((row("x", 0),), ())
    why = illegal(group(*requests, after=after))
    assert "r0's reply: model receipt x (user, steer), target prompt_conflict" in why
    assert "r1 prompt" not in why.split("the orders tried (furthest first)")[1].split("->")[0]
    overlapping = [
        requests[0][:2] + (3,) + requests[0][3:],
        requests[1][:1] + (1, 2, requests[1][3]),
    ]
    legal(group(*overlapping, after=after))  # overlapping, r1 may go first


def test_a_batch_that_skips_an_earlier_steer_is_illegal() -> None:
    """A boundary read takes every pending steer: b cannot go without a."""
    g = group(
        (prompt("a"), 0, 3, receipt("a", 0)),
        (prompt("b"), 1, 2, receipt("b", 1)),
        after=Shown((row("a", 0),), (msg("b", 3),), step_call("b")),
    )
    why = illegal(g)
    assert "pending of s1" in why or "transcript of s1" in why


def test_an_open_call_after_a_kill_is_illegal() -> None:
    g = group(
        (prompt("x"), 0, None, Unknown()),
        after=Shown((), (msg("x", 2),), step_call("x")),
        killed=True,
    )
    assert "open call of s1: model no open call, target step call step 1 [x]" in illegal(g)


def test_a_session_showing_two_open_calls_is_illegal_with_the_reason() -> None:
    """Two prompts on an idle session, each opening a call of its own (two
    runners at once): a verdict on the target, not the harness's exception."""
    two = [
        {"call": c, "session": S1, "kind": "step", "step": 1, "final": False, "context": [x]}
        for c, x in (("t-1", "a"), ("t-2", "b"))
    ]
    shown = shown_from_wire(S1, [], [msg_wire("a", 3), msg_wire("b", 4)], two)
    assert shown.call == step_call("a", call="t-1")
    assert shown.more_calls == (step_call("b", call="t-2"),)
    g = group(
        (prompt("a"), 0, 3, receipt("a", 0)),
        (prompt("b"), 1, 2, receipt("b", 1)),
        after=shown,
    )
    why = illegal(g)
    assert "open calls of s1: the target shows 2, the model never more than one" in why
    assert "step call step 1 [a]; and step call step 1 [b]" in why  # what it showed
    one = shown_from_wire(S1, [], [msg_wire("a", 3), msg_wire("b", 4)], two[:1])
    assert one.more_calls == ()


def msg_wire(x: str, seq: int) -> dict[str, Any]:
    return {"id": x, "type": "user", "seq": seq, "time": NOW}


def test_an_id_the_target_never_returned_does_not_match() -> None:
    g = group(
        (prompt(None, "one", resume=False), 0, 3, receipt("T1", 0, "one")),
        (prompt(None, "two", resume=False), 1, 2, receipt("T2", 1, "two")),
        after=Shown((row("T1", 0), row("T3", 1)), ()),
    )
    assert "pending of s1: model in-2 is T2 on the target, not T3" in illegal(g)


def test_a_log_must_list_admissions_and_promotions_in_seq_order() -> None:
    """b was admitted after a's boundary read and stayed pending."""

    def shown_as(*log: Event) -> Group:
        return group(
            (prompt("a"), 0, 3, receipt("a", 0)),
            (prompt("b", resume=False), 1, 2, receipt("b", 1)),
            after=Shown((row("b", 1),), (msg("a", 2),), step_call("a"), log),
        )

    a, b, promoted = ev(0, "admitted", "a"), ev(1, "admitted", "b"), ev(2, "promoted", "a")
    legal(shown_as(a, b, promoted))  # read before b was admitted, a promoted after
    why = illegal(shown_as(a, promoted, b))  # out of seq order: the log prunes at once
    assert "log of s1: model [admitted:b], target [promoted:a] at that place" in why
    assert "r1's reply: receipt admitted_seq: seq order differs in s1" in why


def test_the_failure_report_lists_orders_and_reasons() -> None:
    g = racing_conflict()
    verdict = linearize(g)
    assert isinstance(verdict, Illegal)
    assert verdict.part == (0, 1) and verdict.tried == len(verdict.dead_ends) >= 2
    text = verdict.explain(g)
    assert "r0 prompt session=s1 input=x resume=False 'x': invoked 0, completed 2" in text
    assert text.count("    -> ") == len(verdict.dead_ends)


def test_a_budget_gives_up_instead_of_hanging() -> None:
    g = group(
        (prompt("a"), 0, 3, receipt("a", 0)),
        (prompt("b"), 1, 2, receipt("b", 1)),
        after=Shown((), (msg("a", 3), msg("b", 4)), step_call("a", "b")),
    )
    assert isinstance(linearize(g, budget=3), Undecided)


# --- splitting ---------------------------------------------------------------------------


def test_a_group_splits_only_where_nothing_is_shared() -> None:
    before = created("s1", "s2")
    ops = [
        Prompt(NOW, session="s1", input="a", text="a"),
        Prompt(NOW, session="s2", input="b", text="b"),
        Prompt(NOW, session="s2", input="a", text="a"),  # the ID joins s1's part
        Prompt(NOW, session="s3", input="c", text="c"),
    ]
    g = Group(
        before, tuple(Request(op, 0, 1, Unknown()) for op in ops), {"s1": Shown(), "s2": Shown()}
    )
    assert [p for p, _ in split(g)] == [(0, 1, 2), (3,)]
    with_calls = Group(before, g.requests + (Request(Calls(NOW), 0, 1, Unknown()),), g.after)
    assert [p for p, _ in split(with_calls)] == [(0, 1, 2, 3, 4)]


def test_an_id_owned_by_another_session_before_the_group_joins_its_part() -> None:
    before = apply(created("s1", "s2"), Prompt(1, session="s1", input="x", text="x")).state
    ops = [Interrupt(NOW, session="s1"), Prompt(NOW, session="s2", input="x", text="x")]
    g = Group(before, tuple(Request(op, 0, 1, Unknown()) for op in ops), {})
    assert [p for p, _ in split(g)] == [(0, 1)]


# --- every history of the fine-grained model is legal ----------------------------------------


def _before(policy: str) -> State:
    """s1 busy (an open call over m0), s2 idle, f1 not yet forked."""
    state = created("s1", "s2", policy=PRESETS[policy])
    return apply(state, Prompt(1, session="s1", input="m0", text="m0")).state


def _ops(rng: random.Random, before: State) -> list[Op]:
    call = before.open_calls()[0].call
    pool = [
        lambda: Prompt(
            NOW,
            session=rng.choice(["s1", "s2"]),
            input=rng.choice([None, "a", "b", "m0"]),
            text=rng.choice(["x", "m0"]),
            delivery=rng.choice([None, "queue"]),
            resume=rng.choice([None, False]),
        ),
        lambda: Synthetic(
            NOW, session=rng.choice(["s1", "s2"]), input=rng.choice([None, "y"]), text="y"
        ),
        lambda: Compact(NOW, session=rng.choice(["s1", "s2"]), input=rng.choice([None, "c"])),
        lambda: Answer(NOW, call=call, finish=rng.choice(["stop", "tool", "error"])),
        lambda: Interrupt(NOW, session=rng.choice(["s1", "s2"])),
        lambda: Resume(NOW, session=rng.choice(["s1", "s2"])),
        lambda: rng.choice([Pending, Messages])(NOW, session=rng.choice(["s1", "s2"])),
        lambda: Calls(NOW),
        lambda: Fork(NOW, session="s1", child="f1"),
        lambda: RevertStage(NOW, session="s1", message=rng.choice(["m0", "a", "y"])),
        lambda: rng.choice([RevertCommit, RevertClear])(NOW, session=rng.choice(["s1", "s2"])),
    ]
    weights = [6, 2, 1, 2, 1, 1, 1, 1, 1, 1, 1]
    return [rng.choices(pool, weights)[0]() for _ in range(rng.randrange(1, 6))]


@pytest.mark.parametrize("policy", ["g4", "g2", "g5", "c"])
@settings(max_examples=80, deadline=None)
@given(rng=st.randoms(use_true_random=False), kill=st.booleans())
def test_every_history_of_the_fine_grained_model_is_legal(
    policy: str, rng: random.Random, kill: bool
) -> None:
    before = _before(policy)
    ops = [op for op in _ops(rng, before) if not (policy == "g2" and isinstance(op, Synthetic))]
    g, _ = simulate(before, ops, rng, kill)
    verdict = linearize(g)
    assert isinstance(verdict, Legal), verdict.explain(g)
    plain = linearize(g, memo=False)
    assert isinstance(plain, Legal), plain.explain(g)


@settings(max_examples=60, deadline=None)
@given(rng=st.randoms(use_true_random=False), kill=st.booleans())
def test_a_phantom_pending_row_is_never_legal(rng: random.Random, kill: bool) -> None:
    """The property is not vacuous: the same histories with one row the
    model never had are judged illegal."""
    before = _before("g4")
    g, _ = simulate(before, _ops(rng, before), rng, kill)
    shown = g.after["s2"]
    phantom = Row("phantom", "user", "steer", 10**6, 10**7)
    after = {**g.after, "s2": replace(shown, pending=shown.pending + (phantom,))}
    verdict = linearize(Group(g.before, g.requests, after, g.killed))
    assert isinstance(verdict, Illegal)
    # The order that explains the rest reaches the end and fails there, on s2.
    assert any(d.reason.startswith("pending of s2") for d in verdict.dead_ends)
