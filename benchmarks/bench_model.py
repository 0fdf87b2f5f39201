"""Model operations per second on one core, over a realistic random mix.

The mix: three sessions; prompts (steer and queue, explicit and omitted IDs,
exact retries and conflicts from a small ID pool), synthetic steers, answers
to open calls (stop / tool / error), manual compaction, interrupts, resumes,
forks, revert stage/commit, crashes between requests and at failpoints, and
the observation queries a harness sends (pending, messages, calls).

The operation sequences are generated first (answers need the open calls of
the run, so generation drives the model once), then timed by replaying them
through ``apply`` alone, so the figure is the model's cost, not the driver's.

    python benchmarks/bench_model.py [--runs 2000] [--ops 100] [--repeat 5]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from inboxsim.model import (
    FAILPOINTS,
    Answer,
    Calls,
    Compact,
    CrashOp,
    Create,
    Fork,
    Hello,
    Interrupt,
    Messages,
    Op,
    Pending,
    Prompt,
    Resume,
    RevertCommit,
    RevertStage,
    State,
    Synthetic,
    apply,
    initial_state,
)

SESSIONS = ("s1", "s2", "s3")
Script = list[tuple[Op, str | None]]


def _next_op(rng: random.Random, state: State, now: int, forks: list[str]) -> tuple[Op, str | None]:
    session = rng.choice(SESSIONS)
    roll = rng.random()
    crash_at = rng.choice(FAILPOINTS) if rng.random() < 0.03 else None
    calls = state.open_calls()
    if roll < 0.30:
        ident = None if rng.random() < 0.1 else f"m{rng.randrange(40)}"
        text = f"text-{ident}" if rng.random() < 0.9 else "other"
        delivery = "queue" if rng.random() < 0.3 else "steer"
        return Prompt(now, session=session, input=ident, text=text, delivery=delivery), crash_at
    if roll < 0.38:
        return Synthetic(now, session=session, input=f"y{rng.randrange(15)}", text="done"), crash_at
    if roll < 0.68 and calls:
        call = rng.choice(calls)
        finish = rng.choices(("stop", "tool", "error"), (5, 4, 1))[0]
        return Answer(now, call=call.call, finish=finish), crash_at
    if roll < 0.72:
        return Compact(now, session=session), crash_at
    if roll < 0.75:
        return Interrupt(now, session=session), None
    if roll < 0.78:
        return Resume(now, session=session), crash_at
    if roll < 0.80:
        transcript = state.store.sessions[session].transcript
        if transcript:
            msg = rng.choice(transcript).id
            if rng.random() < 0.5:
                return RevertStage(now, session=session, message=msg), None
            return RevertCommit(now, session=session), None
    if roll < 0.81:
        child = f"f{len(forks)}"
        forks.append(child)
        return Fork(now, session=session, child=child), None
    if roll < 0.83:
        return CrashOp(now), None
    return rng.choice(
        (Pending(now, session=session), Messages(now, session=session), Calls(now))
    ), None


def make_script(seed: int, ops: int) -> Script:
    rng = random.Random(seed)
    script: Script = [(Hello(0, step_limit=4), None)] + [
        (Create(0, session=s), None) for s in SESSIONS
    ]
    state = initial_state()
    for op, crash_at in script:
        state = apply(state, op, crash_at).state
    forks: list[str] = []
    for now in range(1, ops + 1):
        op, crash_at = _next_op(rng, state, now, forks)
        script.append((op, crash_at))
        state = apply(state, op, crash_at).state
    return script


def time_scripts(scripts: list[Script]) -> float:
    start = time.perf_counter()
    for script in scripts:
        state = initial_state()
        for op, crash_at in script:
            state = apply(state, op, crash_at).state
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--ops", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    scripts = [make_script(seed, args.ops) for seed in range(args.runs)]
    total = sum(len(s) for s in scripts)
    times = [time_scripts(scripts) for _ in range(args.repeat)]
    best, median = min(times), statistics.median(times)
    print(f"{total} operations in {args.runs} runs, {args.repeat} repetitions")
    print(
        f"model apply: median {total / median:,.0f} ops/s, best {total / best:,.0f} ops/s "
        "(one core)"
    )
    print(f"goal 50,000 ops/s: median is {total / median / 50_000:.2f}x the goal")


if __name__ == "__main__":
    main()
