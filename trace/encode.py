"""Canonical JSON text of steps, and the trace hash computed from it.

The store keeps each step's request, reply and observations as JSON text, and
the trace hash covers the canonical text of each whole step. Both come from
the same three strings per step: the whole step's canonical text is assembled
from them (its keys are few and fixed, so their sorted order is written out
here), which avoids encoding everything twice. ``tests/test_sim_run.py``
checks that both equal what :mod:`inboxsim.trace.record` computes generically
(``canonical(step_wire(step))`` and :func:`~inboxsim.trace.record.trace_hash`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import fields
from json.encoder import encode_basestring
from typing import Any

from ..model import OPS, Call, Err, Event, Ok, Op, Reply
from ..model.values import encode_json as _encode
from .record import NOTHING, MessageView, Observed, PendingView, Step, TraceHeader, reply_wire

StepText = tuple[str, str, str]  # request, reply, observed: canonical JSON text

_string = encode_basestring  # a JSON string literal, non-ASCII kept (ensure_ascii=False)


def step_text(step: Step) -> StepText:
    """The canonical JSON text of a step's request, reply and observations:
    ``canonical(step_wire(step)[part])`` for each part, built directly.

    Why by hand: this runs for every step of every run, and the generic path
    builds a dictionary per part only to have the encoder sort its keys, and
    parses each event's data (already canonical text) only to encode it again.
    """
    request = step.request
    if request is None:
        request_text = "null"
    else:
        writer = _REQUEST_WRITERS.get(type(request)) or _request_writer(type(request))
        request_text = writer(request, step.crash_at)
    return request_text, _reply_text(step.reply), observed_text(step.observed)


def _value_text(value: Any) -> str:
    """The canonical text of one request field's value (not None)."""
    kind = type(value)
    if kind is str:
        return _string(value)
    if kind is int:
        return int.__repr__(value)
    if kind is bool:
        return "true" if value else "false"
    return _encode(list(value) if kind is tuple else value)


RequestWriter = Callable[[Op, "str | None"], str]

# Operation class -> its request writer (below); one per class in OPS, written
# at import, and one for any other class when first met (tests make some).
_REQUEST_WRITERS: dict[type, RequestWriter] = {}

# The text of a value of a field declared of this type (the ``None`` left
# out), for the value of that type (tested inline), else :func:`_value_text`.
_WRITE_AS = {
    "str": "_string(value) if type(value) is str else _value_text(value)",
    "int": "value if type(value) is int else _value_text(value)",  # an f-string writes it
    "bool": "('true' if value else 'false') if type(value) is bool else _value_text(value)",
}


def _request_writer(cls: type[Op]) -> RequestWriter:
    """A function writing ``canonical(op.to_wire() | {"crash_at": crash_at})``
    for a ``cls`` operation: the ``None`` fields (and a ``None`` crash_at)
    left out, tuples as lists, keys in sorted order written out, as
    :mod:`..model.frozen` writes ``__init__``.

    Why generated: a loop over the fields paid, per field, a lookup by name
    and the tests of which key it is; here each field is read as an attribute,
    its value's type tested against the field's declared one (that one
    written inline, any other by :func:`_value_text`), and the whole text
    built at once. ``now`` and ``op`` are always there: a key sorted before
    them carries the comma after it, one sorted after them the comma before.
    """
    declared = {f.name: str(f.type).removesuffix(" | None") for f in fields(cls)}
    declared["crash_at"] = "str"
    lines, text = [], ""  # text: the returned f-string's body
    for name in sorted([*declared, "op"]):
        key = _string(name) + ":"
        if name == "op":
            text += _braces("," + key + _string(cls.OP))
            continue
        write = _WRITE_AS.get(declared[name], "_value_text(value)")
        lines.append(f"value = {'crash_at' if name == 'crash_at' else 'op.' + name}")
        if name == "now":
            lines.append(f"field_now = {write}")
        elif name < "now":
            lines.append(f"field_{name} = '' if value is None else f'''{key}{{({write})}},'''")
        else:
            lines.append(f"field_{name} = '' if value is None else f''',{key}{{({write})}}'''")
        text += (_braces(key) if name == "now" else "") + "{field_" + name + "}"
    if "'" in text or "\\" in text:  # not from identifiers: refused, not miswritten
        raise TypeError(f"{cls.__name__}: a request writer takes identifiers as keys and OP")
    source = (
        "def write(op, crash_at):\n"
        + "".join(f"    {line}\n" for line in lines)
        + f"    return f'{{{{{text}}}}}'\n"
    )
    namespace: dict[str, Any] = {"_string": _string, "_value_text": _value_text}
    exec(source, namespace)  # noqa: S102 (generated from field names only)
    writer: RequestWriter = namespace["write"]
    writer.__qualname__ = f"write_{cls.__name__}"
    _REQUEST_WRITERS[cls] = writer
    return writer


