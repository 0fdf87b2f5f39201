"""Two keys coarser than the explorer's merge key (:mod:`.canon`), for
measurement only, and the state count under any key.

:func:`state_key` is each session's whole event log (inputs renamed, times
ranked) and run, without the monitor; :func:`model_key` is the fold alone
(what the model reads of each log). Neither includes the invariant monitor,
so a search merging by them judges a merged state along the shortest path
to it only: ``explore(merge="log"|"fold")`` and ``--merge log|fold`` in
``benchmarks/bench_explore.py`` run them, and say they are not exhaustive.
:func:`count_states` counts the distinct states under a key, without any
monitor: how far any state-merging reduction could go (docs/explorer.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..model import Policy, State
from ..model.state import Run
from ..model.store import SessionLog
from .world import (
    DEFAULT_STEP_LIMIT,
    FULL,
    enabled_families,
    pool_used,
    session_names,
    start,
    transitions,
)


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
    state, _, hello = start(policy, names, step_limit)
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
