"""The processes below a process, read from ``/proc``, and how to end them all.

Linux only: where there is no ``/proc`` every function here finds nothing
(:func:`descendants` is empty, :func:`started` gives 0 for a live process),
and the harness falls back to what it did before: a process group per adapter.

Rules:

- A process is named by its id *and its start time* (``/proc/PID/stat`` field
  22, clock ticks since boot) wherever it is remembered for later: an id alone
  can be reused by an unrelated process once the first one is reaped.
- Parentage is read from a full scan of ``/proc/*/stat`` when it must be
  complete (:func:`kill_tree`), and from the kernel's per-task ``children``
  lists, which touch only the subtree, when it is asked for often
  (:func:`descendants` with ``fast=True``, once per adapter kill).
- Zombies are dead: they are never counted as left alive, and only the
  process whose children they are can reap them (:func:`kill_tree` reaps its
  own when asked to, which only a process that owns every child may do: the
  supervisor).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterable
from pathlib import Path

PROC = Path("/proc")
DEAD = ("Z", "X")  # zombie, dead: states of a process that has ended


def stat(pid: int) -> tuple[str, int, int, int] | None:
    """(state, parent id, process group, start time) of ``pid``, or None if it is gone."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except (OSError, ValueError):
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    fields = text.rpartition(")")[2].split()
    try:
        return fields[0], int(fields[1]), int(fields[2]), int(fields[19])
    except (IndexError, ValueError):
        return None


def started(pid: int) -> int | None:
    """The start time of a live (or zombie) process, None when there is none.
    Without ``/proc``: 0 for a process that exists."""
    if not PROC.is_dir():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            return 0
        return 0
    found = stat(pid)
    return None if found is None else found[3]


def alive(pid: int, start: int) -> bool:
    """Is the process ``pid`` that started at ``start`` still there (zombies count as gone)?"""
    if not PROC.is_dir():
        return started(pid) is not None
    found = stat(pid)
    return found is not None and found[3] == start and found[0] not in DEAD


def _all_stats() -> dict[int, tuple[str, int, int, int]]:
    out = {}
    try:
        entries = os.listdir(PROC)
    except OSError:
        return {}
    for entry in entries:
        if entry.isdigit():
            found = stat(int(entry))
            if found is not None:
                out[int(entry)] = found
    return out


def _children_lists(pid: int) -> list[int] | None:
    """Direct children from ``/proc/PID/task/*/children``; None where the
    kernel does not offer the lists."""
    try:
        tasks = os.listdir(PROC / str(pid) / "task")
    except OSError:
        return []
    out: list[int] = []
    for tid in tasks:
        try:
            text = (PROC / str(pid) / "task" / tid / "children").read_text()
        except FileNotFoundError:
            return None  # no CONFIG_PROC_CHILDREN (or the task just ended)
        except OSError:
            continue
        out.extend(int(c) for c in text.split())
    return out


def descendants(root: int, *, fast: bool = False) -> list[int]:
    """Every process below ``root`` (children first, then theirs), zombies
    included. ``fast``: walk only the subtree's children lists when the
    kernel has them (cheap, but may miss a child born during the walk)."""
    if fast:
        found: list[int] = []
        frontier = [root]
        while frontier:
            kids = _children_lists(frontier.pop())
            if kids is None:
                break  # no lists: the full scan below
            found.extend(kids)
            frontier.extend(kids)
        else:
            return found
    return _below([root], _all_stats())


def _below(heads: Iterable[int], stats: dict[int, tuple[str, int, int, int]]) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid, (_state, ppid, _pgrp, _start) in stats.items():
        children.setdefault(ppid, []).append(pid)
    out: list[int] = []
    frontier = list(heads)
    while frontier:
        kids = children.get(frontier.pop(), [])
        out.extend(kids)
        frontier.extend(kids)
    return out


def cmdline(pid: int) -> bytes:
    """The command line of ``pid``, its arguments separated by NUL bytes (empty if gone)."""
    try:
        return (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return b""


def with_env(entry: str) -> list[int]:
    """Processes whose environment holds ``entry`` (``NAME=value``), readable
    ones only (this user's). Finds a process that left the tree (a daemon that
    forked twice, adopted by init once its supervisor was gone) but kept the
    environment it was started with."""
    wanted = entry.encode()
    out = []
    for pid in _all_stats():
        try:
            env = (PROC / str(pid) / "environ").read_bytes()
        except OSError:
            continue
        if wanted in env.split(b"\0"):
            out.append(pid)
    return out


def kill(pids: Iterable[int]) -> None:
    """SIGKILL each of ``pids`` that is still there."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def reap() -> None:
    """Reap every child of this process that has ended (only for a process
    that owns all its children: the supervisor)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def kill_tree(
    root: int,
    *,
    also: Callable[[], Iterable[int]] = tuple,
    spare: Callable[[int], bool] = lambda pid: False,
    spare_patience: float | None = 5.0,
    reap_own: bool = False,
    patience: float = 5.0,
) -> int:
    """End every process below ``root`` (never ``root`` itself), and those
    ``also`` finds (asked again at every scan: processes that left the tree)
    and theirs; returns how many were killed. Race-free for a tree that keeps
    forking: first every process is stopped (SIGSTOP), scanning again until a
    scan finds none that is not stopped yet (a child forked before its parent
    stopped is still its parent's child, so the next scan sees it); only then
    is each killed, so none can be orphaned out of reach. Waits (at most
    ``patience`` seconds) until they are dead. A process ``spare`` picks is
    left to end by itself once the others are dead (one that has cleaning up
    to do then), for at most ``spare_patience`` seconds, then killed (None:
    left alone, for a caller about to exit, whose exit is what they wait for).
    ``reap_own``: reap this process's ended children as well (only for a
    process that owns them all: the supervisor)."""
    me = os.getpid()
    frozen: set[int] = set()
    spared: set[int] = set()
    deadline = time.monotonic() + patience
    while time.monotonic() < deadline:
        stats = _all_stats()
        outside = {p for p in also() if p in stats}
        tree = set(_below([root, *outside, *frozen], stats)) | outside
        new = {p for p in tree - {me, root} if stats[p][0] not in DEAD} - frozen - spared
        spared |= {p for p in new if spare(p)}
        new -= spared
        if not new:
            break
        for pid in new:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGSTOP)
        frozen |= new
    kill(frozen)
    count = len(frozen)
    while frozen and time.monotonic() < deadline:
        if reap_own:
            reap()
        frozen = {p for p in frozen if _living(p)}
        if frozen:
            time.sleep(0.002)
    if spared and spare_patience is not None:
        until = time.monotonic() + spare_patience
        while time.monotonic() < until and any(_living(p) for p in spared):
            if reap_own:
                reap()
            time.sleep(0.01)
        left = [p for p in spared if _living(p)]
        kill(left)
        count += len(left)
    if reap_own:
        reap()
    return count


def _living(pid: int) -> bool:
    """Alive, or still ending: a process whose first thread has ended shows
    as a zombie while its other threads end."""
    found = stat(pid)
    if found is None:
        return False
    if found[0] not in DEAD:
        return True
    try:
        return len(os.listdir(PROC / str(pid) / "task")) > 1
    except OSError:
        return False


__all__ = [
    "alive",
    "cmdline",
    "descendants",
    "kill",
    "kill_tree",
    "reap",
    "started",
    "stat",
    "with_env",
]
