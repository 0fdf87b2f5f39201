"""Admission, exact retry, ID conflicts and wake policy (spec 3.1-3.3, 3.6;
adapter protocol "Rules the protocol pins down"), under the default policy."""

from __future__ import annotations

from typing import Any

import pytest

from tests.model_helpers import World

USER_DEFAULTS: dict[str, Any] = {"files": [], "agents": [], "metadata": {}}


def idle_world_with_pending(*inputs: str) -> World:
    """``s1`` with user steers admitted but not woken (``resume: false``)."""
    w = World()
    for input_id in inputs:
        w.prompt("s1", input_id, resume=False)
    return w


# --- create ----------------------------------------------------------------------


def test_create_returns_the_session() -> None:
    w = World("s1")
    assert w.create("s2") == {"session": "s2"}
    assert w.events("s2") == [] and w.pending("s2") == [] and w.transcript("s2") == []


def test_create_adopts_an_existing_session() -> None:
    w = idle_world_with_pending("m1")
    before = w.state
    assert w.create("s1") == {"session": "s1"}
    assert w.appended() == ()
    assert w.state.store == before.store
    assert w.pending("s1") == ["m1"]


# --- receipts ---------------------------------------------------------------------


def test_prompt_receipt_applies_the_defaults() -> None:
    """durably admits one user message before transcript promotion"""
    w = World()
    w.now = 5000
    receipt = w.prompt("s1", "m1", text="Continue", resume=False)
    assert receipt == {
        "input": "m1",
        "session": "s1",
        "type": "user",
        "data": {"text": "Continue", **USER_DEFAULTS},
        "delivery": "steer",
        "admitted_seq": 0,
        "time": 5000,
    }
    assert w.pending("s1") == ["m1"] and w.transcript("s1") == []
    assert w.events("s1") == ["admitted"]


def test_prompt_receipt_carries_the_flattened_payload() -> None:
    w = World()
    receipt = w.prompt(
        "s1",
        "m1",
        text="look",
        files=[{"uri": "file:///a.txt"}],
        agents=["build"],
        metadata={"job": 7},
        delivery="queue",
        resume=False,
    )
    assert receipt["data"] == {
        "text": "look",
        "files": [{"uri": "file:///a.txt"}],
        "agents": ["build"],
        "metadata": {"job": 7},
    }
    assert receipt["delivery"] == "queue"


def test_synthetic_receipt_applies_the_defaults() -> None:
    """durably admits synthetic input before transcript promotion"""
    w = World()
    receipt = w.synthetic("s1", "x1", text="Background task completed", resume=False)
    assert receipt["type"] == "synthetic" and receipt["delivery"] == "steer"
    assert receipt["data"] == {
        "text": "Background task completed",
        "description": None,
        "metadata": {},
    }
    assert w.pending("s1") == ["x1"] and w.transcript("s1") == []
    w.resume("s1")
    assert w.pending("s1") == [] and w.transcript("s1") == ["x1"]
    assert w.messages("s1")[0]["type"] == "synthetic"


def test_synthetic_receipt_carries_description_and_metadata() -> None:
    w = World()
    receipt = w.synthetic(
        "s1",
        "x1",
        text="done",
        description="shell completion",
        metadata={"jobID": "j1"},
        delivery="queue",
        resume=False,
    )
    assert receipt["data"] == {
        "text": "done",
        "description": "shell completion",
        "metadata": {"jobID": "j1"},
    }
    assert receipt["delivery"] == "queue"


def test_pending_lists_rows_in_admission_order_with_admission_time() -> None:
    w = World()
    w.now = 100
    w.prompt("s1", "m1", delivery="queue", resume=False)
    w.now = 200
    w.synthetic("s1", "x1", resume=False)
    assert w.pending_rows("s1") == [
        {"input": "m1", "type": "user", "delivery": "queue", "admitted_seq": 0, "time": 100},
        {"input": "x1", "type": "synthetic", "delivery": "steer", "admitted_seq": 1, "time": 200},
    ]


def test_an_invalid_delivery_is_an_invalid_request() -> None:
    w = World()
    w.rejects("invalid_request", "prompt", session="s1", input="m1", text="t", delivery="later")
    w.rejects("invalid_request", "synthetic", session="s1", text="t", delivery="now")


# --- omitted and generated IDs -------------------------------------------------------


def test_an_omitted_id_always_creates_a_new_input() -> None:
    """records distinct messages when the ID is omitted"""
    w = World()
    first = w.prompt("s1", text="same", resume=False)
    second = w.prompt("s1", text="same", resume=False)
    assert first["input"] != second["input"]
    assert w.pending("s1") == [first["input"], second["input"]]
    assert w.events("s1") == ["admitted", "admitted"]


def test_generated_ids_never_collide_with_ids_in_use() -> None:
    w = World()
    taken = {f"{prefix}{n}" for prefix in ("in-", "cmp-", "copy-", "x") for n in range(1, 30)}
    for input_id in sorted(taken):
        w.prompt("s1", input_id, resume=False)
    generated = {w.prompt("s1", resume=False)["input"] for _ in range(5)}
    generated.add(w.synthetic("s1", resume=False)["input"])
    assert len(generated) == 6 and not generated & taken


