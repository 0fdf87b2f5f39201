"""What every command prints and writes: a line of its summary on stdout, its
``--json`` document, and output files (whole or not at all,
:func:`inboxsim.procs.scratch.write_atomic`)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..errors import HarnessError
from ..procs.scratch import write_atomic


def echo(line: str = "", end: str = "\n") -> None:
    """One line of the human summary on stdout (flushed, as progress on stderr
    is, so that the two interleave in the order they happened)."""
    print(line, end=end, file=sys.stdout, flush=True)


def progress(line: str) -> None:
    """One line of progress on stderr."""
    print(line, file=sys.stderr)


def runs_progress(label: str) -> Callable[[int, int], None]:
    """Progress of a pass over a store's runs: a line on stderr every 500."""

    def show(n: int, total: int) -> None:
        if n == total or n % 500 == 0:
            progress(f"{label}: {n}/{total} runs")

    return show


def emit_json(document: Mapping[str, Any]) -> None:
    """The ``--json`` document on stdout."""
    echo(json.dumps(document, indent=2))


def write_file(path: str | Path, data: str | bytes, failure: str) -> None:
    """Write an output file whole; if it cannot be, one line: ``failure``
    (naming the file) and the system's reason, e.g. ``cannot write x.toml``."""
    try:
        write_atomic(path, data)
    except OSError as exc:
        raise HarnessError(f"{failure}: {exc.strerror or exc}") from None


def check_out(path: str) -> Path:
    """The ``--out`` file as a Path, or a one-line error if it cannot be one
    (checked before a long run, not after it)."""
    target = Path(path)
    if target.is_dir():
        raise HarnessError(f"--out {path}: is a directory")
    if not target.parent.is_dir():
        raise HarnessError(f"--out {path}: no such folder {str(target.parent)!r}")
    return target
