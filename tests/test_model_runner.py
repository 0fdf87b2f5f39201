"""The runner: Safe Step Boundaries, steer and queue, step allowance, wakes,
resume, errors, interrupt and crashes (spec 3.4-3.7; adapter protocol
"Quiescence and model calls", "Rules the protocol pins down", "Crashes")."""

from __future__ import annotations

import pytest

from inboxsim.model import Err, Ok, apply, op_from_wire
from tests.model_helpers import World


def busy_world(step_limit: int = 4) -> World:
    """``s1`` running its first step on ``m1``."""
    w = World(step_limit=step_limit)
    w.prompt("s1", "m1")
    assert w.shape() == [("s1", "step", 1, False, ["m1"])]
    return w


# --- one prompt, one step -----------------------------------------------------------------


def test_a_prompt_runs_one_step_and_the_execution_succeeds() -> None:
    """starts a real runner step after default prompt recording"""
    w = busy_world()
    w.answer("stop")
    assert w.new_events() == ["step_ended", "execution_succeeded"]
    assert w.calls() == [] and w.pending("s1") == [] and w.transcript("s1") == ["m1"]
    assert w.events("s1") == [
        "admitted",
        "execution_started",
        "promoted",
        "step_started",
        "step_ended",
        "execution_succeeded",
    ]


def test_message_seq_is_its_promotion_seq() -> None:
    """consumes the pending row and projects the message at promotion"""
    w = busy_world()
    promoted = [e for e in w.wire_events("s1") if e["type"] == "promoted"]
    assert promoted[0]["input"] == "m1"
    assert w.messages("s1")[0]["seq"] == promoted[0]["seq"]


def test_tool_continues_with_the_next_step_without_promotion() -> None:
    w = busy_world()
    w.answer("tool")
    assert w.new_events() == ["step_ended", "step_started"]
    assert w.shape() == [("s1", "step", 2, False, ["m1"])]


def test_admitted_prompts_promote_together_in_admission_order() -> None:
    """streams one request with registry definitions from chronological user history /
    promotes prompt and synthetic steers in admission order"""
    w = World()
    w.prompt("s1", "m1", resume=False)
    w.synthetic("s1", "x1", resume=False)
    w.prompt("s1", "m2", resume=False)
    w.resume("s1")
    assert w.shape() == [("s1", "step", 1, False, ["m1", "x1", "m2"])]
    assert w.pending("s1") == []


# --- steer ------------------------------------------------------------------------------------


def test_a_steer_joins_at_the_next_boundary() -> None:
    """steers an active step with newly recorded prompts"""
    w = busy_world()
    w.prompt("s1", "m2")
    assert w.new_events() == ["admitted"]
    assert w.pending("s1") == ["m2"] and w.shape() == [("s1", "step", 1, False, ["m1"])]
    w.answer("stop")
    assert w.new_events() == ["step_ended", "promoted", "step_started"]
    assert w.shape() == [("s1", "step", 1, False, ["m1", "m2"])]


def test_several_steers_coalesce_into_one_continuation_step() -> None:
    """coalesces multiple active steering prompts into one continuation step"""
    w = busy_world()
    w.prompt("s1", "m2")
    w.prompt("s1", "m3")
    w.answer("tool")
    assert w.shape() == [("s1", "step", 1, False, ["m1", "m2", "m3"])]
    w.answer("stop")
    assert w.calls() == []
    assert w.events("s1").count("step_started") == 2
    assert w.events("s1").count("execution_started") == 1


def test_a_synthetic_steer_joins_an_active_continuation() -> None:
    """runs a follow-up when synthetic input arrives during an active continuation"""
    w = busy_world()
    w.answer("tool")
    w.synthetic("s1", "x1", text="shell finished")
    w.answer("tool")
    assert w.shape() == [("s1", "step", 1, False, ["m1", "x1"])]


# --- queue ------------------------------------------------------------------------------------


def test_queued_input_waits_for_the_continuation_to_end() -> None:
    """promotes queued input after continuation ends"""
    w = busy_world()
    w.prompt("s1", "q1", delivery="queue")
    w.answer("tool")
    assert w.shape() == [("s1", "step", 2, False, ["m1"])]
    assert w.pending("s1") == ["q1"]
    w.answer("stop")
    assert w.shape() == [("s1", "step", 1, False, ["m1", "q1"])]


