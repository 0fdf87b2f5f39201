"""Fork, staged and committed revert, and replay (spec 3.9, 3.10, 3.13;
invariants 30-35; adapter protocol "Rules the protocol pins down")."""

from __future__ import annotations

from inboxsim.model import G4, replay
from tests.model_helpers import World


def world_with_history(*inputs: str) -> World:
    """``s1`` whose inputs were admitted, then promoted together and answered."""
    w = World()
    for input_id in inputs:
        w.prompt("s1", input_id, text=f"text of {input_id}", resume=False)
    w.resume("s1")
    w.answer("stop")
    assert w.transcript("s1") == list(inputs)
    return w


def seqs(w: World, session: str) -> list[int]:
    return [e["seq"] for e in w.wire_events(session)]


# --- fork ------------------------------------------------------------------------------


def test_a_whole_history_fork_copies_every_message_under_new_ids() -> None:
    """forks a session by replaying a durable fork event into copied projected rows"""
    w = world_with_history("m1", "m2")
    parent = w.messages("s1")
    assert w.fork("s1", "f1") == {"session": "f1"}
    child = w.messages("f1")
    assert [m["copied_from"] for m in child] == ["m1", "m2"]
    assert {m["id"] for m in child}.isdisjoint({"m1", "m2"})
    assert [(m["type"], m["seq"], m["time"]) for m in child] == [
        (m["type"], m["seq"], m["time"]) for m in parent
    ]
    forked = w.wire_events("f1")
    assert [(e["seq"], e["type"]) for e in forked] == [(0, "forked")]
    assert forked[0]["data"]["parent_seq"] == w.log("s1").events[-1].seq


def test_a_fork_never_copies_pending_input_and_leaves_the_parent_untouched() -> None:
    """forks a session by replaying a durable fork event into copied projected rows"""
    w = world_with_history("m1")
    w.prompt("s1", "m2", resume=False)
    w.compact("s1", "c1")  # wakes: a compaction call opens, m2 stays pending
    parent = w.log("s1")
    w.fork("s1", "f1")
    assert w.log("s1") == parent
    assert w.pending("f1") == [] and w.pending("s1") == ["m2", "c1"]
    assert [m["copied_from"] for m in w.messages("f1")] == ["m1"]
    assert w.shape("f1") == []


def test_child_events_continue_after_the_cutoff() -> None:
    """forks a session by replaying a durable fork event into copied projected rows
    (the child's log reads seqs [0, 5, 6])"""
    w = World()
    for input_id in ("m1", "m2", "m3"):
        w.prompt("s1", input_id, resume=False)  # seqs 0, 1, 2
    w.resume("s1")  # execution_started 3, promoted 4, 5, 6
    assert [m["seq"] for m in w.messages("s1")] == [4, 5, 6]
    w.fork("s1", "f1", before="m2")
    assert w.wire_events("f1")[0]["data"]["parent_seq"] == 4
    assert [m["copied_from"] for m in w.messages("f1")] == ["m1"]
    w.prompt("f1", "n1", resume=False)
    w.prompt("f1", "n2", resume=False)
    assert seqs(w, "f1") == [0, 5, 6]


def test_a_fork_before_the_first_message_is_empty() -> None:
    """forks before the selected boundary message"""
    w = world_with_history("m1", "m2")
    w.fork("s1", "f1", before="m1")
    assert w.messages("f1") == [] and w.pending("f1") == []
    assert w.wire_events("f1")[0]["data"]["parent_seq"] == w.messages("s1")[0]["seq"] - 1


def test_a_fork_of_an_empty_session_is_empty() -> None:
    """rejects forking an empty session (G5's ForkEmptyError; the model follows G4 and
    forks it)"""
    w = World()
    w.fork("s1", "f1")
    assert w.messages("f1") == [] and w.pending("f1") == []
    assert w.wire_events("f1")[0]["data"]["parent_seq"] == -1
    w.prompt("f1", "n1", resume=False)
    assert seqs(w, "f1") == [0, 1]


def test_a_fork_of_a_fork_names_the_root_original() -> None:
    """keeps nested forks self-contained"""
    w = world_with_history("m1", "m2")
    w.fork("s1", "f1")
    w.fork("f1", "f2")
    grandchild = w.messages("f2")
    assert [m["copied_from"] for m in grandchild] == ["m1", "m2"]
    ids = {m["id"] for m in grandchild}
    assert ids.isdisjoint({m["id"] for m in w.messages("f1")}) and ids.isdisjoint({"m1", "m2"})
    assert w.wire_events("f2")[0]["data"]["parent_seq"] == w.log("f1").fork_seq


def test_a_fork_before_a_copied_message_of_a_fork() -> None:
    w = world_with_history("m1", "m2")
    w.fork("s1", "f1")
    second_copy = w.messages("f1")[1]["id"]
    w.fork("f1", "f2", before=second_copy)
    assert [m["copied_from"] for m in w.messages("f2")] == ["m1"]


