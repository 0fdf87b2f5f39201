"""The workload: what the clients ask of the target next, during the safety phase.

A run has a few sessions and a few clients. Each step the workload picks an
operation family by the seed's swarm weights (among the families that can act
on what the harness currently knows), then fills in the operation with further
choices: which session, an explicit ID from a small pool or none, steer or
queue, ``resume: false``, metadata, and whether the request is asked to crash
at a failpoint. Between requests it may also kill the target.

Clients remember what they sent, so the workload can resend a request exactly
(an exact retry), both after an unknown outcome (the request crashed: the
client cannot know whether it was admitted, so it retries, as a real client
would) and otherwise; and it can reuse an ID with something changed (another
text, metadata, delivery, session or kind), which the target must refuse.

The small ID pool makes retries and conflicts happen by accident as well as
on purpose.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, replace

from ..model import (
    Answer,
    Calls,
    Compact,
    Create,
    Fork,
    Interrupt,
    Log,
    Messages,
    Op,
    Pending,
    Prompt,
    Resume,
    RevertClear,
    RevertCommit,
    RevertStage,
    Synthetic,
)
from ..model.frozen import fast_init
from ..trace.view import View
from .rng import Chooser, cumulative
from .swarm import FAMILIES, FINISH, RACES, Races, Swarm

TEXTS = ("a", "b", "c")
METADATA: tuple[dict[str, int | float], ...] = (
    {"k": 1},
    {"k": 2},
    {"k": 1.0},
)  # 1 and 1.0 are the same JSON value
UNKNOWN_SESSION = "s-unknown"
CHILDREN = ("f1", "f2", "f3")
# Requests whose handling can reach a failpoint, and the failpoints each can
# reach: only these carry crash_at (a crash_at a request cannot reach would be
# a wasted fault).
REACHABLE = {
    Prompt: ("after_admit", "mid_promotion", "after_promotion"),
    Synthetic: ("after_admit", "mid_promotion", "after_promotion"),
    Compact: ("after_admit", "mid_promotion", "after_promotion"),
    Resume: ("mid_promotion", "after_promotion"),
    Answer: ("mid_promotion", "after_promotion"),
}
# The hello feature each optional family needs (adapter protocol, "Features").
NEEDS = {
    "synthetic": "synthetic",
    "compact": "compaction",
    "fork": "fork",
    "revert": "revert",
    "resume": "resume",
    "interrupt": "interrupt",
}
MEMORY = 12  # requests a client remembers
# The hello feature a race needs (a race without its feature is off; that
# the target serves groups at all is the run's to check), and the races that
# answer an open call.
RACE_NEEDS = {"compact.boundary": "compaction", "interrupt.answer": "interrupt"}
RACE_ANSWERS = frozenset({"steer.answer", "compact.boundary", "interrupt.answer"})
# A restriction an adapter may list among its hello features: its prompts take
# no metadata (OpenCode 1.18.33's prompt is {text, files, agents}). It is a
# restriction rather than a feature so that the model's hello, and with it
# every model trace and its hash, stays as it was.
NO_METADATA = "no_metadata"


@fast_init  # one per step (model/frozen.py)
@dataclass(frozen=True, slots=True)
class Action:
    """The workload's next move: a request (maybe asked to crash), or a kill
    between requests (``op`` is None)."""

    label: str
    op: Op | None
    crash_at: str | None = None


@dataclass(slots=True)
class Sent:
    """A request a client sent, and what it learned of its outcome."""

    op: Prompt | Synthetic | Compact
    outcome: str  # "ok", "err" or "unknown"


class Workload:
    """Chooses the safety phase's operations; see the module docstring."""

    __slots__ = (
        "swarm",
        "ch",
        "ids",
        "sessions",
        "sent",
        "_with_id",
        "unknown",
        "features",
        "_families",
        "_crash",
        "_menus",
        "_metadata_ok",
        "_conflicts",
        "_finish",
        "races",
        "_races",
        "group_kills",
    )

    def __init__(
        self,
        swarm: Swarm,
        ch: Chooser,
        features: Collection[str],
        races: Races | None = None,
        group_kills: bool = False,
    ) -> None:
        self.swarm = swarm
        self.races = races
        # The target records a kill mid-group as trace steps (the model; not
        # yet a lockstep target, whose members in flight have no step form).
        self.group_kills = group_kills
        self.ch = ch
        self.ids = tuple(f"u{i}" for i in range(1, swarm.id_pool + 1))
        self.sessions = tuple(f"s{i}" for i in range(1, swarm.sessions + 1))
        self.sent: list[list[Sent]] = [[] for _ in range(swarm.clients)]
        # How many of each client's remembered requests carry an ID (conflicts reuse one).
        self._with_id = [0] * swarm.clients
        # (client, index) of requests whose outcome is unknown, oldest first.
        self.unknown: list[tuple[int, Sent]] = []
        # The harness never sends an operation whose feature the target lacks.
        self.features = tuple(features)
        self._families = tuple(
            (family, weight)
            for family, weight in zip(FAMILIES, swarm.weights, strict=True)
            if weight > 0 and (family not in NEEDS or NEEDS[family] in self.features)
        )
        self._crash = {
            kind: tuple(p for p in points if p in swarm.failpoints)
            if "failpoints" in self.features
            else ()
            for kind, points in REACHABLE.items()
        }
        self._menus: dict[tuple[bool, bool, bool], tuple[tuple[str, ...], tuple[int, ...]]] = {}
        self._finish = cumulative(swarm.finish)  # the answers' weights, as running sums
        self._metadata_ok = NO_METADATA not in self.features
        # The ways a prompt's ID can be reused with something changed (see
        # _conflict_action): all five unless the target lacks metadata, or
        # both other kinds (synthetic and compaction).
        self._conflicts = tuple(
            how
            for how in range(5)
            if (how != 1 or self._metadata_ok)
            and (how != 4 or "synthetic" in self.features or "compaction" in self.features)
        )
        self._races: tuple[tuple[str, int], ...] = ()
        if races is not None:
            self._races = tuple(
                (race, weight)
                for race, weight in zip(RACES, races.weights, strict=True)
                if weight > 0 and RACE_NEEDS.get(race, "") in ("", *self.features)
            )

    # --- the next action ----------------------------------------------------

    def next(self, view: View, now: int) -> tuple[Action, int]:
        """The next action and the client that takes it (-1 for the harness)."""
        ch, swarm = self.ch, self.swarm
        if ch.chance(swarm.kill_rate):
            return Action("kill", None), -1
        if not view.sessions:
            return Action("create", Create(now, session=self.sessions[0])), 0
        client = ch.below(swarm.clients)
        sent = self.sent[client]
        # Which conditional families can act; the (names, weights' running
        # sums) for each of the eight combinations are built once per run.
        key = (bool(view.calls), bool(sent) or bool(self.unknown), self._with_id[client] > 0)
        menu = self._menus.get(key)
        if menu is None:
            menu = self._menus[key] = self._menu(*key)
        names, sums = menu
        action = _ACTS[names[ch.weighted_by(sums)]](self, view, now, client)
        points = self._crash.get(type(action.op), ())
        if points and ch.chance(swarm.failpoint_rate):
            action = Action(action.label, action.op, ch.pick(points))
        return action, client

    def race(self, view: View, now: int) -> tuple[str, list[Action]] | None:
        """A concurrent group for the next step, or None (a sequential step):
        with the seed's group rate, among the races that can act on what the
        harness knows, a group of 2 to ``concurrency`` requests on one session
        (see :data:`~.swarm.RACES`)."""
        ch, races = self.ch, self.races
        if races is None or not view.sessions or not ch.chance(races.rate):
            return None
        open_calls = {c.session: c for c in view.calls}
        menu = [(r, w) for r, w in self._races if r not in RACE_ANSWERS or open_calls]
        if not menu:
            return None
        race = menu[ch.weighted(tuple(w for _, w in menu))][0]
        size = 2 + ch.below(races.concurrency - 1)
        if race in RACE_ANSWERS:
            call = open_calls[ch.pick(sorted(open_calls))]
            session = call.session
            first = [Action("answer.stop", Answer(now, call=call.call, finish="stop"))]
        else:
            session = ch.pick(view.sessions)
            first = []
        ident = ch.pick(self.ids) if race.startswith("retry.") else ""
        actions = first + [
            self._racer(race, session, ident, now, k) for k in range(size - len(first))
        ]
        # A kill mid-group: one member carries a failpoint it can reach, at
        # the seed's failpoint rate, where the target serves it (a seed whose
        # rate is 0, or a target that does not, draws nothing more: the same
        # groups). A member dying in its own admission (``after_admit``) is a
        # failpoint step, as alone; a runner transition dying (``mid_promotion``,
        # ``after_promotion``) leaves its events to the member it works for and
        # the kill is a step of its own (``targets.target.ModelTarget.group_steps``).
        armed = [k for k, a in enumerate(actions) if self._crash.get(type(a.op))]
        rate = self.swarm.failpoint_rate
        if armed and self.group_kills and rate > 0 and ch.chance(rate):
            k = ch.pick(armed)
            point = ch.pick(self._crash[type(actions[k].op)])
            actions[k] = replace(actions[k], crash_at=point)
        return race, actions

    def _racer(self, race: str, session: str, ident: str, now: int, k: int) -> Action:
        """The ``k``-th request of a ``race`` group on ``session`` (besides its
        answer); the retry races' requests all name ``ident``."""
        ch = self.ch
        if race == "retry.exact" or (race == "retry.conflict" and k == 0):
            return Action("retry", Prompt(now, session=session, input=ident, text="a"))
        if race == "retry.conflict":
            if ch.chance(0.5):
                return Action("retry", Prompt(now, session=session, input=ident, text="a"))
            return Action("conflict.text", Prompt(now, session=session, input=ident, text="z"))
        if race == "compact.boundary" and k == 0:
            return Action("compact", Compact(now, session=session, input=None))
        if race == "interrupt.answer" and k == 0:
            return Action("interrupt", Interrupt(now, session=session))
        if race == "prompt.notice":
            # Notices and prompts from different sources, most without an ID
            # of their own: the target numbers them, in one admission order.
            own = None if ch.chance(0.5) else self._input_id()
            if "synthetic" in self.features and ch.chance(0.5):
                notice = Synthetic(now, session=session, input=own, text="done", delivery="steer")
                return Action("synthetic.background", notice)
            prompt = Prompt(now, session=session, input=own, text=ch.pick(TEXTS))
            return Action("prompt", prompt)
        prompt = Prompt(
            now,
            session=session,
            input=self._input_id(),
            text=ch.pick(TEXTS),
            delivery=self._delivery(),
        )
        return Action("prompt", prompt)

    def _menu(
        self, answer: bool, retry: bool, conflict: bool
    ) -> tuple[tuple[str, ...], tuple[int, ...]]:
        """The families that can act (answer needs an open call, retry a sent
        request, conflict a sent request with an ID) and their weights'
        running sums."""
        off = {
            name
            for name, on in (("answer", answer), ("retry", retry), ("conflict", conflict))
            if not on
        }
        menu = [(f, w) for f, w in self._families if f not in off]
        return tuple(f for f, _ in menu), cumulative([w for _, w in menu])

    def learn(self, client: int, action: Action, outcome: str) -> None:
        """Remember an admission request and its outcome (for retries)."""
        op = action.op
        if client < 0 or not isinstance(op, (Prompt, Synthetic, Compact)):
            return
        sent = Sent(op, outcome)
        memory = self.sent[client]
        memory.append(sent)
        with_id = self._with_id[client] + (op.input is not None)
        if len(memory) > MEMORY:
            with_id -= memory[0].op.input is not None
            del memory[0]
        self._with_id[client] = with_id
        if outcome == "unknown":
            self.unknown.append((client, sent))
            if len(self.unknown) > MEMORY:
                del self.unknown[0]

    # --- choices shared by the families --------------------------------------

    def _session(self, view: View) -> str:
        return self.ch.pick_or(self.swarm.unknown_session_rate, UNKNOWN_SESSION, view.sessions)

    def _input_id(self) -> str | None:
        return self.ch.pick_or(self.swarm.omit_id_rate, None, self.ids)

    def _metadata(self) -> dict[str, int | float] | None:
        if self._metadata_ok and self.ch.chance(self.swarm.metadata_rate):
            return self.ch.pick(METADATA)
        return None

    def _delivery(self) -> str | None:
        if self.ch.chance(self.swarm.queue_rate):
            return "queue"
        return "steer" if self.ch.chance(0.5) else None  # explicit or defaulted steer

    def _resume(self) -> bool | None:
        return False if self.ch.chance(self.swarm.no_resume_rate) else None

    # --- one method per family -------------------------------------------------

    def _create_action(self, view: View, now: int, client: int) -> Action:
        return Action("create", Create(now, session=self.ch.pick(self.sessions)))

    def _prompt_action(self, view: View, now: int, client: int) -> Action:
        ch = self.ch
        op = Prompt(
            now,
            session=self._session(view),
            input=self._input_id(),
            text=ch.pick(TEXTS),
            metadata=self._metadata(),
            delivery=self._delivery(),
            resume=self._resume(),
        )
        return Action("prompt", op)

    def _synthetic_action(self, view: View, now: int, client: int) -> Action:
        ch = self.ch
        if ch.chance(0.5):
            # A background completion: always a steer that wakes the session.
            op = Synthetic(
                now,
                session=self._session(view),
                input=self._input_id(),
                text="done",
                description="background",
                metadata={"job": ch.below(3)} if self._metadata_ok else None,
                delivery="steer",
            )
            return Action("synthetic.background", op)
        op = Synthetic(
            now,
            session=self._session(view),
            input=self._input_id(),
            text=ch.pick(TEXTS),
            metadata=self._metadata(),
            delivery=self._delivery(),
            resume=self._resume(),
        )
        return Action("synthetic", op)

    def _retry_action(self, view: View, now: int, client: int) -> Action:
        ch = self.ch
        if self.unknown and (not self.sent[client] or ch.chance(0.7)):
            # The client whose request crashed retries it; which one is
            # drawn from the oldest still unresolved.
            index = ch.below(len(self.unknown))
            _, sent = self.unknown.pop(index)
            label = "retry.unknown"
        else:
            sent = ch.pick(self.sent[client])
            label = "retry"
        return Action(label, _at(sent.op, now))

    def _conflict_action(self, view: View, now: int, client: int) -> Action:
        ch = self.ch
        candidates = [s.op for s in self.sent[client] if s.op.input is not None]
        old = ch.pick(candidates)
        # All five: one draw below 5, as always (model traces keep their hash).
        how = self._conflicts[ch.below(len(self._conflicts))]
        session = old.session
        if isinstance(old, Compact):
            # A compaction ID reused by a prompt: another kind.
            return Action("conflict.kind", Prompt(now, session=session, input=old.input, text="a"))
        if how == 0:  # another text
            text = "z" if old.text != "z" else "y"
            op: Op = _replace_text(old, now, text)
            label = "conflict.text"
        elif how == 1:  # other metadata
            meta = {"k": 9} if old.metadata != {"k": 9} else {"k": 8}
            op = _replace_metadata(old, now, meta)
            label = "conflict.metadata"
        elif how == 2:  # the other delivery
            delivery = "steer" if old.delivery == "queue" else "queue"
            op = _replace_delivery(old, now, delivery)
            label = "conflict.delivery"
        elif how == 3:  # another session
            others = [s for s in view.sessions if s != session] or [UNKNOWN_SESSION]
            op = _replace_session(old, now, ch.pick(others))
            label = "conflict.session"
        else:  # another kind
            if isinstance(old, Prompt) and "synthetic" in self.features:
                op = Synthetic(now, session=session, input=old.input, text=old.text)
            elif isinstance(old, Prompt):
                op = Compact(now, session=session, input=old.input)
            elif "compaction" not in self.features or ch.chance(0.5):
                op = Prompt(now, session=session, input=old.input, text=old.text)
            else:
                op = Compact(now, session=session, input=old.input)
            label = "conflict.kind"
        return Action(label, op)

    def _compact_action(self, view: View, now: int, client: int) -> Action:
        ch = self.ch
        if ch.chance(0.5):
            input_id = None
        else:
            # Mostly IDs of their own; sometimes one from the input pool.
            input_id = ch.pick(("c1", "c2", "c3")) if ch.chance(0.8) else ch.pick(self.ids)
        return Action("compact", Compact(now, session=self._session(view), input=input_id))

    def _answer_action(self, view: View, now: int, client: int) -> Action:
        ch = self.ch
        call = ch.pick(view.calls)
        finish = FINISH[ch.weighted_by(self._finish)]
        if ch.chance(0.02):
            return Action("answer.stale", Answer(now, call="call-0", finish=finish))
        return Action("answer." + finish, Answer(now, call=call.call, finish=finish))

    def _interrupt_action(self, view: View, now: int, client: int) -> Action:
        ch = self.ch
        if view.calls and ch.chance(0.7):
            session = ch.pick(view.calls).session
        else:
            session = self._session(view)
        return Action("interrupt", Interrupt(now, session=session))

    def _resume_action(self, view: View, now: int, client: int) -> Action:
        return Action("resume", Resume(now, session=self._session(view)))

    def _fork_action(self, view: View, now: int, client: int) -> Action:
        ch = self.ch
        parent = self._session(view)
        child = ch.pick(CHILDREN)
        how = ch.below(3)
        before: str | None = None
        label = "fork.whole"
        if how > 0:
            messages = view.transcript.get(parent, ())
            if messages and how == 1:
                before = ch.pick(messages).id
                label = "fork.before"
            else:
                before = "m-missing"
                label = "fork.missing"
        return Action(label, Fork(now, session=parent, child=child, before=before))

    def _revert_action(self, view: View, now: int, client: int) -> Action:
        ch = self.ch
        session = self._session(view)
        what = ch.below(4)
        if what <= 1:
            messages = view.transcript.get(session, ())
            message = ch.pick(messages).id if messages else "m-missing"
            return Action("revert.stage", RevertStage(now, session=session, message=message))
        if what == 2:
            return Action("revert.commit", RevertCommit(now, session=session))
        return Action("revert.clear", RevertClear(now, session=session))

    def _read_action(self, view: View, now: int, client: int) -> Action:
        ch = self.ch
        what = ch.below(4)
        session = self._session(view)
        if what == 0:
            return Action("read.calls", Calls(now))
        if what == 1:
            return Action("read.pending", Pending(now, session=session))
        if what == 2:
            return Action("read.messages", Messages(now, session=session))
        after = ch.below(8) - 1
        return Action("read.log", Log(now, session=session, after=after if after >= 0 else None))


