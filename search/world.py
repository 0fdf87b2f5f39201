"""The explorer's world: its sessions, their pools of input IDs, the alphabet
of operations on them, and the transitions those operations take on the
model. The search (:mod:`.explore`) walks this graph breadth first; the
coarser measurement keys (:mod:`.coarse_keys`) count its states.

- **World.** ``N`` sessions (``s1`` .. ``sN``), created up front after
  ``hello`` (the prefix, at ``now`` 0, not counted in the depth). Each session
  has a fixed pool of fresh input IDs (``pool``, default ``POOL``: ``s1.i1``,
  ``s1.i2``), so the
  world is finite. The ``d``-th operation of a path is sent with ``now = d``,
  so the clock is strictly monotonic along every path.

- **Alphabet** (per session ``s``, only what the target's ``hello`` features
  allow; :data:`FAMILIES` names each family and gives the text the command
  prints):

  1. ``prompt`` with the session's next unused pool ID, ``delivery: steer``;
  2. the same with ``delivery: queue``;
  3. ``synthetic`` with the next unused pool ID, ``delivery: steer``, and
     the same with ``delivery: queue`` (a policy whose synthetic input always
     steers, preset ``b``, is judged on what it does with the queue request);
  4. for every live input ID of the session: its **exact retry** (the same
     request again, rebuilt from its admission record) and a **conflicting
     retry** of each kind: same ID and kind with another text, and with
     the other delivery;
  5. ``compact`` (omitted ID: the target generates the barrier's), and
     ``compact`` with the session's next unused pool ID (a client's barrier
     ID, whose lifecycle ends when the barrier is consumed);
  6. ``interrupt`` and ``resume``;
  7. for the session's open call: ``answer`` with ``stop``, ``tool`` and ``error``;
  8. for every pool ID whose lifecycle ended (its barrier was consumed), in
     every session: a ``prompt``, a ``synthetic`` and a ``compact`` with that
     ID (cross-session and cross-kind reuse after the lifecycle ended, a
     conflict; in its own session and kind, a new input);
  9. every request above that can crash (prompt, synthetic, compact, resume,
     answer), once per failpoint it actually reaches (``after_admit``,
     ``mid_promotion``, ``after_promotion``), followed by the restart ``hello``;

  and, once per world, 10. a **crash between requests** (a kill), followed by
  the restart ``hello``.

  The "next unused pool ID" is the lowest-numbered pool ID the session has
  never admitted: choosing any other unused one would only rename inputs, so
  this is where input-renaming symmetry is taken, at the source.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from ..model import (
    FAILPOINTS,
    Answer,
    Compact,
    Crashed,
    Create,
    Event,
    Interrupt,
    Op,
    Outcome,
    Policy,
    Prompt,
    Resume,
    State,
    Synthetic,
    apply,
    initial_state,
)
from ..model.store import SessionLog
from ..targets.target import hello_op, observe
from ..trace.record import Step

if TYPE_CHECKING:
    from ..model.state import Tx

POOL = 2
"""Fresh input IDs per session (user and synthetic share the pool: one namespace)."""
DEFAULT_STEP_LIMIT = 2
"""A small step allowance, so that a final step (where ``tool`` counts as
``stop``) is reachable within a few answers."""

PROMPT_TEXT = "p"
SYNTHETIC_TEXT = "y"
CONFLICT_TEXT = "x"  # a retry with this text is not exact under strict retry identity
FINISHES = ("stop", "tool", "error")
CRASHABLE = (Prompt, Synthetic, Compact, Resume, Answer)

FAMILIES: dict[str, str] = {
    "prompt_steer": "per session s: prompt, delivery steer, with s's next unused pool ID",
    "prompt_queue": "per session s: prompt, delivery queue, with s's next unused pool ID",
    "synthetic": "per session s: synthetic, delivery steer, with s's next unused pool ID",
    "synthetic_queue": "per session s: synthetic, delivery queue, with s's next unused pool ID",
    "retry": "per live input ID of s: its exact retry (the same request again)",
    "conflict": "per live input ID of s: a conflicting retry (same ID and kind, other text)",
    "conflict_delivery": "per live input ID of s: a conflicting retry "
    "(same ID, kind and text, the other delivery)",
    "compact": "per session s: compact (the target generates the barrier ID)",
    "compact_pool": "per session s: compact with s's next unused pool ID (a barrier ID of the "
    "client's, whose lifecycle ends when the barrier is consumed)",
    "reuse_ended": "per pool ID whose lifecycle ended, in every session: prompt, synthetic and "
    "compact with that ID (cross-session and cross-kind reuse; in its own session and kind, a "
    "new input)",
    "interrupt": "per session s: interrupt",
    "resume": "per session s: resume",
    "answer_stop": "per open call: answer stop",
    "answer_tool": "per open call: answer tool",
    "answer_error": "per open call: answer error",
    "failpoints": "each crashable request above (prompt, synthetic, compact, resume, answer) "
    "once per failpoint it reaches (after_admit, mid_promotion, after_promotion), "
    "then the restart hello",
    "kill": "once per world: a crash between requests (kill), then the restart hello",
}
"""The alphabet's operation families, as the command prints them."""
FULL = frozenset(FAMILIES)
REUSE = "reuse_ended"