def test_queued_inputs_promote_one_at_a_time_in_fifo_order() -> None:
    """promotes queued inputs one at a time in FIFO order"""
    w = busy_world()
    for input_id in ("q1", "q2", "q3"):
        w.prompt("s1", input_id, delivery="queue")
    contexts: list[list[str]] = []
    while w.call("s1") is not None:
        w.answer("stop")
        contexts.extend(c[4] for c in w.shape())
    assert contexts == [["m1", "q1"], ["m1", "q1", "q2"], ["m1", "q1", "q2", "q3"]]


def test_steers_promote_before_the_next_queued_input() -> None:
    """promotes steers before the next queued input"""
    w = busy_world()
    w.prompt("s1", "q1", delivery="queue")
    w.prompt("s1", "m2")
    w.answer("stop")
    assert w.shape() == [("s1", "step", 1, False, ["m1", "m2"])]
    assert w.pending("s1") == ["q1"]
    w.answer("stop")
    assert w.shape() == [("s1", "step", 1, False, ["m1", "m2", "q1"])]


def test_queued_input_after_a_steering_continuation() -> None:
    """promotes queued input after steering continuation ends"""
    w = busy_world()
    w.prompt("s1", "q1", delivery="queue")
    w.prompt("s1", "m2")
    w.answer("tool")
    assert w.shape() == [("s1", "step", 1, False, ["m1", "m2"])]
    w.answer("tool")
    assert w.shape() == [("s1", "step", 2, False, ["m1", "m2"])]
    w.answer("stop")
    assert w.shape() == [("s1", "step", 1, False, ["m1", "m2", "q1"])]


def test_a_queued_synthetic_waits_for_the_queue_boundary() -> None:
    """keeps synthetic queue input pending until the queue boundary"""
    w = busy_world()
    w.synthetic("s1", "x1", delivery="queue")
    w.answer("tool")
    assert w.pending("s1") == ["x1"]
    w.answer("stop")
    assert w.shape() == [("s1", "step", 1, False, ["m1", "x1"])]


def test_an_idle_boundary_promotes_every_steer_before_queued_input() -> None:
    """lists admitted work in admission order until promotion"""
    w = World()
    w.prompt("s1", "a", resume=False)
    w.prompt("s1", "q", delivery="queue", resume=False)
    w.synthetic("s1", "b", resume=False)
    assert w.pending("s1") == ["a", "q", "b"]
    w.resume("s1")
    assert w.shape() == [("s1", "step", 1, False, ["a", "b"])]
    assert w.pending("s1") == ["q"]
    w.answer("stop")
    assert w.shape() == [("s1", "step", 1, False, ["a", "b", "q"])]
    assert w.pending("s1") == []


def test_a_wake_while_idle_promotes_only_the_first_queued_input() -> None:
    """promotes the first queued input when woken while idle / keeps queued input
    pending until the idle boundary"""
    w = World()
    w.prompt("s1", "q1", delivery="queue", resume=False)
    w.prompt("s1", "q2", delivery="queue", resume=False)
    w.prompt("s1", "q1", delivery="queue")  # an exact retry is a wake
    assert w.shape() == [("s1", "step", 1, False, ["q1"])]
    assert w.pending("s1") == ["q2"]


# --- step allowance -----------------------------------------------------------------------------


def test_promotion_resets_the_step_allowance() -> None:
    """resets the configured step allowance when steering input promotes"""
    w = busy_world(step_limit=3)
    w.answer("tool")
    w.answer("tool")
    assert w.shape() == [("s1", "step", 3, True, ["m1"])]
    w.prompt("s1", "m2")
    w.answer("tool")
    assert w.shape() == [("s1", "step", 1, False, ["m1", "m2"])]


def test_the_final_step_is_marked_and_tool_counts_as_stop() -> None:
    """forces a text response on an agent's configured final step"""
    w = busy_world(step_limit=2)
    w.answer("tool")
    assert w.shape() == [("s1", "step", 2, True, ["m1"])]
    w.answer("tool")
    assert w.new_events() == ["step_ended", "execution_succeeded"]
    assert w.calls() == []


def test_a_step_limit_of_one_makes_every_first_step_final() -> None:
    w = World(step_limit=1)
    w.prompt("s1", "m1")
    assert w.shape() == [("s1", "step", 1, True, ["m1"])]


