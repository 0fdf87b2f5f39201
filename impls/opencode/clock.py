"""OpenCode's wall clock to the harness's ``now`` (``clock.log``): each
state-changing request records the wall millisecond it started at with its
``now``, and every OpenCode timestamp reads as the ``now`` of the last
request that had started by then. Exact, since requests are sequential and
nothing progresses between them.
"""

from __future__ import annotations

import time
from bisect import bisect_right
from pathlib import Path


class Clock:
    """OpenCode's wall-clock milliseconds to the harness's ``now``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.walls: list[int] = []
        self.nows: list[int] = []
        if path.exists():
            for line in path.read_text().splitlines():
                parts = line.split()
                if len(parts) == 2:
                    self.walls.append(int(parts[0]))
                    self.nows.append(int(parts[1]))
        self._file = open(path, "a")  # noqa: SIM115 - for the process's life

    def tick(self, now: int) -> None:
        """A request with this ``now`` starts: from here on, OpenCode's
        timestamps are reported as ``now`` (until a later one)."""
        if self.nows and now <= self.nows[-1]:
            return
        # Let the millisecond of everything before turn over, so that no
        # earlier timestamp can equal this request's start.
        time.sleep(0.002)
        wall = int(time.time() * 1000)
        if self.walls and wall <= self.walls[-1]:
            wall = self.walls[-1] + 1
        self.walls.append(wall)
        self.nows.append(now)
        self._file.write(f"{wall} {now}\n")
        self._file.flush()
        time.sleep(0.002)

    def now_of(self, wall: int | None) -> int:
        if wall is None or not self.walls:
            return self.nows[-1] if self.nows else 0
        i = bisect_right(self.walls, int(wall))
        return self.nows[i - 1] if i > 0 else self.nows[0]
