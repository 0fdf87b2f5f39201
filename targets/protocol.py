"""The adapter protocol, version 1, as validated types (``docs/protocol.md``).

Every message both ways is a ``TypedDict`` wrapped in a module-level pydantic
``TypeAdapter`` (``python-ecosystem.md`` section 2: pydantic at the boundary
only, plain dicts and dataclasses inside; TypedDicts validate to plain dicts,
which is what the harness turns into model values anyway). The same types
generate the JSON Schema kept at ``targets/schema/protocol-v1.json``:
``python -m inboxsim.targets.protocol --write`` regenerates it and ``--check``
(and ``tests/test_adapter_protocol.py``) fails when it is stale.

Validation is strict (no coercion: ``"1"`` is not ``1``, ``1.0`` is not an
integer ``seq``, ``1`` is not ``true``). Unknown fields, decided here because
the protocol says "a new optional field ... keeps version 1":

- **requests**: ``extra="forbid"``. The harness builds them, so an unknown field
  is a harness bug; the model adapter refuses one with ``invalid_request``.
- **the response envelope and its ``error``**: ``extra="forbid"``. They are the
  transport; a stray key (a ``result`` next to an ``error``, say) means a
  confused adapter, not a newer one.
- **results and their entries** (hello result, receipt, event, call, message
  and pending entries): unknown fields are allowed and ignored (dropped from
  the trace), so that an adapter written against a later revision of version 1
  still talks to this harness. Every field this page names is required and
  type-checked; an optional one (an event's ``input``, a message's
  ``copied_from``) may also be ``null``, which reads as absent.
- **hello ``features``**: any string is accepted and unknown ones are ignored
  (a new operation behind a new feature flag is an additive change).
- **error codes** and **event types** are closed: an unknown code fails
  validation; an event type is one of the listed types or ``other:<name>``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Annotated, Any, Literal, NotRequired, TypeAlias, get_args

from pydantic import (
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    ValidationError,
    with_config,
)
from typing_extensions import TypedDict

from ..errors import ExitCode
from ..model.ops import FAILPOINTS
from ..model.values import ERROR_CODES, EVENT_TYPES

PROTOCOL_VERSION = 1
SCHEMA_PATH = Path(__file__).parent / "schema" / f"protocol-v{PROTOCOL_VERSION}.json"

Failpoint = Literal["after_admit", "mid_promotion", "after_promotion"]
ErrorCode = Literal[
    "session_not_found",
    "prompt_conflict",
    "synthetic_conflict",
    "compaction_conflict",
    "message_not_found",
    "busy",
    "invalid_request",
    "unsupported",
    "internal",
]
DeliveryName = Literal["steer", "queue"]
InputKind = Literal["user", "synthetic", "compaction"]
Finish = Literal["stop", "tool", "error"]
EventType = Annotated[str, Field(pattern="^(" + "|".join(EVENT_TYPES) + r"|other:.+)$")]
Id = str
Json = Any  # any JSON value

assert set(FAILPOINTS) == set(get_args(Failpoint))
assert set(ERROR_CODES) == set(get_args(ErrorCode))

_REQUEST = ConfigDict(extra="forbid", strict=True)
_CLOSED = ConfigDict(extra="forbid", strict=True)
_OPEN = ConfigDict(extra="ignore", strict=True)


class ProtocolError(Exception):
    """The adapter broke the protocol: the run stops and the target failed
    (exit 1, ``docs/cli.md``). The message names the request (op and
    rid) and quotes the offending bytes."""

    exit_code = ExitCode.TARGET_FAILED

    def __init__(
        self,
        message: str,
        *,
        op: str | None = None,
        rid: int | None = None,
        offending: bytes | None = None,
    ) -> None:
        super().__init__(message)
        self.op = op
        self.rid = rid
        self.offending = offending


# --- requests ------------------------------------------------------------------
# Every request carries rid, op, now and may carry crash_at (feature failpoints).


@with_config(_REQUEST)
class HelloRequest(TypedDict):
    rid: int
    op: Literal["hello"]
    now: int
    crash_at: NotRequired[Failpoint]
    step_limit: NotRequired[Annotated[int, Field(ge=1)]]


@with_config(_REQUEST)
class CreateRequest(TypedDict):
    rid: int
    op: Literal["create"]
    now: int
    crash_at: NotRequired[Failpoint]
    session: Id


@with_config(_REQUEST)
class PromptRequest(TypedDict):
    rid: int
    op: Literal["prompt"]
    now: int
    crash_at: NotRequired[Failpoint]
    session: Id
    input: NotRequired[Id]
    text: str
    files: NotRequired[list[Json]]
    agents: NotRequired[list[Json]]
    metadata: NotRequired[dict[str, Json]]
    delivery: NotRequired[DeliveryName]
    resume: NotRequired[bool]


@with_config(_REQUEST)
class SyntheticRequest(TypedDict):
    rid: int
    op: Literal["synthetic"]
    now: int
    crash_at: NotRequired[Failpoint]
    session: Id
    input: NotRequired[Id]
    text: str
    description: NotRequired[str]
    metadata: NotRequired[dict[str, Json]]
    delivery: NotRequired[DeliveryName]
    resume: NotRequired[bool]


@with_config(_REQUEST)
class CompactRequest(TypedDict):
    rid: int
    op: Literal["compact"]
    now: int
    crash_at: NotRequired[Failpoint]
    session: Id
    input: NotRequired[Id]


@with_config(_REQUEST)
class ResumeRequest(TypedDict):
    rid: int
    op: Literal["resume"]
    now: int
    crash_at: NotRequired[Failpoint]
    session: Id


@with_config(_REQUEST)
class InterruptRequest(TypedDict):
    rid: int
    op: Literal["interrupt"]
    now: int
    crash_at: NotRequired[Failpoint]
    session: Id


@with_config(_REQUEST)
class CallsRequest(TypedDict):
    rid: int
    op: Literal["calls"]
    now: int
    crash_at: NotRequired[Failpoint]


@with_config(_REQUEST)
class AnswerRequest(TypedDict):
    rid: int
    op: Literal["answer"]
    now: int
    crash_at: NotRequired[Failpoint]
    call: Id
    finish: Finish


@with_config(_REQUEST)
class ForkRequest(TypedDict):
    rid: int
    op: Literal["fork"]
    now: int
    crash_at: NotRequired[Failpoint]
    session: Id
    child: Id
    before: NotRequired[Id]


@with_config(_REQUEST)
class RevertStageRequest(TypedDict):
    rid: int
    op: Literal["revert_stage"]
    now: int
    crash_at: NotRequired[Failpoint]
    session: Id
    message: Id


@with_config(_REQUEST)
class RevertClearRequest(TypedDict):
    rid: int
    op: Literal["revert_clear"]
    now: int
    crash_at: NotRequired[Failpoint]
    session: Id


@with_config(_REQUEST)
class RevertCommitRequest(TypedDict):
    rid: int
    op: Literal["revert_commit"]
    now: int
    crash_at: NotRequired[Failpoint]
    session: Id


@with_config(_REQUEST)
class LogRequest(TypedDict):
    rid: int
    op: Literal["log"]
    now: int
    crash_at: NotRequired[Failpoint]
    session: Id
    after: NotRequired[int]


@with_config(_REQUEST)
class MessagesRequest(TypedDict):
    rid: int
    op: Literal["messages"]
    now: int
    crash_at: NotRequired[Failpoint]
    session: Id


@with_config(_REQUEST)
class PendingRequest(TypedDict):
    rid: int
    op: Literal["pending"]
    now: int
    crash_at: NotRequired[Failpoint]
    session: Id


@with_config(_REQUEST)
class CrashRequest(TypedDict):
    rid: int
    op: Literal["crash"]
    now: int
    crash_at: NotRequired[Failpoint]


# --- the concurrent step (features group and pause_points) -----------------------
# A group's requests are the ordinary ones except hello, crash and group itself;
# each carries its own rid and the group's one now (docs/protocol.md, "Groups").

Ordinary: TypeAlias = (
    CreateRequest
    | PromptRequest
    | SyntheticRequest
    | CompactRequest
    | ResumeRequest
    | InterruptRequest
    | CallsRequest
    | AnswerRequest
    | ForkRequest
    | RevertStageRequest
    | RevertClearRequest
    | RevertCommitRequest
    | LogRequest
    | MessagesRequest
    | PendingRequest
)
Member = Annotated[Ordinary, Field(discriminator="op")]


@with_config(_REQUEST)
class GroupRequest(TypedDict):
    rid: int
    op: Literal["group"]
    now: int
    requests: Annotated[list[Member], Field(min_length=1)]
    # feature pause_points: the harness's choices, each taken modulo the options
    # open when every running request is parked (docs/protocol.md, "Pause points")
    schedule: NotRequired[list[Annotated[int, Field(ge=0)]]]


Request = Annotated[
    HelloRequest | Ordinary | CrashRequest | GroupRequest, Field(discriminator="op")
]

# --- results and their entries -------------------------------------------------


@with_config(_CLOSED)
class ErrorBody(TypedDict):
    code: ErrorCode
    message: str


@with_config(_OPEN)
class HelloResult(TypedDict):
    protocol: int
    implementation: str
    features: list[str]
    step_limit: int
    pause_points: NotRequired[list[str]]  # feature pause_points: the points it declares


@with_config(_OPEN)
class SessionResult(TypedDict):
    session: Id


@with_config(_OPEN)
class Receipt(TypedDict):
    input: Id
    session: Id
    type: InputKind
    data: dict[str, Json]
    delivery: DeliveryName | None
    admitted_seq: int
    time: int


@with_config(_OPEN)
class EmptyResult(TypedDict):
    pass


@with_config(_OPEN)
class InterruptResult(TypedDict):
    interrupted: bool


@with_config(_OPEN)
class CallEntry(TypedDict):
    call: Id
    session: Id
    kind: Literal["step", "compaction"]
    step: int
    final: bool
    context: list[Id]


@with_config(_OPEN)
class CallsResult(TypedDict):
    calls: list[CallEntry]


@with_config(_OPEN)
class EventEntry(TypedDict):
    seq: int
    type: EventType
    time: int
    input: NotRequired[Id | None]
    data: dict[str, Json]


@with_config(_OPEN)
class LogResult(TypedDict):
    events: list[EventEntry]


@with_config(_OPEN)
class MessageEntry(TypedDict):
    id: Id
    type: InputKind
    seq: int
    time: int
    copied_from: NotRequired[Id | None]


@with_config(_OPEN)
class MessagesResult(TypedDict):
    messages: list[MessageEntry]


@with_config(_OPEN)
class PendingEntry(TypedDict):
    input: Id
    type: InputKind
    delivery: DeliveryName | None
    admitted_seq: int
    time: int


@with_config(_OPEN)
class PendingResult(TypedDict):
    pending: list[PendingEntry]


@with_config(_OPEN)
class MemberOutcome(TypedDict):
    """One request of a group: its reply (``ok`` with ``result`` or ``error``),
    or ``unknown`` when the implementation died with it in flight; with the
    adapter's monotonic clock readings (any unit) when it issued the request
    and when its outcome came back."""

    rid: int
    ok: NotRequired[bool]
    result: NotRequired[dict[str, Json]]
    error: NotRequired[ErrorBody]
    unknown: NotRequired[Literal[True]]
    invoked: float
    completed: NotRequired[float]


@with_config(_OPEN)
class PauseEntry(TypedDict):
    # the index in the group's requests of the request that passed the point;
    # absent for the implementation's background work (a runner of its own)
    request: NotRequired[Annotated[int, Field(ge=0)]]
    point: str


@with_config(_OPEN)
class GroupResult(TypedDict):
    outcomes: list[MemberOutcome]
    pauses: NotRequired[list[PauseEntry]]  # the pause points passed, in order


RESULT_OF: dict[str, type] = {
    "hello": HelloResult,
    "create": SessionResult,
    "prompt": Receipt,
    "synthetic": Receipt,
    "compact": Receipt,
    "resume": EmptyResult,
    "interrupt": InterruptResult,
    "calls": CallsResult,
    "answer": EmptyResult,
    "fork": SessionResult,
    "revert_stage": EmptyResult,
    "revert_clear": EmptyResult,
    "revert_commit": EmptyResult,
    "log": LogResult,
    "messages": MessagesResult,
    "pending": PendingResult,
    "crash": EmptyResult,
    "group": GroupResult,
}

# --- the response envelope -----------------------------------------------------


@with_config(_CLOSED)
class OkResponse(TypedDict):
    rid: int
    ok: Literal[True]
    result: dict[str, Json]


@with_config(_CLOSED)
class ErrorResponse(TypedDict):
    rid: int
    ok: Literal[False]
    error: ErrorBody


def _ok_tag(value: Any) -> str | None:
    # By identity: a plain ``discriminator="ok"`` finds the ``True`` branch for
    # ``1`` (``1 == True``) and lets it through, strict mode or not.
    ok = value.get("ok") if isinstance(value, dict) else None
    return "ok" if ok is True else "error" if ok is False else None


Response = Annotated[
    Annotated[OkResponse, Tag("ok")] | Annotated[ErrorResponse, Tag("error")],
    Discriminator(
        _ok_tag, custom_error_type="ok_not_bool", custom_error_message="ok must be true or false"
    ),
]

# Built once (pydantic's performance advice): validators are compiled here.
REQUEST: TypeAdapter[Any] = TypeAdapter(Request)
RESPONSE: TypeAdapter[Any] = TypeAdapter(Response)
RESULTS: dict[str, TypeAdapter[Any]] = {op: TypeAdapter(t) for op, t in RESULT_OF.items()}


def describe(error: ValidationError, *, tagged: bool = False, limit: int = 3) -> str:
    """A validation error in one line: the paths and what was wrong there.

    ``tagged``: the value was validated as a discriminated union (``REQUEST``,
    ``RESPONSE``), whose tag pydantic puts first in every path: dropped."""
    parts = []
    for item in error.errors()[:limit]:
        loc = item["loc"][1:] if tagged and item["type"] != "union_tag_invalid" else item["loc"]
        where = ".".join(str(p) for p in loc) or "(top level)"
        got = item.get("input")
        shown = "" if item["type"] == "missing" else f" (got {_short(got)})"
        parts.append(f"{where}: {item['msg']}{shown}")
    more = error.error_count() - limit
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def _short(value: object, limit: int = 80) -> str:
    text = json.dumps(value, ensure_ascii=False) if _jsonable(value) else repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _jsonable(value: object) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


# --- the JSON Schema -----------------------------------------------------------


def json_schema() -> dict[str, Any]:
    """The whole protocol as one JSON Schema document (draft 2020-12).

    The document validates any single message (``anyOf`` a request or a
    response); ``$defs`` holds every message type, and ``<Op>Response`` pairs
    each operation with its result (``x-result-of`` maps op names to them)."""
    mode: Literal["validation"] = "validation"
    named = [("Request", REQUEST), ("Response", RESPONSE)]
    named += [(t.__name__, RESULTS[op]) for op, t in RESULT_OF.items()]
    keys = [(name, mode, adapter) for name, adapter in named]
    refs, schema = TypeAdapter.json_schemas(keys, ref_template="#/$defs/{model}")
    defs: dict[str, Any] = dict(schema.get("$defs", {}))
    for (name, _), ref in refs.items():
        if "$ref" not in ref:  # a top-level union: give it a name
            defs[name] = ref
    per_op: dict[str, Any] = {}
    for op, result in RESULT_OF.items():
        name = "".join(part.title() for part in op.split("_")) + "Response"
        defs[name] = {
            "description": f"The response to `{op}`.",
            "oneOf": [
                {
                    "allOf": [
                        {"$ref": "#/$defs/OkResponse"},
                        {"properties": {"result": {"$ref": f"#/$defs/{result.__name__}"}}},
                    ]
                },
                {"$ref": "#/$defs/ErrorResponse"},
            ],
        }
        per_op[op] = {"$ref": f"#/$defs/{name}"}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"inboxsim adapter protocol, version {PROTOCOL_VERSION}",
        "description": (
            "One message of the inboxsim adapter protocol (docs/protocol.md): a request "
            "the harness sends or a response the adapter returns. Generated from "
            "inboxsim.targets.protocol; do not edit."
        ),
        "x-protocol": PROTOCOL_VERSION,
        "x-result-of": per_op,
        "anyOf": [{"$ref": "#/$defs/Request"}, {"$ref": "#/$defs/Response"}],
        "$defs": dict(sorted(defs.items())),
    }


def schema_text() -> str:
    return json.dumps(json_schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def write_schema(path: Path = SCHEMA_PATH) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(schema_text(), encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m inboxsim.targets.protocol",
        description="Write or check the adapter protocol's JSON Schema.",
    )
    parser.add_argument("--write", action="store_true", help=f"regenerate {SCHEMA_PATH.name}")
    parser.add_argument("--check", action="store_true", help="exit 1 when the kept file is stale")
    args = parser.parse_args(argv)
    if args.write:
        print(write_schema())
        return 0
    if args.check:
        current = SCHEMA_PATH.read_text(encoding="utf-8") if SCHEMA_PATH.exists() else ""
        if current != schema_text():
            print(
                f"{SCHEMA_PATH} is stale: run python -m inboxsim.targets.protocol --write",
                file=sys.stderr,
            )
            return 1
        return 0
    sys.stdout.write(schema_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
