"""Judgements from a durable event log alone, for logs written outside the harness.

``inboxsim validate`` turns a log into a synthetic trace that the
:class:`~inboxsim.invariants.Monitor` judges for the invariants whose checkers
decide from the events alone. Two more invariants have a part that a log
shows without any view or reply, judged here by folding the log once:

- ``replay-matches-views`` (the log folds without contradiction): every
  ``promoted`` and ``compaction_started``/``ended``/``failed`` names an input
  the fold has pending (admitted and not yet removed);
- ``monotonic-visible-time``: event times never run backward within a
  session (``now`` never decreases), and under ``visible_time = "promotion"``
  neither do the times of its ``promoted`` events (a promoted message's time
  is the boundary's ``now``).

A finding cites the log's line numbers, not trace steps. Nothing here does
I/O: the caller reads the file.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model.policy import Policy
from ..model.values import Event
from .durability import REPLAY
from .transcript import MONOTONIC

LOG_JUDGED = (REPLAY, MONOTONIC)
"""The invariants :func:`judge_log` reports (each an id of the registry)."""


@dataclass(frozen=True, slots=True)
class LogViolation:
    invariant: str
    lines: list[int]
    message: str


def judge_log(events: list[tuple[int, Event]], policy: Policy) -> list[LogViolation]:
    """Fold ``(line, event)`` pairs in file order; every contradiction found,
    in the order the fold meets it."""
    found: list[LogViolation] = []
    pending: dict[str, dict[str, int]] = {}  # session -> input -> line admitted
    last_time: dict[str, tuple[int, int]] = {}  # session -> (time, line)
    last_promoted: dict[str, tuple[int, int]] = {}
    for line, ev in events:
        rows = pending.setdefault(ev.session, {})
        prev = last_time.get(ev.session)
        if prev is not None and ev.time < prev[0]:
            found.append(
                LogViolation(
                    MONOTONIC,
                    [prev[1], line],
                    f"the {ev.type} event at seq {ev.seq} of {ev.session} has time "
                    f"{ev.time}, before the previous event's {prev[0]}: now never decreases",
                )
            )
        last_time[ev.session] = (ev.time, line)
        kind, ident = ev.type, ev.input
        if kind in ("admitted", "compaction_admitted") and ident is not None:
            rows[ident] = line
        elif kind in ("promoted", "compaction_ended", "compaction_failed") and ident is not None:
            if ident not in rows:
                found.append(
                    LogViolation(
                        REPLAY,
                        [line],
                        f"the {kind} event at seq {ev.seq} of {ev.session} names "
                        f"{ident}, which the log never admitted (or already removed)",
                    )
                )
            rows.pop(ident, None)
            if kind == "promoted" and policy.visible_time == "promotion":
                before = last_promoted.get(ev.session)
                if before is not None and ev.time < before[0]:
                    found.append(
                        LogViolation(
                            MONOTONIC,
                            [before[1], line],
                            f"{ident} was promoted at time {ev.time}, before the "
                            f"previous promotion's {before[0]}: visible times run backward",
                        )
                    )
                last_promoted[ev.session] = (ev.time, line)
        elif kind == "compaction_started" and ident is not None and ident not in rows:
            found.append(
                LogViolation(
                    REPLAY,
                    [line],
                    f"compaction_started at seq {ev.seq} of {ev.session} names "
                    f"{ident}, which is not a pending barrier",
                )
            )
    return found
