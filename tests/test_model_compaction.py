"""The manual compaction barrier (spec 3.8, invariants 9-12; adapter protocol
"Rules the protocol pins down")."""

from __future__ import annotations

from inboxsim.model import Ok
from tests.model_helpers import World


def busy_world() -> World:
    """``s1`` running its first step on ``m1``."""
    w = World()
    w.prompt("s1", "m1")
    return w


def test_compact_receipt_is_a_compaction_without_delivery() -> None:
    w = busy_world()
    w.now = 4000
    receipt = w.compact("s1", "c1")
    assert receipt == {
        "input": "c1",
        "session": "s1",
        "type": "compaction",
        "data": {},
        "delivery": None,
        "admitted_seq": 4,
        "time": 4000,
    }
    assert w.new_events() == ["compaction_admitted"]
    assert w.pending_rows("s1") == [
        {"input": "c1", "type": "compaction", "delivery": None, "admitted_seq": 4, "time": 4000}
    ]


def test_compact_without_an_id_gets_a_generated_one() -> None:
    w = busy_world()
    receipt = w.compact("s1")
    assert receipt["input"] not in ("", "m1") and w.pending("s1") == [receipt["input"]]


def test_a_compaction_call_opens_even_with_nothing_to_summarize() -> None:
    w = World()
    w.compact("s1", "c1")
    assert w.new_events() == ["compaction_admitted", "execution_started", "compaction_started"]
    assert w.shape() == [("s1", "compaction", 0, False, [])]
    w.answer("stop")
    assert w.new_events() == ["compaction_ended", "execution_succeeded"]
    assert w.pending("s1") == [] and w.calls() == []


def test_compaction_requests_coalesce_into_one_barrier() -> None:
    w = busy_world()
    first = w.compact("s1", "c1")
    before = w.state
    assert w.compact("s1", "c2") == first
    assert w.compact("s1") == first
    assert w.compact("s1", "c1") == first
    assert w.appended() == () and w.state == before
    assert w.pending("s1") == ["c1"]


def test_the_barrier_blocks_promotion_until_the_compaction_ends() -> None:
    """runs manual compaction at the next step boundary before queued prompts"""
    w = busy_world()
    w.compact("s1", "c1")
    w.prompt("s1", "m2")
    w.prompt("s1", "q1", delivery="queue")
    w.answer("stop")
    assert w.new_events() == ["step_ended", "compaction_started"]
    assert w.shape() == [("s1", "compaction", 0, False, ["m1"])]
    assert w.pending("s1") == ["c1", "m2", "q1"]
    w.answer("stop")
    assert w.new_events() == ["compaction_ended", "promoted", "step_started"]
    assert w.shape() == [("s1", "step", 1, False, ["m1", "m2"])]
    w.answer("stop")
    assert w.shape() == [("s1", "step", 1, False, ["m1", "m2", "q1"])]


def test_the_compaction_runs_before_a_tool_continuation() -> None:
    """runs manual compaction before the continuation of an active tool turn"""
    w = busy_world()
    w.compact("s1", "c1")
    w.answer("tool")
    assert w.shape() == [("s1", "compaction", 0, False, ["m1"])]
    w.answer("stop")
    assert w.shape() == [("s1", "step", 2, False, ["m1"])]


def test_the_compaction_runs_at_drain_start_before_promotion() -> None:
    w = World()
    w.prompt("s1", "m1", resume=False)
    w.compact("s1", "c1")
    assert w.shape() == [("s1", "compaction", 0, False, [])]
    assert w.pending("s1") == ["m1", "c1"]
    w.answer("stop")
    assert w.shape() == [("s1", "step", 1, False, ["m1"])]


def test_a_forced_resume_runs_a_pending_compaction_first() -> None:
    w = busy_world()
    w.compact("s1", "c1")
    w.interrupt("s1")
    assert w.pending("s1") == ["c1"]
    w.resume("s1")
    assert w.shape() == [("s1", "compaction", 0, False, ["m1"])]
    w.answer("stop")
    assert w.shape() == [("s1", "step", 1, False, ["m1"])]


