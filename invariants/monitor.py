"""The online monitor and the offline check of a whole trace.

For each step the monitor runs, in this order: the tracker's ``begin``; the
checkers' ``begin`` hooks for that request type; for each event, the
checkers' ``event`` hooks for that event type, then the tracker folds the
event; the tracker applies the step's views and open calls; the checkers'
``end`` hooks; the tracker settles its volatile drain facts. Dispatch
tables are built per request and event type, so a step costs only the
hooks that care about it.

``check_trace`` is the same monitor fed a stored trace from start to end:
a checker's verdict never depends on when it is asked, only on the steps.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from ..model.policy import Policy
from ..trace.record import Step, Trace
from .admission import (
    BeforeWakeChecker,
    FreshIdChecker,
    OmittedIdChecker,
    ProjectionChecker,
    ReceiptChecker,
)
from .barrier import BarrierEventChecker, CoalesceChecker
from .base import CRASHED, EVENTS, MOVES, OPENED, PROMOTED, VIEWS, Checker, Env, Violation
from .delivery import AdmissionOrderChecker, AllowanceChecker, BoundaryContentChecker
from .durability import DurabilityChecker, ReplayChecker, RestartChecker
from .execution import (
    CompactionErrorChecker,
    FollowUpChecker,
    IndependenceChecker,
    InterruptChecker,
    LifecycleChecker,
    SingleExecutionChecker,
    WakeChecker,
)
from .history import ForkChecker, RevertChecker
from .liveness import LivenessChecker
from .promotion import AtomicChecker, BoundaryChecker, PromotionEventChecker
from .registry import REGISTRY, expected
from .retry import ConcurrentRetryChecker, ErrorChecker, ReuseChecker
from .sequence import SequenceChecker
from .tracker import Tracker
from .transcript import ContextChecker, NotHistoryChecker, TranscriptViewChecker

CHECKERS: tuple[type[Checker], ...] = (
    SequenceChecker,
    FreshIdChecker,
    ProjectionChecker,
    ReceiptChecker,
    OmittedIdChecker,
    BeforeWakeChecker,
    ReuseChecker,
    ConcurrentRetryChecker,
    ErrorChecker,
    PromotionEventChecker,
    AtomicChecker,
    BoundaryChecker,
    BoundaryContentChecker,
    AdmissionOrderChecker,
    AllowanceChecker,
    BarrierEventChecker,
    CoalesceChecker,
    NotHistoryChecker,
    TranscriptViewChecker,
    ContextChecker,
    ReplayChecker,
    RestartChecker,
    DurabilityChecker,
    WakeChecker,
    SingleExecutionChecker,
    LifecycleChecker,
    FollowUpChecker,
    IndependenceChecker,
    CompactionErrorChecker,
    InterruptChecker,
    ForkChecker,
    RevertChecker,
    LivenessChecker,
)


_EVERY = frozenset(i for cls in CHECKERS for i in cls.ids)
"""Every id a checker can hit."""


class MonitorLike(Protocol):
    """What the harness asks of a monitor (this module's :class:`Monitor`,
    or a checkers' module named with ``--checkers``): judge each step, then
    the run's end; the invariants it could judge."""

    exercised: set[str]

    def feed(self, step: Step) -> list[Any]: ...

    def finish(self, liveness: bool) -> list[Any]: ...


MonitorFactory = Callable[[Policy, dict[str, Any]], MonitorLike]
"""How a run makes its monitor from the policy and the target's hello."""

Plan = tuple[tuple[Callable[..., None], int], ...]
"""A hook table's entry: the hooks to call, each as (its class's function,
the position of its checker in the monitor)."""


class Tables:
    """The hook tables (``begin``, ``event``, ``end``, ``end_async``, each by
    request or event type; the last two first by what the step moved, as
    :data:`~inboxsim.invariants.base.EVENTS` and the like) of every monitor
    with these checker classes, for
    the steps of concurrent groups (``grouped``) or for the others, filled on
    demand by :func:`_plan`. A monitor and all its clones share them (the
    explorer clones one per transition): the tables hold functions and
    positions, not methods bound to one monitor's checkers."""

    __slots__ = ("kinds", "grouped", "begin", "event", "end", "end_async")

    def __init__(self, kinds: tuple[type[Checker], ...], grouped: bool) -> None:
        self.kinds = kinds
        self.grouped = grouped
        self.begin: dict[Any, Plan] = {}
        self.event: dict[Any, Plan] = {}
        self.end: list[dict[Any, Plan]] = [{} for _ in range(MOVES)]
        self.end_async: list[dict[Any, Plan]] = [{} for _ in range(MOVES)]  # a busy member's end


_TABLES: dict[tuple[tuple[type[Checker], ...], bool], Tables] = {}


def _tables(kinds: tuple[type[Checker], ...], grouped: bool) -> Tables:
    """The one :class:`Tables` of these checker classes, grouped or not."""
    tables = _TABLES.get((kinds, grouped))
    if tables is None:
        tables = _TABLES[kinds, grouped] = Tables(kinds, grouped)
    return tables


STILL = "still"
REFUSED = "refused"
UNANSWERED = "unanswered"
"""The ``begin``, ``end`` and ``end_async`` tables hold the plan of a step
that moved nothing under ``(request type, STILL)``, or ``(request type,
REFUSED)`` if it was refused: without the checkers that have nothing to
judge there (``Checker.moved_only``, ``still``, ``refused``, ``answered``,
``refused_only``); and that of a step that moved but was not answered with
a result (refused, crashed, its reply unseen) under ``(request type,
UNANSWERED)``: without the ``Checker.answered`` ones. A step that moved and
was answered, under its request type alone, leaves out the
``Checker.refused_only`` ones."""


def _judges_still(cls: type[Checker], op: Any, refused: bool) -> bool:
    """Does a checker's ``end`` judge a step of request type ``op`` that
    moved nothing (refused or not)?"""
    if cls.moved_only or (refused and cls.answered):
        return False
    types = cls.refused if refused else cls.still
    return types is None or op in types


def _plan(tables: Tables, name: str, kind: Any, moved: int = 0) -> Plan:
    """Which hooks table ``name`` calls for one request type (``begin``,
    ``end``, ``end_async``; ``(type, STILL)`` or ``(type, REFUSED)`` for a
    step that moved nothing, ``(type, UNANSWERED)`` for one that moved
    without a result) or event type (``event``): those of the checkers
    whose class defines the hook and cares about that type (on a step that
    moved nothing, whose ``end`` judges it; on one without a result, not
    ``answered`` ones; on any but a refused or unanswered one, not
    ``refused_only`` ones: a ``begin`` prepares its checker's ``end``), leaving
    out the ``grouped_only`` ones from the tables of steps in no group, and
    from an ``end`` those whose ``Checker.moves`` the step did not move
    (``moved``). The same for every monitor with these checker classes, so
    computed once."""
    ends = name in ("end", "end_async")
    table: dict[Any, Plan] = getattr(tables, name)[moved] if ends else getattr(tables, name)
    plan = table.get(kind)
    if plan is None:
        chosen: list[tuple[Callable[..., None], int]] = []
        marked = type(kind) is tuple
        op = kind[0] if marked else kind
        unanswered = marked and kind[1] == UNANSWERED
        still = marked and not unanswered
        refused = still and kind[1] == REFUSED
        for i, cls in enumerate(tables.kinds):
            if cls.grouped_only and not tables.grouped:
                continue
            if name == "end_async":  # a busy group member's end: the checkers not quiescent
                if cls.quiescent or cls.end is Checker.end:
                    continue
            elif getattr(cls, name) is getattr(Checker, name):
                continue  # the base's no-op: never called
            if ends and cls.moves and not cls.moves & moved:
                continue
            if name != "event":
                if unanswered and cls.answered:
                    continue
                if cls.refused_only and not (unanswered or refused):
                    continue  # an answer, or a still step not refused
                if still and cls.end is not Checker.end and not _judges_still(cls, op, refused):
                    continue
            cares = cls.events if name == "event" else cls.ops
            if cares is None or (op is not None and op in cares):
                chosen.append((getattr(cls, "end" if name == "end_async" else name), i))
        plan = table[kind] = tuple(chosen)
    return plan


_TABLE_ATTRIBUTES = ("_solo", "_grouped")
_SHARED = frozenset({*_TABLE_ATTRIBUTES, "_kinds", "_sharing", "policy", "enabled"})
"""What a monitor's copies share: its hook tables, checker classes, which
checkers they share, policy and enabled ids (never changed in place)."""

Sharing = tuple[tuple[int, ...], tuple[int, ...]]
"""Which checkers a monitor's copies share, and which they copy (positions)."""


def _sharing(checkers: list[Checker]) -> Sharing:
    """The stateless checkers (:meth:`Checker.stateless`: 25 of the 33) are
    shared by a monitor and its copies, bound to the monitor that feeds
    them before each step; the others are copied. Decided once, when the
    monitor is made: a checker sets all its attributes in ``__init__``
    (``tests/test_canon.py`` checks that a stateless one stays so)."""
    shared = tuple(i for i, c in enumerate(checkers) if c.stateless())
    return shared, tuple(i for i in range(len(checkers)) if i not in shared)


_ALL = frozenset(REGISTRY)
"""Every invariant's id: what a monitor judges by default."""

_LINEUPS: dict[tuple[tuple[type[Checker], ...], frozenset[str]], tuple[type[Checker], ...]] = {}
"""The checker classes a monitor runs, by :data:`CHECKERS` (a test swaps
them) and its enabled ids: a sweep makes a monitor per seed, always with
the same ones, so they are chosen once."""

_SHARINGS: dict[tuple[type[Checker], ...], Sharing] = {}
""":func:`_sharing` by checker classes: a checker class sets the same
attributes in every ``__init__``, so its monitors all share alike."""


_FINISHERS: dict[tuple[type[Checker], ...], tuple[int, ...]] = {}


def _finishers(kinds: tuple[type[Checker], ...], checkers: list[Checker]) -> tuple[int, ...]:
    """The positions of the checkers whose class has a ``finish`` of its own
    (the base's does nothing): 1 of 33, and the explorer finishes a monitor
    for every new key."""
    found = _FINISHERS.get(kinds)
    if found is None:
        found = _FINISHERS[kinds] = tuple(
            i for i, c in enumerate(checkers) if type(c).finish is not Checker.finish
        )
    return found


def _lineup(enabled: frozenset[str]) -> tuple[type[Checker], ...]:
    """The checker classes with an enabled id, in :data:`CHECKERS` order."""
    key = (CHECKERS, enabled)
    kinds = _LINEUPS.get(key)
    if kinds is None:
        kinds = _LINEUPS[key] = tuple(cls for cls in CHECKERS if enabled.intersection(cls.ids))
    return kinds


class Monitor:
    """Judges a run step by step; see the module docstring.

    By default every invariant is judged, so that a run shows where a policy
    departs from the seed's decided design (a sweep of ``g2`` must fail on
    visible timestamps); ``only_expected=True`` judges only the invariants
    the policy is expected to keep. ``invariants`` narrows the run to the
    given ids.
    """

    def __init__(
        self,
        policy: Policy,
        hello: dict[str, Any],
        only_expected: bool = False,
        invariants: Iterable[str] | None = None,
    ) -> None:
        enabled = expected(policy) if only_expected else _ALL
        if invariants is not None:
            wanted = frozenset(invariants)
            unknown = wanted - _ALL
            if unknown:
                raise ValueError(f"unknown invariant(s): {', '.join(sorted(unknown))}")
            enabled &= wanted
        self.policy = policy
        self.enabled = enabled
        self.tracker = Tracker(policy, dict(hello))
        self._env = Env(policy, self.tracker, enabled, _EVERY)
        self.exercised: set[str] = self._env.exercised
        """Ids of the invariants that reached a step where they could have failed."""
        kinds = self._kinds = _lineup(enabled)
        self.checkers = [cls(self._env) for cls in kinds]
        sharing = _SHARINGS.get(kinds)
        if sharing is None:
            sharing = _SHARINGS[kinds] = _sharing(self.checkers)
        self._sharing = sharing
        self._bind_tables()
        self._finished: list[Violation] | None = None

    def _bind_tables(self) -> None:
        """The hook tables shared by every monitor with these checkers (:func:`_tables`)."""
        self._solo = _tables(self._kinds, False)
        self._grouped = _tables(self._kinds, True)

    def __deepcopy__(self, memo: dict[int, Any]) -> Monitor:
        """A copy that judges on independently (the explorer keeps one per
        search node). The hook tables are shared (:func:`_tables`)."""
        self._bind_checkers()
        clone = Monitor.__new__(Monitor)
        memo[id(self)] = clone
        for name, value in self.__dict__.items():
            if name in _SHARED:
                setattr(clone, name, value)
            else:
                setattr(clone, name, copy.deepcopy(value, memo))
        return clone

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the hook tables (functions, shared per process),
        its shared checkers bound to it."""
        self._bind_checkers()
        return {n: v for n, v in self.__dict__.items() if n not in _TABLE_ATTRIBUTES}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._bind_tables()

    def clone(self) -> Monitor:
        """A copy that judges on independently, taken between steps: the
        tracker's and each checker's ``clone``; the hook tables are shared.
        What the explorer copies per transition (several times cheaper than
        ``pickle`` or ``deepcopy``)."""
        if self._finished is not None:
            raise RuntimeError("the monitor has finished; start a new one")
        clone = Monitor.__new__(Monitor)
        clone.policy = self.policy
        clone.enabled = self.enabled
        clone.tracker = self.tracker.clone()
        clone._env = env = self._env.clone(clone.tracker)
        clone.exercised = env.exercised
        clone.checkers = checkers = self.checkers.copy()
        for i in self._sharing[1]:
            checkers[i] = checkers[i].clone(env)
        clone._kinds = self._kinds
        clone._sharing = self._sharing
        clone._solo, clone._grouped = self._solo, self._grouped
        clone._finished = None
        return clone

    def _bind_checkers(self) -> None:
        """Bind the checkers shared with this monitor's copies (stateless:
        :func:`_sharing`) to this monitor's ``env`` and tracker, unless the
        last monitor to use them was this one (they are bound together)."""
        shared = self._sharing[0]
        if not shared:
            return
        checkers, env = self.checkers, self._env
        if checkers[shared[0]].env is env:
            return
        tracker = self.tracker
        for i in shared:
            c = checkers[i]
            c.env = env
            c.t = tracker

    def feed(self, step: Step) -> list[Violation]:
        """Judge one step; returns the violations it revealed."""
        if self._finished is not None:
            raise RuntimeError("the monitor has finished; start a new one")
        tracker = self.tracker
        request = step.request
        op_type = type(request) if request is not None else None
        checkers = self.checkers
        shared = self._sharing[0]
        if shared and checkers[shared[0]].env is not self._env:
            self._bind_checkers()  # another copy fed them last
        ctx = tracker.begin(step)
        observed = step.observed
        events = observed.events
        moved = (
            events
            or observed.pending
            or observed.transcript
            or observed.calls is not None
            or ctx.crashed
        )
        if moved:
            key = op_type if ctx.ok else (op_type, UNANSWERED)
        else:
            key = (op_type, REFUSED if ctx.err else STILL)
        tables = self._solo if ctx.group is None else self._grouped
        begin = tables.begin.get(key)
        if begin is None:
            begin = _plan(tables, "begin", key)
        for hook, i in begin:
            hook(checkers[i], ctx)
        if events:
            table = tables.event
            index = ctx.index
            for ev in events:
                sh = tracker.writable(ev.session, index)  # the shadow ``apply`` changes
                hooks = table.get(ev.type)
                if hooks is None:
                    hooks = _plan(tables, "event", ev.type)
                for event_hook, i in hooks:
                    event_hook(checkers[i], ctx, ev, sh)
                tracker.apply(ctx, ev, sh)
        # A step that moved nothing and was not answered (refused, or its reply
        # unseen; a third of a sweep's steps) has no view, call or session to apply.
        if moved or ctx.ok:
            tracker.observe(ctx)
        # what moved, for the end hooks that judge only some of it (Checker.moves)
        facts = (
            (
                (EVENTS if events else 0)
                | (VIEWS if ctx.view_changes else 0)
                | (OPENED if ctx.new_calls else 0)
                | (PROMOTED if ctx.promoted else 0)
                | (CRASHED if ctx.crashed else 0)
            )
            if moved
            else 0
        )
        # a group member while the runner worked (a crash ends that work)
        if (ctx.runner_busy or ctx.busy_before) and not ctx.crashed:
            end = tables.end_async[facts].get(key)
            if end is None:
                end = _plan(tables, "end_async", key, facts)
        else:
            end = tables.end[facts].get(key)
            if end is None:
                end = _plan(tables, "end", key, facts)
        for hook, i in end:
            hook(checkers[i], ctx)
        if moved or ctx.ok or ctx.answered is not None:
            tracker.settle(ctx)  # else no drain fact can change
        found = self._env.found
        self._env.found = []
        return found

    def finish(self, liveness: bool) -> list[Violation]:
        """End the run. ``liveness``: the run ended with a liveness phase that
        settled or hit its bound, so liveness invariants are judged now."""
        if self._finished is None:
            self._bind_checkers()
            checkers = self.checkers
            for i in _finishers(self._kinds, checkers):
                checkers[i].finish(liveness)
            self._finished = self._env.found
            self._env.found = []
        return list(self._finished)


def check_trace(
    trace: Trace,
    policy: Policy,
    liveness: bool,
    only_expected: bool = False,
    invariants: Iterable[str] | None = None,
) -> list[Violation]:
    """Judge a whole stored trace; the same verdicts as feeding a
    :class:`Monitor` step by step."""
    monitor = Monitor(policy, trace.header.hello, only_expected, invariants)
    found: list[Violation] = []
    for step in trace.steps:
        found.extend(monitor.feed(step))
    found.extend(monitor.finish(liveness))
    return found