# Each family's method, as the class's function: a workload keeping methods
# bound to itself would be a reference cycle, which keeps a run's requests
# alive until the cyclic collector runs.
_ACTS: dict[str, Callable[[Workload, View, int, int], Action]] = {
    family: getattr(Workload, "_" + family + "_action") for family in FAMILIES
}


def _at(op: Prompt | Synthetic | Compact, now: int) -> Op:
    """The same request, sent again at ``now``."""
    if isinstance(op, Prompt):
        return Prompt(
            now,
            op.session,
            op.input,
            op.text,
            op.files,
            op.agents,
            op.metadata,
            op.delivery,
            op.resume,
        )
    if isinstance(op, Synthetic):
        return Synthetic(
            now, op.session, op.input, op.text, op.description, op.metadata, op.delivery, op.resume
        )
    return Compact(now, op.session, op.input)


def _replace_text(op: Prompt | Synthetic, now: int, text: str) -> Op:
    if isinstance(op, Prompt):
        return Prompt(
            now,
            op.session,
            op.input,
            text,
            op.files,
            op.agents,
            op.metadata,
            op.delivery,
            op.resume,
        )
    return Synthetic(
        now, op.session, op.input, text, op.description, op.metadata, op.delivery, op.resume
    )


def _replace_metadata(op: Prompt | Synthetic, now: int, meta: dict[str, int]) -> Op:
    if isinstance(op, Prompt):
        return Prompt(
            now, op.session, op.input, op.text, op.files, op.agents, meta, op.delivery, op.resume
        )
    return Synthetic(
        now, op.session, op.input, op.text, op.description, meta, op.delivery, op.resume
    )


def _replace_delivery(op: Prompt | Synthetic, now: int, delivery: str) -> Op:
    if isinstance(op, Prompt):
        return Prompt(
            now,
            op.session,
            op.input,
            op.text,
            op.files,
            op.agents,
            op.metadata,
            delivery,
            op.resume,
        )
    return Synthetic(
        now, op.session, op.input, op.text, op.description, op.metadata, delivery, op.resume
    )


def _replace_session(op: Prompt | Synthetic, now: int, session: str) -> Op:
    if isinstance(op, Prompt):
        return Prompt(
            now,
            session,
            op.input,
            op.text,
            op.files,
            op.agents,
            op.metadata,
            op.delivery,
            op.resume,
        )
    return Synthetic(
        now, session, op.input, op.text, op.description, op.metadata, op.delivery, op.resume
    )
