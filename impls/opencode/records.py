"""OpenCode's answers, events and rows read back as the protocol's shapes:
receipts, log events (``events.EVENT_MAP``; data reduced to deterministic
fields, no OpenCode IDs, clocks, costs or tokens), pending rows and
transcript messages, with OpenCode's IDs mapped to the harness's and its
timestamps to the harness's ``now``; and an HTTP refusal as the protocol's
error code.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from clock import Clock
from events import EVENT_MAP
from failures import Refused
from file_parts import file_from_opencode
from idmap import Ids


def refusal(status: int, body: Any, what: str) -> Refused:
    """An OpenCode error answer as the protocol's error."""
    tag = body.get("_tag") if isinstance(body, dict) else None
    message = body.get("message") if isinstance(body, dict) else str(body)
    text = f"{what}: OpenCode answered {status} {tag or ''}: {message}"
    if status == 404 and tag == "MessageNotFoundError":
        return Refused("message_not_found", text)
    if status == 404:
        return Refused("session_not_found", text)
    if status == 409:
        return Refused("prompt_conflict", text)
    if status == 400:
        return Refused("invalid_request", text)
    return Refused("internal", text)


def error_text(data: dict[str, Any]) -> str:
    err = data.get("error")
    if isinstance(err, dict):
        return str(err.get("message") or err.get("name") or "")
    return str(err or data.get("message") or "")


class Records:
    def __init__(self, ids: Ids, clock: Clock, project: Path) -> None:
        self.ids = ids
        self.clock = clock
        self.project = project  # the served folder: file paths are in it

    def input_name(self, oc: str | None) -> str | None:
        """The harness's name of an OpenCode message ID (unknown: as it is)."""
        return None if oc is None else self.ids.input_of.get(oc, oc)

    def files_of(self, prompt: dict[str, Any]) -> list[dict[str, Any]]:
        return [file_from_opencode(f, self.project) for f in prompt.get("files") or []]

    def prompt_data(self, prompt: dict[str, Any]) -> dict[str, Any]:
        return {
            "text": prompt.get("text"),
            "files": self.files_of(prompt),
            "agents": prompt.get("agents") or [],
            "metadata": {},
        }

    def receipt(self, data: dict[str, Any]) -> dict[str, Any]:
        """The answer of ``POST /api/session/:id/prompt`` as a receipt."""
        return {
            "input": self.input_name(data["id"]),
            "session": self.ids.session_of.get(data["sessionID"], data["sessionID"]),
            "type": "user",
            "data": self.prompt_data(data["prompt"]),
            "delivery": data.get("delivery"),
            "admitted_seq": data["admittedSeq"],
            "time": self.clock.now_of(data.get("timeCreated")),
        }

    def created(self, row: tuple[str, str]) -> dict[str, Any]:
        """Seq 0 (``session.created``) from the event table: type and data."""
        kind, data = row
        native = kind.rsplit(".", 1)[0] if kind[-1:].isdigit() else kind
        info = (json.loads(data).get("info") or {}).get("time") or {}
        return {
            "seq": 0,
            "type": EVENT_MAP.get(native, f"other:{native}"),
            "time": self.clock.now_of(info.get("created")),
            "data": {},
        }

    def event(self, e: dict[str, Any]) -> dict[str, Any]:
        """One event of the history route as a log event."""
        native, data = e["type"], e.get("data") or {}
        kind = EVENT_MAP.get(native, f"other:{native}")
        out: dict[str, Any] = {
            "seq": e["durable"]["seq"],
            "type": kind,
            "time": self.clock.now_of(data.get("timestamp")),
        }
        msg = data.get("messageID")
        if msg is not None and kind in ("admitted", "promoted"):
            out["input"] = self.input_name(msg)
        if kind == "admitted":
            prompt = data.get("prompt") or {}
            out["data"] = {
                "type": "user",
                "delivery": data.get("delivery"),
                "data": self.prompt_data(prompt),
            }
        elif kind == "promoted":
            out["data"] = {"delivery": data.get("delivery")}
        elif kind == "step_ended":
            out["data"] = {"finish": data.get("finish")}
        elif kind == "step_failed":
            out["data"] = {"error": error_text(data)}
        elif kind == "revert_staged":
            staged = (data.get("revert") or {}).get("messageID")
            out["data"] = {"message": self.input_name(staged)}
        elif kind == "revert_committed":
            out["data"] = {"to": self.input_name(msg)}
        elif native == "session.next.text.ended":
            out["data"] = {"text": data.get("text")}
        elif native in ("session.next.tool.called", "session.next.tool.success"):
            out["data"] = {"tool": data.get("tool") or data.get("name")}
        else:
            out["data"] = {}
        return out

    def messages(self, rows: list[tuple[str, str, int, int]]) -> list[dict[str, Any]]:
        return [
            {"id": self.input_name(i), "type": "user", "seq": seq, "time": self.clock.now_of(t)}
            for i, _data, seq, t in rows
        ]

    def pending(self, rows: list[tuple[str, str, int, int]]) -> list[dict[str, Any]]:
        return [
            {
                "input": self.input_name(i),
                "type": "user",
                "delivery": d,
                "admitted_seq": s,
                "time": self.clock.now_of(t),
            }
            for i, d, s, t in rows
        ]
