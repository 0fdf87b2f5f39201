"""The command lines of a conformance check: :func:`target_command` (what
``--adapter COMMAND`` or ``--target NAME`` starts) and :func:`repro_command`
(the ``inboxsim conformance`` line that reruns one scenario or one seed)."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from ..errors import HarnessError
from ..impls import sqlite_inbox
from ..impls.opencode import RECOMMENDED_TIMEOUT, adapter_command
from ..targets.adapter import DEFAULT_TIMEOUT, check_startable, split_command

TARGETS = ("sqlite", "model-adapter", "opencode")
DEFAULT_OPS = 40


def target_command(
    adapter: str | None, target: str | None, policy: str | None, timeout: float
) -> tuple[list[str], str, float, str]:
    """(argv, policy name, timeout, what to call the target) for the command line's
    ``--adapter COMMAND`` or ``--target NAME``."""
    if (adapter is None) == (target is None):
        raise HarnessError("give one of --adapter COMMAND or --target NAME")
    if adapter is not None:
        try:
            argv = split_command(adapter)
        except ValueError as exc:
            raise HarnessError(f"--adapter: {exc}") from None
        if not argv:
            raise HarnessError("--adapter: the command is empty")
        check_startable(argv)
        return argv, policy or "g4", timeout, adapter
    if target == "sqlite":
        path = Path(sqlite_inbox.__file__).resolve().parent / "adapter.py"
        return [sys.executable, str(path)], policy or "g4", timeout, "sqlite"
    if target == "model-adapter":
        name = policy or "g4"
        return (
            [sys.executable, "-m", "inboxsim.targets.model_adapter", "--policy", name],
            name,
            timeout,
            "model-adapter",
        )
    if target == "opencode":
        return adapter_command(), policy or "g2", max(timeout, RECOMMENDED_TIMEOUT), "opencode"
    raise HarnessError(
        f"--target {target!r} is not a conformance target: one of {', '.join(TARGETS)}"
    )


def repro_command(
    command: Sequence[str],
    policy: str,
    *,
    scenario: str | None = None,
    seed: int | None = None,
    ops: int = DEFAULT_OPS,
    timeout: float = DEFAULT_TIMEOUT,
    concurrency: int = 1,
    free: bool = False,
    group_kills: bool = True,
) -> str:
    words = ["inboxsim", "conformance", "--adapter", shlex.join(command), "--policy", policy]
    if timeout != DEFAULT_TIMEOUT:
        words += ["--adapter-timeout", f"{timeout:g}"]
    if scenario is not None:
        words += ["--scenario", scenario, "--seeds", "0"]
    if seed is not None:
        words += ["--no-library", "--seed-start", str(seed), "--seeds", "1", "--ops", str(ops)]
    if concurrency > 1:
        words += ["--concurrency", str(concurrency)] + (["--free-running"] if free else [])
        words += [] if group_kills else ["--no-group-kills"]
    return shlex.join(words)
