"""The cost of the adapter protocol, measured against the model adapter.

Three figures:

- **round trips per second**: one ``calls`` request and its validated
  response, nothing else (JSON both ways, the pipe, pydantic validation, the
  model's work for ``calls``);
- **target requests per second**: ``AdapterTarget.request`` over a mix of
  prompts, answers, resumes and reads on three sessions, each followed by the
  observation queries the harness makes (``log`` per session, ``pending`` and
  ``messages`` for touched sessions, ``calls``), with the wire round trips per
  request, and the in-process ``ModelTarget`` on the same mix for scale;
- **kill + restart**: ``AdapterTarget.kill()``: SIGKILL, start the process
  again (Python, imports, journal replay), ``hello``, observe; at the journal
  length the mix left behind.

    python benchmarks/bench_adapter.py [--roundtrips 2000] [--requests 1000] [--kills 10]
                                       [--no-fsync]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from inboxsim.model import G4, Answer, Calls, Create, Hello, Log, Op, Pending, Prompt, Resume
from inboxsim.targets.adapter import AdapterTarget
from inboxsim.targets.target import ModelTarget, Target
from inboxsim.trace.view import View

COMMAND = [sys.executable, "-m", "inboxsim.targets.model_adapter"]
SESSIONS = ("s1", "s2", "s3")
STEP_LIMIT = 4


def mix(target: Target, requests: int, seed: int) -> float:
    """Drive the mix; returns seconds spent in ``request``."""
    rng, view, spent = random.Random(seed), View(), 0.0
    for now in range(1, requests + 1):
        roll = rng.random()
        session = rng.choice(SESSIONS)
        op: Op
        if view.calls and roll < 0.45:
            finish = rng.choices(("stop", "tool", "error"), (6, 3, 1))[0]
            op = Answer(now, call=rng.choice(view.calls).call, finish=finish)
        elif roll < 0.75:
            ident = None if rng.random() < 0.2 else f"m{rng.randrange(60)}"
            delivery = "queue" if rng.random() < 0.3 else "steer"
            op = Prompt(now, session=session, input=ident, text=f"t{ident}", delivery=delivery)
        elif roll < 0.82:
            op = Resume(now, session=session)
        elif roll < 0.9:
            op = Log(now, session=session)
        elif roll < 0.95:
            op = Pending(now, session=session)
        else:
            op = Calls(now)
        started = time.perf_counter()
        _, observed = target.request(op)
        spent += time.perf_counter() - started
        view.absorb(observed)
    return spent


def setup(target: Target) -> None:
    target.request(Hello(0, step_limit=STEP_LIMIT))
    for sid in SESSIONS:
        view_seen = target.request(Create(0, session=sid))
        assert view_seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--roundtrips", type=int, default=2000)
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument(
        "--no-fsync", action="store_true", help="pass --no-fsync to the model adapter"
    )
    args = parser.parse_args()
    command = COMMAND + (["--no-fsync"] if args.no_fsync else [])
    print("command: python benchmarks/bench_adapter.py " + " ".join(sys.argv[1:]))
    with tempfile.TemporaryDirectory() as tmp:
        target = AdapterTarget(command, Path(tmp) / "data", STEP_LIMIT, timeout=30)
        try:
            started = time.perf_counter()
            setup(target)
            first_start = time.perf_counter() - started
            early = []
            for _ in range(max(1, args.kills // 2)):
                started = time.perf_counter()
                target.kill()
                early.append(time.perf_counter() - started)

            started = time.perf_counter()
            for _ in range(args.roundtrips):
                target._exchange(Calls(0).to_wire(), None)
            trips = args.roundtrips / (time.perf_counter() - started)

            rid_before = target._rid
            spent = mix(target, args.requests, seed=1)
            per_request = (target._rid - rid_before) / args.requests
            adapter_rate = args.requests / spent

            journal = sum(1 for _ in (Path(tmp) / "data" / "model-journal.jsonl").open())
            kills = []
            for _ in range(args.kills):
                started = time.perf_counter()
                target.kill()
                kills.append(time.perf_counter() - started)
        finally:
            target.close()

    model = ModelTarget(G4, STEP_LIMIT)
    setup(model)
    model_rate = args.requests / mix(model, args.requests, seed=1)

    print(f"first start + hello + 3 creates:      {first_start * 1000:8.1f} ms")
    print(f"round trips (calls), per second:      {trips:8.0f}   ({1e6 / trips:.0f} µs each)")
    print(
        f"target requests, per second:          {adapter_rate:8.0f}   "
        f"({per_request:.1f} wire round trips per request, observation included)"
    )
    print(f"ModelTarget in process, same mix:     {model_rate:8.0f}   per second")
    print(f"kill + restart (fresh journal):      median {statistics.median(early) * 1000:.0f} ms")
    print(
        f"kill + restart (journal {journal} lines): "
        f"median {statistics.median(kills) * 1000:.0f} ms, "
        f"min {min(kills) * 1000:.0f} ms, max {max(kills) * 1000:.0f} ms over {len(kills)}"
    )


if __name__ == "__main__":
    main()
