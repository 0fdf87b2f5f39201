"""What every checker shares: the violation value, the policy predicate an
invariant is expected under, and the checker base class with its hooks.

A checker is a small object with private incremental state. The monitor
calls its hooks in a fixed order for every trace step (see
:mod:`inboxsim.invariants.monitor`), always with the shared
:class:`~inboxsim.invariants.tracker.Tracker` already holding what was
observed before that point. Hooks never do I/O and never look at anything
but the step and the tracker, so the same checkers judge a real
implementation through an adapter.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from ..model.policy import Policy

if TYPE_CHECKING:
    from ..model.values import Event
    from .tracker import SessionShadow, StepCtx, Tracker


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken invariant: its id, the trace steps that prove it, and what
    happened, said in the inbox's words."""

    invariant: str
    steps: tuple[int, ...]
    message: str


@dataclass(frozen=True, slots=True)
class When:
    """The policies under which an invariant is expected to hold, as a
    predicate on policy fields (never on preset names). ``When()`` holds
    under every policy; ``When(visible_time=("promotion",))`` only where that
    field has one of the listed values."""

    fields: tuple[tuple[str, tuple[Any, ...]], ...] = ()

    @staticmethod
    def of(**choices: tuple[Any, ...] | Any) -> When:
        items = []
        for name, allowed in sorted(choices.items()):
            if name not in Policy.__dataclass_fields__:
                raise ValueError(f"Policy has no field {name!r}")
            items.append((name, tuple(allowed) if isinstance(allowed, tuple) else (allowed,)))
        return When(tuple(items))

    def __call__(self, policy: Policy) -> bool:
        return all(getattr(policy, name) in allowed for name, allowed in self.fields)

    def __str__(self) -> str:
        if not self.fields:
            return "every policy"
        return " and ".join(
            f"{name} = {' or '.join(map(str, allowed))}" for name, allowed in self.fields
        )


