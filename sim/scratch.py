"""Temporary folders that name their owner, so that the folders of a harness
that was killed are found and removed by the next run.

A folder is made in the system's temporary folder (``$TMPDIR``) as
``inboxsim-<kind>-<pid>-<start>-<random>``: the id and start time (see
:mod:`.proctree`) of the process that made it are in the name, written by the
one ``mkdir`` that creates it. Why in the name rather than a marker file
inside: a marker is written after the ``mkdir``, and a SIGKILL that lands
between the two leaves a folder nobody can tell is abandoned.

A folder is *stale* when its owner is gone (no process with that id, or one
that started at another time: the id was reused). :func:`remove_stale`
removes stale folders; the command line calls it as every run starts and
again when the harness ends (:mod:`.supervise`), so a run that was killed
leaves its folders only until the next run, and a run that was interrupted
leaves none. Folders of live processes, and folders without an owner in
their name (made by something else), are never touched.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from .proctree import alive, started

PREFIX = "inboxsim-"
# mkdtemp's random part: 8 characters of [a-z0-9_].
_NAME = re.compile(r"^inboxsim-[a-z0-9-]+?-(?P<pid>\d+)-(?P<start>\d+)-[a-z0-9_]{8}$")


def owner(pid: int | None = None) -> str:
    """``<pid>-<start>`` of a process (default: this one)."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}-{started(pid) or 0}"


def make(kind: str, dir: str | Path | None = None) -> Path:
    """A new folder owned by this process (the caller removes it)."""
    return Path(tempfile.mkdtemp(prefix=f"{PREFIX}{kind}-{owner()}-", dir=dir))


@contextlib.contextmanager
def folder(kind: str, dir: str | Path | None = None) -> Iterator[Path]:
    """A temporary folder for the block, removed when it ends however it ends."""
    path = make(kind, dir)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def stale(root: str | Path | None = None, *, mine: bool = False) -> list[Path]:
    """Folders in ``root`` (default ``$TMPDIR``) whose owner is gone; with
    ``mine``, this process's own as well."""
    base = Path(root if root is not None else tempfile.gettempdir())
    me = owner()
    try:
        names = [n for n in os.listdir(base) if n.startswith(PREFIX)]
    except OSError:
        return []
    out = []
    for name in names:
        match = _NAME.match(name)
        if match is None:
            continue
        pid, start = int(match["pid"]), int(match["start"])
        if (mine and f"{pid}-{start}" == me) or not alive(pid, start):
            out.append(base / name)
    return out


def remove_stale(root: str | Path | None = None, *, mine: bool = False) -> list[Path]:
    """Remove :func:`stale` folders; returns those removed."""
    removed = []
    for path in stale(root, mine=mine):
        shutil.rmtree(path, ignore_errors=True)
        if not path.exists():
            removed.append(path)
    return removed


__all__ = ["folder", "make", "owner", "remove_stale", "stale"]
