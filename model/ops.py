"""Operations: the adapter protocol's requests as immutable values.

Each operation carries ``now``, the only clock (protocol "Determinism"). An
omitted optional field stays ``None`` so that the wire form shows exactly what
the harness sent; the model applies the protocol's defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from json.encoder import encode_basestring
from typing import Any, ClassVar

from .frozen import fast_init
from .values import canonical_json


@dataclass(frozen=True, slots=True)
class Op:
    """Base of every operation; ``OP`` is its protocol name."""

    OP: ClassVar[str] = ""
    now: int

    def to_wire(self) -> dict[str, Any]:
        """The request object without ``rid``; omitted fields are left out."""
        wire: dict[str, Any] = {"op": self.OP, "now": self.now}
        names = _WIRE_FIELDS.get(type(self))
        if names is None:  # once per class: dataclasses.fields is slow
            names = tuple(f.name for f in fields(self) if f.name != "now")
            _WIRE_FIELDS[type(self)] = names
        for name in names:
            value = getattr(self, name)
            if value is not None:
                wire[name] = list(value) if isinstance(value, tuple) else value
        return wire


# An operation class's fields besides ``now``, in order.
_WIRE_FIELDS: dict[type, tuple[str, ...]] = {}


@dataclass(frozen=True, slots=True)
class Hello(Op):
    OP: ClassVar[str] = "hello"
    step_limit: int | None = None


@dataclass(frozen=True, slots=True)
class Create(Op):
    OP: ClassVar[str] = "create"
    session: str = ""


@dataclass(frozen=True, slots=True)
class Prompt(Op):
    OP: ClassVar[str] = "prompt"
    session: str = ""
    input: str | None = None
    text: str = ""
    files: tuple[Any, ...] | None = None
    agents: tuple[Any, ...] | None = None
    metadata: dict[str, Any] | None = field(default=None, hash=False)
    delivery: str | None = None
    resume: bool | None = None

    def payload(self) -> dict[str, Any]:
        """The user data with the receipt's defaults applied (protocol receipt)."""
        return {
            "text": self.text,
            "files": list(self.files or ()),
            "agents": list(self.agents or ()),
            "metadata": self.metadata or {},
        }


@dataclass(frozen=True, slots=True)
class Synthetic(Op):
    OP: ClassVar[str] = "synthetic"
    session: str = ""
    input: str | None = None
    text: str = ""
    description: str | None = None
    metadata: dict[str, Any] | None = field(default=None, hash=False)
    delivery: str | None = None
    resume: bool | None = None

    def payload(self) -> dict[str, Any]:
        return {"text": self.text, "description": self.description, "metadata": self.metadata or {}}


@dataclass(frozen=True, slots=True)
class Compact(Op):
    OP: ClassVar[str] = "compact"
    session: str = ""
    input: str | None = None


@dataclass(frozen=True, slots=True)
class Resume(Op):
    OP: ClassVar[str] = "resume"
    session: str = ""


@dataclass(frozen=True, slots=True)
class Interrupt(Op):
    OP: ClassVar[str] = "interrupt"
    session: str = ""


@dataclass(frozen=True, slots=True)
class Calls(Op):
    OP: ClassVar[str] = "calls"


@dataclass(frozen=True, slots=True)
class Answer(Op):
    OP: ClassVar[str] = "answer"
    call: str = ""
    finish: str = "stop"


@dataclass(frozen=True, slots=True)
class Fork(Op):
    OP: ClassVar[str] = "fork"
    session: str = ""
    child: str = ""
    before: str | None = None


@dataclass(frozen=True, slots=True)
class RevertStage(Op):
    OP: ClassVar[str] = "revert_stage"
    session: str = ""
    message: str = ""


@dataclass(frozen=True, slots=True)
class RevertClear(Op):
    OP: ClassVar[str] = "revert_clear"
    session: str = ""


@dataclass(frozen=True, slots=True)
class RevertCommit(Op):
    OP: ClassVar[str] = "revert_commit"
    session: str = ""


