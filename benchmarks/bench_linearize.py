"""Linearizability checks per second, and what the search buys over the
alternatives a user would write.

The histories are the hardest kind the checker meets in one piece: every
request of a group on one session (nothing to split), all invoked at once
(every request overlaps every other, so real time orders nothing), produced
by the model's fine-grained form under a random interleaving and disguised
as another implementation's (generated IDs renamed, seqs and times remapped:
``tests/group_helpers.py``). The mix, from a session busy at one open call:
prompts (explicit IDs from a small pool, so exact retries and conflicts race,
and omitted IDs), synthetic notices, a compaction request, answers to the
open call, an interrupt, a ``pending`` read. "Kill" groups end with the
implementation killed at a random point: requests in flight have unknown
outcomes, which removes the replies that prune the search.

Three searches judge each history:

- **memo**: the checker (Wing and Gong's search, every reply compared as
  soon as its request is placed, Lowe's memo of dead nodes);
- **dfs**: the same depth-first search without the memo (early pruning only);
- **perm**: the plain permutation search, what one writes first: every
  order of the requests and the runner's transitions (real time kept; a
  request in flight at a kill placed or left out), each replayed to its end
  and only then compared (replies, then the final observations), no memo.

Each history is judged as it is (legal) and with one pending row the model
never had (illegal: the cost of a failing group, where every reachable order
must be given up). The target's log is read (its folded events prune a
wrong order at its first wrong event, for memo and dfs), or not with
``--no-log``. For each size: checks per second (groups over the CPU time of that search
alone, all groups of the row), the slowest group, and the ratios of the
totals. dfs and perm get a node budget; a group over it counts at the
budget's time, so a ratio against it is a lower bound ("≥"). Then the
largest size whose slowest group checks in under a second (memo), with the
log read and without. CPU time is used because the machine is shared; the
load average is printed. ``--ends``: memo goes on for every legal end (what
``GroupDriver`` asks for; lockstep stops at the first legal order).

    python -m benchmarks.bench_linearize [--groups 20] [--sizes 2,4,6,8] [--up-to 12]
        [--budget 200000] [--no-log] [--ends]
"""

from __future__ import annotations

import argparse
import os
import random
import time
from collections.abc import Callable
from dataclasses import replace

from inboxsim.model import (
    Answer,
    Compact,
    Err,
    Interrupt,
    Ok,
    Op,
    Pending,
    Prompt,
    State,
    Synthetic,
    advance,
    apply,
    enabled,
    request,
)
from inboxsim.search import Group, Legal, Match, Mismatch, Undecided, compare, linearize
from inboxsim.search.history import Row, Unknown
from inboxsim.search.linearize import observe
from tests.group_helpers import NOW, created, known_ids, simulate


def before() -> State:
    """s1 busy at one open call over m0."""
    return apply(created("s1"), Prompt(1, session="s1", input="m0", text="m0")).state


def requests(rng: random.Random, state: State, n: int) -> list[Op]:
    call = state.open_calls()[0].call
    pool: list[Callable[[], Op]] = [
        lambda: Prompt(
            NOW,
            session="s1",
            input=rng.choice([None, "a", "b", "c", "m0"]),
            text=rng.choice(["x", "m0"]),
            delivery=rng.choice([None, "queue"]),
        ),
        lambda: Synthetic(NOW, session="s1", input=rng.choice([None, "y"]), text="y"),
        lambda: Compact(NOW, session="s1"),
        lambda: Answer(NOW, call=call, finish=rng.choice(["stop", "tool", "error"])),
        lambda: Interrupt(NOW, session="s1"),
        lambda: Pending(NOW, session="s1"),
    ]
    return [rng.choices(pool, [8, 2, 1, 2, 1, 1])[0]() for _ in range(n)]


PHANTOM = Row("phantom", "user", "steer", 10**6, 10**7)


def histories(size: int, kill: bool, count: int, log: bool, legal: bool = True) -> list[Group]:
    """``legal=False``: the same histories with one pending row the model
    never had, so that no order explains them and every search must give up
    on every order it can reach (a failing group's cost)."""
    out = []
    for k in range(count):
        rng = random.Random(f"{size}-{kill}-{k}")
        start = before()
        group, _ = simulate(start, requests(rng, start, size), rng, kill, at_once=True)
        after = dict(group.after)
        if not log:
            after = {sid: replace(shown, events=None) for sid, shown in after.items()}
        if not legal:
            after["s1"] = replace(after["s1"], pending=after["s1"].pending + (PHANTOM,))
        out.append(replace(group, after=after))
    return out


ENDS = False  # memo goes on for every legal end (``--ends``)


def timed(group: Group, memo: bool, budget: int | None, legal: bool) -> tuple[float, bool]:
    """CPU seconds of one check, and whether it reached a verdict."""
    t = time.process_time()
    verdict = linearize(group, memo=memo, budget=budget, ends=ENDS and memo)
    seconds = time.process_time() - t
    if not isinstance(verdict, Undecided) and isinstance(verdict, Legal) != legal:
        raise SystemExit(f"a history was judged {type(verdict).__name__}: a checker bug")
    return seconds, not isinstance(verdict, Undecided)


