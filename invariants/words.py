"""How violations name things: inputs, calls and sessions in the inbox's words.

Every violation message is built from these, so that a report reads like
"input m2 (queue prompt, admitted at seq 3)" rather than a bare assertion.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..model.values import Call
    from .tracker import Msg, Owner, Row

_KIND = {"user": "prompt", "synthetic": "synthetic", "compaction": "compaction barrier"}


def kind_word(kind: str | None) -> str:
    return _KIND.get(kind or "", kind or "input")


_A_KIND = {
    "user": "a prompt",
    "synthetic": "a synthetic input",
    "compaction": "a compaction barrier",
}


def a_kind(kind: str) -> str:
    """An input of a kind: ``a prompt``, ``a compaction barrier``."""
    return _A_KIND.get(kind, f"a {kind} input")


def held(o: Owner) -> str:
    """What an ID is to the session it belongs to: ``a prompt``, or ``a
    fork's copied message``."""
    return "a fork's copied message" if o.copied else a_kind(o.type)


def row(r: Row) -> str:
    """An admitted input: ``input m2 (queue prompt, admitted at seq 3)``."""
    if r.type == "compaction":
        return f"compaction barrier {r.input} (admitted at seq {r.seq})"
    delivery = f"{r.delivery} " if r.delivery else ""
    return f"input {r.input} ({delivery}{kind_word(r.type)}, admitted at seq {r.seq})"


def msg(m: Msg) -> str:
    """A visible message: a promoted input or a fork's copy."""
    if m.copied_from is not None:
        return f"message {m.id} (copy of {m.copied_from}, seq {m.seq})"
    return f"message {m.id} ({kind_word(m.type)}, seq {m.seq})"


def call(c: Call) -> str:
    name = c.call if c.call.startswith("call") else f"call {c.call}"
    if c.kind == "compaction":
        return f"compaction {name} of session {c.session}"
    return f"{name} (step {c.step}{', final' if c.final else ''}) of session {c.session}"


def ids(values: list[str] | tuple[str, ...] | set[str]) -> str:
    items = list(values)
    return "[" + ", ".join(items) + "]" if items else "nothing"
