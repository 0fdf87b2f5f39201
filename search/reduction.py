"""The explorer's partial-order reduction: which actions commute, so that a
sleep set may hold one aside (:mod:`.explore` keeps the sleep sets).

- **Independence** (:func:`commutes`; docs/explorer.md states the
  argument). Two actions judged at a state are independent there when
  both are requests on different sessions (the kill is no session's), neither
  reuses an ended ID (the one family that reads another session's entries
  of the shared ID index), each was judged clean and changed neither of the
  monitor's global :func:`facts`, and, where one of them crashes the process
  (a failpoint variant), the other's session is :func:`quiet` before and
  after the other: a crash ends runs, open calls and drain facts in every
  session, and there are none there to end. Such a pair commutes modulo
  the merge key: either order reaches one key, each action as clean after
  the other (``tests/test_explore_reduction.py``).
- **Sleep sets.** At a node, a clean action *b* sleeps in the child of a
  clean action *a* when the two are independent there and *b* comes before
  *a* in the :func:`rank` order (equal ranks: neither): the child does not
  judge *b*, since the node's child of *b* judges *a*. A key reached by
  several paths of one level sleeps what any of them would (the union);
  an asleep action does not stay asleep in a child. Why that is sound
  (each action held aside leads, through actions of strictly larger rank,
  to a judged transition with the same verdict and child key) is written
  in docs/explorer.md. Sleep sets remove transitions, never keys: the same
  keys level by level, the same shortest violations.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .world import REUSE, Action


def eligible(action: Action) -> bool:
    """May this action commute with another session's? A request on one
    session (a failpoint variant too: :func:`commutes` says when) that does
    not touch the ID namespace another session reads (the reuse of an ended
    ID)."""
    return action.session is not None and action.family != REUSE


def independent(a: Action, b: Action) -> bool:
    """The actions' structural independence: both eligible, on different
    sessions. :func:`commutes` adds what the state must show."""
    return eligible(a) and eligible(b) and a.session != b.session


def commutes(a: Action, a_quiet: bool, b: Action, b_quiet: bool) -> bool:
    """Two actions judged clean at a state, neither changing its
    :func:`facts`: are they independent there? ``a_quiet``: ``a``'s session
    was :func:`quiet` before and after ``a`` (likewise ``b_quiet``). A
    failpoint variant ends every session's run, open call and drain facts:
    it commutes with an action whose session has none, before or after."""
    if not independent(a, b):
        return False
    return (a.crash_at is None or b_quiet) and (b.crash_at is None or a_quiet)


def sleeps_in(b: Action, b_quiet: bool, a: Action, a_quiet: bool) -> bool:
    """Does ``b`` sleep in the child of ``a`` (both judged clean at the node,
    neither changing its facts)? When they commute there and ``b`` ranks
    strictly before ``a``."""
    return commutes(a, a_quiet, b, b_quiet) and rank(b) < rank(a)


def facts(monitor: Any) -> tuple[bool, bool] | None:
    """What the monitor knows of the whole target, beyond any one session:
    whether it has shown execution and step events at all (a check of one
    session reads them). None for a monitor without the tracker: no
    reduction."""
    tracker = getattr(monitor, "tracker", None)
    if tracker is None:
        return None
    return (tracker.emits_exec, tracker.emits_steps)


def quiet(state: Any, monitor: Any, session: str | None) -> bool:
    """Nothing of the session that a crash would end: no run in the model;
    in the monitor no open call, no open execution and no volatile drain
    fact (the tracker resets exactly these on a crash)."""
    if session is None or session in state.runs:
        return False
    tracker = monitor.tracker
    if session in tracker.open:
        return False
    shadow = tracker.sessions.get(session)
    if shadow is None:
        return True
    return (
        not shadow.exec_open
        and shadow.cont is None
        and shadow.last_step is None
        and shadow.doorbell is None
        and not shadow.doorbell_kept
        and not shadow.bg
    )


def quiet_sessions(state: Any, monitor: Any, sessions: Iterable[str]) -> frozenset[str]:
    return frozenset(s for s in sessions if quiet(state, monitor, s))


def rank(action: Action) -> str:
    """An eligible action's label with its session written ``@`` and its
    input ID ``#``: what the merge key's renaming keeps of it besides its
    session's rank and its input's local name. Corresponding actions of two
    states with one key have one rank, so the order it sets is the same
    wherever a pair of actions is met (the soundness argument needs that)."""
    session = action.session
    assert session is not None
    label = action.label
    if action.ident is not None:
        label = label.replace(action.ident, "#")
    return label.replace("(" + session, "(@", 1)


def canonical(action: Action, key: Any) -> tuple[Any, ...]:
    """An eligible action as the merge key names things: its session by
    rank, its input ID by the local name the key gave it (or ``fresh``), the
    rest of its label as :func:`rank` writes it. Two states with one key
    (untied) give their corresponding actions one canonical form."""
    session = action.session
    assert session is not None
    name: Any = None
    if action.ident is not None:
        local = key.names.get(session, {}).get(action.ident)
        name = "fresh" if local is None else local
    return (key.ranks[session], rank(action), name)