class Env:
    """What a checker reports through: the enabled ids, the violations of the
    current step, and the set of exercised invariants.

    ``hit`` runs hundreds of times per run: when every id a checker can hit
    (``every``) is enabled, it is the exercised set's own ``add``, with no
    Python frame of its own; otherwise it filters by the enabled ids."""

    __slots__ = ("policy", "tracker", "enabled", "found", "exercised", "hit", "_every")

    def __init__(
        self,
        policy: Policy,
        tracker: Tracker,
        enabled: frozenset[str],
        every: frozenset[str] | None = None,
    ) -> None:
        self.policy = policy
        self.tracker = tracker
        self.enabled = enabled
        self.found: list[Violation] = []
        self._every = every
        self._exercise(set())

    def _exercise(self, exercised: set[str]) -> None:
        self.exercised = exercised
        self.hit: Callable[[str], None] = (
            exercised.add
            if self._every is not None and self._every <= self.enabled
            else self._hit_enabled
        )

    def fail(
        self, invariant: str, steps: tuple[int, ...] | list[int] | set[int], message: str
    ) -> None:
        if invariant in self.enabled:
            ordered = tuple(sorted({s for s in steps if s is not None and s >= 0}))
            self.found.append(Violation(invariant, ordered, message))

    def __getstate__(self) -> dict[str, Any]:
        """Copied and pickled without ``hit``, which is rebound to the copy's set."""
        return {name: getattr(self, name) for name in self.__slots__ if name != "hit"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            if name != "exercised":
                setattr(self, name, value)
        self._exercise(state["exercised"])

    def _hit_enabled(self, invariant: str) -> None:
        """Record that ``invariant`` reached a point where it could have failed."""
        if invariant in self.enabled:
            self.exercised.add(invariant)

    def clone(self, tracker: Tracker) -> Env:
        """A copy over ``tracker`` (the copy's), between steps (nothing found)."""
        env = Env.__new__(Env)
        env.policy, env.tracker, env.enabled = self.policy, tracker, self.enabled
        env.found, env._every = [], self._every
        env.exercised = exercised = self.exercised.copy()
        # the same choice of ``hit`` as this one's (:meth:`_exercise`), not made again
        env.hit = exercised.add if self.hit == self.exercised.add else env._hit_enabled
        return env


EVENTS = 1
VIEWS = 2
OPENED = 4
PROMOTED = 8
CRASHED = 16
"""What a step moved, as bits (``Checker.moves``): an event appended, a
pending or transcript view shown, a model call opened, an input promoted,
a crash."""
MOVES = 32
"""How many combinations of those bits there are."""


class Checker:
    """Base of the checkers. Subclasses list the invariant ``ids`` they
    report, the request types whose steps they ``begin``/``end`` on
    (``ops = None``: every step, crashes included), the event types they
    see (``events``; ``None``: every event), and the attributes that are
    ``step_scoped``. A hook left as the base's no-op is never called."""

    ids: ClassVar[tuple[str, ...]] = ()
    ops: ClassVar[tuple[type, ...] | None] = None
    events: ClassVar[tuple[str, ...] | None] = ()
    quiescent: ClassVar[bool] = False
    """Its ``end`` judges what a step shows once the target is quiescent
    again (a wake's execution, a boundary's call, a session gone idle), as
    every sequential step is. A member of a concurrent group that did not
    start and end quiescent (``StepCtx.busy_before``, ``runner_busy``: the
    runner was mid-drain) is not judged by it; its other hooks still run."""
    moved_only: ClassVar[bool] = False
    """Its ``end`` judges only what a step moved: on a step that moved
    nothing (no event, no view, no call opened or closed, no crash: a
    read, a refused request, a retry answered from its receipt; most
    steps of a sweep) it would neither hit, nor fail, nor change its
    memory, so the monitor does not call it there. Its other hooks
    still run."""
    moves: ClassVar[int] = 0
    """Finer than ``moved_only``: its ``end`` judges only a step that moved
    one of these (:data:`EVENTS`, :data:`VIEWS`, :data:`OPENED`,
    :data:`PROMOTED`, :data:`CRASHED`, or'd; 0: whatever moved): on any
    other step it would neither hit, nor fail, nor change its memory, so
    the monitor does not call it there (a moved step's ``end`` calls were
    most of its dispatch). It has no ``begin`` (one would prepare for an
    ``end`` that may not come); its ``event`` hooks still run."""
    still: ClassVar[tuple[type, ...] | None] = None
    """On a step that moved nothing and was answered (not refused), the
    request types whose steps its ``end`` still judges; on any other such
    step it would neither hit, nor fail, nor change its memory, so the
    monitor calls neither its ``end`` nor its ``begin`` there (``None``:
    every type its ``ops`` name; ``moved_only``: none)."""
    refused: ClassVar[tuple[type, ...] | None] = None
    """The same for a step that moved nothing and was refused (an error
    reply): a refused request did nothing, so most checkers of what a
    request did have nothing to judge there (``()``)."""
    answered: ClassVar[bool] = False
    """Its ``end`` judges only a request answered with a result
    (``StepCtx.ok``): on a refused or crashed step, or one whose reply was
    unseen, it would neither hit, nor fail, nor change its memory, whatever
    the step moved, so the monitor calls neither its ``end`` nor its
    ``begin`` there (its ``event`` hooks still run; ``refused`` is moot)."""
    refused_only: ClassVar[bool] = False
    """Its ``end`` judges only a refused request (``StepCtx.err``): on any
    other step it would neither hit, nor fail, nor change its memory, so
    the monitor calls neither its ``end`` nor its ``begin`` there."""
    grouped_only: ClassVar[bool] = False
    """It judges only the members of a concurrent group (``StepCtx.group``):
    on any other step (every step of a sequential run) none of its hooks
    would hit, fail or change its memory, so the monitor calls none there."""
    step_scoped: ClassVar[tuple[str, ...]] = ()
    """Attributes that live for one step only: assigned before any read in
    every step that reads them, dead once the step ends. The explorer's
    merge key (``search/canon.py``) leaves them out; every other attribute is
    memory that later steps read. ``tests/test_canon.py`` poisons these
    between steps to show that no later step reads them."""

    def __init__(self, env: Env) -> None:
        self.env = env
        self.t = env.tracker
        self.policy = env.policy

    def begin(self, ctx: StepCtx) -> None:
        """Before the step's events are applied: the tracker shows the state
        at the start of the step."""

    def event(self, ctx: StepCtx, ev: Event, sh: SessionShadow) -> None:
        """Before ``ev`` is applied to its session's shadow ``sh``."""

    def end(self, ctx: StepCtx) -> None:
        """After every event, view and call of the step is applied."""

    def finish(self, liveness: bool) -> None:
        """At the end of the run."""

    def __getstate__(self) -> dict[str, Any]:
        """Pickled and deep-copied without its ``step_scoped`` attributes:
        dead between steps (each step assigns them before any read), and a
        stateless checker shared by a monitor's copies holds the last step
        any of them judged (:meth:`stateless`)."""
        scoped = type(self).step_scoped
        if not scoped:
            return self.__dict__
        return {n: v for n, v in self.__dict__.items() if n not in scoped}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        for name in type(self).step_scoped:
            self.__dict__.setdefault(name, None)

    def stateless(self) -> bool:
        """Has it no memory between steps (every attribute besides the
        base's is ``step_scoped``)? Then a monitor's copies may share it,
        binding it to their ``env`` and tracker before each step they feed
        (``invariants/monitor.py``), instead of copying it."""
        scoped = type(self).step_scoped
        return all(n in _BASE_ATTRIBUTES or n in scoped for n in self.__dict__)

    def clone(self, env: Env) -> Checker:
        """A copy that judges on independently, over ``env`` (the copy's),
        taken between steps. Memory is copied one level deep: a checker keeps
        containers of values that are never changed in place (rows, events,
        IDs, step indexes); one whose memory nests deeper overrides this.
        ``tests/test_canon.py`` feeds copies and checks that the original
        does not change."""
        cls = type(self)
        new = object.__new__(cls)
        mine = self.__dict__
        memory = mine.copy()  # a dict's copy, then given whole: cheaper than filling the new one's
        memory["env"] = env
        memory["t"] = env.tracker
        found = _MEMORY_NAMES.get(cls)
        if found is None or found[0] != len(mine):
            found = _memory_names(cls, mine)
        for name in found[1]:
            value = memory[name]
            kind = type(value)
            if kind is dict or kind is list or kind is set:
                memory[name] = value.copy()
        new.__dict__ = memory
        return new


_BASE_ATTRIBUTES = frozenset({"env", "t", "policy"})
_MEMORY_NAMES: dict[type, tuple[int, tuple[str, ...]]] = {}


def _memory_names(cls: type, attributes: dict[str, Any]) -> tuple[int, tuple[str, ...]]:
    """A checker's own attributes (its memory), besides what the base gives
    every checker and its ``step_scoped`` ones (dead between steps: each step
    assigns them before any read, so a copy may share them): computed once
    per class, again if the number of its attributes changed (a checker sets
    all of them in ``__init__``, never deletes one; most checkers have none)."""
    scoped = getattr(cls, "step_scoped", ())
    names = tuple(n for n in attributes if n not in _BASE_ATTRIBUTES and n not in scoped)
    found = _MEMORY_NAMES[cls] = (len(attributes), names)
    return found