# --- exact retry ---------------------------------------------------------------------


def test_exact_retry_while_pending_returns_the_original_receipt() -> None:
    """returns the original recorded message when the ID is retried"""
    w = World()
    original = w.prompt(
        "s1", "m1", text="hi", metadata={"k": [1, 2]}, delivery="queue", resume=False
    )
    before = w.state
    again = w.prompt("s1", "m1", text="hi", metadata={"k": [1, 2]}, delivery="queue", resume=False)
    assert again == original
    assert w.appended() == () and w.state == before


def test_exact_retry_after_promotion_returns_the_original_receipt() -> None:
    w = World()
    original = w.prompt("s1", "m1", text="hi")
    w.answer("stop")
    assert w.transcript("s1") == ["m1"]
    before = w.state
    assert w.prompt("s1", "m1", text="hi") == original  # resume defaults to true
    assert w.appended() == () and w.state == before


def test_exact_retry_of_a_synthetic_returns_the_original_receipt() -> None:
    """reconciles exact synthetic retries and rejects conflicting reuse"""
    w = World()
    original = w.synthetic("s1", "x1", text="n", description="d", resume=False)
    assert w.synthetic("s1", "x1", text="n", description="d", resume=False) == original
    assert w.appended() == ()
    w.resume("s1")
    w.answer("stop")
    assert w.synthetic("s1", "x1", text="n", description="d") == original
    assert w.appended() == ()
    w.rejects(
        "synthetic_conflict", "synthetic", session="s1", input="x1", text="n", description="other"
    )


def test_retry_compares_numbers_by_value_and_applies_defaults() -> None:
    w = World()
    original = w.prompt("s1", "m1", text="t", metadata={"n": 1, "f": 2.5}, resume=False)
    same = w.prompt(
        "s1",
        "m1",
        text="t",
        files=[],
        agents=[],
        metadata={"f": 2.5, "n": 1.0},
        delivery="steer",
        resume=False,
    )
    assert same == original and w.appended() == ()


def test_resume_is_not_part_of_retry_identity_and_a_retry_wakes() -> None:
    """starts execution when resume is explicitly true"""
    w = idle_world_with_pending("m1")
    original = w.pending_rows("s1")[0]
    receipt = w.prompt("s1", "m1", resume=True)
    assert receipt["admitted_seq"] == original["admitted_seq"]
    assert w.new_events() == ["execution_started", "promoted", "step_started"]
    assert w.shape() == [("s1", "step", 1, False, ["m1"])]


def test_a_retry_of_a_promoted_input_wakes_the_session() -> None:
    """wakes execution when an exact prompt retry recovers a committed message"""
    w = World()
    w.prompt("s1", "m1")
    w.answer("stop")
    w.prompt("s1", "m2", resume=False)
    w.prompt("s1", "m1")
    assert "admitted" not in w.new_events()
    assert w.new_events() == ["execution_started", "promoted", "step_started"]
    assert w.shape() == [("s1", "step", 1, False, ["m1", "m2"])]


def test_an_id_is_free_again_after_a_committed_revert_removed_it() -> None:
    w = World()
    w.prompt("s1", "m1")
    w.answer("stop")
    w.prompt("s1", "m2")
    w.answer("stop")
    first = w.messages("s1")[1]
    w.revert_stage("s1", "m2")
    w.revert_commit("s1")
    receipt = w.prompt("s1", "m2", text="something else", resume=False)
    assert receipt["admitted_seq"] > first["seq"]
    assert w.pending("s1") == ["m2"]


# --- conflicts ----------------------------------------------------------------------

CONFLICTING_PROMPTS: dict[str, dict[str, Any]] = {
    "other text": {"text": "other"},
    "other files": {"files": [{"uri": "file:///b"}]},
    "other agents": {"agents": ["plan"]},
    "other metadata": {"metadata": {"k": 2}},
    "metadata added": {"metadata": {"k": 1, "extra": True}},
    "other delivery": {"delivery": "queue"},
}


@pytest.mark.parametrize("change", CONFLICTING_PROMPTS.values(), ids=list(CONFLICTING_PROMPTS))
@pytest.mark.parametrize("promoted", [False, True], ids=["pending", "promoted"])
def test_a_non_equivalent_reuse_is_a_prompt_conflict(
    change: dict[str, Any], promoted: bool
) -> None:
    """rejects reuse of one ID with a different prompt / rejects reuse of one ID with a
    different delivery mode / treats prompt metadata as durable retry identity"""
    w = World()
    original: dict[str, Any] = {"text": "hi", "metadata": {"k": 1}}
    w.prompt("s1", "m1", **original, resume=promoted)
    if promoted:
        w.answer("stop")
        assert w.transcript("s1") == ["m1"]
    w.rejects("prompt_conflict", "prompt", session="s1", input="m1", **{**original, **change})


