"""Policy presets change only what the policy table of ``docs/cli.md``
says, and ``load_policy`` reads presets and TOML files."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from inboxsim.invariants import check_trace
from inboxsim.model import G4, PRESETS, Ok, Policy, PolicyError, features
from inboxsim.policy_file import load_policy
from inboxsim.scenarios.load import load_library
from inboxsim.scenarios.runner import run_scenario
from tests.invariant_traces import Ops, edit, ok, play
from tests.model_helpers import World

# --- g5: first admission wins, retry from the message, ordered barrier -----------------


def test_g5_keeps_the_first_admission_when_an_id_is_reused() -> None:
    """keeps the first admission when one ID is reused with a different prompt / keeps
    the first admission's delivery mode when one ID is reused with another / keeps the
    first admission's metadata when one ID is reused with other metadata"""
    w = World(policy="g5")
    original = w.prompt("s1", "m1", text="first", metadata={"k": 1}, resume=False)
    for change in ({"text": "second"}, {"delivery": "queue"}, {"metadata": {"k": 2}}):
        fields: dict[str, Any] = {"text": "first", "metadata": {"k": 1}, **change}
        assert w.prompt("s1", "m1", resume=False, **fields) == original
        assert w.appended() == ()
    assert w.pending_rows("s1")[0]["delivery"] == "steer"


def test_g5_still_rejects_another_session_or_type() -> None:
    """rejects reuse of one globally unique message ID across sessions"""
    w = World("s1", "s2", policy="g5")
    w.prompt("s1", "m1", resume=False)
    w.rejects("prompt_conflict", "prompt", session="s2", input="m1", text="hello")
    w.rejects("synthetic_conflict", "synthetic", session="s1", input="m1", text="hello")


def test_g5_ignores_delivery_when_retrying_a_promoted_message() -> None:
    """ignores delivery when retrying a promoted message / reconciles an exact retry
    from the promoted message without admission history"""
    w = World(policy="g5")
    w.now = 100
    w.prompt("s1", "m1", text="hi")
    w.answer("stop")
    receipt = w.prompt("s1", "m1", text="other", delivery="queue")
    assert w.appended() == ()
    message = w.messages("s1")[0]
    assert receipt["delivery"] == "queue" and receipt["time"] == message["time"] == 100
    assert receipt["data"]["text"] == "hi"


def test_g5_reconciles_synthetic_retries_from_the_message_regardless_of_payload() -> None:
    """reconciles synthetic retries from the promoted message regardless of payload"""
    w = World(policy="g5")
    w.synthetic("s1", "x1", text="first", description="d")
    w.answer("stop")
    receipt = w.synthetic("s1", "x1", text="second")
    assert receipt["data"] == {"text": "first", "description": "d", "metadata": {}}
    assert w.appended() == ()


def test_g5_reconciles_a_fork_copied_id_in_the_child() -> None:
    """forks a session by replaying a durable fork event into copied projected rows
    (copied ID reconciles in child)"""
    w = World(policy="g5")
    w.prompt("s1", "m1", text="hi")
    w.answer("stop")
    w.fork("s1", "f1")
    copy = w.messages("f1")[0]
    receipt = w.prompt("f1", copy["id"], text="hi")
    assert receipt["input"] == copy["id"] and receipt["session"] == "f1"
    assert w.appended() == ()


def test_g4_rejects_a_fork_copied_id_in_the_child() -> None:
    w = World()
    w.prompt("s1", "m1", text="hi")
    w.answer("stop")
    w.fork("s1", "f1")
    w.rejects("prompt_conflict", "prompt", session="f1", input=w.messages("f1")[0]["id"], text="hi")


def barrier_scenario(policy: str) -> list[tuple[str, str, int, bool, list[str]]]:
    """A steer admitted before a barrier and one after it; the calls in order."""
    w = World(policy=policy)
    w.prompt("s1", "early", resume=False)
    w.compact("s1", "c1")
    w.prompt("s1", "late")
    shapes = []
    while w.calls():
        shapes.extend(w.shape())
        w.answer("stop")
    return shapes


