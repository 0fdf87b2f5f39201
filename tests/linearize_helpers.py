"""Shared by the linearizability checker's tests: requests, receipts, rows,
messages and events on one session, at the group helpers' ``NOW``.
"""

from __future__ import annotations

from typing import Any

from inboxsim.model import Event, Ok, Prompt
from inboxsim.search import Msg, Row
from tests.group_helpers import NOW

S1 = "s1"


def prompt(x: str | None, text: str | None = None, **fields: Any) -> Prompt:
    return Prompt(NOW, session=S1, input=x, text=text or x or "", **fields)


def receipt(x: str, seq: int, text: str | None = None, delivery: str = "steer") -> Ok:
    data = {"text": text or x, "files": [], "agents": [], "metadata": {}}
    return Ok(
        {
            "input": x,
            "session": S1,
            "type": "user",
            "data": data,
            "delivery": delivery,
            "admitted_seq": seq,
            "time": NOW,
        }
    )


def row(x: str, seq: int, delivery: str = "steer") -> Row:
    return Row(x, "user", delivery, seq, NOW)


def msg(x: str, seq: int) -> Msg:
    return Msg(x, "user", seq, NOW)


def ev(seq: int, type_: str, x: str | None = None) -> Event:
    return Event(S1, seq, type_, NOW, x, "{}")
