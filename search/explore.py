"""Bounded-exhaustive exploration: every interleaving of a small world, breadth first.

Theory of operation (after TLC's breadth-first search with a fingerprint set,
``harness-anchors.md`` 1.8, and P's exhaustive mode, 1.7):

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

- **Exhaustive for the bound.** Every sequence of at most ``D`` operations
  from this alphabet over ``N`` sessions is covered: a path is expanded the
  first (shallowest) time its key is reached, and a path reaching a known key
  is equivalent to the one already expanded (the same futures, with the same
  verdicts) with at least as much depth left, so its futures are already
  covered. Every transition is judged, also those that lead to a known key
  (a step can be wrong even when the state it leads to is fine).

- **The merge key** (``search/canon.py``, :func:`~inboxsim.search.canon.compute`)
  is what the model and the invariant monitor will read in the future, and
  nothing else of the path: each session's fold (pending rows, transcript,
  staged revert, next seq) and run, and the monitor's shadows, lifecycles,
  receipts and checker memory; inputs and calls renamed by first
  appearance, times and seqs ranked per session (every later request
  carries a larger ``now``; no checker does arithmetic on times), trace
  step indexes kept only as "earlier", and sessions sorted (symmetry:
  worlds that differ only by session names collapse). Because the monitor
  is in the key, two paths are merged only when every continuation gets the
  same verdicts on both; ``tests/test_canon.py`` checks that as a
  bisimulation over every path of small bounds.

  Two coarser keys stay for measurement: :func:`state_key` (each session's
  whole event log, times ranked, without the monitor) and :func:`model_key`
  (the fold alone). Neither includes the monitor, so a merged state would be
  judged along the shortest path to it only; ``--merge log|fold`` in
  ``benchmarks/bench_explore.py`` runs them, and says they are not
  exhaustive.

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

- **Frontier.** A level's nodes are kept as (parent, label): a chunk rebuilds
  its nodes' states and monitors by replaying labels from the state after
  the prefix (consecutive nodes share all but their last labels), so the
  frontier is bytes per node where states and monitors were kilobytes.

- **Judging.** The invariant monitor is mutable and history-dependent: each
  node's monitor is copied (``Monitor.clone``) for every transition. The
  first violation found is on a shortest path (BFS), and it is reported
  with the full trace from ``hello``. Each new distinct key also gets the
  end-of-run safety checks (``finish(liveness=False)``), since every path
  prefix is a run of its own; liveness is not judged here (a bounded
  prefix need not settle).
"""

from __future__ import annotations

import copy
import pickle
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from ..errors import HarnessError
from ..model import (
    FAILPOINTS,
    Answer,
    Compact,
    Crashed,
    Create,
    Interrupt,
    Op,
    Policy,
    Prompt,
    Resume,
    State,
    Synthetic,
    apply,
    initial_state,
)
from ..model.state import Run
from ..model.store import SessionLog
from ..scenarios.render import write_scenario
from ..sim.executor import open_executor, result
from ..targets.target import hello_op, observe
from ..trace.record import Step, reply_wire, step_wire
from .canon import ModelCache, compute

POOL = 2
"""Fresh input IDs per session (user and synthetic share the pool: one namespace)."""
DEFAULT_SESSIONS = 2
DEFAULT_DEPTH = 3
"""Small enough that the full alphabet with every checker runs in seconds (2
sessions: 11,646 distinct states); the benchmark goes deeper."""
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


# --- the alphabet ---------------------------------------------------------------


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
    failpoints = "failpoints" in enabled
    for action in requests(state, sessions, now, enabled, pool):
        plain = take(state, action, now, step_limit, base)
        yield plain
        # A failpoint is only ever passed after the request appended an event
        # (an admission, a promotion, or the execution/step events before a
        # boundary), so a request that appended nothing reaches none: skip
        # the three trial applies.
        if (
            not failpoints
            or not isinstance(action.op, CRASHABLE)
            or not plain.steps[0].observed.events
        ):
            continue
        for point in FAILPOINTS:
            label = f"{action.label}@{point}"
            variant = Action(label, action.op, point, action.session, action.ident, "failpoints")
            crashed = take(state, variant, now, step_limit, base)
            if isinstance(
                crashed.steps[0].reply, Crashed
            ):  # reached it; else it is the plain request
                yield crashed