def test_g4_barrier_blocks_every_promotion() -> None:
    assert barrier_scenario("g4") == [
        ("s1", "compaction", 0, False, []),
        ("s1", "step", 1, False, ["early", "late"]),
    ]


def test_g5_barrier_lets_older_steers_go_first() -> None:
    """runs steers before queued compaction and later queued input"""
    assert barrier_scenario("g5") == [
        ("s1", "step", 1, False, ["early"]),
        ("s1", "compaction", 0, False, ["early"]),
        ("s1", "step", 1, False, ["early", "late"]),
    ]


# --- g2: admission-time stamps, no synthetic route, OpenCode 1.18.33's revert -------------


def test_g2_has_no_synthetic_route() -> None:
    w = World(policy="g2")
    w.rejects("unsupported", "synthetic", session="s1", input="x1", text="t")
    assert "synthetic" not in w.hello()["features"]
    assert "synthetic" not in features(PRESETS["g2"])


G2_SOURCE = dataclasses.replace(PRESETS["g2"], name="g2-source", steer_batch_cap=100)


def test_the_g2_source_revision_promotes_at_most_100_steers_per_boundary() -> None:
    """promotes steers only through the captured inbox cutoff (the G2 source
    revision's cap; the released 1.18.33, preset g2, has none)"""
    w = World(policy=G2_SOURCE)
    inputs = [f"m{n:03}" for n in range(101)]
    for input_id in inputs:
        w.prompt("s1", input_id, resume=False)
    w.resume("s1")
    assert w.shape() == [("s1", "step", 1, False, inputs[:100])]
    assert w.pending("s1") == inputs[100:]
    w.answer("stop")
    assert w.shape() == [("s1", "step", 1, False, inputs)]


def test_the_100_steer_cap_breaks_the_steer_batch_scenario_at_its_wake() -> None:
    """steer-batch-101 (what OpenCode 1.18.33 does) holds under g2 and fails
    under the G2 source revision's cap at step 103, the wake: c101 stays pending."""
    loaded = next(s for s in load_library() if s.scenario.name == "steer-batch-101")
    assert run_scenario(loaded).failures == ()
    failures = run_scenario(loaded, policy=G2_SOURCE).failures
    assert failures[0].step == 103
    assert "expected pending [] in s1, got ['c101']" in failures[0].message


@pytest.mark.parametrize("policy", ["g4", "g2"])
def test_g4_and_g2_promote_every_pending_steer(policy: str) -> None:
    w = World(policy=policy)
    inputs = [f"m{n:03}" for n in range(101)]
    for input_id in inputs:
        w.prompt("s1", input_id, resume=False)
    w.resume("s1")
    assert w.shape() == [("s1", "step", 1, False, inputs)]


def test_g2_messages_keep_their_admission_time() -> None:
    w = World(policy="g2")
    w.now = 100
    w.prompt("s1", "m1", resume=False)
    w.now = 500
    w.resume("s1")
    assert w.messages("s1")[0]["time"] == 100
    assert w.pending_rows("s1") == []


def test_g2_promoted_events_carry_the_admission_time() -> None:
    """OpenCode 1.18.33 stamps session.next.prompted with the admission time."""

    def promoted_times(policy: str) -> list[tuple[str, int]]:
        w = World(policy=policy)
        w.now = 100
        w.prompt("s1", "m1", resume=False)
        w.now = 200
        w.prompt("s1", "q1", delivery="queue", resume=False)
        w.now = 500
        w.resume("s1")
        w.now = 700
        w.answer("stop")
        return [(e["input"], e["time"]) for e in w.wire_events("s1") if e["type"] == "promoted"]

    assert promoted_times("g2") == [("m1", 100), ("q1", 200)]
    assert promoted_times("g4") == [("m1", 500), ("q1", 700)]