def test_a_steer_after_the_final_step_starts_a_fresh_allowance() -> None:
    w = busy_world(step_limit=2)
    w.answer("tool")
    w.prompt("s1", "m2")
    w.answer("tool")
    assert w.shape() == [("s1", "step", 1, False, ["m1", "m2"])]


# --- resume and wakes -------------------------------------------------------------------------


def test_a_forced_resume_with_nothing_pending_makes_one_call() -> None:
    """resumes through a recorded message without appending another prompt"""
    w = busy_world()
    w.answer("stop")
    w.resume("s1")
    assert w.new_events() == ["execution_started", "step_started"]
    assert w.shape() == [("s1", "step", 1, False, ["m1"])]
    w.answer("stop")
    assert w.new_events() == ["step_ended", "execution_succeeded"]
    assert "admitted" not in w.events("s1")[1:]


def test_a_forced_resume_on_an_empty_session_makes_one_call() -> None:
    w = World()
    w.resume("s1")
    assert w.shape() == [("s1", "step", 1, False, [])]


def test_an_unforced_wake_with_nothing_pending_starts_nothing() -> None:
    w = busy_world()
    w.answer("stop")
    before = w.state
    w.prompt("s1", "m1")  # an exact retry wakes; nothing is pending
    assert w.appended() == () and w.state == before and w.calls() == []


def test_resume_joins_the_active_execution() -> None:
    """joins concurrent resumes for one key / joins concurrent resume calls into one
    active provider run"""
    w = busy_world()
    before = w.state
    w.resume("s1")
    w.resume("s1")
    assert w.appended() == () and w.state == before


def test_a_resume_joins_a_wake_started_execution_without_a_successor() -> None:
    """joins a wake-started execution without forcing a successor"""
    w = busy_world()
    w.resume("s1")
    assert w.state.runs["s1"].doorbell is False
    w.answer("stop")
    assert w.new_events() == ["step_ended", "execution_succeeded"] and w.calls() == []


def test_wakes_during_a_drain_ring_one_doorbell() -> None:
    """coalesces wakes received during active execution / settles once per execution
    across coalesced drains"""
    w = busy_world()
    assert w.state.runs["s1"].doorbell is False
    for input_id in ("m2", "m3", "m4"):
        w.prompt("s1", input_id)
    assert w.state.runs["s1"].doorbell is True
    w.settle("s1")
    assert w.events("s1").count("execution_started") == 1
    assert w.events("s1").count("execution_succeeded") == 1


def test_a_doorbell_rung_during_a_failed_step_starts_one_new_execution() -> None:
    """runs steering input accepted while the active step fails / starts one follow-up
    when a wake races with failure"""
    w = busy_world()
    w.prompt("s1", "m2")
    w.prompt("s1", "m3")
    w.answer("error")
    assert w.new_events() == [
        "step_failed",
        "execution_failed",
        "execution_started",
        "promoted",
        "promoted",
        "step_started",
    ]
    assert w.shape() == [("s1", "step", 1, False, ["m1", "m2", "m3"])]


def test_a_wake_during_the_follow_up_gives_another() -> None:
    """runs again when woken during the follow-up"""
    w = busy_world()
    w.prompt("s1", "m2")
    w.answer("error")
    w.prompt("s1", "m3")
    w.answer("error")
    assert w.events("s1").count("execution_started") == 3
    assert w.shape() == [("s1", "step", 1, False, ["m1", "m2", "m3"])]


def test_an_error_fails_the_step_and_execution_and_keeps_pending_input() -> None:
    """fans out one failed run and allows a later retry / cleans active executions after
    failure and defect"""
    w = busy_world()
    w.prompt("s1", "m2", resume=False)
    w.answer("error")
    assert w.new_events() == ["step_failed", "execution_failed"]
    assert w.calls() == [] and w.pending("s1") == ["m2"] and not w.state.runs
    w.resume("s1")
    assert w.shape() == [("s1", "step", 1, False, ["m1", "m2"])]


def test_a_resume_false_input_is_still_promoted_by_the_running_drain() -> None:
    w = busy_world()
    w.prompt("s1", "m2", resume=False)
    assert w.state.runs["s1"].doorbell is False
    w.answer("stop")
    assert w.shape() == [("s1", "step", 1, False, ["m1", "m2"])]


