"""Open points of spec section 5 that the model decides without a policy
field, each pinned where the decision shows (the rule's comment in the
model names the same point). A9 and A18 are pinned by
``test_a_whole_history_fork_copies_every_message_under_new_ids`` and
``test_a_synthetic_steer_joins_an_active_continuation``."""

from __future__ import annotations

from tests.model_helpers import World


def test_a8_a_whole_history_fork_reserves_the_parents_pending_admissions() -> None:
    """A8: nothing pending is copied, and the cutoff still covers the
    admission events of input that is pending in the parent."""
    w = World()
    w.prompt("s1", "m1", resume=False)  # admitted at seq 0, pending
    w.fork("s1", "f1")
    assert w.wire_events("f1")[0]["data"]["parent_seq"] == 0
    assert w.pending("f1") == [] and w.messages("f1") == [] and w.pending("s1") == ["m1"]
    w.prompt("f1", "n1", resume=False)
    assert [e["seq"] for e in w.wire_events("f1")] == [0, 1]


def test_a12_a_staged_revert_does_not_hold_back_promotion() -> None:
    """A12: a synthetic admitted under a staged revert while a step runs is
    promoted at the next boundary, then removed by the commit."""
    w = World()
    w.prompt("s1", "m1")  # step 1 runs on [m1]
    w.revert_stage("s1", "m1")
    w.synthetic("s1", "x1")  # no wake under the staged revert, but the drain is running
    w.answer("tool")
    assert w.transcript("s1") == ["m1", "x1"]
    assert w.shape() == [("s1", "step", 1, False, ["m1", "x1"])]
    w.revert_commit("s1")
    assert w.transcript("s1") == [] and w.pending("s1") == []