def test_a_failed_compaction_consumes_the_barrier_and_the_drain_goes_on() -> None:
    """releases queued prompts when durable compaction fails"""
    w = busy_world()
    w.compact("s1", "c1")
    w.prompt("s1", "q1", delivery="queue")
    w.answer("stop")
    w.answer("error")
    assert w.new_events() == ["compaction_failed", "promoted", "step_started"]
    assert w.shape() == [("s1", "step", 1, False, ["m1", "q1"])]
    assert w.pending("s1") == []


def test_tool_on_a_compaction_call_counts_as_stop() -> None:
    w = World()
    w.compact("s1", "c1")
    w.answer("tool")
    assert w.new_events() == ["compaction_ended", "execution_succeeded"]


def test_interrupting_a_compaction_consumes_the_barrier() -> None:
    """records cancelled manual compaction without surfacing an internal failure"""
    w = World()
    w.compact("s1", "c1")
    assert w.interrupt("s1") is True
    assert w.new_events() == ["compaction_failed", "execution_interrupted"]
    failed = w.wire_events("s1")[-2]
    assert failed["input"] == "c1" and failed["data"]["error"] == "Compaction cancelled"
    assert w.pending("s1") == []


def test_interrupting_a_step_keeps_a_pending_barrier() -> None:
    w = busy_world()
    w.compact("s1", "c1")
    w.interrupt("s1")
    assert w.pending("s1") == ["c1"]


def test_a_consumed_barrier_id_may_be_admitted_again() -> None:
    w = World()
    first = w.compact("s1", "c1")
    w.answer("stop")
    second = w.compact("s1", "c1")
    assert second["input"] == "c1" and second["admitted_seq"] > first["admitted_seq"]
    assert "compaction_admitted" in w.new_events()


def test_a_coalesced_id_is_not_recorded() -> None:
    w = World()
    w.compact("s1", "c1")
    w.compact("s1", "c2")
    w.answer("stop")
    receipt = w.compact("s1", "c2")
    assert receipt["input"] == "c2" and w.pending("s1") == ["c2"]


def test_the_barrier_survives_a_crash() -> None:
    w = busy_world()
    w.compact("s1", "c1")
    w.prompt("s1", "m2")
    w.crash()
    assert w.pending("s1") == ["c1", "m2"]
    w.resume("s1")
    assert w.shape() == [("s1", "compaction", 0, False, ["m1"])]


def test_a_compaction_cut_short_by_a_crash_runs_again() -> None:
    """settles abandoned compactions before continuing after a process crash (the model
    keeps the barrier and runs the compaction again; nothing settles it at restart)"""
    w = busy_world()
    w.compact("s1", "c1")
    w.prompt("s1", "m2")
    w.answer("stop")
    assert w.shape() == [("s1", "compaction", 0, False, ["m1"])]
    w.crash()
    assert w.pending("s1") == ["c1", "m2"]
    w.resume("s1")
    assert w.new_events() == ["execution_started", "compaction_started"]
    w.answer("stop")
    assert w.shape() == [("s1", "step", 1, False, ["m1", "m2"])]
    assert w.events("s1").count("compaction_started") == 2
    assert w.events("s1").count("compaction_ended") == 1


def test_after_admit_fires_for_a_fresh_barrier_only() -> None:
    w = busy_world()
    outcome = w.crashes_at("after_admit", "compact", session="s1", input="c1")
    assert [e.type for e in outcome.events] == ["compaction_admitted"]
    assert w.pending("s1") == ["c1"]
    coalesced = w.send("compact", crash_at="after_admit", session="s1", input="c2")
    assert coalesced.reply == Ok(outcome.state.store.sessions["s1"].pending[0].to_wire())
    assert [e.type for e in coalesced.events] == ["execution_started", "compaction_started"]


def test_a_committed_revert_keeps_the_barrier() -> None:
    w = busy_world()
    w.prompt("s1", "m2")
    w.answer("stop")  # m2 promoted, step open on [m1, m2]
    w.compact("s1", "c1")
    w.prompt("s1", "q1", delivery="queue")
    w.revert_stage("s1", "m2")
    w.revert_commit("s1")
    assert w.transcript("s1") == ["m1"]
    assert w.pending("s1") == ["c1"]
