"""Policy presets change only what the policy table of ``docs/cli.md``
says, and ``load_policy`` reads presets and TOML files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from inboxsim.model import G4, PRESETS, Policy, PolicyError, features, load_policy
from inboxsim.tests.model_helpers import World

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


# --- g2: admission-time stamps, 100-steer cap, no synthetic route ---------------------------


def test_g2_has_no_synthetic_route() -> None:
    w = World(policy="g2")
    w.rejects("unsupported", "synthetic", session="s1", input="x1", text="t")
    assert "synthetic" not in w.hello()["features"]
    assert "synthetic" not in features(PRESETS["g2"])


def test_g2_promotes_at_most_100_steers_per_boundary() -> None:
    """promotes steers only through the captured inbox cutoff"""
    w = World(policy="g2")
    inputs = [f"m{n:03}" for n in range(101)]
    for input_id in inputs:
        w.prompt("s1", input_id, resume=False)
    w.resume("s1")
    assert w.shape() == [("s1", "step", 1, False, inputs[:100])]
    assert w.pending("s1") == inputs[100:]
    w.answer("stop")
    assert w.shape() == [("s1", "step", 1, False, inputs)]


def test_g4_promotes_every_pending_steer() -> None:
    w = World()
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
