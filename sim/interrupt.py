"""SIGINT and SIGTERM as an exception that unwinds the command, and the one
line that says what was kept.

The contract (harness-contract.md, "Command line"): on SIGINT or SIGTERM a
command stops its workers and adapters, keeps what is complete in the store,
removes its temporary folders, says in one line what was kept and how to go
on, and exits 130 or 143.

How: :func:`install` (the command line's harness process only, never a
library caller's) makes both signals raise :class:`Interrupted` in the main
thread. Like :class:`KeyboardInterrupt` it is not an :class:`Exception`, so
every ``with`` and ``finally`` of the command runs as it would for Ctrl-C
(adapters are killed, folders removed, a store transaction in flight rolled
back) and no ``except Exception`` swallows it; unlike it, the command line
library does not turn it into a silent exit 130. A command that keeps
something says what in :attr:`Interrupted.kept` on the way out (the sweep:
the runs stored and the command that goes on); :func:`line` is the one line.

- :func:`deferred` marks a step that must not be cut in two (a batch written
  to the store and counted in the tally): a signal that arrives inside it is
  raised when it ends.
- Code that waits for a pool's batches waits in short slices inside
  :func:`deferred` (:func:`.executor.result`): a signal raised inside
  ``concurrent.futures``' own waiting would leave its locks taken, and the
  pool's shutdown would wait for ever.
- A second SIGINT a second or more after the first (someone pressing Ctrl-C
  again because the first is taking long), the parent-death signal
  (:mod:`.supervise`: the supervisor was killed), and a graceful stop still
  running after :data:`GRACE` seconds stop at once: ``hard_stop``, given by
  the supervisor, kills the process tree and exits. A repeated SIGTERM, or a
  SIGINT within the second (a signal sent to the process and again to its
  group), is the same request and is ignored.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import FrameType

GRACEFUL = (signal.SIGINT, signal.SIGTERM)
NOTHING_KEPT = "nothing was kept (this command stores its results when it ends); rerun it"
AGAIN_AFTER = 1.0  # seconds: a second SIGINT sooner than this is the same one
GRACE = 30.0  # seconds a graceful stop may take before it is made a hard one


class Interrupted(BaseException):
    """The command was asked to stop by ``signum``; ``kept`` says what it kept
    and how to go on (None: nothing was stored)."""

    def __init__(self, signum: int, kept: str | None = None) -> None:
        super().__init__(signum)
        self.signum = signum
        self.kept = kept

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def line(stop: Interrupted) -> str:
    """The one line an interrupted command prints (without the program's name)."""
    name = signal.Signals(stop.signum).name
    kept = stop.kept or NOTHING_KEPT
    return f"interrupted by {name}: {kept}"


@dataclass
class _State:
    signum: int | None = None  # the first signal received
    at: float = 0.0
    depth: int = 0  # inside deferred()
    pending: bool = False
    hard_stop: Callable[[int], None] | None = None


_STATE = _State()


def _on_signal(signum: int, _frame: FrameType | None) -> None:
    state = _STATE
    now = time.monotonic()
    if state.signum is not None:
        if signum == signal.SIGINT and now - state.at >= AGAIN_AFTER and state.hard_stop:
            state.hard_stop(128 + state.signum)
        return  # the same request again
    state.signum, state.at = signum, now
    if state.depth:
        state.pending = True
        return
    raise Interrupted(signum)


def _on_parent_death(signum: int, _frame: FrameType | None) -> None:
    if _STATE.hard_stop is not None:
        _STATE.hard_stop(128 + signal.SIGKILL)


def _watch(state: _State, grace: float, done: threading.Event) -> None:
    """Make a graceful stop that outlives ``grace`` a hard one. A thread, so
    that it acts even if the main thread is stuck; it writes its line with
    one system call, taking no lock the main thread may hold."""
    while not done.wait(0.2):
        if state.signum is not None and time.monotonic() - state.at > grace:
            name = signal.Signals(state.signum).name
            message = f"inboxsim: interrupted by {name}: still stopping after {grace:g} s"
            with contextlib.suppress(OSError):
                os.write(2, f"{message}; stopped at once\n".encode())
            assert state.hard_stop is not None
            state.hard_stop(128 + state.signum)
            return


def install(
    hard_stop: Callable[[int], None], parent_death: int | None = None, grace: float = GRACE
) -> Callable[[], None]:
    """SIGINT and SIGTERM raise :class:`Interrupted`; ``parent_death`` (the
    signal the kernel sends when the supervisor dies) calls ``hard_stop``, as
    does a graceful stop still going after ``grace`` seconds. Returns a
    function that puts back the handlers and forgets any signal received
    (for a caller that is not the whole process: a test)."""
    global _STATE
    before = {s: signal.getsignal(s) for s in (*GRACEFUL, parent_death) if s is not None}
    state = _STATE = _State(hard_stop=hard_stop)
    for signum in GRACEFUL:
        if before[signum] != signal.SIG_IGN:  # a background job stays deaf to ^C
            signal.signal(signum, _on_signal)
    if parent_death is not None:
        signal.signal(parent_death, _on_parent_death)
    done = threading.Event()
    threading.Thread(
        target=_watch, args=(state, grace, done), name="inboxsim-grace", daemon=True
    ).start()

    def restore() -> None:
        global _STATE
        done.set()
        for signum, handler in before.items():
            signal.signal(signum, handler)
        _STATE = _State()

    return restore


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """A signal that arrives inside the block is raised when the block ends."""
    state = _STATE
    state.depth += 1
    try:
        yield
    finally:
        state.depth -= 1
        if state.depth == 0 and state.pending:
            state.pending = False
            assert state.signum is not None
            raise Interrupted(state.signum)


__all__ = ["Interrupted", "deferred", "install", "line"]
