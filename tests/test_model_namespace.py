"""One ID namespace, for good (spec invariants 2 and 38; adapter protocol,
"Rules the protocol pins down"): an input ID belongs to one session and one
kind from its first admission. After its lifecycle ended (a consumed
barrier, a committed revert) it may be admitted again only in that session
and as that kind; generated IDs never collide with an ID ever used.

The first four tests are the shrunk repros of issue 16, on which the model
used to free the ID for everyone."""

from __future__ import annotations

from tests.model_helpers import World


def consumed_barrier(w: World, session: str, input_id: str) -> None:
    """Admit barrier ``input_id`` in ``session`` and consume it."""
    w.compact(session, input_id)
    assert w.pending(session) == [input_id]
    w.settle(session)
    assert w.pending(session) == []


def test_a_consumed_barrier_id_is_no_prompt_id() -> None:
    w = World()
    consumed_barrier(w, "s1", "c2")
    w.rejects("prompt_conflict", "prompt", session="s1", input="c2", text="a")


def test_a_promoted_synthetic_is_no_prompt_under_its_own_staged_revert() -> None:
    # The prompt is judged as if the revert were committed first: u1 is then
    # a synthetic input whose lifecycle ended, so a prompt conflicts, and
    # (the revert rule) nothing changes: the revert stays staged.
    w = World()
    w.synthetic("s1", "u1")
    w.settle("s1")
    assert w.transcript("s1") == ["u1"]
    w.revert_stage("s1", "u1")
    w.rejects("prompt_conflict", "prompt", session="s1", input="u1", text="a")
    assert w.log("s1").revert == "u1" and w.transcript("s1") == ["u1"]


def test_a_consumed_barrier_id_is_no_barrier_of_another_session() -> None:
    w = World("s1", "s2")
    consumed_barrier(w, "s1", "c1")
    w.rejects("compaction_conflict", "compact", session="s2", input="c1")


def test_a_reverted_prompt_id_is_no_synthetic_of_a_fork() -> None:
    w = World()
    w.prompt("s1", "u4")
    w.settle("s1")
    w.prompt("s1", "u5")
    w.settle("s1")
    w.revert_stage("s1", "u5")
    w.revert_commit("s1")
    w.fork("s1", "f2")
    w.rejects("synthetic_conflict", "synthetic", session="f2", input="u5", text="a")
    w.rejects("prompt_conflict", "prompt", session="f2", input="u5", text="a")


def test_same_session_and_kind_after_the_lifecycle_ended_is_a_new_input() -> None:
    w = World()
    consumed_barrier(w, "s1", "c1")
    again = w.compact("s1", "c1")
    assert w.new_events()[0] == "compaction_admitted" and again["input"] == "c1"
    w.settle("s1")
    w.prompt("s1", "u1", text="first")
    w.settle("s1")
    w.revert_stage("s1", "u1")
    w.revert_commit("s1")
    receipt = w.prompt("s1", "u1", text="second", resume=False)
    assert w.new_events() == ["admitted"] and receipt["data"]["text"] == "second"
    assert w.pending("s1") == ["u1"]


def test_a_prompt_reusing_the_staged_boundary_id_is_a_new_input() -> None:
    """Judged as if the revert were committed first: the boundary message is
    gone, so the prompt is a new input of the same session and kind, not a
    retry (even with the boundary's exact payload)."""
    w = World()
    w.prompt("s1", "u1", text="first")
    w.settle("s1")
    w.revert_stage("s1", "u1")
    receipt = w.prompt("s1", "u1", text="first", resume=False)
    assert w.new_events() == ["revert_committed", "admitted"]
    assert receipt["admitted_seq"] > w.wire_events("s1")[0]["seq"]
    assert w.transcript("s1") == [] and w.pending("s1") == ["u1"]


def test_a_truncated_copy_id_is_never_admitted() -> None:
    w = World()
    w.prompt("s1", "m1")
    w.settle("s1")
    w.fork("s1", "f1")
    (copy,) = w.transcript("f1")
    w.revert_stage("f1", copy)
    w.revert_commit("f1")
    assert w.transcript("f1") == []
    w.rejects("prompt_conflict", "prompt", session="f1", input=copy, text="a")
    w.rejects("prompt_conflict", "prompt", session="s1", input=copy, text="a")


def test_generated_ids_skip_every_id_ever_used() -> None:
    # A client may send in-N itself; after that input's lifecycle ended the
    # ID still belongs to it, so the generator must skip it.
    w = World()
    used = {f"{prefix}{n}" for prefix in ("in-", "cmp-", "copy-", "call-") for n in range(1, 12)}
    for input_id in sorted(used):
        w.prompt("s1", input_id, text=input_id, resume=False)
    w.resume("s1")
    w.settle("s1")
    first = w.transcript("s1")[0]
    w.revert_stage("s1", first)
    w.revert_commit("s1")
    assert w.transcript("s1") == [] and w.pending("s1") == []
    generated = {w.prompt("s1", resume=False)["input"] for _ in range(4)}
    generated.add(w.compact("s1")["input"])
    w.settle("s1")
    w.fork("s1", "f1")
    generated |= set(w.transcript("f1"))
    generated |= {c["call"] for c in w.calls()}
    w.resume("s1")
    generated |= {c["call"] for c in w.calls()}
    assert len(generated) >= 8 and not generated & used
