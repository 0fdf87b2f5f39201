"""Conformance throughput: lockstep steps per second through the protocol
against the model adapter, and the cost of a crash and restart, each printed
against the alternative:

- "lean start" is the model adapter as it is (no pydantic, no
  importlib.metadata, no tomllib at start: targets/request_check.py);
- "heavy start" is the same adapter with the imports its start used to pay
  forced first (pydantic, the protocol's validators, importlib.metadata,
  tomllib), i.e. the adapter before the start-up work;
- "--jobs 2": the lean adapter with the seeds in two worker processes.

Every crash is a real SIGKILL of the adapter process and a new process
started on the same data folder. Figures depend on the machine's load.

    python benchmarks/bench_conformance.py [--seeds N] [--ops N] [--rounds N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from inboxsim.conformance.seeds import SeedRun, seed_outcomes
from inboxsim.model import G4, Create, Prompt
from inboxsim.search.lockstep import LockstepTarget
from inboxsim.targets.adapter import AdapterTarget
from inboxsim.targets.target import ModelTarget, hello_op

LEAN = [sys.executable, "-m", "inboxsim.targets.model_adapter", "--no-fsync"]
HEAVY = [
    sys.executable,
    "-c",
    "import importlib.metadata, tomllib, pydantic, inboxsim.targets.protocol, runpy, sys; "
    "sys.argv = ['model_adapter', '--no-fsync']; "
    "runpy.run_module('inboxsim.targets.model_adapter', run_name='__main__')",
]


def steps_per_second(command: list[str], seeds: int, ops: int, jobs: int = 1) -> tuple[int, float]:
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        run = SeedRun(command, G4, "g4", ops, 10.0, "model")
        outcomes = list(
            seed_outcomes(run, range(seeds), Path(tmp), jobs, "local", None, lambda _m: None)
        )
        seconds = time.perf_counter() - started
    for _, out in outcomes:
        assert out.item.verdict == "held", out.item.detail
    return sum(out.steps for _, out in outcomes), seconds


def crash_restart(command: list[str], rounds: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        lock = LockstepTarget(ModelTarget(G4, 4), AdapterTarget(command, Path(tmp) / "d", 4))
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
    parser.add_argument("--seeds", type=int, default=6)
    parser.add_argument("--ops", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    heavy_restart = crash_restart(HEAVY, args.rounds)
    lean_restart = crash_restart(LEAN, args.rounds)
    print(
        f"crash (SIGKILL) + restart + hello, 21-request journal: heavy start "
        f"{heavy_restart * 1000:.0f} ms, lean start {lean_restart * 1000:.0f} ms "
        f"(lean/heavy = {lean_restart / heavy_restart:.2f})"
    )
    rates = {}
    for label, command, jobs in (
        ("heavy start", HEAVY, 1),
        ("lean start", LEAN, 1),
        ("lean start, --jobs 2", LEAN, 2),
    ):
        steps, seconds = steps_per_second(command, args.seeds, args.ops, jobs)
        rates[label] = steps / seconds
        print(
            f"lockstep vs model adapter, {label}: {steps} steps of {args.seeds} seeds in "
            f"{seconds:.2f} s = {rates[label]:.0f} steps/s (adapter start per seed and per crash)"
        )
    base = rates["heavy start"]
    print(
        "steps/s relative to heavy start: "
        + ", ".join(f"{k} {v / base:.2f}x" for k, v in rates.items())
    )


if __name__ == "__main__":
    main()
