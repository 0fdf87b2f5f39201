"""Linearizability checks per second, and what Lowe's memoisation buys.

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

Each history is checked twice: with the target's log read (its folded events
then prune a wrong order at its first wrong event) and without (only replies
and the final observations prune). For each size: checks per second (groups
over the CPU time of the checker alone, all groups of the row) with
memoisation and with the plain search (the same depth-first search without
the memo: a permutation search with early pruning), the ratio of their
totals, and the slowest group. The plain search gets a node budget; a group
over it counts at the budget's time, so its ratio is a lower bound ("≥").
Then the largest size whose slowest group checks in under a second, with
the log read and without. CPU time is used because the machine is shared; the load average
is printed.

    python -m benchmarks.bench_linearize [--groups 20] [--sizes 2,4,6,8] [--up-to 12]
        [--budget 200000]
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
    Interrupt,
    Op,
    Pending,
    Prompt,
    State,
    Synthetic,
    apply,
)
from inboxsim.search import Group, Legal, Undecided, linearize
from tests.group_helpers import NOW, created, simulate


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


def histories(size: int, kill: bool, count: int, log: bool) -> list[Group]:
    out = []
    for k in range(count):
        rng = random.Random(f"{size}-{kill}-{k}")
        start = before()
        group, _ = simulate(start, requests(rng, start, size), rng, kill, at_once=True)
        if not log:
            after = {sid: replace(shown, events=None) for sid, shown in group.after.items()}
            group = replace(group, after=after)
        out.append(group)
    return out


def timed(group: Group, memo: bool, budget: int | None) -> tuple[float, bool]:
    """CPU seconds of one check, and whether it reached a verdict."""
    t = time.process_time()
    verdict = linearize(group, memo=memo, budget=budget)
    seconds = time.process_time() - t
    if memo and not isinstance(verdict, Legal):
        raise SystemExit(f"a model history was judged {type(verdict).__name__}: a checker bug")
    return seconds, not isinstance(verdict, Undecided)


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
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f} (2 cores shared; CPU time measured)")
    print(f"{args.groups} groups per row, all requests on one session and overlapping")
    print(
        f"{'size':>4} {'kill':>4} {'log':>4} | {'memo checks/s':>13} {'slowest':>8} | "
        f"{'plain checks/s':>14} {'slowest':>8} | {'ratio':>7}"
    )
    for size in (int(s) for s in args.sizes.split(",")):
        for kill in (False, True):
            for log in (True, False):
                groups = histories(size, kill, args.groups, log)
                memo = [timed(g, True, None)[0] for g in groups]
                plain = [timed(g, False, args.budget) for g in groups]
                cut = any(not done for _, done in plain)
                m, p = sum(memo), sum(s for s, _ in plain)
                ratio = f"{'≥' if cut else ''}{p / m:.1f}x"
                print(
                    f"{size:>4} {'yes' if kill else 'no':>4} {'yes' if log else 'no':>4} | "
                    f"{len(groups) / m:>13,.0f} {max(memo):>7.3f}s | "
                    f"{len(groups) / p:>14,.0f} {max(s for s, _ in plain):>7.3f}s | {ratio:>7}"
                )
    for log in (True, False):
        largest = 0
        for size in range(2, args.up_to + 1):
            slowest = max(
                timed(g, True, None)[0]
                for kill in (False, True)
                for g in histories(size, kill, args.groups, log)
            )
            print(f"log {'read' if log else 'not read'}, size {size}: slowest of "
                  f"{2 * args.groups} groups {slowest:.3f}s")  # fmt: skip
            if slowest >= 1.0:
                break
            largest = size
        print(
            f"largest group whose every history checks in under a second, log "
            f"{'read' if log else 'not read'}: {largest}"
        )
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