class _Budget(Exception):
    pass


def permutations(group: Group, budget: int) -> bool | None:
    """The plain permutation search (module docstring): True legal, False
    not, None over ``budget`` nodes."""
    reqs = group.requests
    preds = [
        {j for j, o in enumerate(reqs) if o.completed is not None and o.completed < r.invoked}
        for r in reqs
    ]
    known = {i for i, r in enumerate(reqs) if not isinstance(r.returned, Unknown)}
    start = Match.start(known_ids(group.before, [r.op for r in reqs]), group.ids)
    base = {sid: len(log.events) for sid, log in group.before.store.sessions.items()}
    nodes = 0

    def judge(state: State, replies: list[tuple[int, Ok | Err]]) -> bool:
        m = start
        try:
            for i, reply in replies:
                m = compare.reply(reqs[i].op, reply, reqs[i].returned, m, f"r{i}")
            observe(group, state, group.after, base, m)
        except Mismatch:
            return False
        return True

    def walk(state: State, done: frozenset[int], replies: list[tuple[int, Ok | Err]]) -> bool:
        nonlocal nodes
        nodes += 1
        if nodes > budget:
            raise _Budget
        if known <= done:
            if group.killed and judge(state.crashed(), replies):
                return True
            if not group.killed and not state.busy and judge(state, replies):
                return True
        for step in enabled(state):
            if walk(advance(state, step, NOW).state, done, replies):
                return True
        for i in range(len(reqs)):
            if i in done or not preds[i] <= done:
                continue
            out = request(state, reqs[i].op)
            assert isinstance(out.reply, (Ok, Err))
            if walk(out.state, done | {i}, [*replies, (i, out.reply)]):
                return True
        return False

    try:
        return walk(group.before, frozenset(), [])
    except _Budget:
        return None


def timed_plain(group: Group, budget: int, legal: bool) -> tuple[float, bool]:
    t = time.process_time()
    verdict = permutations(group, budget)
    seconds = time.process_time() - t
    if verdict is not None and verdict != legal:
        raise SystemExit(f"the permutation search judged a history {verdict}: a bench bug")
    return seconds, verdict is not None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, default=20, help="histories per size and kind")
    parser.add_argument(
        "--sizes", default="2,4,6,8", help="group sizes compared with the plain search"
    )
    parser.add_argument(
        "--up-to", type=int, default=12, help="largest size tried for the 1 s bound"
    )
    parser.add_argument(
        "--budget", type=int, default=200_000, help="node budget of the plain search"
    )
    parser.add_argument(
        "--no-log", action="store_true", help="judge without the target's log (no pruning by it)"
    )
    parser.add_argument(
        "--ends", action="store_true", help="memo goes on for every legal end (GroupDriver's)"
    )
    args = parser.parse_args()
    global ENDS
    ENDS = args.ends
    print(f"load average before: {os.getloadavg()[0]:.2f} (2 cores shared; CPU time measured)")
    print(f"{args.groups} groups per row, all requests on one session and overlapping")
    log = not args.no_log
    print(f"the target's log {'read' if log else 'not read'}" + (", memo: every end" * ENDS))
    print(
        f"{'size':>4} {'kill':>4} {'history':>7} | {'memo/s':>8} {'slowest':>8} | "
        f"{'dfs/s':>8} {'slowest':>8} | {'perm/s':>8} {'slowest':>8} | "
        f"{'dfs/memo':>8} {'perm/memo':>9}"
    )
    for size in (int(s) for s in args.sizes.split(",") if s):
        for kill in (False, True):
            for legal in (True, False):
                groups = histories(size, kill, args.groups, log, legal)
                memo = [timed(g, True, None, legal)[0] for g in groups]
                dfs = [timed(g, False, args.budget, legal) for g in groups]
                perm = [timed_plain(g, args.budget, legal) for g in groups]
                m = sum(memo)
                cells = []
                ratios = []
                for runs in (dfs, perm):
                    total = sum(s for s, _ in runs)
                    cut = "≥" if any(not done for _, done in runs) else ""
                    cells.append(f"{len(groups) / total:>8,.0f} {max(s for s, _ in runs):>7.3f}s")
                    ratios.append(f"{cut}{total / m:.1f}x")
                kind = "legal" if legal else "illegal"
                print(
                    f"{size:>4} {'yes' if kill else 'no':>4} {kind:>7} | "
                    f"{len(groups) / m:>8,.0f} {max(memo):>7.3f}s | {cells[0]} | {cells[1]} | "
                    f"{ratios[0]:>8} {ratios[1]:>9}"
                )
    for legal in (True, False):
        largest = 0
        for size in range(2, args.up_to + 1):
            slowest = max(
                timed(g, True, None, legal)[0]
                for kill in (False, True)
                for g in histories(size, kill, args.groups, log, legal)
            )
            kind = "legal" if legal else "illegal"
            print(f"{kind}, size {size}: slowest of {2 * args.groups} groups {slowest:.3f}s")
            if slowest >= 1.0:
                break
            largest = size
        print(
            f"largest group whose every {'legal' if legal else 'illegal'} history checks "
            f"in under a second (memo): {largest}"
        )
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
