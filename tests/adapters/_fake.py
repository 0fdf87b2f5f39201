"""Shared by the misbehaving fake adapters: read requests, answer ``hello``
properly, then misbehave in the way the script is named for.

Only the standard library, so that they start fast under a 1 s timeout.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

HELLO = {"protocol": 1, "implementation": "fake 0", "features": [], "step_limit": 4}


def read() -> dict[str, Any]:
    line = sys.stdin.readline()
    if not line:
        sys.exit(0)
    request: dict[str, Any] = json.loads(line)
    return request


def write(data: bytes) -> None:
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def respond(rid: int, result: dict[str, Any]) -> None:
    write(json.dumps({"rid": rid, "ok": True, "result": result}).encode() + b"\n")


def hello_result(request: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {**HELLO, "step_limit": request.get("step_limit", 4), **changes}


def serve(misbehave: Callable[[dict[str, Any]], None]) -> None:
    """Answer hello (and empty observation queries) until the first other
    request, then hand that one to ``misbehave``."""
    while True:
        request = read()
        op = request["op"]
        if op == "hello":
            respond(request["rid"], hello_result(request))
        elif op == "calls":
            respond(request["rid"], {"calls": []})
        else:
            misbehave(request)