def parse_alphabet(text: str | None) -> frozenset[str]:
    """``None`` or ``full``: every family; else a comma-separated list of
    families, or ``full-FAMILY,...`` for the full alphabet without some."""
    if text is None or text == "full":
        return FULL
    if text.startswith("full-"):
        names, base = text[5:].split(","), FULL
    else:
        names, base = text.split(","), frozenset()
    unknown = [n for n in names if n not in FAMILIES]
    if unknown:
        word = "families" if len(unknown) > 1 else "family"
        known = ", ".join(FAMILIES)
        raise ValueError(f"unknown alphabet {word} {', '.join(unknown)}; known: {known}")
    return base - frozenset(names) if base else frozenset(names)


def describe(alphabet: frozenset[str]) -> list[str]:
    """The alphabet in words, in a fixed order."""
    return [text for name, text in FAMILIES.items() if name in alphabet]


@dataclass(frozen=True, slots=True)
class Action:
    """One operation of the alphabet: a request (maybe asked to crash at a
    failpoint), or a kill between requests (``op`` is None). ``session`` is
    the session it acts on (an answer: its call's; None for the kill),
    ``ident`` the input ID its label names, and ``family`` the alphabet
    family it belongs to: the partial-order reduction reads them."""

    label: str
    op: Op | None
    crash_at: str | None = None
    session: str | None = None
    ident: str | None = None
    family: str = ""


def pool_ids(session: str, pool: int = POOL) -> tuple[str, ...]:
    return tuple(f"{session}.i{k}" for k in range(1, pool + 1))


def pool_used(state: State, session: str) -> int:
    """How many of the session's pool IDs were ever admitted (whatever the pool)."""
    prefix = session + ".i"
    return sum(1 for ident in state.store.owners if ident.startswith(prefix))


def _next_fresh(state: State, session: str, pool: int = POOL) -> str | None:
    """The lowest pool ID the session never admitted (an ID belongs to its
    session and kind for good, so an ID whose lifecycle ended is not fresh:
    the ``reuse_ended`` family sends it)."""
    owners = state.store.owners
    for ident in pool_ids(session, pool):
        if ident not in owners:
            return ident
    return None


def _live_inputs(log: SessionLog) -> Iterator[tuple[str, str, str | None]]:
    """(ID, kind, delivery) of the session's pending and visible user and
    synthetic inputs, in admission order: the IDs a client may retry."""
    rows = [m.receipt for m in log.transcript if m.receipt is not None]
    rows += [r for r in log.pending if r.type != "compaction"]
    for row in sorted(rows, key=lambda r: r.admitted_seq):
        yield row.input, row.type, row.delivery


