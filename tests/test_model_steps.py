"""The model's fine-grained form: requests and runner transitions apart.

``apply`` must be exactly a request followed by every runner transition as
soon as it is enabled (same states, replies, events; the failpoints are
places between transitions), and the fine-grained form must allow what only
an asynchronous runner does: two prompts admitted before one boundary read
join one call (spec A6), an admission after the read waits for the next, a
wake taken after an interrupt starts a successor (spec 3.7).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inboxsim.model import (
    PRESETS,
    Crashed,
    Create,
    Err,
    Ok,
    Op,
    Outcome,
    Prompt,
    Resume,
    RunnerStep,
    State,
    advance,
    apply,
    enabled,
    initial_state,
    request,
)
from tests.model_driver import Driver, programs
from tests.model_helpers import op_of

NOW = 100


def stepwise(state: State, op: Op, crash_at: str | None = None) -> Outcome:
    """``apply`` rebuilt from the fine-grained form: the request, then the
    runner's transitions one by one (the first enabled each time), with each
    failpoint as a kill between two transitions."""
    out = request(state, op)
    if not isinstance(out.reply, Ok):
        return out
    events = list(out.events)
    admitted = any(e.type in ("admitted", "compaction_admitted") for e in out.events)
    if crash_at == "after_admit" and admitted:
        return Outcome(out.state.crashed(), Crashed(crash_at), tuple(events))
    state, promoted = out.state, False
    while steps := enabled(state):
        step = steps[0]
        if crash_at == "after_promotion" and step.at == "open":
            return Outcome(state.crashed(), Crashed(crash_at), tuple(events))
        state, more, _ = advance(state, step, op.now)
        events += more
        if crash_at == "mid_promotion" and not promoted and any(e.type == "promoted" for e in more):
            return Outcome(state.crashed(), Crashed(crash_at), tuple(events))
        promoted = promoted or any(e.type == "promoted" for e in more)
    return Outcome(state, out.reply, tuple(events))


class Stepwise(Driver):
    """The property driver, with every request also run the fine-grained way."""

    def send(self, name: str, crash_at: str | None, fields: dict[str, Any]) -> Outcome:
        before = self.state
        outcome = super().send(name, crash_at, fields)
        again = stepwise(before, op_of(name, self.now, fields), crash_at)
        assert again.reply == outcome.reply
        assert again.events == outcome.events
        assert again.state == outcome.state
        assert not outcome.state.busy  # apply leaves the runner quiescent
        return outcome


@pytest.mark.parametrize("name", sorted(PRESETS))
@settings(max_examples=60, deadline=None)
@given(program=programs)
def test_apply_is_the_request_then_the_runner_to_quiescence(
    name: str, program: list[tuple[Any, ...]]
) -> None:
    driver = Stepwise.start(PRESETS[name], 3)
    for action in program:
        driver.run(action)


# --- the fine-grained form allows what only an asynchronous runner does ------------


def _created(*sessions: str) -> State:
    state = initial_state()
    for sid in sessions:
        state = apply(state, Create(0, session=sid)).state
    return state


def _run(state: State, now: int = NOW) -> State:
    while steps := enabled(state):
        state = advance(state, steps[0], now).state
    return state


def _admit(state: State, input_id: str, **fields: Any) -> State:
    """A prompt's own part: admitted, its wake recorded, not yet taken."""
    out = request(state, Prompt(NOW, session="s1", input=input_id, text=input_id, **fields))
    assert isinstance(out.reply, Ok), out.reply
    return out.state


def _prompt(state: State, input_id: str, **fields: Any) -> State:
    """A prompt with its wake taken at once."""
    return advance(_admit(state, input_id, **fields), RunnerStep("s1", "wake"), NOW).state


def _contexts(state: State) -> list[tuple[str, ...]]:
    return [c.context for c in state.open_calls()]


def _types(state: State, session: str = "s1") -> list[str]:
    return [
        f"{e.type}:{e.input}" if e.input else e.type for e in state.store.sessions[session].events
    ]


