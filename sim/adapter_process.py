"""One adapter child process and its JSON-lines pipes, with a deadline on
every read and write.

Why not ``proc.stdout.readline()``: it blocks forever on an adapter that hangs,
and the harness must never hang (``docs/protocol.md``, Transport). The
pipes are non-blocking and waited on with ``selectors``, so a read returns a
line, reports end of file, or gives up at the deadline, keeping whatever
partial bytes arrived so that the error can quote them.

The child runs in its own session (``start_new_session``): it leads a new
process group, so :meth:`AdapterProcess.kill` takes down anything it spawned
too (a wrapper script, a server it forked), and the terminal's Ctrl-C does not
reach it behind the harness's back. What it started in a session of its own
is outside that group; the kill finds it by parentage (:mod:`.proctree`). A
daemon that forked twice has left the adapter's tree before the kill, and is
left to the supervisor (:mod:`.supervise`), which ends every process of a
run when the run ends. Its stderr goes straight to a file the
run keeps, never interleaved with the harness's own output.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from pathlib import Path
from typing import BinaryIO

from . import proctree

MAX_LINE = 64 * 1024 * 1024  # a response longer than this is garbage, not a big log


class Eof(Exception):
    """stdout closed before a full line; ``partial`` holds what came."""

    def __init__(self, partial: bytes) -> None:
        super().__init__("end of file")
        self.partial = partial


class Timeout(Exception):
    """The deadline passed before a full line; ``partial`` holds what came."""

    def __init__(self, partial: bytes) -> None:
        super().__init__("timeout")
        self.partial = partial


class TooLong(Exception):
    def __init__(self, partial: bytes) -> None:
        super().__init__("line too long")
        self.partial = partial


class AdapterProcess:
    """A started adapter; raises ``OSError`` when the command cannot start."""

    def __init__(self, command: list[str], env: dict[str, str], stderr: BinaryIO) -> None:
        self.command = command
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=env,
            bufsize=0,
            close_fds=True,
            start_new_session=True,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._out = self.proc.stdout.fileno()
        self._in = self.proc.stdin.fileno()
        os.set_blocking(self._out, False)
        os.set_blocking(self._in, False)
        self._buf = bytearray()
        self._eof = False
        self._readable = selectors.DefaultSelector()
        self._readable.register(self._out, selectors.EVENT_READ)
        self._writable = selectors.DefaultSelector()
        self._writable.register(self._in, selectors.EVENT_WRITE)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def returncode(self) -> int | None:
        return self.proc.poll()

    def send(self, data: bytes, deadline: float) -> None:
        """Write all of ``data``; ``BrokenPipeError`` if the child is gone,
        :class:`Timeout` if it stops reading."""
        view = memoryview(data)
        while view:
            try:
                written = os.write(self._in, view)
            except BlockingIOError:
                written = 0
            view = view[written:]
            if view and not self._writable.select(_left(deadline)):
                raise Timeout(b"")

    def read_line(self, deadline: float) -> bytes:
        """The next line without its newline; :class:`Eof`, :class:`Timeout`
        or :class:`TooLong` carry the partial bytes."""
        start = 0
        while True:
            end = self._buf.find(b"\n", start)
            if end >= 0:
                line = bytes(self._buf[:end])
                del self._buf[: end + 1]
                return line
            start = len(self._buf)
            if start > MAX_LINE:
                raise TooLong(bytes(self._buf))
            if self._eof:
                raise Eof(bytes(self._buf))
            if not self._fill(deadline):
                raise Timeout(bytes(self._buf))

    def unread(self) -> bytes:
        """Bytes already on stdout that no request asked for (drained)."""
        if not self._eof:
            self._fill(time.monotonic())
        extra = bytes(self._buf)
        self._buf.clear()
        return extra

    def _fill(self, deadline: float) -> bool:
        """Read what is available by the deadline; False if nothing came."""
        if not self._readable.select(_left(deadline)):
            return False
        got = False
        while True:
            try:
                chunk = os.read(self._out, 65536)
            except BlockingIOError:
                return got
            if not chunk:
                self._eof = True
                return True
            self._buf += chunk
            got = True

    def wait(self, deadline: float) -> int | None:
        """The exit status if the child ends by the deadline, else None."""
        try:
            return self.proc.wait(timeout=_left(deadline))
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        """SIGKILL the whole process group, and every process below the
        adapter that left it (a helper in a session of its own), then reap
        the child. Idempotent."""
        # Read the tree while the adapter lives: once it is dead its children
        # are adopted elsewhere and no longer tell whose they were.
        below = proctree.descendants(self.proc.pid, fast=True) if self.proc.poll() is None else []
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass  # the group is already gone
        proctree.kill(below)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - stuck in the kernel
            pass
        for selector in (self._readable, self._writable):
            selector.close()
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                try:
                    pipe.close()
                except OSError:
                    pass


def _left(deadline: float) -> float:
    return max(0.0, deadline - time.monotonic())


def stderr_tail(path: Path, limit: int = 2000) -> str:
    """The last ``limit`` bytes of the adapter's stderr log, for messages."""
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - limit))
            data = f.read()
    except OSError:
        return ""
    text = data.decode("utf-8", errors="replace").strip()
    return ("…" + text) if size > limit else text