def test_sessions_run_independently() -> None:
    """runs different sessions concurrently / runs different keys concurrently"""
    w = World("s1", "s2")
    w.prompt("s1", "a1")
    w.prompt("s2", "b1")
    assert w.shape() == [("s1", "step", 1, False, ["a1"]), ("s2", "step", 1, False, ["b1"])]
    w.answer("tool", session="s2")
    assert w.shape() == [("s1", "step", 1, False, ["a1"]), ("s2", "step", 2, False, ["b1"])]
    w.answer("error", session="s1")
    assert w.shape() == [("s2", "step", 2, False, ["b1"])]


def test_calls_are_listed_oldest_first() -> None:
    w = World("s1", "s2")
    w.prompt("s2", "b1")
    w.prompt("s1", "a1")
    assert [c["session"] for c in w.calls()] == ["s2", "s1"]
    w.answer("tool", session="s2")
    assert [c["session"] for c in w.calls()] == ["s1", "s2"]


# --- answer ---------------------------------------------------------------------------------


def test_answer_on_a_call_that_is_not_open_is_an_invalid_request() -> None:
    w = busy_world()
    call = w.calls()[0]["call"]
    w.rejects("invalid_request", "answer", call="call-999", finish="stop")
    w.rejects("invalid_request", "answer", call=call, finish="maybe")
    w.answer("stop")
    w.rejects("invalid_request", "answer", call=call, finish="stop")


# --- interrupt ---------------------------------------------------------------------------------


def test_interrupt_keeps_pending_input_and_drops_the_doorbell() -> None:
    """interrupts active execution and clears its pending wake / preserves durable
    steering input for a later resume after interruption"""
    w = busy_world()
    w.prompt("s1", "m2")
    assert w.interrupt("s1") is True
    assert w.new_events() == ["step_failed", "execution_interrupted"]
    assert w.calls() == [] and w.pending("s1") == ["m2"] and not w.state.runs
    w.resume("s1")
    assert w.shape() == [("s1", "step", 1, False, ["m1", "m2"])]


def test_queued_input_survives_an_interrupt_until_a_later_wake() -> None:
    """preserves durable queued input for a later wake after interruption"""
    w = busy_world()
    w.prompt("s1", "q1", delivery="queue")
    w.interrupt("s1")
    assert w.pending("s1") == ["q1"] and w.calls() == []
    w.prompt("s1", "q1", delivery="queue")  # the retry wakes
    assert w.shape() == [("s1", "step", 1, False, ["m1", "q1"])]


def test_an_idle_interrupt_is_a_no_op() -> None:
    """does nothing when interrupted while idle / reports an idle interrupt as a no-op"""
    w = World()
    w.prompt("s1", "m1", resume=False)
    before = w.state
    assert w.interrupt("s1") is False
    assert w.appended() == () and w.state == before


def test_a_second_interrupt_is_a_no_op() -> None:
    w = busy_world()
    assert w.interrupt("s1") is True
    before = w.state
    assert w.interrupt("s1") is False
    assert w.appended() == () and w.state == before


# --- crashes --------------------------------------------------------------------------------


def test_a_crash_drops_volatile_state_only() -> None:
    w = busy_world()
    w.prompt("s1", "m2", delivery="queue")
    store = w.state.store
    w.crash()
    assert w.state.store is store and not w.state.runs
    assert w.calls() == [] and w.pending("s1") == ["m2"] and w.transcript("s1") == ["m1"]


def test_after_a_crash_nothing_runs_until_a_wake() -> None:
    w = busy_world()
    w.prompt("s1", "m2")
    w.crash()
    w.hello(step_limit=4)
    assert w.calls() == []
    w.resume("s1")
    assert w.new_events() == ["execution_started", "promoted", "step_started"]
    assert w.shape() == [("s1", "step", 1, False, ["m1", "m2"])]


def test_failpoint_after_admit() -> None:
    w = World()
    outcome = w.crashes_at("after_admit", "prompt", session="s1", input="m1", text="hi")
    assert [e.type for e in outcome.events] == ["admitted"]
    assert w.pending("s1") == ["m1"] and w.calls() == []


def test_after_admit_does_not_fire_for_an_exact_retry() -> None:
    w = World()
    original = w.prompt("s1", "m1", resume=False)
    outcome = w.send(
        "prompt", crash_at="after_admit", session="s1", input="m1", text="hello", resume=False
    )
    assert outcome.reply == Ok(original) and outcome.events == ()


