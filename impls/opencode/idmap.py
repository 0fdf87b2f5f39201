"""Harness IDs to OpenCode IDs: OpenCode insists on ``ses…`` and ``msg_…`` IDs
and orders messages by ID, so every harness session and input ID gets an
ascending OpenCode-style one, kept in ``ids.json`` (written before the
request that uses it, so it survives a SIGKILL); the names the adapter
generates (``in-N``, ``call-N``) and the run's step allowance live there too.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from pathlib import Path
from typing import Any

_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


class Ids:
    """Harness IDs to OpenCode IDs, persisted in ``ids.json`` before use."""

    def __init__(self, path: Path) -> None:
        self.path = path
        doc: dict[str, Any] = {}
        if path.exists():
            doc = json.loads(path.read_text())
        self.sessions: dict[str, str] = doc.get("sessions", {})
        self.inputs: dict[str, dict[str, str]] = doc.get("inputs", {})  # harness -> {oc, session}
        self.counter: int = doc.get("counter", 0)
        self.calls: int = doc.get("calls", 0)
        self.step_limit: int = doc.get("step_limit", 4)
        self.session_of: dict[str, str] = {v: k for k, v in self.sessions.items()}
        self.input_of: dict[str, str] = {v["oc"]: k for k, v in self.inputs.items()}
        self._last = 0
        self._count = 0
        # A group's members map IDs from their own threads.
        self.lock = threading.RLock()

    def save(self) -> None:
        doc = {
            "sessions": self.sessions,
            "inputs": self.inputs,
            "counter": self.counter,
            "calls": self.calls,
            "step_limit": self.step_limit,
        }
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, separators=(",", ":")))
        os.replace(tmp, self.path)  # survives a SIGKILL of this process

    def ascending(self, prefix: str) -> str:
        """An ID in OpenCode's own ascending format (prefix, 12 hex of
        time and counter, 14 base62)."""
        now = int(time.time() * 1000)
        if now != self._last:
            self._last, self._count = now, 0
        self._count += 1
        stamp = (now * 0x1000 + self._count) & 0xFFFFFFFFFFFF
        tail = "".join(random.choice(_BASE62) for _ in range(14))
        return f"{prefix}_{stamp:012x}{tail}"

    def new_session(self, harness: str) -> str:
        with self.lock:
            oc = self.ascending("ses")
            self.sessions[harness] = oc
            self.session_of[oc] = harness
            self.save()
            return oc

    def input(self, harness: str, session: str) -> str:
        """The OpenCode ID of input ``harness``, new (and saved) if unknown."""
        with self.lock:
            known = self.inputs.get(harness)
            if known is not None:
                return known["oc"]
            oc = self.ascending("msg")
            self.inputs[harness] = {"oc": oc, "session": session}
            self.input_of[oc] = harness
            self.save()
            return oc

    def admitted_in(self, harness: str, session: str) -> None:
        """OpenCode admitted input ``harness`` in ``session``: a committed
        revert frees an ID for any session (g2's ``ended_ids``), so the
        session an ID was first sent to need not be the one that holds it."""
        with self.lock:
            known = self.inputs.get(harness)
            if known is not None and known["session"] != session:
                known["session"] = session
                self.save()

    def fresh_input(self) -> str:
        with self.lock:
            while True:
                self.counter += 1
                name = f"in-{self.counter}"
                if name not in self.inputs:
                    return name

    def fresh_call(self) -> str:
        with self.lock:
            self.calls += 1
            return f"call-{self.calls}"
