"""The command line's process tree: no process the harness starts outlives it,
even when the harness is killed with SIGKILL.

What has to be caught: adapters (each leads its own process group, in its
own session), what they start (a server, a helper, possibly in a session of
its own, possibly a daemon that forked twice so that its parent is gone),
the pool's forkserver, workers and resource tracker, Dask's nannies and
workers. After SIGKILL of the harness nothing in the harness can run, so
something else must be there to clean up, and it must be able to *find*
every one of those processes.

The two designs the issue names, and why this module uses both:

- A parent-death signal (``PR_SET_PDEATHSIG``) reaches only a direct child,
  and only one whose code sets it; an adapter's own children never get one.
- A child subreaper (``PR_SET_CHILD_SUBREAPER``) adopts every orphan below
  it, so nothing below it can leave its subtree by forking twice or calling
  ``setsid``. But it only helps while it lives: when the subreaper itself is
  killed, its subtree goes to init, out of reach.
- A watchdog that records the tree as it sees it (polling) misses what was
  born and orphaned between two looks.

So the subreaper is a process that is never the one doing the work: the
**supervisor**. :func:`run` forks at the start of every command line run:

- the *supervisor* (the original process, the pid the user and ``timeout``
  see) becomes a child subreaper, relays SIGINT, SIGTERM, SIGHUP, Ctrl-Z and
  window changes to the harness, and reaps whatever is adopted. When the
  harness ends, however it ends, it kills every process left below it (race
  free: :func:`.proctree.kill_tree` stops the whole tree before killing it),
  removes the stale temporary folders (:mod:`.scratch`), and exits with the
  harness's code (128 + the signal, with one line, if the harness was
  killed);
- the *harness* (the child) runs the command in a process group of its own,
  so that a SIGKILL sent to the supervisor's group (``timeout -s KILL``, a CI
  runner killing a job's group) does not take both at once. It gets a
  parent-death signal (SIGHUP): if the supervisor is killed, the harness
  kills its own tree and removes its folders at once, then exits. SIGINT and
  SIGTERM are graceful (:mod:`.interrupt`): the command unwinds, keeps what
  is complete, says so in one line; then the harness kills what is left of
  its tree and exits 130 or 143.

Either of the two can be killed and the other cleans up. Every process of
the run also carries ``INBOXSIM_SUPERVISOR=<pid>.<start>`` in its
environment: a daemon that forked twice and was adopted by init after the
supervisor died is still found by it, unless it cleared its environment.
What is not covered: SIGKILL of *both* processes at the same moment (``kill
-9`` of each by name), or of a process that cleared its environment and
escaped the tree in that moment. A cgroup (systemd, Docker, a CI runner's
job) kills everything anyway.

On systems without ``prctl`` (not Linux) the command runs in process, with
the same graceful SIGINT and SIGTERM and a process group per adapter.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import NoReturn

from . import interrupt, proctree, scratch

ENV = "INBOXSIM_SUPERVISOR"
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
PARENT_DEATH = signal.SIGHUP
# The longest run folder that still fits multiprocessing's socket path
# (".../pymp-XXXXXXXX/listener-XXXXXXXX") in AF_UNIX's 107 bytes.
ROOT_MAX = 107 - len("/pymp-abcdefgh/listener-abcdefgh")
TRACKER_PATIENCE = 5.0  # seconds the resource tracker gets to clean up and end
RELAYED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGTSTP, signal.SIGWINCH)


# $TMPDIR as it was before run() put the run's own folder in its place.
_outer: str | None = None


def lasting_tempdir() -> str:
    """The temporary folder for a file a message names (an internal error's
    traceback): the run's own folder, ``$TMPDIR`` during the run, is removed
    when the run ends."""
    return _outer if _outer is not None else tempfile.gettempdir()


def _prctl(option: int, value: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(option, value, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def run(command: Callable[[], int]) -> int:
    """Run ``command`` (the command line) under a supervisor; returns its exit
    code in the harness process (the supervisor never returns)."""
    scratch.remove_stale()  # left by a run that was killed
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    if not sys.platform.startswith("linux") or not _prctl(PR_SET_CHILD_SUBREAPER, 1):
        interrupt.install(_exit_now)
        return command()
    me = os.getpid()
    os.environ[ENV] = f"{me}.{proctree.started(me) or 0}"
    # One folder holds every temporary file of the run, the pool's and Dask's
    # and the adapters' included: $TMPDIR for all of them. The supervisor owns
    # it and removes it at the end; if it is killed, the harness does. Not
    # when its path is too long for the pool's socket inside it (AF_UNIX
    # paths end at 107 bytes): then the run's own folders still name their
    # owner, but a pool's `pymp-*` folder is left by a run killed with SIGKILL.
    outer = tempfile.gettempdir()
    root = scratch.make("harness")
    if len(os.fsencode(root)) <= ROOT_MAX:
        global _outer
        _outer = outer
        os.environ["TMPDIR"] = str(root)
        tempfile.tempdir = None
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, RELAYED)
    child = os.fork()
    if child == 0:
        return _harness(command, me, mask, outer)
    _supervise(child, mask, outer, root)


# --- the harness (the child) ------------------------------------------------------


def _harness(
    command: Callable[[], int], supervisor: int, mask: set[int | signal.Signals], outer: str
) -> int:
    os.setpgid(0, 0)  # out of the supervisor's group (see the module docstring)
    _prctl(PR_SET_PDEATHSIG, PARENT_DEATH)
    # In a background group, writing to the terminal would stop it (with
    # `stty tostop`) unless these are ignored; it reads nothing from it.
    for signum in (signal.SIGTTOU, signal.SIGTTIN):
        signal.signal(signum, signal.SIG_IGN)
    interrupt.install(lambda code: _stop_tree(code, outer), parent_death=PARENT_DEATH)
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    if os.getppid() != supervisor:  # it died before the parent-death signal was set
        _stop_tree(128 + signal.SIGKILL, outer)
    code = command()
    # Done: a SIGINT or SIGTERM from now on (relayed by the supervisor) would
    # find the interpreter shutting down, its handlers reset to the default,
    # and kill it. Ignored ones stay ignored (blocking them would not do: the
    # process's other threads would take them).
    for signum in interrupt.GRACEFUL:
        signal.signal(signum, signal.SIG_IGN)
    return code


def _stop_tree(code: int, outer: str) -> NoReturn:
    """Kill every process of this harness, remove its folders (the run's
    folder in ``outer`` too, once the supervisor is gone), exit ``code``."""
    if threading.current_thread() is threading.main_thread():  # else its locks may be taken
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
    me, supervisor = os.getpid(), os.getppid()
    tag = f"{ENV}={os.environ.get(ENV)}"

    def escaped() -> list[int]:  # adopted by init once the supervisor died
        return [p for p in proctree.with_env(tag) if p not in (me, supervisor)]

    # The resource tracker ends once this process is gone (see _resource_tracker).
    proctree.kill_tree(me, also=escaped, spare=_resource_tracker, spare_patience=None)
    scratch.remove_stale(mine=True)
    scratch.remove_stale(outer)
    os._exit(code)


def _resource_tracker(pid: int) -> bool:
    """multiprocessing's resource tracker is spared: once every process that
    holds its pipe is dead it removes the named semaphores they left in
    /dev/shm, and exits. Killed, it would leave them there."""
    return b"multiprocessing.resource_tracker" in proctree.cmdline(pid)


def _exit_now(code: int) -> NoReturn:
    """Without a supervisor: the folders, then out."""
    scratch.remove_stale(mine=True)
    os._exit(code)


# --- the supervisor (the original process) ----------------------------------------


def _supervise(child: int, mask: set[int | signal.Signals], outer: str, root: Path) -> NoReturn:
    def relay(signum: int, _frame: FrameType | None) -> None:
        with contextlib.suppress(ProcessLookupError):
            # A hangup of the terminal is a request to stop, as SIGTERM is.
            os.kill(child, signal.SIGTERM if signum == signal.SIGHUP else signum)

    def suspend(_signum: int, _frame: FrameType | None) -> None:
        # Ctrl-Z reaches only this (the foreground) group: stop the harness's
        # group too, then stop here as the shell expects; continue both.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child, signal.SIGSTOP)
        os.kill(os.getpid(), signal.SIGSTOP)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child, signal.SIGCONT)

    for signum in RELAYED:
        if signal.getsignal(signum) == signal.SIG_IGN:
            continue  # e.g. SIGINT in a background job of a script: stay deaf to it
        signal.signal(signum, suspend if signum == signal.SIGTSTP else relay)
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    status = 0
    while True:
        try:
            pid, got = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        if pid == child:
            status = got
            break
    # Alive, a subreaper has every process that left the harness's tree below
    # it: no need to look for them by their environment here.
    proctree.kill_tree(
        os.getpid(), spare=_resource_tracker, spare_patience=TRACKER_PATIENCE, reap_own=True
    )
    shutil.rmtree(root, ignore_errors=True)
    scratch.remove_stale(outer)
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        name = signal.Signals(-code).name
        print(
            f"inboxsim: the harness process {child} was killed by {name}: its processes are "
            "stopped and its temporary folders removed; a store keeps the batches written before "
            "(inboxsim check --db PATH re-judges them)",
            file=sys.stderr,
            flush=True,
        )
        code = 128 - code
    os._exit(code)


__all__ = ["ENV", "lasting_tempdir", "run"]
