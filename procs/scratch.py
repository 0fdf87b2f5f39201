"""Temporary folders and files that name their owner, so that what a harness
that was killed left behind is found and removed by the next run; and the one
way the harness writes an output file (:func:`write_atomic`).

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

Every output file a command writes (JSON, JUnit, Markdown, HTML, scenario
files, plots) goes through :func:`write_atomic`: the text is written to a
temporary file in the target's own folder (``os.replace`` is atomic only
within one file system), flushed to disk, then renamed over the target. A
reader, or the next run, finds the old file or the new one, never half of
one. The temporary file is ``.<name>.inboxsim-<pid>-<start>-<random>.tmp``:

- an error or an exception (:class:`~.interrupt.Interrupted` included)
  removes it before it propagates;
- a hard stop (:mod:`.supervise`: ``remove_stale(mine=True)``, then
  ``os._exit``) removes the ones still being written (:data:`_WRITING`);
- after SIGKILL nothing of the writer runs, so its owner in the name is what
  counts: the next write of the same file removes the temporary files whose
  owner is gone (never a live writer's: two processes may write one file,
  the last rename wins).
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
# The target's name in a temporary file's name is cut to this many characters,
# so that the temporary name stays within NAME_MAX (255 bytes) when the
# target's is near it.
_STEM = 120
# The temporary files of write_atomic that this process is writing now.
_WRITING: set[Path] = set()


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
    """Remove :func:`stale` folders; returns those removed. With ``mine``, the
    temporary files this process is writing (:func:`write_atomic`) as well:
    what a hard stop calls before ``os._exit``."""
    removed = []
    for path in stale(root, mine=mine):
        shutil.rmtree(path, ignore_errors=True)
        if not path.exists():
            removed.append(path)
    if mine:
        for path in list(_WRITING):
            with contextlib.suppress(OSError):
                path.unlink()
                removed.append(path)
    return removed


def write_atomic(path: str | Path, data: str | bytes) -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` whole, or leave the file as it
    was: see the module's header. Raises :class:`OSError` (the caller words
    it), after removing its temporary file. A new file gets the mode an
    ``open`` would give it (0o666 less the umask), an existing one keeps its
    own; a symbolic link is followed (the file it names is replaced)."""
    target = Path(os.path.realpath(path))
    _remove_abandoned(target)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    tmp = target.with_name(f".{target.name[:_STEM]}.{PREFIX}{owner()}-{os.urandom(4).hex()}.tmp")
    # Registered before it exists, so that no moment has it on disk unlisted.
    _WRITING.add(tmp)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        try:
            with contextlib.suppress(FileNotFoundError):
                os.fchmod(fd, os.stat(target).st_mode & 0o7777)
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    finally:
        _WRITING.discard(tmp)
    return target


def _remove_abandoned(target: Path) -> None:
    """Remove the temporary files of ``target`` whose writer is gone (killed
    while writing it)."""
    pattern = re.compile(
        rf"^\.{re.escape(target.name[:_STEM])}\.{PREFIX}(?P<pid>\d+)-(?P<start>\d+)-[0-9a-f]{{8}}\.tmp$"
    )
    try:
        names = os.listdir(target.parent)
    except OSError:
        return  # the write says why the folder cannot be written
    for name in names:
        match = pattern.match(name)
        if match is not None and not alive(int(match["pid"]), int(match["start"])):
            with contextlib.suppress(OSError):
                (target.parent / name).unlink()


__all__ = ["folder", "make", "owner", "remove_stale", "stale", "write_atomic"]
