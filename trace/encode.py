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
from collections.abc import Iterable
from dataclasses import fields
from json.encoder import encode_basestring
from typing import Any

from ..model import Call, Err, Event, Ok, Op, Reply
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
    request_text = "null" if request is None else _request_text(request, step.crash_at)
    return request_text, _reply_text(step.reply), observed_text(step.observed)


def _request_text(op: Op, crash_at: str | None) -> str:
    """``canonical(op.to_wire() | {"crash_at": crash_at})``, the ``None``
    fields (and a ``None`` crash_at) left out, tuples as lists."""
    keys = _REQUEST_KEYS.get((type(op), crash_at is not None))
    if keys is None:
        keys = _request_keys(op, crash_at is not None)
    parts = []
    for name, head in keys:
        if name == "op":
            value: Any = op.OP
        elif name == "crash_at":
            value = crash_at
        else:
            value = getattr(op, name)
            if value is None:
                continue
        kind = type(value)
        if kind is str:
            parts.append(head + _string(value))
        elif kind is int:
            parts.append(head + int.__repr__(value))
        elif kind is bool:
            parts.append(head + ("true" if value else "false"))
        else:
            parts.append(head + _encode(list(value) if kind is tuple else value))
    return "{" + ",".join(parts) + "}"


# (operation type, with crash_at) -> its wire keys in sorted order, each with
# its text ('"key":'), looked up once (dataclasses.fields is slow).
_REQUEST_KEYS: dict[tuple[type, bool], tuple[tuple[str, str], ...]] = {}


def _request_keys(op: Op, crash: bool) -> tuple[tuple[str, str], ...]:
    names = ["op", "now", *(f.name for f in fields(op) if f.name != "now")]
    if crash:
        names.append("crash_at")
    keys = tuple((name, _string(name) + ":") for name in sorted(names))
    _REQUEST_KEYS[(type(op), crash)] = keys
    return keys


def _reply_text(reply: Reply | None) -> str:
    """``canonical(reply_wire(reply))``; keys in sorted order."""
    if type(reply) is Ok:
        return '{"ok":true,"result":' + (reply.text or _encode(reply.result)) + "}"
    if type(reply) is Err:
        return '{"error":' + _string(reply.code) + ',"ok":false}'
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
        pending = sorted(observed.pending, key=_first)
        parts.append(
            '"pending":{'
            + ",".join(f"{_string(s)}:[{','.join(map(_pending, v))}]" for s, v in pending)
            + "}"
        )
    if observed.transcript:
        transcript = sorted(observed.transcript, key=_first)
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
        f'"time":{e.time},"type":{_string(e.type)}}}'
    )


def _pending(r: PendingView) -> str:
    # Keys sorted: admitted_seq, delivery, input, time, type; None left out.
    delivery = "" if r.delivery is None else f',"delivery":{_string(r.delivery)}'
    return (
        f'{{"admitted_seq":{r.admitted_seq}{delivery},"input":{_string(r.input)},'
        f'"time":{r.time},"type":{_string(r.type)}}}'
    )


def _message(m: MessageView) -> str:
    # Keys sorted: copied_from, id, seq, time, type; None left out.
    copied = "" if m.copied_from is None else f'"copied_from":{_string(m.copied_from)},'
    return (
        f'{{{copied}"id":{_string(m.id)},"seq":{m.seq},"time":{m.time},"type":{_string(m.type)}}}'
    )


def _call(c: Call) -> str:
    # Keys sorted: call, context, final, kind, session, step.
    context = ",".join(map(_string, c.context))
    final = "true" if c.final else "false"
    return (
        f'{{"call":{_string(c.call)},"context":[{context}],"final":{final},"kind":{_string(c.kind)},'
        f'"session":{_string(c.session)},"step":{c.step}}}'
    )


def whole_step_text(step: Step, text: StepText) -> str:
    """``trace.canonical(step_wire(step))``, assembled from ``text``."""
    request, reply, observed = text
    # Keys in sorted order: decision, index, kind, observed, phase, reply, request.
    return (
        f'{{"decision":{_string(step.decision)},"index":{step.index},"kind":{_string(step.kind)},'
        f'"observed":{observed},"phase":{_string(step.phase)},"reply":{reply},"request":{request}}}'
    )


def header_text(header: TraceHeader) -> str:
    return _encode({"policy": header.policy, "hello": header.hello, "version": header.version})


def trace_hash_of(header: TraceHeader, steps: Iterable[Step], texts: Iterable[StepText]) -> str:
    """The trace hash (as :func:`~inboxsim.trace.record.trace_hash`) from step texts:
    the digest of the header's and each step's text, joined by newlines, encoded
    and hashed at once (the same bytes, fewer calls)."""
    parts = [header_text(header)]
    parts.extend(whole_step_text(step, text) for step, text in zip(steps, texts, strict=True))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()
