"""The protocol types: strict where the protocol is closed, open where it
allows additive fields, and the kept JSON Schema is the generated one."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from inboxsim.model import (
    Answer,
    Calls,
    Compact,
    CrashOp,
    Create,
    Fork,
    Hello,
    Interrupt,
    Log,
    Messages,
    Pending,
    Prompt,
    Resume,
    RevertClear,
    RevertCommit,
    RevertStage,
    Synthetic,
)
from inboxsim.model.ops import OPS
from inboxsim.targets import protocol
from inboxsim.targets.protocol import REQUEST, RESPONSE, RESULTS, SCHEMA_PATH, describe, schema_text

EVERY_OP = [
    Hello(0, step_limit=3),
    Hello(0),
    Create(1, session="s"),
    Prompt(
        2,
        session="s",
        input="i",
        text="t",
        files=("f",),
        agents=({"a": 1},),
        metadata={"m": 1.5},
        delivery="queue",
        resume=False,
    ),
    Prompt(2, session="s", text="t"),
    Synthetic(
        3,
        session="s",
        input="j",
        text="t",
        description="d",
        metadata={},
        delivery="steer",
        resume=True,
    ),
    Compact(4, session="s"),
    Compact(4, session="s", input="c"),
    Resume(5, session="s"),
    Interrupt(6, session="s"),
    Calls(7),
    Answer(8, call="call-1", finish="tool"),
    Fork(9, session="s", child="k"),
    Fork(9, session="s", child="k", before="i"),
    RevertStage(10, session="s", message="i"),
    RevertClear(11, session="s"),
    RevertCommit(12, session="s"),
    Log(13, session="s"),
    Log(13, session="s", after=4),
    Messages(14, session="s"),
    Pending(15, session="s"),
    CrashOp(16),
]


def test_the_kept_schema_is_the_generated_one() -> None:
    assert SCHEMA_PATH.read_text(encoding="utf-8") == schema_text(), (
        "targets/schema/protocol-v1.json is stale: run python -m inboxsim.targets.protocol --write"
    )
    assert protocol.main(["--check"]) == 0


def test_every_op_has_a_request_type_and_a_result_type() -> None:
    # group is the protocol's concurrent step, not a model operation
    assert set(OPS) | {"group"} == set(protocol.RESULT_OF)
    assert {op.OP for op in EVERY_OP} == set(OPS)


@pytest.mark.parametrize("op", EVERY_OP, ids=lambda op: op.OP)
def test_what_the_harness_sends_is_a_valid_request(op: Any) -> None:
    wire = {"rid": 1, **op.to_wire()}
    assert REQUEST.validate_python(wire) == wire
    assert REQUEST.validate_python({**wire, "crash_at": "after_admit"})["crash_at"] == "after_admit"


@pytest.mark.parametrize(
    ("request_", "where"),
    [
        ({"rid": 1, "op": "create", "now": 0, "session": "s", "extra": 1}, "extra"),
        ({"rid": "1", "op": "create", "now": 0, "session": "s"}, "rid"),
        ({"rid": 1, "op": "create", "now": 0.0, "session": "s"}, "now"),
        ({"rid": 1, "op": "hello", "now": 0, "step_limit": 0}, "step_limit"),
        ({"rid": 1, "op": "answer", "now": 0, "call": "c", "finish": "done"}, "finish"),
        ({"rid": 1, "op": "calls", "now": 0, "crash_at": "somewhere"}, "crash_at"),
        ({"rid": 1, "op": "prompt", "now": 0, "session": "s"}, "text"),
    ],
)
def test_requests_are_strict(request_: dict[str, Any], where: str) -> None:
    with pytest.raises(ValidationError) as caught:
        REQUEST.validate_python(request_)
    assert describe(caught.value, tagged=True).startswith(where)


def test_the_envelope_is_closed() -> None:
    ok = {"rid": 1, "ok": True, "result": {}}
    assert RESPONSE.validate_python(ok) == ok
    for bad in (
        {**ok, "error": {"code": "internal", "message": ""}},
        {"rid": 1, "ok": 1, "result": {}},
        {"rid": 1, "ok": False, "error": {"code": "internal", "message": "x", "trace": "..."}},
        {"rid": 1, "ok": False, "error": {"code": "exploded", "message": "x"}},
        {"rid": 1, "ok": False},
    ):
        with pytest.raises(ValidationError):
            RESPONSE.validate_python(bad)


def test_results_allow_additive_fields_and_drop_them() -> None:
    event = {"seq": 0, "type": "other:tool_called", "time": 1, "data": {}, "native": {"id": 9}}
    assert RESULTS["log"].validate_python({"events": [event], "cursor": 3}) == {
        "events": [{"seq": 0, "type": "other:tool_called", "time": 1, "data": {}}]
    }
    hello = {"protocol": 1, "implementation": "x", "features": ["fork", "streams"], "step_limit": 2}
    assert RESULTS["hello"].validate_python({**hello, "build": "abc"}) == hello
    message = {"id": "m", "type": "user", "seq": 1, "time": 2, "copied_from": None}
    assert (
        RESULTS["messages"].validate_python({"messages": [message]})["messages"][0]["copied_from"]
        is None
    )


@pytest.mark.parametrize(
    ("op", "result"),
    [
        ("log", {"events": [{"seq": 0, "type": "exploded", "time": 1, "data": {}}]}),
        ("log", {"events": [{"seq": 1.0, "type": "admitted", "time": 1, "data": {}}]}),
        ("log", {"events": [{"seq": 0, "type": "admitted", "time": 1}]}),
        (
            "calls",
            {
                "calls": [
                    {
                        "call": "c",
                        "session": "s",
                        "kind": "step",
                        "step": 1,
                        "final": 0,
                        "context": [],
                    }
                ]
            },
        ),
        (
            "pending",
            {
                "pending": [
                    {
                        "input": "i",
                        "type": "user",
                        "delivery": "later",
                        "admitted_seq": 0,
                        "time": 0,
                    }
                ]
            },
        ),
        ("interrupt", {"interrupted": "yes"}),
        (
            "prompt",
            {
                "input": "i",
                "session": "s",
                "type": "user",
                "data": {},
                "delivery": "steer",
                "time": 0,
            },
        ),
    ],
)
def test_results_are_strict_about_what_they_name(op: str, result: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        RESULTS[op].validate_python(result)


def test_the_json_schema_accepts_and_refuses_like_the_types() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    message = jsonschema.Draft202012Validator(schema)
    for op in EVERY_OP:
        message.validate({"rid": 1, **op.to_wire()})
    receipt = {
        "input": "i",
        "session": "s",
        "type": "user",
        "data": {"text": "t"},
        "delivery": "steer",
        "admitted_seq": 0,
        "time": 0,
    }
    message.validate({"rid": 1, "ok": True, "result": receipt})
    message.validate({"rid": 1, "ok": False, "error": {"code": "busy", "message": "m"}})
    assert not message.is_valid(
        {"rid": 1, "ok": False, "error": {"code": "exploded", "message": "m"}}
    )
    assert not message.is_valid({"rid": 1, "op": "create", "now": 0, "session": "s", "extra": 1})
    # Per-op responses pair the envelope with the op's result.
    prompt = jsonschema.Draft202012Validator({**schema, **schema["x-result-of"]["prompt"]})
    prompt.validate({"rid": 1, "ok": True, "result": receipt})
    assert not prompt.is_valid({"rid": 1, "ok": True, "result": {"session": "s"}})