def ended_ids(state: State) -> list[str]:
    """IDs whose lifecycle ended (neither pending nor visible in the session
    they belong to), in name order; fork copies aside (not in the alphabet)."""
    out = []
    for ident, owner in sorted(state.store.owners.items()):
        log = state.store.sessions[owner.session]
        if not owner.copied and log.pending_row(ident) is None and log.message(ident) is None:
            out.append(ident)
    return out


def _reuses(state: State, session: str, now: int, enabled: frozenset[str]) -> list[Action]:
    """The ``reuse_ended`` requests into ``session``: each ended ID as a
    prompt, a synthetic input (where the alphabet has synthetic input) and a
    barrier (where it has compaction)."""
    acts: list[Action] = []
    for ident in ended_ids(state):
        op: Op = Prompt(now, session=session, input=ident, text=PROMPT_TEXT, delivery="steer")
        acts.append(Action(f"reuse({session},{ident},prompt)", op, None, session, ident, REUSE))
        if "synthetic" in enabled:
            op = Synthetic(now, session=session, input=ident, text=SYNTHETIC_TEXT, delivery="steer")
            label = f"reuse({session},{ident},synthetic)"
            acts.append(Action(label, op, None, session, ident, REUSE))
        if "compact" in enabled:
            op = Compact(now, session=session, input=ident)
            label = f"reuse({session},{ident},compact)"
            acts.append(Action(label, op, None, session, ident, REUSE))
    return acts


def _resend(session: str, ident: str, kind: str, delivery: str | None, text: str, now: int) -> Op:
    if kind == "user":
        return Prompt(now, session=session, input=ident, text=text, delivery=delivery)
    return Synthetic(now, session=session, input=ident, text=text, delivery=delivery)


def session_actions(
    state: State, session: str, now: int, enabled: frozenset[str], pool: int = POOL
) -> list[Action]:
    """The requests of the alphabet on one session, without crash variants.

    ``enabled``: the alphabet's families that the target's features allow."""
    log = state.store.sessions[session]
    acts: list[Action] = []
    op: Op
    fresh = _next_fresh(state, session, pool)
    if fresh is not None:
        for delivery in ("steer", "queue"):
            family = "prompt_" + delivery
            if family in enabled:
                op = Prompt(now, session=session, input=fresh, text=PROMPT_TEXT, delivery=delivery)
                label = f"prompt({session},{fresh},{delivery})"
                acts.append(Action(label, op, None, session, fresh, family))
        for delivery, family in (("steer", "synthetic"), ("queue", "synthetic_queue")):
            if family in enabled:
                op = Synthetic(
                    now, session=session, input=fresh, text=SYNTHETIC_TEXT, delivery=delivery
                )
                label = f"synthetic({session},{fresh},{delivery})"
                acts.append(Action(label, op, None, session, fresh, family))
    for ident, kind, sent in _live_inputs(log):
        exact = PROMPT_TEXT if kind == "user" else SYNTHETIC_TEXT
        if "retry" in enabled:
            op = _resend(session, ident, kind, sent, exact, now)
            acts.append(Action(f"retry({session},{ident})", op, None, session, ident, "retry"))
        if "conflict" in enabled:
            op = _resend(session, ident, kind, sent, CONFLICT_TEXT, now)
            label = f"conflict({session},{ident})"
            acts.append(Action(label, op, None, session, ident, "conflict"))
        if "conflict_delivery" in enabled:
            other = "queue" if sent == "steer" else "steer"
            op = _resend(session, ident, kind, other, exact, now)
            label = f"conflict({session},{ident},{other})"
            acts.append(Action(label, op, None, session, ident, "conflict_delivery"))
    if "compact" in enabled:
        op = Compact(now, session=session)
        acts.append(Action(f"compact({session})", op, None, session, None, "compact"))
    if fresh is not None and "compact_pool" in enabled:
        op = Compact(now, session=session, input=fresh)
        acts.append(Action(f"compact({session},{fresh})", op, None, session, fresh, "compact_pool"))
    if "reuse_ended" in enabled:
        acts.extend(_reuses(state, session, now, enabled))
    if "interrupt" in enabled:
        op = Interrupt(now, session=session)
        acts.append(Action(f"interrupt({session})", op, None, session, None, "interrupt"))
    if "resume" in enabled:
        op = Resume(now, session=session)
        acts.append(Action(f"resume({session})", op, None, session, None, "resume"))
    run = state.runs.get(session)
    if run is not None:
        for finish in FINISHES:
            family = "answer_" + finish
            if family in enabled:
                op = Answer(now, call=run.call.call, finish=finish)
                acts.append(Action(f"answer({session},{finish})", op, None, session, None, family))
    return acts


