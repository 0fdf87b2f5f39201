"""Shared bits of the SQLite inbox adapter: errors, the mutant switch, JSON helpers.

Standard library only: this is an independent implementation of the inbox,
it never imports inboxsim.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

# Name of the planted bug to switch on (none in a correct build).
MUTANT = os.environ.get("INBOXSIM_MUTANT", "")

CONFLICT = {
    "user": "prompt_conflict",
    "synthetic": "synthetic_conflict",
    "compaction": "compaction_conflict",
}


class AdapterError(Exception):
    """A protocol error: the request fails with ``code``, durable state untouched."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def invalid(message: str) -> AdapterError:
    return AdapterError("invalid_request", message)


def dumps(value: Any) -> str:
    """Canonical JSON: sorted keys, no whitespace (used for storage and comparison)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def same_json(a: Any, b: Any) -> bool:
    """JSON values compared as values: numbers by value (1 == 1.0), bool is not a number."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def log(*parts: Any) -> None:
    print("[sqlite_inbox]", *parts, file=sys.stderr, flush=True)


def crash_now(point: str) -> None:
    """A failpoint fired: die at once, without a response. The process SIGKILLs
    itself, so nothing runs on the way out (no atexit, no SQLite close, no
    buffered write): exactly what a power-cut-free crash leaves on disk."""
    log("failpoint", point, "-> SIGKILL")
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)
    os._exit(137)  # not reached where SIGKILL exists
