"""The immutable values the model is made of, in the adapter protocol's words.

Payloads are kept as canonical JSON text (sorted keys, no whitespace, integral
floats written as integers) so that two payloads are equal exactly when the
protocol says they are ("payloads compare as JSON values, numbers by value")
and every value stays hashable for the explorer's visited-state set.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from json.scanner import make_scanner
from typing import Any, Literal

from .frozen import fast_init

InputType = Literal["user", "synthetic", "compaction"]
Delivery = Literal["steer", "queue"]
Finish = Literal["stop", "tool", "error"]
CallKind = Literal["step", "compaction"]

ERROR_CODES = (
    "session_not_found",
    "prompt_conflict",
    "synthetic_conflict",
    "compaction_conflict",
    "message_not_found",
    "busy",
    "invalid_request",
    "unsupported",
    "internal",
)

EVENT_TYPES = (
    "admitted",
    "promoted",
    "compaction_admitted",
    "compaction_started",
    "compaction_ended",
    "compaction_failed",
    "forked",
    "revert_staged",
    "revert_cleared",
    "revert_committed",
    "execution_started",
    "execution_succeeded",
    "execution_failed",
    "execution_interrupted",
    "step_started",
    "step_ended",
    "step_failed",
)


def _normalize(value: Any) -> Any:
    """JSON value with integral floats as ints, so 1 and 1.0 encode alike."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {str(k): _normalize(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_normalize(v) for v in value]
    return value


def canonical_json(value: Any) -> str:
    """The canonical text of a JSON value: the unit of payload identity."""
    return encode_json(_normalize(value))


# One encoder with the canonical settings, built once: ``json.dumps`` with
# keyword arguments builds a new encoder object on every call, and even a kept
# ``JSONEncoder`` builds its C scanner per call. Where the C scanner exists it
# is built once here (no cycle check: the values are JSON values, acyclic).
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
_encode: Callable[[Any], str] = _ENCODER.encode
if c_make_encoder is not None:
    _scan = c_make_encoder(
        None, _ENCODER.default, encode_basestring, None, ":", ",", True, False, True
    )

    def _encode_scanned(value: Any) -> str:
        return "".join(_scan(value, 0))

    _encode = _encode_scanned


_string = encode_basestring  # a JSON string literal, as the canonical encoder writes it


def encode_json(value: Any) -> str:
    """Canonical text of a value already normalized (built by the model, or
    parsed back from canonical text): skips the normalizing walk."""
    return "{}" if value == {} else _encode(value)


# The decoder's scanner, called directly: ``json.loads`` goes through three
# Python-level calls and a whitespace match around it, most of the cost of
# parsing the model's short canonical texts.
_scan_json: Callable[[str, int], tuple[Any, int]] = make_scanner(json.JSONDecoder())  # type: ignore[arg-type]


def parse_json(text: str) -> Any:
    """The JSON value of ``text`` (as ``json.loads``)."""
    try:
        value, end = _scan_json(text, 0)
    except StopIteration:  # leading whitespace, or not JSON: json.loads says which
        return json.loads(text)
    return value if end == len(text) else json.loads(text)


@fast_init
@dataclass(frozen=True, slots=True)
class Receipt:
    """The durable admission record of one input lifecycle (protocol receipt)."""

    input: str
    session: str
    type: InputType
    data: str  # canonical JSON
    delivery: Delivery | None
    admitted_seq: int
    time: int

    def to_wire(self) -> dict[str, Any]:
        return {
            "input": self.input,
            "session": self.session,
            "type": self.type,
            "data": parse_json(self.data),
            "delivery": self.delivery,
            "admitted_seq": self.admitted_seq,
            "time": self.time,
        }

    def wire_text(self) -> str:
        """``encode_json(self.to_wire())``, written out (keys in sorted order)."""
        delivery = "null" if self.delivery is None else _string(self.delivery)
        return (
            f'{{"admitted_seq":{self.admitted_seq},"data":{self.data},"delivery":{delivery},'
            f'"input":{_string(self.input)},"session":{_string(self.session)},'
            f'"time":{self.time},"type":{_string(self.type)}}}'
        )


@fast_init
@dataclass(frozen=True, slots=True)
class Message:
    """A visible transcript entry: a promoted input, or a fork's copy of one."""

    id: str
    type: InputType
    seq: int
    time: int
    data: str  # canonical JSON of the promoted payload
    copied_from: str | None = None  # the root original, for a fork's copy
    receipt: Receipt | None = None  # its admission record; None for a copy

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {
            "id": self.id,
            "type": self.type,
            "seq": self.seq,
            "time": self.time,
        }
        if self.copied_from is not None:
            wire["copied_from"] = self.copied_from
        return wire


@fast_init
@dataclass(frozen=True, slots=True)
class Event:
    """One durable event of a session's aggregate log (protocol event)."""

    session: str
    seq: int
    type: str
    time: int
    input: str | None
    data: str  # canonical JSON

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"seq": self.seq, "type": self.type, "time": self.time}
        if self.input is not None:
            wire["input"] = self.input
        wire["data"] = parse_json(self.data)
        return wire

    def wire_text(self) -> str:
        """``encode_json(self.to_wire())``, written out (keys in sorted order:
        data, input, seq, time, type)."""
        who = "" if self.input is None else f',"input":{_string(self.input)}'
        return (
            f'{{"data":{self.data}{who},"seq":{self.seq},"time":{self.time},'
            f'"type":{_string(self.type)}}}'
        )


@fast_init
@dataclass(frozen=True, slots=True)
class Call:
    """An open model call: the harness plays the model and answers it."""

    call: str
    session: str
    kind: CallKind
    step: int
    final: bool
    context: tuple[str, ...]
    opened: int  # global opening order, for "oldest first"

    def to_wire(self) -> dict[str, Any]:
        return {
            "call": self.call,
            "session": self.session,
            "kind": self.kind,
            "step": self.step,
            "final": self.final,
            "context": list(self.context),
        }


@fast_init
@dataclass(frozen=True, slots=True)
class Ok:
    """A successful reply: the protocol ``result`` object."""

    result: dict[str, Any]
    text: str | None = field(default=None, compare=False, repr=False)
    """The canonical JSON text of ``result``, when whoever built the reply
    wrote it at once (the model's receipts and logs, whose payloads are
    canonical text already, its hello, encoded once per model and step
    limit, its create and its interrupt), so that the trace does not parse
    them back or encode them again; ``None`` otherwise. Not compared: a function of ``result``."""


@fast_init
@dataclass(frozen=True, slots=True)
class Err:
    """An error reply; ``code`` is one of :data:`ERROR_CODES`."""

    code: str
    message: str


@fast_init
@dataclass(frozen=True, slots=True)
class Crashed:
    """No reply: the target died at a failpoint, so the outcome is unknown."""

    point: str


Reply = Ok | Err | Crashed