def requests(
    state: State, sessions: Sequence[str], now: int, enabled: frozenset[str], pool: int = POOL
) -> list[Action]:
    """Every plain request of the alphabet, session by session, then the kill."""
    acts: list[Action] = []
    for session in sessions:
        acts.extend(session_actions(state, session, now, enabled, pool))
    if "kill" in enabled:
        acts.append(Action("crash", None, None, None, None, "kill"))
    return acts


# The hello features each family needs (docs/protocol.md, "Features"): the
# harness never sends an operation whose feature is missing.
_NEEDS = {
    "synthetic": "synthetic",
    "synthetic_queue": "synthetic",
    "compact": "compaction",
    "compact_pool": "compaction",
    "interrupt": "interrupt",
    "resume": "resume",
    "failpoints": "failpoints",
}


def enabled_families(alphabet: frozenset[str], features: Iterable[str]) -> frozenset[str]:
    have = set(features)
    return frozenset(f for f in alphabet if f not in _NEEDS or _NEEDS[f] in have)


# --- transitions ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Transition:
    """One action taken: the state it leads to and the trace steps it makes
    (the request, and the restart ``hello`` after a crash). Step indexes are
    relative (0, 1) and fixed up when a path is laid out."""

    action: Action
    state: State
    steps: tuple[Step, ...]


def _restart(state: State, now: int, step_limit: int, index: int) -> tuple[State, Step]:
    hello = hello_op(now, step_limit)
    outcome = apply(state, hello)
    step = Step(
        index,
        "safety",
        "request",
        "restart",
        hello,
        None,
        outcome.reply,
        observe(state, outcome.state, outcome.events),
    )
    return outcome.state, step


class _Probe(str):
    """A ``crash_at`` equal to no failpoint, shown the transaction at each
    failpoint the request passes (``Tx.reach``). A request applied with it
    does exactly what it does without one (the model reads ``crash_at`` only
    to compare it with the failpoint it reaches); asked to crash at a
    failpoint, it would run the same way up to its first pass there and die
    with the durable state and the events it had then. The probe keeps those
    at each point's first pass: a request's crash variants come out of its
    one plain apply, with no apply of their own."""

    crashes: dict[str, tuple[State, tuple[Event, ...]]]

    def __new__(cls) -> _Probe:
        probe = super().__new__(cls, "probe")
        probe.crashes = {}
        return probe

    def passing(self, tx: Tx, point: str) -> None:
        if point not in self.crashes:
            self.crashes[point] = (tx.freeze().crashed(), tuple(tx.events))


def take(state: State, action: Action, now: int, step_limit: int, base: int) -> Transition:
    """Apply one action; ``base`` is the index of its first step."""
    if action.op is None:
        crashed = state.crashed()
        kill = Step(
            base, "safety", "crash", action.label, None, None, None, observe(state, crashed, ())
        )
        after, hello = _restart(crashed, now, step_limit, base + 1)
        return Transition(action, after, (kill, hello))
    outcome = apply(state, action.op, action.crash_at)
    return _laid_out(state, action, outcome, now, step_limit, base)


