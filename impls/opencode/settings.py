"""The adapter's settings from its environment (docs/opencode.md,
"Environment"): each read checked, a bad value a usage error (exit 2).
"""

from __future__ import annotations

import os

from failures import EXIT_USAGE, Fatal


def stream_mode() -> str:
    mode = os.environ.get("INBOXSIM_OPENCODE_STREAM", "whole")
    if mode not in ("whole", "midstream"):
        raise Fatal(f"INBOXSIM_OPENCODE_STREAM={mode!r}: expected whole or midstream", EXIT_USAGE)
    return mode


def call_timeout() -> int:
    """Seconds OpenCode lets a model call sit idle (no byte back) before it
    gives up on it: ``BUN_CONFIG_HTTP_IDLE_TIMEOUT`` of the server, Bun's
    fetch idle timeout, which the V2 model client (no ``timeout: false`` on
    its fetch, unlike the AI SDK path) inherits; Bun's default is 300 s, and
    the provider's ``timeout``/``headerTimeout``/``chunkTimeout`` options do
    not reach it (docs/opencode.md, "Held calls and OpenCode's give-up")."""
    raw = os.environ.get("INBOXSIM_OPENCODE_CALL_TIMEOUT", "3600")
    if not raw.isdigit() or int(raw) < 1:
        raise Fatal(
            f"INBOXSIM_OPENCODE_CALL_TIMEOUT={raw!r}: expected whole seconds >= 1", EXIT_USAGE
        )
    return int(raw)


# A hang-up of a call held at least this share of ``call_timeout`` is the
# idle timeout's (seen: 5 s gave up at 14 s, 20 at 25, 300 at ~300).
IDLE_SWEEP_MARGIN = 0.9


def netns_mode() -> str:
    mode = os.environ.get("INBOXSIM_OPENCODE_NETNS", "auto")
    if mode not in ("auto", "require", "off"):
        raise Fatal(f"INBOXSIM_OPENCODE_NETNS={mode!r}: expected auto, require or off", EXIT_USAGE)
    return mode


def start_timeout() -> float:
    """Seconds a (re)start may take, to health and the fake provider listed."""
    return float(os.environ.get("INBOXSIM_OPENCODE_START_TIMEOUT", "60"))


def settle_timeout() -> float:
    """Seconds the quiescence wait after a request may take."""
    return float(os.environ.get("INBOXSIM_OPENCODE_SETTLE_TIMEOUT", "8"))
