"""Concurrent groups for the checker's tests, made by the model itself.

:func:`simulate` runs a group's requests against the model's fine-grained
form under a random interleaving (invocations, each request's own
transition, completions, runner transitions, optionally a kill, between
transitions or inside one at a runner failpoint), records
what a real adapter would, and disguises it as another implementation's:
generated IDs renamed, seqs and times mapped by increasing functions. Such a
history is legal by construction, so the checker must say so.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from inboxsim.model import (
    Call,
    Create,
    Err,
    Event,
    Ok,
    Op,
    State,
    advance,
    apply,
    enabled,
    initial_state,
    request,
)
from inboxsim.search import Group, Msg, Request, Row, Shown, Unknown

NOW = 1000


class Disguise:
    """Renames the model's generated IDs and remaps seqs and times, as the
    target's own would look (only their order is meaningful)."""

    def __init__(self, rng: random.Random, known: set[str]) -> None:
        self.rng = rng
        self.known = known
        self.names: dict[str, str] = {}

    def id(self, ident: str | None) -> str | None:
        if ident is None or ident in self.known:
            return ident
        if ident not in self.names:
            self.names[ident] = f"T{self.rng.randrange(10**9)}-{len(self.names)}"
        return self.names[ident]

    @staticmethod
    def seq(seq: int) -> int:
        return 3 * seq + 7

    @staticmethod
    def time(time: int) -> int:
        return 10 * time + 1

    def result(self, op: Op, result: dict[str, Any]) -> dict[str, Any]:
        if {"input", "admitted_seq", "time"} <= set(result):
            return {
                **result,
                "input": self.id(result["input"]),
                "admitted_seq": self.seq(result["admitted_seq"]),
                "time": self.time(result["time"]),
            }
        if "pending" in result:
            return {"pending": [self.result(op, r) for r in result["pending"]]}
        if "messages" in result:
            return {"messages": [self.message(m) for m in result["messages"]]}
        if "calls" in result:
            return {"calls": [self.call_wire(c) for c in result["calls"]]}
        return result

    def message(self, m: dict[str, Any]) -> dict[str, Any]:
        out = {**m, "id": self.id(m["id"]), "seq": self.seq(m["seq"]), "time": self.time(m["time"])}
        if "copied_from" in m:
            out["copied_from"] = self.id(m["copied_from"])
        return out

    def call_wire(self, c: dict[str, Any]) -> dict[str, Any]:
        return {**c, "call": self.id(c["call"]), "context": [self.id(x) for x in c["context"]]}

    def call(self, c: Call | None) -> Call | None:
        if c is None:
            return None
        context = tuple(self.id(x) or "" for x in c.context)
        return replace(c, call=self.id(c.call) or "", context=context, opened=0)

    def event(self, e: Event) -> Event:
        return replace(e, seq=self.seq(e.seq), time=self.time(e.time), input=self.id(e.input))


def known_ids(state: State, ops: Sequence[Op]) -> set[str]:
    known = set(state.store.owners) | set(state.store.sessions)
    for log in state.store.sessions.values():
        known |= {e.input for e in log.events if e.input is not None}
    known |= {run.call.call for run in state.runs.values()}
    for op in ops:
        for name in ("session", "child", "input", "message", "before", "call"):
            value = getattr(op, name, None)
            if isinstance(value, str):
                known.add(value)
    return known


def simulate(
    before: State,
    ops: Sequence[Op],
    rng: random.Random,
    kill: bool = False,
    at_once: bool = False,
) -> tuple[Group, State]:
    """One random concurrent run of ``ops`` (see the module docstring);
    returns the group as an adapter would report it, and the model's state.
    ``at_once``: every request is invoked before anything else happens (all
    overlap, as when an adapter issues a whole group together)."""
    disguise = Disguise(rng, known_ids(before, ops))
    state = before
    clock = 0
    invoked: dict[int, int] = {}
    replies: dict[int, Ok | Err] = {}
    completed: dict[int, int] = {}
    waiting = list(range(len(ops)))
    rng.shuffle(waiting)
    stop_after = rng.randrange(1, 4 * len(ops) + 6) if kill else None
    actions = 0
    while True:
        choices = []
        if waiting:
            choices.append("invoke")
        if at_once and waiting:
            choices = ["invoke"]
        placed = [i for i in invoked if i not in replies]
        if placed:
            choices.append("place")
        done = [i for i in replies if i not in completed]
        if done:
            choices.append("complete")
        if enabled(state):
            choices.append("runner")
        if not choices or (stop_after is not None and actions >= stop_after):
            break
        actions += 1
        clock += 1
        what = rng.choice(choices)
        if what == "invoke":
            invoked[waiting.pop()] = clock
        elif what == "place":
            i = rng.choice(placed)
            out = request(state, ops[i])
            assert isinstance(out.reply, (Ok, Err))
            replies[i], state = out.reply, out.state
        elif what == "complete":
            completed[(i := rng.choice(done))] = clock
        else:
            steps = enabled(state)
            state = advance(state, rng.choice(steps), NOW).state
    if kill:
        # Half the kills land inside a runner transition, at a failpoint it
        # reaches (a batch's first promotion, or its call not yet open).
        inside = [s for s in enabled(state) if s.at != "wake"]
        point = rng.choice(("mid_promotion", "after_promotion"))
        cut = (
            advance(state, rng.choice(inside), NOW, point)
            if inside and rng.random() < 0.5
            else None
        )
        state = cut.state if cut is not None and cut.crashed else state.crashed()
    requests = []
    for i, op in enumerate(ops):
        if i not in invoked:
            continue  # never sent before the kill: not part of the group
        if i in completed:
            reply = replies[i]
            shown = Ok(disguise.result(op, reply.result)) if isinstance(reply, Ok) else reply
            requests.append(Request(op, invoked[i], completed[i], shown))
        else:
            requests.append(Request(op, invoked[i], None, Unknown()))
    return Group(before, tuple(requests), observe(before, state, disguise), kill), state


def observe(before: State, state: State, disguise: Disguise) -> dict[str, Shown]:
    after = {}
    for sid, log in state.store.sessions.items():
        base = len(before.store.sessions[sid].events) if sid in before.store.sessions else 0
        run = state.runs.get(sid)
        after[sid] = Shown(
            tuple(
                Row(
                    disguise.id(r.input) or "",
                    r.type,
                    r.delivery,
                    disguise.seq(r.admitted_seq),
                    disguise.time(r.time),
                )
                for r in log.pending
            ),
            tuple(
                Msg(
                    disguise.id(m.id) or "",
                    m.type,
                    disguise.seq(m.seq),
                    disguise.time(m.time),
                    disguise.id(m.copied_from),
                )
                for m in log.transcript
            ),
            disguise.call(run.call if run else None),
            tuple(disguise.event(e) for e in log.events[base:]),
        )
    return after


def created(*sessions: str, policy: Any = None) -> State:
    state = initial_state() if policy is None else initial_state(policy)
    for sid in sessions:
        state = apply(state, Create(0, session=sid)).state
    return state