def test_two_prompts_on_an_idle_session_may_join_one_call() -> None:
    """Spec A6: both admitted before the boundary read, one call holds both."""
    state = _prompt(_prompt(_created("s1"), "a"), "b")
    assert enabled(state) == (RunnerStep("s1", "start"),)
    assert _contexts(_run(state)) == [("a", "b")]
    # No sequence of whole requests gives that: the first prompt's call holds it alone.
    seq = apply(_created("s1"), Prompt(NOW, session="s1", input="a", text="a")).state
    seq = apply(seq, Prompt(NOW, session="s1", input="b", text="b")).state
    assert _contexts(seq) == [("a",)]


def test_a_prompt_records_its_wake_and_the_runner_takes_it() -> None:
    """Spec 3.6: admission, then wake; the wake is a transition of its own."""
    state = _admit(_created("s1"), "a")
    assert enabled(state) == (RunnerStep("s1", "wake"),) and not state.work
    state = advance(state, RunnerStep("s1", "wake"), NOW).state
    assert enabled(state) == (RunnerStep("s1", "start"),) and not state.wakes
    assert _contexts(_run(state)) == [("a",)]


def _parked() -> State:
    """s1's execution parked at a's step call."""
    state = _run(_prompt(_created("s1"), "a"))
    assert _contexts(state) == [("a",)]
    return state


def test_a_wake_taken_before_an_interrupt_is_dropped_with_the_doorbell() -> None:
    state = _prompt(_parked(), "b")  # the wake rings the running execution's doorbell
    state = _run(request(state, op_of("interrupt", NOW, {"session": "s1"})).state)
    assert not state.runs and [r.input for r in state.store.sessions["s1"].pending] == ["b"]


def test_a_wake_taken_after_an_interrupt_starts_a_successor() -> None:
    """Spec 3.7: wakes recorded during cleanup start a successor execution;
    b was admitted before the interrupt, its wake taken after it (a server
    that admits and then wakes, such as the SQLite inbox)."""
    state = _admit(_parked(), "b")
    state = request(state, op_of("interrupt", NOW, {"session": "s1"})).state
    state = _run(state)
    assert _contexts(state) == [("a", "b")]
    assert _types(state)[-4:] == [
        "execution_interrupted",
        "execution_started",
        "promoted:b",
        "step_started",
    ]


def test_an_admission_after_the_boundary_read_waits_for_the_next_boundary() -> None:
    state = _prompt(_created("s1"), "a")
    state = advance(state, RunnerStep("s1", "start"), NOW).state
    state = advance(state, RunnerStep("s1", "drain"), NOW).state  # the read: batch (a,)
    assert state.work["s1"].batch == ("a",)
    state = _prompt(state, "b")  # admitted after the read, before a's promotion
    state = _run(state)
    assert _contexts(state) == [("a",)]
    assert [r.input for r in state.store.sessions["s1"].pending] == ["b"]
    assert _types(state) == [
        "admitted:a",
        "execution_started",
        "admitted:b",
        "promoted:a",
        "step_started",
    ]
    assert state.runs["s1"].doorbell  # b's wake: the next boundary takes it


def test_a_boundary_that_promoted_queued_input_reads_the_steers_again() -> None:
    """Spec 3.4 step 4: steers that arrived meanwhile join the queued input's call."""
    state = _prompt(_created("s1"), "q", delivery="queue")
    for at in ("start", "drain", "promote"):
        state = advance(state, RunnerStep("s1", at), NOW).state
    assert enabled(state) == (RunnerStep("s1", "reread"),)
    state = _run(_prompt(state, "s"))
    assert _contexts(state) == [("q", "s")]
    assert state.runs["s1"].step == 1


def test_a_captured_input_removed_before_its_turn_is_skipped() -> None:
    world = apply(_created("s1"), Prompt(1, session="s1", input="m0", text="m0")).state
    world = apply(world, op_of("answer", 2, {"call": world.open_calls()[0].call})).state
    world = apply(world, op_of("revert_stage", 3, {"session": "s1", "message": "m0"})).state
    for x in ("a", "b"):  # synthetic input neither commits nor wakes under a staged revert
        world = apply(world, op_of("synthetic", 4, {"session": "s1", "input": x})).state
    state = request(world, Resume(NOW, session="s1")).state
    for at in ("start", "drain"):
        state = advance(state, RunnerStep("s1", at), NOW).state
    assert state.work["s1"].batch == ("a", "b")
    state = _prompt(state, "c")  # commits the revert: a and b were admitted after m0
    state = _run(state)
    assert [m.id for m in state.store.sessions["s1"].transcript] == []
    assert [r.input for r in state.store.sessions["s1"].pending] == ["c"]
    assert _contexts(state) == [()] and state.runs["s1"].doorbell


