"""Groups: several requests at once, one thread and one SQLite connection each.

Free (no schedule): the threads run as they will; SQLite's ``BEGIN IMMEDIATE``
serialises the writes (with a busy timeout) and a lock per session serialises
the runner's work on that session.

Scheduled (the harness's ``schedule``): one thread runs at a time. A thread
parks at every **pause point**: before each write transaction (``begin``:
it needs the write lock) and before it takes a session's runner lock
(``runner``: it needs that lock). When every live thread is parked or done,
the scheduler takes the next schedule number ``k`` and releases the parked
thread at ``k mod n`` among the ``n`` whose need is free (in the members'
order). Nothing waits inside a pause point for another thread (a parked
thread holds what it holds and needs one thing), so the schedule decides
every interleaving and a schedule replays exactly. Clock: the decision count.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

WRITE = "write"
_local = threading.local()


class Scheduler:
    def __init__(self, schedule: list[int] | None) -> None:
        self.schedule = schedule
        self.cond = threading.Condition()
        self.parked: dict[int, tuple[str, Any]] = {}  # member -> (point, need)
        self.running: set[int] = set()
        self.held: dict[Any, tuple[int, int]] = {}  # resource -> (member, depth)
        self.go: int | None = None
        self.decisions = 0
        self.pauses: list[dict[str, Any]] = []
        self.free_locks: dict[Any, threading.RLock] = {}

    @property
    def scheduled(self) -> bool:
        return self.schedule is not None

    def clock(self) -> float:
        return float(self.decisions) if self.scheduled else time.monotonic()

    # --- run the members --------------------------------------------------------

    def run(self, members: list[Callable[[], Any]]) -> list[tuple[Any, float, float]]:
        """Run every member (each in its own thread); their results with the
        invoke and completion clock readings, in the members' order."""
        out: list[Any] = [None] * len(members)

        def body(i: int) -> None:
            _local.member, _local.sched = i, self
            invoked = self.clock()
            try:
                self.pause("start", None)
                result = members[i]()
            finally:
                with self.cond:
                    self.running.discard(i)
                    self.cond.notify_all()
            out[i] = (result, invoked, self.clock())

        threads = [
            threading.Thread(target=body, args=(i,), daemon=True) for i in range(len(members))
        ]
        self.running = set(range(len(members)))
        for t in threads:
            t.start()
        if self.scheduled:
            self._drive(len(members))
        for t in threads:
            t.join()
        return out

    def _drive(self, n: int) -> None:
        k = 0
        with self.cond:
            while True:
                self.cond.wait_for(lambda: self.go is None and set(self.parked) >= self.running)
                if not self.running:
                    return
                options = [i for i in sorted(self.parked) if self._free(self.parked[i][1], i)]
                assert options, f"pause points deadlocked: {self.parked} {self.held}"
                assert self.schedule is not None
                pick = self.schedule[k] % len(options) if k < len(self.schedule) else 0
                k += 1
                self.decisions += 1
                chosen = options[pick]
                self.pauses.append({"request": chosen, "point": self.parked[chosen][0]})
                del self.parked[chosen]
                self.go = chosen
                self.cond.notify_all()

    def _free(self, need: Any, member: int) -> bool:
        owner = self.held.get(need)
        return need is None or owner is None or owner[0] == member

    # --- in a member's thread ----------------------------------------------------

    def pause(self, point: str, need: Any) -> None:
        if not self.scheduled:
            return
        me = _local.member
        with self.cond:
            self.parked[me] = (point, need)
            self.cond.notify_all()
            self.cond.wait_for(lambda: self.go == me)
            self.go = None
            if need is not None:
                owner, depth = self.held.get(need, (me, 0))
                self.held[need] = (me, depth + 1)

    def release(self, need: Any) -> None:
        if not self.scheduled:
            return
        with self.cond:
            owner, depth = self.held[need]
            if depth == 1:
                del self.held[need]
            else:
                self.held[need] = (owner, depth - 1)


def current() -> Scheduler | None:
    return getattr(_local, "sched", None)


def member_store() -> Any:
    """The connection of the group member running in this thread, or None."""
    return getattr(_local, "store", None)


def use_store(store: Any) -> None:
    _local.store = store


@contextmanager
def holding(point: str, need: Any) -> Iterator[None]:
    """Take ``need`` (a session's runner lock) at a pause point; in a free
    group, a real lock; outside a group, nothing."""
    sched = current()
    if sched is None:
        yield
        return
    if sched.scheduled:
        sched.pause(point, need)
        try:
            yield
        finally:
            sched.release(need)
        return
    with sched.cond:
        lock = sched.free_locks.setdefault(need, threading.RLock())
    with lock:
        yield
