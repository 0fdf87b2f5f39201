"""Invariant checkers: pure functions that judge a recorded trace.

Each invariant is a registered value (:data:`REGISTRY`): an id, a one-line
statement, its source in the spec, the adapter protocol or the seed, tags,
and the policies under which it is expected to hold. A :class:`Monitor`
judges a run online, step by step, with per-session incremental state;
:func:`check_trace` judges a stored trace and gives the same verdicts. The
spec invariants that cannot be judged through the protocol are listed in
:data:`UNOBSERVABLE` with the reason. Nothing here does I/O.
"""

from .base import Violation as Violation
from .base import When as When
from .monitor import CHECKERS as CHECKERS
from .monitor import Monitor as Monitor
from .monitor import check_trace as check_trace
from .registry import REGISTRY as REGISTRY
from .registry import UNOBSERVABLE as UNOBSERVABLE
from .registry import Invariant as Invariant
from .registry import Unobservable as Unobservable
from .registry import expected as expected
from .registry import listing as listing

__all__ = [
    "CHECKERS",
    "Invariant",
    "Monitor",
    "REGISTRY",
    "UNOBSERVABLE",
    "Unobservable",
    "Violation",
    "When",
    "check_trace",
    "expected",
    "listing",
]