def test_a_child_runs_on_its_copied_history() -> None:
    w = world_with_history("m1")
    w.fork("s1", "f1")
    w.prompt("f1", "n1")
    copy = w.messages("f1")[0]["id"]
    assert w.shape() == [("f1", "step", 1, False, [copy, "n1"])]
    assert w.transcript("s1") == ["m1"] and w.pending("s1") == []


def test_fork_errors_change_nothing() -> None:
    w = world_with_history("m1")
    w.prompt("s1", "m2", resume=False)
    w.create("s2")
    w.rejects("invalid_request", "fork", session="s1", child="s2")
    w.rejects("invalid_request", "fork", session="s1", child="s1")
    w.rejects("session_not_found", "fork", session="nope", child="f1")
    w.rejects(
        "message_not_found", "fork", session="s1", child="f1", before="m2"
    )  # pending, not visible
    w.rejects("message_not_found", "fork", session="s1", child="f1", before="zzz")


# --- revert: stage, clear, commit ------------------------------------------------------------


def test_revert_stage_needs_a_visible_message_of_the_session() -> None:
    w = world_with_history("m1")
    w.create("s2")
    w.prompt("s1", "m2", resume=False)
    w.rejects("message_not_found", "revert_stage", session="s1", message="m2")
    w.rejects("message_not_found", "revert_stage", session="s1", message="zzz")
    w.rejects("message_not_found", "revert_stage", session="s2", message="m1")


def test_clear_and_commit_without_a_staged_revert_do_nothing() -> None:
    w = world_with_history("m1")
    before = w.state
    w.revert_clear("s1")
    w.revert_commit("s1")
    assert w.appended() == () and w.state == before


def test_a_cleared_revert_changes_nothing_and_commit_then_does_nothing() -> None:
    w = world_with_history("m1", "m2")
    w.revert_stage("s1", "m1")
    assert w.new_events() == ["revert_staged"]
    w.revert_clear("s1")
    assert w.new_events() == ["revert_cleared"]
    w.revert_commit("s1")
    assert w.appended() == ()
    assert w.transcript("s1") == ["m1", "m2"]


def test_commit_truncates_transcript_and_pending_at_the_boundary_seq() -> None:
    """projects staged, cleared, and committed reverts"""
    w = World()
    w.prompt("s1", "m1")  # step 1 open on [m1]
    w.prompt("s1", "m2")
    w.prompt("s1", "early", delivery="queue")  # admitted before m2's promotion
    w.answer("tool")  # m2 promoted; step 1 open on [m1, m2]
    w.prompt("s1", "late", delivery="queue")
    w.synthetic("s1", "x1", delivery="queue")
    w.revert_stage("s1", "m2")
    assert w.transcript("s1") == ["m1", "m2"]  # staging changes nothing yet
    w.revert_commit("s1")
    assert w.new_events() == ["revert_committed"]
    assert w.transcript("s1") == ["m1"]
    assert w.pending("s1") == ["early"]  # admitted_seq below the boundary's seq survives
    assert w.log("s1").revert is None


def test_a_committed_revert_ends_the_truncated_lifecycles_not_their_ownership() -> None:
    w = world_with_history("m1", "m2")
    w.revert_stage("s1", "m1")
    w.revert_commit("s1")
    assert w.transcript("s1") == []
    w.prompt("s1", "m1", text="new text", resume=False)  # same session and kind: a new input
    w.rejects("synthetic_conflict", "synthetic", session="s1", input="m2", text="y")
    assert w.pending("s1") == ["m1"]


def test_a_prompt_under_a_staged_revert_commits_it_first() -> None:
    """commits a staged revert before admitting a new prompt"""
    w = world_with_history("m1", "m2")
    w.revert_stage("s1", "m2")
    w.prompt("s1", "m3")
    assert w.new_events() == [
        "revert_committed",
        "admitted",
        "execution_started",
        "promoted",
        "step_started",
    ]
    assert w.shape() == [("s1", "step", 1, False, ["m1", "m3"])]
    assert w.log("s1").revert is None


def test_a_prompt_under_the_boundary_id_replaces_the_boundary() -> None:
    """atomically replaces a staged boundary under the same message ID"""
    w = world_with_history("m1", "m2")
    w.revert_stage("s1", "m2")
    receipt = w.prompt("s1", "m2", text="replacement", resume=False)
    assert w.new_events() == ["revert_committed", "admitted"]
    assert receipt["data"]["text"] == "replacement"
    assert w.transcript("s1") == ["m1"] and w.pending("s1") == ["m2"]


def test_a_retry_of_a_delivered_message_before_the_boundary_commits() -> None:
    """commits a staged revert while preserving a delivered retry before the boundary"""
    w = world_with_history("m1", "m2")
    original = w.log("s1").transcript[0].receipt
    assert original is not None
    w.revert_stage("s1", "m2")
    assert w.prompt("s1", "m1", text="text of m1") == original.to_wire()
    assert w.new_events() == ["revert_committed"]
    assert w.transcript("s1") == ["m1"]


