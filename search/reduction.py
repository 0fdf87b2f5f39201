"""The explorer's partial-order reduction: which actions commute, so that a
sleep set may hold one aside (:mod:`.explore` keeps the sleep sets).

- **Sleep sets** (partial-order reduction, ``reduce``; docs/explorer.md
  states the argument). Two actions are *independent* (:func:`independent`)
  when both are requests on different sessions that neither crash the
  process (no failpoint; the kill is no session's) nor reuse an ended ID
  (the one family that reads another session's entries of the shared ID
  index); the search uses that only at a state where both were judged
  clean and neither changed the monitor's global :func:`facts`. Such a
  pair commutes modulo the merge key: either order reaches one key, each
  action as clean after the other (``tests/test_explore_reduction.py``).
  When a node is expanded, each clean eligible action judged before a
  sibling's (and each one asleep at the node) goes to sleep in the
  sibling's child if it is on another session: the child does not judge
  it, since the sibling judged the other order. A key reached by several
  paths of one level keeps the intersection of their sleep sets; a tied
  key (two sessions with equal segments) keeps none. Sleep sets remove
  transitions, never keys: the same keys level by level, the same
  shortest violations.
"""

from __future__ import annotations

from typing import Any

from .world import REUSE, Action


def eligible(action: Action) -> bool:
    """May this action commute with another session's? A request on one
    session that does not crash the process and does not touch the ID
    namespace another session reads (the reuse of an ended ID)."""
    return action.session is not None and action.crash_at is None and action.family != REUSE


def independent(a: Action, b: Action) -> bool:
    """The actions' structural independence: both eligible, on different
    sessions. The search takes two such actions as independent at a state
    where neither revealed a violation and neither changed the monitor's
    global facts (:func:`facts`); docs/explorer.md states the argument."""
    return eligible(a) and eligible(b) and a.session != b.session


def facts(monitor: Any) -> tuple[bool, bool] | None:
    """What the monitor knows of the whole target, beyond any one session:
    whether it has shown execution and step events at all (a check of one
    session reads them). None for a monitor without the tracker: no
    reduction."""
    tracker = getattr(monitor, "tracker", None)
    if tracker is None:
        return None
    return (tracker.emits_exec, tracker.emits_steps)


def canonical(action: Action, key: Any) -> tuple[Any, ...]:
    """An eligible action as the merge key names things: its session by
    rank, its input ID by the local name the key gave it (or ``fresh``), the
    rest of its label as it is. Two states with one key (untied) give their
    corresponding actions one canonical form."""
    session = action.session
    assert session is not None
    ident = action.ident
    label = action.label
    if ident is None:
        name: Any = None
    else:
        local = key.names.get(session, {}).get(ident)
        name = "fresh" if local is None else local
        label = label.replace(ident, "#")
    return (key.ranks[session], label.replace("(" + session, "(@", 1), name)