# --- the canonical key ----------------------------------------------------------


def _session_form(log: SessionLog, symmetric: bool) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """A session's events with inputs renamed and times ranked; returns the
    form and the input renaming (the run's call context uses it).

    ``symmetric=False`` keeps pool IDs by name and renames only the IDs the
    target generated (the brute-force check needs names to rename itself)."""
    names: dict[str, Any] = {}
    times = sorted({e.time for e in log.events})
    rank = {t: i for i, t in enumerate(times)}
    form = []
    for e in log.events:
        ident: Any = -1
        if e.input is not None:
            ident = names.get(e.input)
            if ident is None:
                ident = names[e.input] = _rename(e.input, len(names), log.id, symmetric)
        form.append((e.seq, e.type, rank[e.time], ident, e.data))
    return tuple(form), names


def _rename(ident: str, order: int, session: str, symmetric: bool) -> Any:
    pool = ident.startswith(session + ".")
    if symmetric:
        # A pool ID and a generated one stay apart (even numbers, odd ones):
        # a barrier under a pool ID uses up a fresh ID, a generated one not.
        return 2 * order + (0 if pool else 1)
    return ident if pool else f"gen{order}"


def _run_form(run: Run | None, names: dict[str, Any], order: dict[str, int]) -> tuple[Any, ...]:
    if run is None:
        return ()
    c = run.call
    context = tuple(names[m] for m in c.context)
    return (
        order[c.call],
        c.kind,
        c.step,
        c.final,
        context,
        run.phase,
        run.forced,
        run.step,
        run.cont,
        run.doorbell,
    )


FormCache = dict[int, tuple[SessionLog, tuple[Any, ...], dict[str, Any]]]


def state_key(
    state: State, symmetric: bool = True, cache: FormCache | None = None
) -> tuple[Any, ...]:
    """The canonical key of a state (see the module docstring).

    ``symmetric=True``: the sorted per-session forms, inputs renamed by first
    appearance. ``symmetric=False``: sessions by name in name order, pool IDs
    kept, only normalizations that do not rename the harness's own IDs.

    ``cache`` maps ``id(log)`` to the log (kept alive, so the id is not
    reused) and its form: a transition changes one session, and its siblings
    share the other sessions' logs, so most forms are computed once."""
    calls = state.open_calls()
    order = {c.call: i for i, c in enumerate(calls)}
    forms = []
    for sid in sorted(state.store.sessions):
        log = state.store.sessions[sid]
        hit = cache.get(id(log)) if cache is not None else None
        if hit is not None and hit[0] is log:
            events, names = hit[1], hit[2]
        else:
            events, names = _session_form(log, symmetric)
            if cache is not None:
                cache[id(log)] = (log, events, names)
        run = _run_form(state.runs.get(sid), names, order)
        forms.append((events, run) if symmetric else (sid, events, run))
    if symmetric:
        forms.sort()
    return tuple(forms)


# --- a coarser key, for measurement only -------------------------------------------


def _fold_form(state: State, log: SessionLog, order: dict[str, int]) -> tuple[Any, ...]:
    """One session as the model reads it: the fold of its log (pending rows,
    transcript, staged revert), seqs and times by rank, inputs renamed by
    first appearance, the number of pool IDs used, and the run."""
    names: dict[str, int] = {}

    def name(ident: str | None) -> int | None:
        if ident is None:
            return None
        return names.setdefault(ident, len(names))

    receipts = [r for r in log.pending] + [m.receipt for m in log.transcript if m.receipt]
    seqs = sorted({r.admitted_seq for r in receipts} | {m.seq for m in log.transcript})
    times = sorted({r.time for r in receipts} | {m.time for m in log.transcript})
    srank = {s: i for i, s in enumerate(seqs)}
    trank = {t: i for i, t in enumerate(times)}

    def row(r: Any) -> tuple[Any, ...] | None:
        if r is None:
            return None
        return (name(r.input), r.type, r.data, r.delivery, srank[r.admitted_seq], trank[r.time])

    transcript = tuple(
        (
            name(m.id),
            m.type,
            srank[m.seq],
            trank[m.time],
            m.data,
            name(m.copied_from),
            row(m.receipt),
        )
        for m in log.transcript
    )
    pending = tuple(row(r) for r in log.pending)
    used = pool_used(state, log.id)
    run = state.runs.get(log.id)
    if run is not None:
        for ident in run.call.context:
            name(ident)
    return (
        transcript,
        pending,
        name(log.revert),
        log.fork_seq is not None,
        used,
        _run_form(run, names, order),
    )