@pytest.mark.parametrize(
    "change",
    [{"text": "other"}, {"description": "d2"}, {"metadata": {"k": 2}}, {"delivery": "queue"}],
    ids=["text", "description", "metadata", "delivery"],
)
def test_a_non_equivalent_synthetic_reuse_is_a_synthetic_conflict(change: dict[str, Any]) -> None:
    """reconciles exact synthetic retries and rejects conflicting reuse"""
    w = World()
    original: dict[str, Any] = {"text": "t", "description": "d", "metadata": {"k": 1}}
    w.synthetic("s1", "x1", **original, resume=False)
    w.rejects("synthetic_conflict", "synthetic", session="s1", input="x1", **{**original, **change})


@pytest.mark.parametrize("promoted", [False, True], ids=["pending", "promoted"])
def test_reusing_an_id_as_another_kind_conflicts(promoted: bool) -> None:
    """rejects a prompt ID already used by visible Session history"""
    w = World()
    w.synthetic("s1", "x1", resume=promoted)
    w.prompt("s1", "m1", resume=promoted)
    if promoted:
        w.answer("stop")
        assert w.transcript("s1") == ["x1", "m1"]
    w.rejects("prompt_conflict", "prompt", session="s1", input="x1", text="notice")
    w.rejects("synthetic_conflict", "synthetic", session="s1", input="m1", text="hello")
    w.rejects("compaction_conflict", "compact", session="s1", input="m1")
    w.rejects("compaction_conflict", "compact", session="s1", input="x1")


def test_reusing_an_id_in_another_session_conflicts() -> None:
    """rejects reuse of one globally unique message ID across sessions"""
    w = World("s1", "s2")
    w.prompt("s1", "m1", resume=False)
    w.synthetic("s1", "x1", resume=False)
    w.rejects("prompt_conflict", "prompt", session="s2", input="m1", text="hello")
    w.rejects("synthetic_conflict", "synthetic", session="s2", input="x1", text="notice")
    w.rejects("compaction_conflict", "compact", session="s2", input="m1")
    assert w.events("s2") == []


def test_reusing_a_barrier_id_conflicts() -> None:
    w = World("s1", "s2")
    w.prompt("s1", "m1")  # keeps s1 busy, so the barrier stays pending
    w.compact("s1", "c1")
    assert w.pending("s1") == ["c1"]
    w.rejects("prompt_conflict", "prompt", session="s1", input="c1", text="hello")
    w.rejects("synthetic_conflict", "synthetic", session="s1", input="c1", text="notice")
    w.rejects("compaction_conflict", "compact", session="s2", input="c1")


def test_reusing_a_fork_copied_id_conflicts() -> None:
    w = World()
    w.prompt("s1", "m1", text="hi")
    w.answer("stop")
    w.fork("s1", "f1")
    copy = w.messages("f1")[0]
    assert copy["copied_from"] == "m1" and copy["id"] != "m1"
    w.rejects("prompt_conflict", "prompt", session="f1", input=copy["id"], text="hi")
    w.rejects("prompt_conflict", "prompt", session="s1", input=copy["id"], text="hi")
    w.rejects("synthetic_conflict", "synthetic", session="f1", input=copy["id"], text="hi")
    w.rejects("compaction_conflict", "compact", session="f1", input=copy["id"])


SESSION_OPS: dict[str, dict[str, Any]] = {
    "prompt": {"text": "t"},
    "synthetic": {"text": "t"},
    "compact": {},
    "resume": {},
    "interrupt": {},
    "fork": {"child": "f1"},
    "revert_stage": {"message": "m1"},
    "revert_clear": {},
    "revert_commit": {},
    "log": {},
    "messages": {},
    "pending": {},
}


@pytest.mark.parametrize("name", list(SESSION_OPS))
def test_an_unknown_session_is_session_not_found(name: str) -> None:
    """fails for an unknown session"""
    w = idle_world_with_pending("m1")
    w.rejects("session_not_found", name, session="nope", **SESSION_OPS[name])


# --- wake policy ----------------------------------------------------------------------


def test_a_prompt_wakes_by_default() -> None:
    """starts execution by default after recording the prompt"""
    w = World()
    w.prompt("s1", "m1")
    assert w.new_events() == ["admitted", "execution_started", "promoted", "step_started"]
    assert w.shape() == [("s1", "step", 1, False, ["m1"])]


def test_resume_false_admits_without_waking() -> None:
    """only records the prompt when resume is false"""
    w = World()
    w.prompt("s1", "m1", resume=False)
    w.synthetic("s1", "x1", resume=False)
    assert w.events("s1") == ["admitted", "admitted"]
    assert w.calls() == []


def test_timestamps_pending_row_at_admission_message_at_promotion() -> None:
    w = World()
    w.now = 100
    receipt = w.prompt("s1", "m1", resume=False)
    w.now = 300
    w.resume("s1")
    assert receipt["time"] == 100
    assert w.messages("s1") == [{"id": "m1", "type": "user", "seq": 2, "time": 300}]
    w.answer("stop")
    w.now = 900
    assert w.prompt("s1", "m1")["time"] == 100  # the retry's receipt keeps admission time