@dataclass(frozen=True, slots=True)
class Log(Op):
    OP: ClassVar[str] = "log"
    session: str = ""
    after: int | None = None


@dataclass(frozen=True, slots=True)
class Messages(Op):
    OP: ClassVar[str] = "messages"
    session: str = ""


@dataclass(frozen=True, slots=True)
class Pending(Op):
    OP: ClassVar[str] = "pending"
    session: str = ""


@dataclass(frozen=True, slots=True)
class CrashOp(Op):
    """The ``crash`` operation (feature ``crash_op``): drop volatile state."""

    OP: ClassVar[str] = "crash"


# The canonical text of a request's payload, by request object: the model's
# admission and the checkers judging that step both read it, from the same
# object. Keyed by identity, each entry holding its request so that the id is
# not reused while the entry lives; bounded, since an entry never goes stale
# (a request is a frozen value).
_PAYLOAD_TEXT: dict[int, tuple[Op, str]] = {}
_PAYLOAD_TEXT_MOST = 1024


def payload_text(op: Prompt | Synthetic) -> str:
    """``canonical_json(op.payload())``, encoded once per request object."""
    entry = _PAYLOAD_TEXT.get(id(op))
    if entry is not None and entry[0] is op:
        return entry[1]
    text = _plain_payload_text(op) or canonical_json(op.payload())
    if len(_PAYLOAD_TEXT) >= _PAYLOAD_TEXT_MOST:
        _PAYLOAD_TEXT.clear()
    _PAYLOAD_TEXT[id(op)] = (op, text)
    return text


def _plain_payload_text(op: Prompt | Synthetic) -> str | None:
    """The canonical text of the payload most requests carry (a text, a
    synthetic's description, nothing else), written out: no dict built,
    normalized and encoded. Keys in sorted order; strings as the canonical
    encoder writes them (``encode_basestring``). None: not that payload."""
    if type(op.text) is not str or op.metadata:
        return None
    if type(op) is Prompt:
        if op.files or op.agents:
            return None
        return '{"agents":[],"files":[],"metadata":{},"text":' + encode_basestring(op.text) + "}"
    if type(op) is Synthetic:
        description = op.description
        if description is None:
            return '{"description":null,"metadata":{},"text":' + encode_basestring(op.text) + "}"
        if type(description) is str:
            return (
                '{"description":'
                + encode_basestring(description)
                + ',"metadata":{},"text":'
                + encode_basestring(op.text)
                + "}"
            )
    return None


OPS: dict[str, type[Op]] = {
    cls.OP: cls
    for cls in (
        Hello,
        Create,
        Prompt,
        Synthetic,
        Compact,
        Resume,
        Interrupt,
        Calls,
        Answer,
        Fork,
        RevertStage,
        RevertClear,
        RevertCommit,
        Log,
        Messages,
        Pending,
        CrashOp,
    )
}

_OP_CLASSES: list[type[Op]] = [Op, *OPS.values()]
for op_class in _OP_CLASSES:
    fast_init(op_class)  # the workload builds one per step (model/frozen.py)

FAILPOINTS = ("after_admit", "mid_promotion", "after_promotion")


def op_from_wire(request: dict[str, Any]) -> Op:
    """Build an operation from a request object (``rid`` and ``crash_at`` are
    the transport's and are ignored here). Raises ``ValueError`` naming the
    offending field."""
    name = request.get("op")
    if name not in OPS:
        raise ValueError(f"unknown op {name!r}")
    cls = OPS[name]
    known = {f.name for f in fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in request.items():
        if key in ("op", "rid", "crash_at"):
            continue
        if key not in known:
            raise ValueError(f"op {name!r} has no field {key!r}")
        kwargs[key] = tuple(value) if isinstance(value, list) else value
    if "now" not in kwargs or not isinstance(kwargs["now"], int):
        raise ValueError(f"op {name!r} needs an integer 'now'")
    return cls(**kwargs)