def model_key(state: State) -> tuple[Any, ...]:
    """The model's state without its history: each session's log folded (see
    :func:`_fold_form`), sessions sorted. Coarser than :func:`state_key`,
    which keeps the whole event log.

    **Not used by the search, and not sound for it**: the invariant monitor
    is history-dependent (the receipts the client was given, the steps at
    which inputs were admitted, promoted and acknowledged, the last crash),
    and none of that is in this key, so merging two paths with one fold
    could hide a violation that only one path's monitor would report. It
    is here to measure how far *any* state-merging reduction could go:
    ``benchmarks/bench_explore.py --model-states`` counts the distinct folds,
    without the monitor (docs/explorer.md)."""
    order = {c.call: i for i, c in enumerate(state.open_calls())}
    forms = [_fold_form(state, state.store.sessions[sid], order) for sid in state.store.sessions]
    forms.sort(key=repr)  # rows mix None and ints: repr gives a total order
    return tuple(forms)


def count_states(
    policy: Policy,
    sessions: int,
    depth: int,
    key: Callable[[State], Any],
    alphabet: frozenset[str] = FULL,
    step_limit: int = DEFAULT_STEP_LIMIT,
) -> list[int]:
    """Distinct states (cumulative) at each depth under ``key``, breadth
    first, without any monitor: the search's shape alone, for measurement."""
    names = session_names(sessions)
    state, _, hello = _prefix(policy, names, step_limit)
    enabled = enabled_families(alphabet, hello.get("features", ()))
    seen = {key(state)}
    frontier, counts = [state], []
    for now in range(1, depth + 1):
        fresh = []
        for source in frontier:
            for t in transitions(source, names, now, step_limit, enabled, 0):
                if t.state is source:
                    continue
                k = key(t.state)
                if k not in seen:
                    seen.add(k)
                    fresh.append(t.state)
        frontier = fresh
        counts.append(len(seen))
    return counts


# --- the search ------------------------------------------------------------------

MonitorFactory = Callable[[Policy, dict[str, Any]], Any]
Tick = Callable[[int, int, int, int, int], None]
MERGES = ("sound", "log", "fold")


@dataclass(slots=True)
class ExploreResult:
    """What a search found; ``violations`` and ``trace`` are empty when all held."""

    policy: str
    sessions: int
    depth: int
    step_limit: int
    alphabet: tuple[str, ...]  # the families explored (the target's features allowing)
    states: int = 0
    transitions: int = 0
    depth_reached: int = 0
    complete: bool = False  # the state space closed before the bound
    per_depth: list[int] = field(default_factory=list)  # new distinct states at each depth
    seconds: float = 0.0
    violations: list[Any] = field(default_factory=list)
    trace: tuple[Step, ...] = ()
    hello: dict[str, Any] = field(default_factory=dict)
    pool: int = POOL  # fresh input IDs per session
    slept: int = 0  # transitions a sleep set held aside (not judged: they commute)
    reduction: str = "sleep sets"

    @property
    def states_per_second(self) -> float:
        return self.states / self.seconds if self.seconds > 0 else float("inf")

    @property
    def operations(self) -> int:
        """Alphabet operations on the counterexample (restarts not counted)."""
        return sum(
            1
            for s in self.trace
            if s.decision not in ("hello", "restart") and s.decision[:7] != "create("
        )


def exhaustive_claim(sessions: int, depth: int, pool: int = POOL) -> str:
    return (
        f"exhaustive: every sequence of at most {depth} operations from this alphabet "
        f"over {sessions} session{'s' if sessions != 1 else ''}, "
        f"{pool} fresh input ID{'s' if pool != 1 else ''} each"
    )


