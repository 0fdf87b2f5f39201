"""What the harness knows about the target: the fold of its observations.

The workload chooses its next operation from this view only, never from the
target's insides, so the same workload drives the model in process and an
adapter process alike. It is rebuilt step by step from each step's
:class:`~inboxsim.trace.record.Observed` (which records changes only).

Iteration order matters for determinism: sessions are kept in the order they
were first seen (a list, and dicts that are only ever filled in trace order),
never in a set's hash order.
"""

from __future__ import annotations

from ..model import Call
from .record import MessageView, Observed, PendingView


class View:
    """The harness's picture of the target after the steps it has seen."""

    __slots__ = ("sessions", "pending", "transcript", "calls", "staged")

    def __init__(self) -> None:
        self.sessions: list[str] = []  # first seen order
        self.pending: dict[str, tuple[PendingView, ...]] = {}
        self.transcript: dict[str, tuple[MessageView, ...]] = {}
        self.calls: tuple[Call, ...] = ()  # oldest first
        self.staged: dict[str, str] = {}  # session -> staged revert boundary

    def absorb(self, observed: Observed) -> None:
        for sid, rows in observed.pending:
            if sid not in self.pending and sid not in self.transcript:
                self.sessions.append(sid)
            self.pending[sid] = rows
        for sid, msgs in observed.transcript:
            if sid not in self.pending and sid not in self.transcript:
                self.sessions.append(sid)
            self.transcript[sid] = msgs
        if observed.calls is not None:
            self.calls = observed.calls
        for event in observed.events:
            kind = event.type
            if kind == "revert_staged":
                self.staged[event.session] = event.data
            elif kind == "revert_cleared" or kind == "revert_committed":
                self.staged.pop(event.session, None)

    def busy(self, session: str) -> bool:
        """Does the session have an open model call?"""
        for call in self.calls:
            if call.session == session:
                return True
        return False

    def quiet(self) -> bool:
        """Nothing left to do: no open call and no pending row anywhere."""
        if self.calls:
            return False
        for rows in self.pending.values():
            if rows:
                return False
        return True