def _laid_out(
    state: State, action: Action, outcome: Outcome, now: int, step_limit: int, base: int
) -> Transition:
    """A request's outcome as a transition: its step, and the restart after a crash."""
    step = Step(
        base,
        "safety",
        "request",
        action.label,
        action.op,
        action.crash_at,
        outcome.reply,
        observe(state, outcome.state, outcome.events),
    )
    if isinstance(outcome.reply, Crashed):
        after, hello = _restart(outcome.state, now, step_limit, base + 1)
        return Transition(action, after, (step, hello))
    return Transition(action, outcome.state, (step,))


def transitions(
    state: State,
    sessions: Sequence[str],
    now: int,
    step_limit: int,
    enabled: frozenset[str],
    base: int,
    pool: int = POOL,
) -> Iterator[Transition]:
    """Every transition of the alphabet from ``state``, crash variants included."""
    return cast(Iterator[Transition], moves(state, sessions, now, step_limit, enabled, base, pool))


def moves(
    state: State,
    sessions: Sequence[str],
    now: int,
    step_limit: int,
    enabled: frozenset[str],
    base: int,
    pool: int = POOL,
    asleep: Callable[[Action], bool] | None = None,
) -> Iterator[Transition | Action]:
    """:func:`transitions`, except that an action ``asleep`` holds aside is
    yielded alone, not taken: the search judges nothing of it, so the model
    does not apply it (unless its request has crash variants, which only
    its plain apply finds) and no step is laid out for it."""
    failpoints = "failpoints" in enabled
    for action in requests(state, sessions, now, enabled, pool):
        if not failpoints or not isinstance(action.op, CRASHABLE):
            if asleep is not None and asleep(action):
                yield action
            else:
                yield take(state, action, now, step_limit, base)
            continue
        probe = _Probe()
        outcome = apply(state, action.op, probe)
        if asleep is not None and asleep(action):
            yield action
        else:
            yield _laid_out(state, action, outcome, now, step_limit, base)
        # A failpoint is only ever passed after the request appended an event
        # (an admission, a promotion, or the execution/step events before a
        # boundary), so a request that appended nothing has no crash variant.
        if not outcome.events:
            continue
        for point in FAILPOINTS:
            crash = probe.crashes.get(point)
            if crash is None:
                continue  # not reached: asked to crash there, it is the plain request
            label = f"{action.label}@{point}"
            variant = Action(label, action.op, point, action.session, action.ident, "failpoints")
            if asleep is not None and asleep(variant):
                yield variant
            else:
                crashed = Outcome(crash[0], Crashed(point), crash[1])
                yield _laid_out(state, variant, crashed, now, step_limit, base)


def exhaustive_claim(sessions: int, depth: int, pool: int = POOL) -> str:
    return (
        f"exhaustive: every sequence of at most {depth} operations from this alphabet "
        f"over {sessions} session{'s' if sessions != 1 else ''}, "
        f"{pool} fresh input ID{'s' if pool != 1 else ''} each"
    )


def session_names(n: int) -> tuple[str, ...]:
    return tuple(f"s{k}" for k in range(1, n + 1))


def start(
    policy: Policy, sessions: Sequence[str], step_limit: int
) -> tuple[State, list[Step], dict[str, Any]]:
    """hello and the creates, at ``now`` 0."""
    state = initial_state(policy, step_limit)
    hello = hello_op(0, step_limit)
    out = apply(state, hello)
    steps = [
        Step(
            0,
            "safety",
            "request",
            "hello",
            hello,
            None,
            out.reply,
            observe(state, out.state, out.events),
        )
    ]
    state = out.state
    for sid in sessions:
        op = Create(0, session=sid)
        out = apply(state, op)
        steps.append(
            Step(
                len(steps),
                "safety",
                "request",
                f"create({sid})",
                op,
                None,
                out.reply,
                observe(state, out.state, out.events),
            )
        )
        state = out.state
    return state, steps, out_result(steps[0])


def out_result(step: Step) -> dict[str, Any]:
    return dict(step.reply.result)  # type: ignore[union-attr]