def test_promoted_event_time_admission_needs_admission_visible_time(tmp_path: Path) -> None:
    path = tmp_path / "odd.toml"
    path.write_text('base = "g4"\npromoted_event_time = "admission"\n', encoding="utf-8")
    with pytest.raises(PolicyError, match=r"odd.toml: .*needs visible_time = 'admission'"):
        load_policy(str(path))
    path.write_text('base = "g4"\nvisible_time = "admission"\npromoted_event_time = "admission"\n')
    assert load_policy(str(path)).promoted_event_time == "admission"


def _staged_then_prompted(policy: str) -> World:
    """m1, m2 visible; q1 pending; revert staged to m2; then prompt m3."""
    w = World(policy=policy)
    w.prompt("s1", "m1")
    w.answer("stop")
    w.prompt("s1", "m2")
    w.answer("stop")
    w.prompt("s1", "q1", delivery="queue", resume=False)
    w.revert_stage("s1", "m2")
    w.prompt("s1", "m3", resume=False)
    return w


def test_g2_prompt_under_a_staged_revert_is_admitted_and_the_commit_keeps_the_boundary() -> None:
    w = _staged_then_prompted("g2")
    assert w.new_events() == ["admitted"]  # no revert_committed
    assert w.pending("s1") == ["q1", "m3"] and w.transcript("s1") == ["m1", "m2"]
    assert w.log("s1").revert == "m2"
    w.revert_commit("s1")
    assert w.transcript("s1") == ["m1", "m2"] and w.pending("s1") == []


def test_g4_prompt_under_a_staged_revert_commits_it_and_the_boundary_goes() -> None:
    w = _staged_then_prompted("g4")
    assert w.new_events() == ["revert_committed", "admitted"]
    assert w.transcript("s1") == ["m1"] and w.pending("s1") == ["m3"]
    assert w.log("s1").revert is None


# --- b and c: synthetic delivery and parallel lifecycles --------------------------------------


def test_b_synthetic_input_always_steers() -> None:
    w = World(policy="b")
    receipt = w.synthetic("s1", "x1", delivery="queue", resume=False)
    assert receipt["delivery"] == "steer"
    assert w.synthetic("s1", "x1", delivery="queue", resume=False) == receipt
    assert w.prompt("s1", "q1", delivery="queue", resume=False)["delivery"] == "queue"


def test_c_promotes_prompts_before_synthetics() -> None:
    def contexts(policy: str) -> list[list[str]]:
        w = World(policy=policy)
        w.synthetic("s1", "x1", resume=False)
        w.prompt("s1", "m1", resume=False)
        w.synthetic("s1", "xq", delivery="queue", resume=False)
        w.prompt("s1", "mq", delivery="queue", resume=False)
        seen: list[list[str]] = []
        w.resume("s1")
        while w.calls():
            seen.extend(c[4] for c in w.shape())
            w.answer("stop")
        return seen

    assert contexts("g4") == [["x1", "m1"], ["x1", "m1", "xq"], ["x1", "m1", "xq", "mq"]]
    assert contexts("c") == [["m1", "x1"], ["m1", "x1", "mq"], ["m1", "x1", "mq", "xq"]]


@pytest.mark.parametrize("name", ["g3", "a", "c-merged"])
def test_presets_indistinguishable_from_g4_behave_alike(name: str) -> None:
    def run(policy: str) -> tuple[object, ...]:
        w = World(policy=policy)
        w.synthetic("s1", "x1", resume=False)
        w.prompt("s1", "m1", delivery="queue", resume=False)
        w.prompt("s1", "m2")
        w.compact("s1", "c1")
        w.answer("tool")
        w.answer("stop")
        w.prompt("s1", "m2")
        shapes = w.shape()
        return (shapes, w.pending_rows("s1"), w.messages("s1"), w.wire_events("s1"))

    assert run(name) == run("g4")


# --- load_policy --------------------------------------------------------------------------------


def test_every_preset_loads_by_name() -> None:
    for name, preset in PRESETS.items():
        assert load_policy(name) is preset
    assert load_policy("g4") is G4
    assert set(PRESETS) == {"g4", "g3", "g2", "g5", "a", "b", "c", "c-merged"}