def _braces(literal: str) -> str:
    """``literal`` as a part of an f-string's body."""
    return literal.replace("{", "{{").replace("}", "}}")


for _op_class in OPS.values():
    _request_writer(_op_class)


def _reply_text(reply: Reply | None) -> str:
    """``canonical(reply_wire(reply))``; keys in sorted order."""
    if type(reply) is Ok:
        return '{"ok":true,"result":' + (reply.text or _encode(reply.result)) + "}"
    if type(reply) is Err:
        return '{"error":' + _string(reply.code) + ',"ok":false}'
    if reply is None:  # a kill's step
        return "null"
    return _encode(reply_wire(reply))


def observed_text(observed: Observed) -> str:
    """``canonical(observed_wire(observed))``; keys in sorted order:
    calls, events, pending, transcript."""
    if observed is NOTHING:
        return "{}"
    parts = []
    if observed.calls is not None:
        parts.append('"calls":[' + ",".join(map(_call, observed.calls)) + "]")
    if observed.events:
        parts.append('"events":[' + ",".join(map(_event, observed.events)) + "]")
    if observed.pending:
        # Mostly one session's: nothing to sort.
        pending = (
            observed.pending if len(observed.pending) == 1 else sorted(observed.pending, key=_first)
        )
        parts.append(
            '"pending":{'
            + ",".join(f"{_string(s)}:[{','.join(map(_pending, v))}]" for s, v in pending)
            + "}"
        )
    if observed.transcript:
        transcript = (
            observed.transcript
            if len(observed.transcript) == 1
            else sorted(observed.transcript, key=_first)
        )
        parts.append(
            '"transcript":{'
            + ",".join(f"{_string(s)}:[{','.join(map(_message, v))}]" for s, v in transcript)
            + "}"
        )
    return "{" + ",".join(parts) + "}"


def _first(pair: tuple[str, object]) -> str:
    return pair[0]


def _event(e: Event) -> str:
    # Keys sorted: data, input, seq, session, time, type. ``data`` is kept as
    # canonical JSON text by the model (same settings as trace.canonical).
    who = "" if e.input is None else f',"input":{_string(e.input)}'
    return (
        f'{{"data":{e.data}{who},"seq":{e.seq},"session":{_string(e.session)},'
        f'"time":{e.time},"type":{_QUOTED[e.type]}}}'
    )


def _pending(r: PendingView) -> str:
    # Keys sorted: admitted_seq, delivery, input, time, type; None left out.
    delivery = "" if r.delivery is None else f',"delivery":{_QUOTED[r.delivery]}'
    return (
        f'{{"admitted_seq":{r.admitted_seq}{delivery},"input":{_string(r.input)},'
        f'"time":{r.time},"type":{_QUOTED[r.type]}}}'
    )


def _message(m: MessageView) -> str:
    # Keys sorted: copied_from, id, seq, time, type; None left out.
    copied = "" if m.copied_from is None else f'"copied_from":{_string(m.copied_from)},'
    return (
        f'{{{copied}"id":{_string(m.id)},"seq":{m.seq},"time":{m.time},"type":{_QUOTED[m.type]}}}'
    )


def _call(c: Call) -> str:
    # Keys sorted: call, context, final, kind, session, step.
    context = ",".join(map(_string, c.context))
    final = "true" if c.final else "false"
    return (
        f'{{"call":{_string(c.call)},"context":[{context}],"final":{final},"kind":{_QUOTED[c.kind]},'
        f'"session":{_string(c.session)},"step":{c.step}}}'
    )


class _Quoted(dict[str, str]):
    """Words of a small vocabulary as JSON string literals, each written
    once (a look-up costs less than writing it again): a step's decision,
    kind and phase (a few labels; a group's carry its first step's index: a
    few thousand at most), and the protocol's event, row, message and call
    types. Not IDs: an adapter's sessions and inputs are new in every run."""

    def __missing__(self, word: str) -> str:
        text = self[word] = _string(word)
        return text


_QUOTED = _Quoted()


def header_text(header: TraceHeader) -> str:
    return _encode({"policy": header.policy, "hello": header.hello, "version": header.version})


def trace_hash_of(header: TraceHeader, steps: Iterable[Step], texts: Iterable[StepText]) -> str:
    """The trace hash (as :func:`~inboxsim.trace.record.trace_hash`) from step texts:
    the digest of the header's and each step's text, joined by newlines, encoded
    and hashed at once (the same bytes, fewer calls). A step's text is
    ``trace.canonical(step_wire(step))``, assembled from its three texts, its
    keys in sorted order: decision, index, kind, observed, phase, reply, request."""
    quoted = _QUOTED
    parts = [header_text(header)]
    parts += [
        f'{{"decision":{quoted[step.decision]},"index":{step.index},"kind":{quoted[step.kind]},'
        f'"observed":{observed},"phase":{quoted[step.phase]},"reply":{reply},"request":{request}}}'
        for step, (request, reply, observed) in zip(steps, texts, strict=True)
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()