def test_a_retry_of_a_pending_input_before_the_boundary_commits() -> None:
    """commits a staged revert while preserving a pending retry before the boundary"""
    w = World()
    w.prompt("s1", "m1")  # step 1 open on [m1]
    w.prompt("s1", "m2")
    original = w.prompt("s1", "q1", delivery="queue")
    w.answer("stop")  # m2 promoted after q1 was admitted
    w.revert_stage("s1", "m2")
    assert w.prompt("s1", "q1", delivery="queue", resume=False) == original
    assert w.new_events() == ["revert_committed"]
    assert w.pending("s1") == ["q1"] and w.transcript("s1") == ["m1"]


def test_a_failing_prompt_leaves_the_revert_staged() -> None:
    """keeps a staged revert recoverable when replacement prompt admission conflicts /
    keeps a staged revert recoverable when replacement prompt validation fails"""
    w = world_with_history("m1", "m2")
    w.create("s2")
    w.prompt("s2", "other", resume=False)
    w.revert_stage("s1", "m1")
    w.rejects("prompt_conflict", "prompt", session="s1", input="other", text="t")
    w.rejects("invalid_request", "prompt", session="s1", input="m3", text="t", delivery="soon")
    assert w.log("s1").revert == "m1" and w.transcript("s1") == ["m1", "m2"]


def test_a_prompt_retry_of_a_truncated_input_is_a_new_admission() -> None:
    w = world_with_history("m1", "m2")
    w.revert_stage("s1", "m2")
    receipt = w.prompt("s1", "m2", text="text of m2", resume=False)
    assert w.new_events() == ["revert_committed", "admitted"]
    assert receipt["admitted_seq"] == w.log("s1").events[-1].seq


def test_a_synthetic_under_a_staged_revert_is_held_and_discarded_by_commit() -> None:
    """holds synthetic input behind a staged revert and discards it when committed"""
    w = world_with_history("m1", "m2")
    w.revert_stage("s1", "m2")
    w.synthetic("s1", "x1")
    assert w.new_events() == ["admitted"]
    assert w.calls() == [] and w.log("s1").revert == "m2"
    assert w.pending("s1") == ["x1"]
    w.revert_commit("s1")
    assert w.pending("s1") == [] and w.transcript("s1") == ["m1"]


def test_a_synthetic_under_a_staged_revert_rings_no_doorbell() -> None:
    w = world_with_history("m1", "m2")
    w.prompt("s1", "m3")
    w.revert_stage("s1", "m1")
    w.synthetic("s1", "x1")
    assert w.state.runs["s1"].doorbell is False


# --- replay ------------------------------------------------------------------------------------


def test_replay_rebuilds_pending_and_transcript_without_waking() -> None:
    """reprojects pending inbox input without scheduling execution / replays one prompt
    lifecycle into a fresh target database"""
    w = World()
    w.prompt("s1", "m1", resume=False)
    w.prompt("s1", "q1", delivery="queue", resume=False)
    admitted = w.log("s1").events
    prefix = replay("s1", admitted, G4)
    assert [r.input for r in prefix.pending] == ["m1", "q1"] and prefix.transcript == ()
    w.resume("s1")
    w.answer("stop")
    log = w.log("s1")
    rebuilt = replay("s1", log.events, G4)
    assert rebuilt == log
    assert [m.id for m in rebuilt.transcript] == ["m1", "q1"]


def test_replay_rebuilds_a_fork_with_stable_identities() -> None:
    """replays a fork with stable projected identities"""
    w = world_with_history("m1", "m2")
    w.fork("s1", "f1", before="m2")
    w.prompt("f1", "n1")
    log = w.log("f1")
    assert replay("f1", log.events, G4) == log
    assert replay("f1", log.events[:1], G4).transcript == log.transcript[:1]


def test_replay_rebuilds_reverts_and_barriers() -> None:
    w = world_with_history("m1", "m2")
    w.prompt("s1", "m3")
    w.compact("s1", "c1")
    w.revert_stage("s1", "m2")
    w.synthetic("s1", "x1")
    for session in ("s1",):
        log = w.log(session)
        assert replay(session, log.events, G4) == log
    w.revert_commit("s1")
    log = w.log("s1")
    assert replay("s1", log.events, G4) == log
    assert [r.input for r in log.pending] == ["c1"]


def test_log_after_is_exclusive() -> None:
    """streams durable Session events after an aggregate sequence"""
    w = World()
    w.prompt("s1", "m1", resume=False)
    w.prompt("s1", "m2", resume=False)
    w.resume("s1")
    assert seqs(w, "s1") == [0, 1, 2, 3, 4, 5]
    assert [(e["seq"], e["type"]) for e in w.wire_events("s1", after=1)] == [
        (2, "execution_started"),
        (3, "promoted"),
        (4, "promoted"),
        (5, "step_started"),
    ]
    assert [e["input"] for e in w.wire_events("s1", after=2)[:2]] == ["m1", "m2"]
    assert w.wire_events("s1", after=5) == []