@pytest.mark.parametrize(("policy", "expected"), [("g4", ["a"]), ("g5", ["a", "b"])])
def test_a_barrier_admitted_during_a_batch_holds_what_it_blocks(
    policy: str, expected: list[str]
) -> None:
    state = initial_state(PRESETS[policy])
    state = apply(state, Create(0, session="s1")).state
    state = _prompt(_prompt(state, "a"), "b")
    for at in ("start", "drain", "promote"):
        state = advance(state, RunnerStep("s1", at), NOW).state
    out = request(state, op_of("compact", NOW, {"session": "s1", "input": "c"}))
    state = _run(out.state)
    visible = [m.id for m in state.store.sessions["s1"].transcript]
    assert visible == expected  # g4: the barrier blocks b; g5: b was admitted before it


def test_an_execution_woken_but_not_begun_is_interrupted_without_events() -> None:
    state = _prompt(_created("s1"), "a")
    out = request(state, op_of("interrupt", NOW, {"session": "s1"}))
    assert out.reply == Ok({"interrupted": True}) and out.events == ()
    assert not out.state.work and not enabled(out.state)


def test_an_execution_interrupted_between_transitions_ends_interrupted() -> None:
    state = _prompt(_created("s1"), "a")
    for at in ("start", "drain", "promote"):
        state = advance(state, RunnerStep("s1", at), NOW).state
    out = request(state, op_of("interrupt", NOW, {"session": "s1"}))
    assert out.reply == Ok({"interrupted": True})
    assert [e.type for e in out.events] == ["execution_interrupted"]  # no step had started
    assert not out.state.work


def test_a_wake_during_pending_work_rings_the_doorbell_and_resume_joins() -> None:
    state = _prompt(_created("s1"), "a")
    state = request(state, Resume(NOW, session="s1")).state
    assert state.work["s1"].forced is False  # joined, not restarted
    state = _prompt(state, "b")
    assert state.work["s1"].doorbell


def test_advance_refuses_a_transition_that_is_not_enabled() -> None:
    state = _prompt(_created("s1"), "a")
    with pytest.raises(ValueError, match="runner s1: open is not enabled"):
        advance(state, RunnerStep("s1", "open"), NOW)
    with pytest.raises(ValueError, match="runner s2: start is not enabled"):
        advance(state, RunnerStep("s2", "start"), NOW)


def test_a_request_error_returns_the_state_it_was_given_work_included() -> None:
    state = _prompt(_created("s1"), "a")
    out = request(state, Prompt(NOW, session="s1", input="a", text="other"))
    assert isinstance(out.reply, Err) and out.reply.code == "prompt_conflict"
    assert out.state is state


@settings(max_examples=150, deadline=None)
@given(seed=st.randoms(use_true_random=False))
def test_a_kill_between_any_two_transitions_keeps_every_admission(seed: Any) -> None:
    """Crash anywhere in a random interleaving: what was admitted stays
    pending or visible, and nothing volatile survives."""
    state = _created("s1", "s2")
    admitted: set[str] = set()
    for k in range(8):
        if seed.random() < 0.5 and enabled(state):
            steps = enabled(state)
            state = advance(state, steps[int(seed.random() * len(steps))], NOW).state
        else:
            sid = "s1" if seed.random() < 0.6 else "s2"
            out = request(state, Prompt(NOW, session=sid, input=f"m{k}", text="t"))
            state = out.state
            admitted |= {e.input or "" for e in out.events if e.type == "admitted"}
    crashed = state.crashed()
    assert not crashed.busy and not crashed.runs and not enabled(crashed)
    live = {r.input for log in crashed.store.sessions.values() for r in log.pending}
    live |= {m.id for log in crashed.store.sessions.values() for m in log.transcript}
    assert admitted <= live
