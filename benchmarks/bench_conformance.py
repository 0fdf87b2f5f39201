"""Conformance throughput: lockstep steps per second through the protocol
against the model adapter, and the cost of a crash and restart.

    python benchmarks/bench_conformance.py [--seeds N] [--ops N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from inboxsim.model import G4, Create, Prompt
from inboxsim.sim.adapter import AdapterTarget
from inboxsim.sim.conformance import seed_item
from inboxsim.sim.lockstep import LockstepTarget
from inboxsim.sim.target import ModelTarget, hello_op

COMMAND = [sys.executable, "-m", "inboxsim.sim.model_adapter", "--no-fsync"]


def steps_per_second(seeds: int, ops: int) -> tuple[int, float]:
    steps, seconds = 0, 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(seeds):
            out = seed_item(seed, COMMAND, G4, "g4", ops, 10.0, Path(tmp))
            assert out.item.verdict == "held", out.item.detail
            steps += out.steps
            seconds += out.item.seconds
    return steps, seconds


def crash_restart(rounds: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        lock = LockstepTarget(ModelTarget(G4, 4), AdapterTarget(COMMAND, Path(tmp) / "d", 4))
        lock.request(hello_op(0, 4))
        lock.request(Create(1, session="s1"))
        for i in range(20):
            lock.request(Prompt(2 + i, session="s1", input=f"u{i}", text="x", resume=False))
        started = time.perf_counter()
        for r in range(rounds):
            lock.kill()
            lock.request(hello_op(100 + r, 4))
        elapsed = time.perf_counter() - started
        lock.close()
    return elapsed / rounds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--ops", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    steps, seconds = steps_per_second(args.seeds, args.ops)
    print(
        f"lockstep vs model adapter: {steps} steps in {seconds:.2f} s = {steps / seconds:.0f} steps/s "
        f"(incl. one adapter start per seed)"
    )
    per = crash_restart(args.rounds)
    print(f"crash (SIGKILL) + restart + hello, 21-request journal: {per * 1000:.0f} ms each")


if __name__ == "__main__":
    main()