def test_a_toml_file_overrides_fields_of_its_base(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text(
        'base = "g5"\nvisible_time = "admission"\nsteer_batch_cap = 3\n', encoding="utf-8"
    )
    policy = load_policy(str(path))
    assert policy.name == "mine"
    assert policy.visible_time == "admission" and policy.steer_batch_cap == 3
    assert policy.retry_identity == "first_wins"  # from g5
    assert isinstance(policy, Policy)


def test_a_toml_file_defaults_to_g4(tmp_path: Path) -> None:
    path = tmp_path / "plain.toml"
    path.write_text('name = "plain"\n', encoding="utf-8")
    assert load_policy(str(path)).fields() == G4.fields()


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('base = "g9"\n', "base"),
        ('base = ["g4"]\n', "base"),
        ("colour = 1\n", "colour"),
        ('retry_identity = "lenient"\n', "retry_identity"),
        ("steer_batch_cap = 0\n", "steer_batch_cap"),
        ("steer_batch_cap = true\n", "steer_batch_cap"),
        ("name = 7\n", "name"),
        ("retry_identity = \n", "not valid TOML"),
    ],
    ids=["base", "base-type", "field", "value", "cap-zero", "cap-bool", "name-type", "syntax"],
)
def test_a_bad_toml_file_is_a_policy_error_naming_the_problem(
    tmp_path: Path, text: str, needle: str
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(PolicyError, match=needle):
        load_policy(str(path))


def test_an_unknown_name_or_missing_file_is_a_policy_error(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="unknown policy"):
        load_policy("g6")
    with pytest.raises(PolicyError, match="cannot read"):
        load_policy(str(tmp_path / "absent.toml"))


# --- the rules OpenCode's G5 tests pin where the protocol's default differs --------
# (scenarios/policies/g5-opencode.toml; each field's default keeps g4 as it was)

G5_OC = dataclasses.replace(
    PRESETS["g5"],
    name="g5-opencode",
    interrupt_unknown="no_op",
    empty_compaction="fail",
    abandoned_compaction="settle",
    fork_empty="reject",
)


def _last_reply(policy: Any, *items: Any) -> Any:
    return play(*items, policy=policy).steps[-1].reply


def test_interrupt_of_an_unknown_session_is_a_no_op_only_under_no_op() -> None:
    o = Ops()
    assert _last_reply(G5_OC, o.interrupt("nobody")) == ok({"interrupted": False})
    o = Ops()
    assert getattr(_last_reply(PRESETS["g5"], o.interrupt("nobody")), "code", None) == (
        "session_not_found"
    )


def test_the_interrupt_checker_judges_an_unknown_session_by_the_policy() -> None:
    o = Ops()
    good = play(o.interrupt("nobody"), policy=G5_OC)
    ids = ["idle-interrupt-noop"]
    assert check_trace(good, G5_OC, False, only_expected=False, invariants=ids) == []
    planted = edit(good, 1, reply=ok({"interrupted": True}))
    fired = check_trace(planted, G5_OC, False, only_expected=False, invariants=ids)
    assert [v.invariant for v in fired] == ids
    # the same quiet trace violates the protocol's rule (session_not_found)
    assert check_trace(good, G4, False, only_expected=False, invariants=ids) != []


def test_an_empty_compaction_fails_without_a_call_only_under_fail() -> None:
    o = Ops()
    trace = play(o.create(), o.compact(x="c1"), policy=G5_OC)
    types = [e.type for e in trace.steps[-1].observed.events]
    assert "compaction_failed" in types and "compaction_started" not in types
    o = Ops()
    trace = play(o.create(), o.compact(x="c1"), policy=PRESETS["g5"])
    assert "compaction_started" in [e.type for e in trace.steps[-1].observed.events]


def test_forking_an_empty_session_is_refused_only_under_reject() -> None:
    o = Ops()
    reply = _last_reply(G5_OC, o.create(), o.fork("s1", "f1"))
    assert getattr(reply, "code", None) == "invalid_request"
    o = Ops()
    assert isinstance(_last_reply(PRESETS["g5"], o.create(), o.fork("s1", "f1")), Ok)
