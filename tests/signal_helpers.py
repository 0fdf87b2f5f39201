"""The signal state of this process as the kernel records it, shared by the
suite's guard of each test's signal state (``conftest.py``) and the test that
shows the guard sees what C code sets (``test_harness_processes.py``)."""

from __future__ import annotations

import signal
from pathlib import Path

WATCHED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGTSTP, signal.SIGUSR1)
STATUS = Path("/proc/self/status")


def ignored_by_the_kernel() -> frozenset[int]:
    """Signals the kernel ignores for this process (what a child inherits,
    also when set by C code that Python's own record of handlers misses)."""
    if not STATUS.exists():
        return frozenset()
    for line in STATUS.read_text().splitlines():
        if line.startswith("SigIgn:"):
            bits = int(line.split()[1], 16)
            return frozenset(s for s in WATCHED if bits >> (s - 1) & 1)
    return frozenset()