def test_failpoint_mid_promotion_between_two_promotions_of_one_batch() -> None:
    w = World()
    w.prompt("s1", "m1", resume=False)
    w.prompt("s1", "m2", resume=False)
    outcome = w.crashes_at("mid_promotion", "resume", session="s1")
    assert [e.type for e in outcome.events] == ["execution_started", "promoted"]
    assert w.transcript("s1") == ["m1"] and w.pending("s1") == ["m2"] and w.calls() == []
    w.resume("s1")
    assert w.shape() == [("s1", "step", 1, False, ["m1", "m2"])]


def test_failpoint_mid_promotion_for_a_batch_of_one() -> None:
    w = World()
    outcome = w.crashes_at("mid_promotion", "prompt", session="s1", input="m1", text="hi")
    assert [e.type for e in outcome.events] == ["admitted", "execution_started", "promoted"]
    assert w.transcript("s1") == ["m1"] and w.calls() == []


def test_failpoint_mid_promotion_waits_for_a_boundary_that_promotes() -> None:
    w = World()
    w.resume("s1")  # a forced drain: its first boundary promotes nothing
    w.answer("stop")
    w.prompt("s1", "m1", resume=False)
    outcome = w.crashes_at("mid_promotion", "resume", session="s1")
    assert [e.type for e in outcome.events] == ["execution_started", "promoted"]


def test_failpoint_after_promotion() -> None:
    w = World()
    w.prompt("s1", "m1", resume=False)
    w.prompt("s1", "m2", resume=False)
    outcome = w.crashes_at("after_promotion", "resume", session="s1")
    assert [e.type for e in outcome.events] == ["execution_started", "promoted", "promoted"]
    assert w.transcript("s1") == ["m1", "m2"] and w.calls() == []


def test_failpoint_after_promotion_at_a_boundary_that_promotes_nothing() -> None:
    w = World()
    outcome = w.crashes_at("after_promotion", "resume", session="s1")
    assert [e.type for e in outcome.events] == ["execution_started"]


def test_a_request_that_never_reaches_its_failpoint_completes() -> None:
    w = World()
    outcome = w.send(
        "prompt", crash_at="mid_promotion", session="s1", input="m1", text="t", resume=False
    )
    assert isinstance(outcome.reply, Ok) and w.pending("s1") == ["m1"]


# --- hello -------------------------------------------------------------------------------------


def test_hello_reports_protocol_features_and_step_limit() -> None:
    w = World(step_limit=4)
    result = w.hello(step_limit=6)
    assert result["protocol"] == 1 and result["step_limit"] == 6
    assert set(result["features"]) == {
        "synthetic",
        "compaction",
        "fork",
        "revert",
        "resume",
        "interrupt",
        "crash_op",
        "failpoints",
    }
    assert w.hello()["step_limit"] == 6


def test_hello_sets_the_allowance_used_by_the_next_steps() -> None:
    w = World(step_limit=4)
    w.hello(step_limit=1)
    w.prompt("s1", "m1")
    assert w.shape() == [("s1", "step", 1, True, ["m1"])]


@pytest.mark.parametrize("bad", [0, -1, True, 2.5, "3"], ids=repr)
def test_hello_rejects_a_step_limit_that_is_not_a_positive_integer(bad: object) -> None:
    w = World()
    w.rejects("invalid_request", "hello", step_limit=bad)


def test_op_from_wire_builds_the_same_request() -> None:
    w = World()
    op = op_from_wire(
        {
            "rid": 1,
            "op": "prompt",
            "now": 5,
            "session": "s1",
            "input": "m1",
            "text": "t",
            "files": [],
            "metadata": {"a": 1},
        }
    )
    outcome = apply(w.state, op)
    assert isinstance(outcome.reply, Ok) and outcome.reply.result["data"]["metadata"] == {"a": 1}
    assert isinstance(
        apply(w.state, op_from_wire({"op": "pending", "now": 6, "session": "zz"})).reply, Err
    )
    with pytest.raises(ValueError):
        op_from_wire({"op": "prompt", "now": 1, "sesion": "s1"})
    with pytest.raises(ValueError):
        op_from_wire({"op": "teleport", "now": 1})