def session_names(n: int) -> tuple[str, ...]:
    return tuple(f"s{k}" for k in range(1, n + 1))


def _prefix(
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


def _copier(monitor: Any) -> Callable[[Any], Any]:
    """How to copy a monitor between steps: its ``clone`` (the invariant
    monitor's: several times cheaper than the alternatives), else a
    ``pickle`` round trip, else ``deepcopy``."""
    if callable(getattr(monitor, "clone", None)):
        return lambda m: m.clone()
    try:
        pickle.dumps(monitor, protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError):
        return copy.deepcopy
    return lambda m: pickle.loads(pickle.dumps(m, protocol=pickle.HIGHEST_PROTOCOL))


def _feed(monitor: Any, steps: Iterable[Step]) -> list[Any]:
    found: list[Any] = []
    for step in steps:
        found.extend(monitor.feed(step))
    return found


def _judge_end(monitor: Any) -> list[Any]:
    """End-of-run safety checks (``finish(liveness=False)``) as if the run
    stopped here: every path prefix is a run of its own. Consumes the
    monitor (a child is judged on its own copy, never reused)."""
    finish = getattr(monitor, "finish", None)
    return [] if finish is None else list(finish(False))


def _wanted(found: list[Any], invariant: str | None) -> list[Any]:
    """The violations the search stops at: all, or those of ``invariant``."""
    if invariant is None:
        return found
    return [v for v in found if v.invariant == invariant]


# --- partial-order reduction: sleep sets ------------------------------------------------


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


# --- the search --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Level:
    """What expanding one level needs besides its nodes (sent to workers)."""

    names: tuple[str, ...]
    step_limit: int
    enabled: frozenset[str]
    invariant: str | None
    merge: str
    now: int
    last: bool  # at the bound: children are counted, never expanded
    pool: int
    reduce: bool  # sleep sets
    root: tuple[State, Any, int]  # the state after the prefix, its monitor (or pickle), length

    def wanted(self, found: list[Any]) -> list[Any]:
        return _wanted(found, self.invariant)


def _take_label(state: State, label: str, now: int, level: _Level, base: int) -> Transition:
    """Take the action with this label again (replaying a path)."""
    plain, _, point = label.partition("@")
    for action in requests(state, level.names, now, level.enabled, level.pool):
        if action.label == plain:
            if point:
                action = Action(label, action.op, point, action.session, action.ident, "failpoints")
            return take(state, action, now, level.step_limit, base)
    raise RuntimeError(f"replay: no action {label!r} at depth {now}")


class _Replay:
    """The states and monitors along a path, rebuilt from the root by
    replaying its labels. The frontier keeps only labels (a few bytes per
    node, where a state and monitor are kilobytes); consecutive nodes share
    all but their last labels, so a chunk replays about one transition per
    node."""

    def __init__(self, level: _Level) -> None:
        state, monitor, length = level.root
        if isinstance(monitor, bytes):
            monitor = pickle.loads(monitor)
        self.level = level
        self.copy = _copier(monitor)
        self.stack: list[tuple[str | None, State, Any, int]] = [(None, state, monitor, length)]

    def to(self, labels: tuple[str, ...]) -> tuple[State, Any, int]:
        stack = self.stack
        same = 0
        while same < len(labels) and same + 1 < len(stack) and stack[same + 1][0] == labels[same]:
            same += 1
        del stack[same + 1 :]
        for depth in range(same, len(labels)):
            _, state, monitor, length = stack[-1]
            t = _take_label(state, labels[depth], depth + 1, self.level, length)
            child = self.copy(monitor)
            _feed(child, t.steps)
            stack.append((labels[depth], t.state, child, length + len(t.steps)))
        _, state, monitor, length = stack[-1]
        return state, monitor, length


# A chunk's result: the judged transitions that matter to the search, the
# number judged, and the number slept (pruned by sleep sets). A record is
# (position of its node in the chunk, the action's label, the violations it
# revealed, the key it reached, the child's sleep set in canonical form, the
# end-of-run violations of a key new to the chunk or None).
_Record = tuple[int, str, list[Any], Any, frozenset[Any], list[Any] | None]
_Chunk = tuple[list[_Record], int, int]

CHUNK = 64
"""Frontier nodes per chunk: the unit of work sent to a worker, and the most
judged transitions held before they are merged."""


def _expand_chunk(
    level: _Level, nodes: list[tuple[tuple[str, ...], frozenset[Any]]], seen: set[Any] | None = None
) -> _Chunk:
    """Judge every transition of the nodes, in order (those a sleep set
    holds aside excepted); stop at the first transition that reveals a
    violation (end-of-run violations of a new key do not stop it). ``seen``:
    the keys the search knows (in process), so that the end-of-run checks
    run once per key."""

    replay = _Replay(level)
    copy_of = replay.copy
    models: ModelCache = {}
    forms: FormCache = {}
    local: set[Any] = set()
    out: list[_Record] = []
    judged = slept = 0
    sound = level.merge == "sound"
    names, now, step_limit, enabled, pool = (
        level.names,
        level.now,
        level.step_limit,
        level.enabled,
        level.pool,
    )
    for at, (labels, sleep) in enumerate(nodes):
        state, monitor, length = replay.to(labels)
        known = facts(monitor)
        reduce = level.reduce and sound and known is not None
        asleep: list[Action] = []
        if reduce and sleep:
            key = compute(state, monitor, models)
            asleep = [
                a
                for a in requests(state, names, now, enabled, pool)
                if eligible(a) and canonical(a, key) in sleep
            ]
        aside = {a.label for a in asleep}
        explored: list[Action] = []  # judged here, eligible and clean: may sleep in later siblings
        scratch = None
        for t in transitions(state, names, now, step_limit, enabled, length, pool):
            action = t.action
            if action.label in aside:
                slept += 1
                continue
            judged += 1
            if t.state is state:  # an error reply: nothing changed, the monitor neither
                if scratch is None:
                    scratch = copy_of(monitor)
                found = _feed(scratch, t.steps)
                if level.wanted(found):
                    out.append((at, action.label, level.wanted(found), None, frozenset(), None))
                    return out, judged, slept
                if reduce and not found and eligible(action):
                    explored.append(action)
                continue
            child = copy_of(monitor)
            found = _feed(child, t.steps)
            wanted = level.wanted(found)
            if wanted:
                out.append((at, action.label, wanted, None, frozenset(), None))
                return out, judged, slept
            canon: frozenset[Any] = frozenset()
            commutes = reduce and not found and eligible(action) and facts(child) == known
            if sound:
                child_key = compute(t.state, child, models)
                digest: Any = child_key.digest
                if commutes and not level.last:
                    if not child_key.tied:
                        canon = frozenset(
                            canonical(b, child_key)
                            for b in (*asleep, *explored)
                            if b.session != action.session
                        )
            elif level.merge == "fold":
                digest = model_key(t.state)
            else:
                digest = state_key(t.state, cache=forms)
            end = None
            if digest not in local and (seen is None or digest not in seen):
                local.add(digest)
                end = level.wanted(_judge_end(child))
            out.append((at, action.label, [], digest, canon, end))
            if commutes:
                explored.append(action)
    return out, judged, slept


def _expanded(
    chunks: int,
    payload: Callable[[int], list[tuple[tuple[str, ...], frozenset[Any]]]],
    level: _Level,
    visited: set[Any],
    executor: Any,
    jobs: int,
) -> Iterator[tuple[int, _Chunk]]:
    """Each chunk's judged transitions, in frontier order: in process, or on
    ``executor`` (a few chunks per worker in flight, results taken back in
    order, so the search is the same whatever the number of workers).
    ``payload(k)`` is chunk ``k``'s nodes (built when it is sent)."""
    if executor is None:
        for k in range(chunks):
            yield k, _expand_chunk(level, payload(k), visited)
        return

    flight: deque[tuple[int, Any]] = deque()
    sent = 0
    try:
        while sent < chunks or flight:
            while sent < chunks and len(flight) < 2 * jobs:
                flight.append((sent, executor.submit(_expand_chunk, level, payload(sent))))
                sent += 1
            k, future = flight.popleft()
            yield k, result(future)
    finally:
        for _, future in flight:
            future.cancel()


def explore(
    policy: Policy,
    monitor: MonitorFactory,
    sessions: int = DEFAULT_SESSIONS,
    depth: int = DEFAULT_DEPTH,
    step_limit: int = DEFAULT_STEP_LIMIT,
    alphabet: frozenset[str] = FULL,
    progress: Callable[[int, int, int], None] | None = None,
    invariant: str | None = None,
    merge: str = "sound",
    jobs: int = 1,
    pool: int = POOL,
    tick: Tick | None = None,
    reduce: bool = True,
) -> ExploreResult:
    """Breadth-first search of every interleaving up to ``depth`` operations.

    Stops at the first violation (on a shortest path, by BFS). ``progress``
    is called after each depth with (depth, distinct states, transitions).
    ``merge``: ``sound`` (the default) merges paths by
    :func:`~inboxsim.search.canon.compute`, the model's fold together with
    what the monitor will read later: paths with one key have the same
    futures, so the search is exhaustive for the bound. ``log`` (the whole
    event log, :func:`state_key`) and ``fold`` (:func:`model_key`) leave the
    monitor out and judge a merged state along the shortest path to it
    only: measurements for the benchmark, not exhaustive.
    ``invariant``: stop only at a violation of this invariant; other
    violations are not reported and the search goes on through them (to ask
    "how deep is the shortest path to *this* failure").
    ``jobs``: worker processes judging chunks of each level (the monitor
    must pickle); the result is the same for any number. ``pool``: fresh
    input IDs per session (part of the world's bound). ``tick`` is called
    within a level, after each chunk of its frontier, with (depth, frontier
    nodes expanded, frontier size, distinct states, transitions): a level
    of a big search takes most of an hour. ``reduce``: sleep sets (with the
    sound merge only): a transition that commutes with one already judged
    is not judged again; the same states, the same shortest violations
    (module docstring), fewer transitions.
    """
    if merge not in MERGES:
        raise ValueError(f"unknown merge {merge!r}; known: {', '.join(MERGES)}")
    if jobs < 1 or pool < 1:
        raise ValueError(f"jobs and pool must be at least 1, not {jobs} and {pool}")
    search = partial(
        _search,
        policy,
        monitor,
        sessions,
        depth,
        step_limit,
        alphabet,
        progress,
        invariant,
        merge,
        pool,
        tick,
        reduce and merge == "sound",
    )
    if jobs == 1:
        return search(None, 1)
    from concurrent.futures.process import BrokenProcessPool

    try:
        pickle.dumps(monitor(policy, {}))
    except (pickle.PicklingError, TypeError, AttributeError):
        raise HarnessError(
            f"explore --jobs {jobs}: the monitor does not pickle; use --jobs 1"
        ) from None
    preload = ["inboxsim.search.explore", "inboxsim.search.canon", "inboxsim.invariants"]
    try:
        with open_executor("local", jobs, None, preload) as (executor, _):
            return search(executor, jobs)
    except BrokenProcessPool:
        raise HarnessError(
            f"explore --jobs {jobs}: a worker process died (killed, or out of memory); "
            "nothing of the search is kept: rerun, with fewer jobs if memory ran out"
        ) from None


def _search(
    policy: Policy,
    monitor: MonitorFactory,
    sessions: int,
    depth: int,
    step_limit: int,
    alphabet: frozenset[str],
    progress: Callable[[int, int, int], None] | None,
    invariant: str | None,
    merge: str,
    pool: int,
    tick: Tick | None,
    reduce: bool,
    executor: Any,
    jobs: int,
) -> ExploreResult:
    started = time.perf_counter()
    names = session_names(sessions)
    state, prefix, hello = _prefix(policy, names, step_limit)
    enabled = enabled_families(alphabet, hello.get("features", ()))
    result = ExploreResult(
        policy.name,
        sessions,
        depth,
        step_limit,
        tuple(f for f in FAMILIES if f in enabled),
        hello=hello,
        pool=pool,
        reduction="sleep sets" if reduce else "none",
    )
    root_monitor = monitor(policy, hello)
    found = _wanted(_feed(root_monitor, prefix), invariant)
    if found:
        result.violations, result.trace = found, tuple(prefix)
        return _done(result, started)
    if merge == "sound":
        visited: set[Any] = {compute(state, root_monitor).digest}
    else:
        visited = {model_key(state) if merge == "fold" else state_key(state)}
    shipped: Any = root_monitor
    if executor is not None:
        shipped = pickle.dumps(root_monitor, protocol=pickle.HIGHEST_PROTOCOL)
    root = (state, shipped, len(prefix))
    # Each level's nodes as (index of the parent in the level before, label):
    # the frontier is labels only, and a node's path is read up the levels.
    levels: list[list[tuple[int, str]]] = [[(-1, "")]]
    sleeps: list[frozenset[Any]] = [frozenset()]
    result.states = 1

    def labels_of(k: int) -> tuple[str, ...]:
        out = []
        for nodes in reversed(levels[1:]):
            parent, label = nodes[k]
            out.append(label)
            k = parent
        return tuple(reversed(out))

    for now in range(1, depth + 1):
        level = _Level(
            names, step_limit, enabled, invariant, merge, now, now == depth, pool, reduce, root
        )
        frontier = levels[-1]
        payload = partial(_payload, labels_of, sleeps, len(frontier))
        chunks = (len(frontier) + CHUNK - 1) // CHUNK
        fresh: list[tuple[int, str]] = []
        fresh_sleeps: list[frozenset[Any]] = []
        here: dict[Any, int] = {}  # this level's new keys -> their place in ``fresh``
        interned: dict[frozenset[Any], frozenset[Any]] = {}
        new_at_bound = expanded = 0
        for k, (records, judged, slept) in _expanded(
            chunks, payload, level, visited, executor, jobs
        ):
            result.transitions += judged
            result.slept += slept
            for at, label, found, key, canon, end in records:
                parent = k * CHUNK + at
                if found or (key not in visited and end):
                    labels = (*labels_of(parent), label)
                    result.violations = found or end  # type: ignore[assignment]
                    result.trace = _trace(level, prefix, labels)
                    result.depth_reached = now
                    result.states = len(visited) + (0 if found else 1)
                    return _done(result, started)
                place = here.get(key)
                if place is not None:  # one more path to a key new at this level
                    if not level.last:
                        kept = fresh_sleeps[place] & canon
                        fresh_sleeps[place] = interned.setdefault(kept, kept)
                    continue
                if key in visited:
                    continue  # reached at an earlier level: its futures are covered
                visited.add(key)
                if level.last:
                    new_at_bound += 1
                    continue
                here[key] = len(fresh)
                fresh.append((parent, label))
                fresh_sleeps.append(interned.setdefault(canon, canon))
            expanded += min(CHUNK, len(frontier) - k * CHUNK)
            if tick is not None:
                tick(now, expanded, len(frontier), len(visited), result.transitions)
        grown = len(fresh) + new_at_bound
        result.per_depth.append(grown)
        result.states = len(visited)
        if grown:
            result.depth_reached = now
        if progress is not None:
            progress(now, result.states, result.transitions)
        if not grown:
            result.complete = True
            break
        levels.append(fresh)
        sleeps = fresh_sleeps
    return _done(result, started)


def _payload(
    labels_of: Callable[[int], tuple[str, ...]], sleeps: list[frozenset[Any]], size: int, chunk: int
) -> list[tuple[tuple[str, ...], frozenset[Any]]]:
    """Chunk ``chunk`` of a frontier of ``size`` nodes: each node's path and sleep set."""
    start = chunk * CHUNK
    return [(labels_of(k), sleeps[k]) for k in range(start, min(start + CHUNK, size))]


def _trace(level: _Level, prefix: Sequence[Step], labels: tuple[str, ...]) -> tuple[Step, ...]:
    """The full trace of a path, from hello: the prefix, then its labels
    replayed."""
    state, _, length = level.root
    steps = list(prefix)
    for depth, label in enumerate(labels, start=1):
        t = _take_label(state, label, depth, level, length)
        steps.extend(t.steps)
        state, length = t.state, length + len(t.steps)
    return tuple(steps)


def _done(result: ExploreResult, started: float) -> ExploreResult:
    result.seconds = time.perf_counter() - started
    return result


# --- the result document ---------------------------------------------------------


def violation_wire(v: Any) -> dict[str, Any]:
    return {"invariant": v.invariant, "steps": list(v.steps), "message": v.message}


def result_document(result: ExploreResult, out: str | None) -> dict[str, Any]:
    """The ``explore --json`` document."""

    return {
        "policy": result.policy,
        "sessions": result.sessions,
        "depth": result.depth,
        "step_limit": result.step_limit,
        "pool": result.pool,
        "alphabet": list(result.alphabet),
        "alphabet_text": describe(frozenset(result.alphabet)),
        "claim": exhaustive_claim(result.sessions, result.depth, result.pool),
        "states": result.states,
        "transitions": result.transitions,
        "depth_reached": result.depth_reached,
        "complete": result.complete,
        "new_states_per_depth": result.per_depth,
        "seconds": round(result.seconds, 3),
        "states_per_second": round(result.states_per_second, 1) if result.seconds > 0 else None,
        "violations": [violation_wire(v) for v in result.violations],
        "counterexample": [step_wire(s) for s in result.trace],
        "counterexample_file": out if result.violations else None,
    }


def render_counterexample(
    result: ExploreResult, policy: Policy, expect: bool = False
) -> tuple[str, str]:
    """The shortest counterexample as file text, and its format (a scenario
    TOML file). Like ``shrink``'s, the scenario is a regression test
    (``inboxsim run`` fails on it while the bug is there); ``expect=True``
    writes ``expect_violation`` instead."""
    first = result.violations[0]
    text = write_scenario(
        result.trace,
        policy,
        name=f"explore-{policy.name}-{first.invariant}",
        source=f"inboxsim explore --sessions {result.sessions} --depth {result.depth} "
        f"--policy {policy.name}: shortest counterexample (breadth-first)",
        step_limit=result.step_limit,
        expect_violation=first.invariant if expect else None,
    )
    return text, "toml"


def summary_lines(result: ExploreResult, out: str | None) -> list[str]:
    """The human summary of a search."""
    lines = [
        f"explore: policy {result.policy}, {result.sessions} session(s) created up front, "
        f"{result.pool} fresh input ID{'s' if result.pool != 1 else ''} per session, "
        f"step limit {result.step_limit}, now = depth",
        "alphabet:",
        *(f"  - {text}" for text in describe(frozenset(result.alphabet))),
        exhaustive_claim(result.sessions, result.depth, result.pool)
        + (
            ""
            if not result.violations
            else f" (stopped at the first violation, depth {result.depth_reached})"
        ),
        f"distinct states: {result.states} (paths merged where the model and the monitor "
        f"read the same future, up to renaming; new per depth: {result.per_depth})",
        f"transitions: {result.transitions}",
        f"depth reached: {result.depth_reached}"
        + (" (state space closed)" if result.complete else ""),
        f"time: {result.seconds:.2f} s, {result.states_per_second:,.0f} states/s",
    ]
    if not result.violations:
        lines.append("no violation")
        return lines
    for v in result.violations:
        lines.append(f"VIOLATION {v.invariant} at steps {list(v.steps)}: {v.message}")
    lines.append(f"shortest counterexample ({result.operations} operations):")
    for s in result.trace:
        if s.decision in ("hello",) or s.decision.startswith("create("):
            continue
        lines.append(f"  [{s.index}] {s.decision}  ->  {_reply_text(s)}")
    if out is not None:
        lines.append(f"written to {out}")
    return lines


def _reply_text(step: Step) -> str:

    if step.kind == "crash":
        return "killed"
    wire = reply_wire(step.reply)
    if wire is None:
        return "-"
    if "unknown" in wire:
        return f"crashed at {wire['unknown']}"
    if not wire["ok"]:
        return f"error {wire['error']}"
    return "ok"
