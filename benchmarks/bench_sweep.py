"""Sweep throughput: seeds/s and ops/s of the default mix, every invariant on,
traces written to DuckDB, at 1 and 2 jobs; side by side with a previous
release; checked operations per second against a Hypothesis state machine;
then where the time goes.

Goals: 10,000 seeds of ~100 ops in under a minute on a 2-core machine (issue
4), then under 30 s at 2 jobs (issue 21: 46.6 s before). Each measurement is
a whole ``sweep`` as the command runs it: pool start-up, the runs, the
checkers, encoding, and the parent's database writes, into a fresh database
each time. On a shared machine the wall time says little; the CPU time of
the process tree (the parent's, plus the workers' time running batches) is
what the work cost, and every line states the load it ran under.

    python benchmarks/bench_sweep.py [--seeds 10000] [--ops 100] [--jobs 1,2]
        [--base REF [--base-keep DIR]] [--checked-seeds 200 --hypothesis-examples 150]
        [--checked-rounds 1] [--checked-instructions 0 [--checked-counts 3]]
        [--profile-seeds 300]
        [--checkers MODULE] [--json FILE]

``--base REF``: each sweep also runs in the release REF names, installed in
its own virtual environment (``benchmarks/baseline.py``), one after the other
in one run, and the ratios are printed with the absolute figures; both sides
must give the same trace hashes (the same version string hashes alike).

Checked operations (``--checked-seeds N``, 0 to skip): how many operations
each way of testing judges for the same work, every step judged by the same
model (``ModelTarget`` over ``PRESETS[--policy]``), the same ``Monitor`` and
the same invariants (all of them; each side builds one monitor per run or
example). An operation is a step the monitor judged: hello, restarts and the
liveness phase included, on both sides. Each side runs in a process of its
own, warmed up first (imports, first-use caches: one seed run and stored,
one Hypothesis example), and measures only what follows:

- the sweep side: ``run_batch`` of N seeds in process, as a worker runs a
  batch (the seeded workload, the model, the monitor, every trace encoded
  and hashed, the store's tables built), then ``Store.write`` of the batch
  into DuckDB and the store's close (its checkpoint writes the rows into the
  file): more work than the Hypothesis side, which stores nothing;
- the Hypothesis side: ``run_state_machine_as_test`` of ``InboxMachine``
  (``search/stateful.py``) for ``--hypothesis-examples`` examples of up to
  ``--ops`` rule steps, derandomized, no database, health checks off, no
  deadline: Hypothesis draws each rule and its arguments, the machine sends
  the operation to the model and feeds the step to the monitor.

Two ratios, sweep ops per unit over Hypothesis ops per unit, are printed
(and written with ``--json``):

- by CPU time (``--checked-rounds R``): R rounds, each running the sweep
  side and the Hypothesis side back to back (with ``--base``, the release's
  pair in the same round; every other round in the reverse order), so both
  sides of a ratio ran under the same load. The median is the figure, the
  spread (lowest-highest round) says how far the load moved it: on this
  shared 2-core machine a round moved by up to ~15 %, more than a pass gains.
- by instruction count (``--checked-instructions N``): each side's script
  under ``valgrind --tool=callgrind`` with N seeds (N examples), minus the
  same with none (start-up, imports, the warm-up), the hash seed fixed:
  checked ops per instruction. The load hardly moves it, so it is the one to
  compare between passes; it gives no weight to what valgrind does not run
  as the CPU would (SHA-256 instructions, memory stalls, the kernel's page
  faults), so it reads somewhat above the CPU ratio. Each side is counted
  ``--checked-counts K`` times and the median is the figure, the spread
  printed: neither side counts quite the same twice (Hypothesis's engine
  times phases, draws and the collector through the clock: 7,133.7-7,155.9 M
  for the same 2,745 ops in three counts on one day, and once a count ~4 %
  over its neighbours; the sweep side's store runs DuckDB's threads), so one
  count can flatter a ratio. A release's Hypothesis side draws other
  examples (of other lengths), so compare each interpreter's ratio, not one
  side across them.

The profile runs a sample of seeds in process (as one job does, the store
write included) under cProfile, and prints the hottest functions and the
time per area (model, simulator, checkers, encoding, store). cProfile's
per-call cost weighs functions called often; a sampling profiler (``py-spy
record -f raw -- python -c ...``) gives the flatter, truer picture below.

Profile before issue 21's sweep work (py-spy, 200 Hz, 500 seeds x 100 ops in
one process, store write included; 15,188 samples; by the innermost package
frame): checkers 33.0 %, model 21.2 % (+3.6 % the target's observe),
simulator 15.8 % (+2.6 % probes and view), JSON (the model's canonical JSON,
event data parsing) 8.6 %, encoding of steps and the hash 7.2 %, store 8.0 %
(mostly pyarrow's first import and a fresh database). Hottest own time:
dataclass ``__init__`` of the per-step frozen values 7.8 %, Monitor.feed 4.5 %
(its hook calls), JSONEncoder.iterencode 3.6 %, the step encoder 3.0 %,
model ``_request`` 2.0 %, Workload.next 1.9 %, State.open_calls 1.5 %,
JSONDecoder.decode 1.4 % (event data parsed again by each checker),
BarrierEventChecker.end 1.4 %, BoundaryContentChecker 1.3 %, Env.hit 0.9 %,
the monitor's hook tables 0.9 %. Under cProfile (500 seeds, CPU timer) the
top own times were Monitor.feed, isinstance, dict.get, list.append, the
model's ``_normalize``, Workload.next, Env.hit (365,248 calls), apply's
``_request`` and ``canonical_json`` (34,224 calls for 300 seeds, most from
the retry checker re-encoding both receipts key by key).

Issue 21, second pass (2026-12-01; py-spy, 500 seeds x 100 ops, ``inboxsim
sweep --jobs 1``): checkers 27.5 %, model 17.8 % (+2 % observe), store
14.2 % (imports and the database included), simulator 14.2 %, generated
dataclass ``__init__`` 9.0 % (frozen values: each field an
``object.__setattr__``, ~3.7x a plain slots class; left, the model's values
stay frozen), encoding 6.7 %, JSON 6.6 %. Kept: ``Tx.freeze`` reuses the
runs and work mappings a transition left unchanged; one canonical encoder
with its C scanner built once (``model/values``); a request's payload text
encoded once per request object. Work per seed, by valgrind instruction
count (load-independent; 15 seeds x 100 ops in process, tables built):
49.6 M at the start of the pass, 47.8 M after, the release 52.9 M (1.07x
-> 1.11x less). This benchmark at load 15-22 (CPU time): 39.1 s vs the
release's 41.4 s, 1.06x (the same 1.06x before the pass: the 4 % is below
this load's noise); checked ops per CPU second 6,592 vs Hypothesis's 1,726,
3.82x (the release 3.57x). Goals (1.55x; 6x) not met.

Issue 21, third pass (2026-12-01; py-spy, 200 Hz, 500 seeds x 100 ops in one
process, store write included, 6,410 samples; by the innermost package
frame): checkers 35.5 %, model 22.9 % (+2.4 % the target's observe),
simulator 16.2 %, imports 8.1 % (start-up: a sweep's worker pays it once),
encoding 5.3 %, store 3.2 %, the values' ``__init__`` 5.7 %. Hottest own
time: the values' ``__init__`` 4.7 %, Monitor.feed 4.6 % (its hook calls),
the C encoder 4.3 %, apply's ``_request`` 2.9 %, Workload.next 2.0 %,
StepCtx.__init__ 2.0 %, BarrierEventChecker.end 1.7 %, pyarrow's tables 1.6 %,
``_safety`` 1.4 %, Monitor's hook tables 1.3 % (built per monitor, i.e. per
seed), Tracker.settle 1.3 %, observed_text 1.3 %. Kept: ``model.frozen.fast_init``
(each frozen value's fields stored through their slot descriptors, ~2x
faster construction, still frozen: 48.4 M -> 45.4 M instructions a seed);
a request's plain payload text written out, not normalized and encoded;
``boundaries`` answers at once on the steps without one (44.0 M); the
trace hash in one call (~0.4 % of a run). By valgrind instruction count
(``benchmarks/sweep_instructions.py``: 15 seeds x 100 ops in process, tables
built, start-up subtracted): 43.9 M a seed vs the release's 51.9 M, 1.18x
(1.08x at the start of the pass). This benchmark at load 6-8 (CPU time):
47.5 s vs the release's 50.9 s, 1.07x (at load 12-18: 47.0 vs 46.7 s, 1.0x:
at such load CPU time moves by more than the gain); the in-process batch of
the checked comparison, one side after the other, 4.0 s vs 4.6 s (1.15x).
Checked ops per CPU second 5,396 vs Hypothesis's 1,340, 4.03x (the release
3.10x; at load 11-13 3.80x vs 3.50x: the Hypothesis side varies by ~15 %;
both share the model and the monitor, so their gains lift Hypothesis too).
Goals (1.55x; 6x) not met. Left: the monitor's per-seed hook tables and its
dispatch loop (the explorer's work is changing them), the workload's own
per-step values, the target's views.

Issue 21, fourth pass, outside the checkers (2026-12-02). Kept: a run makes
no reference cycles (a refused request's traceback held the callers' frames,
so every run's steps waited for the cyclic collector; the workload's family
table held methods bound to itself; ``tests/test_sim_run.py`` checks it),
and ``run_batch`` pauses the collector, collecting the youngest generation
after each seed; a request's and a reply's canonical text written directly
(``trace/encode.py``), the workload's ``Action`` with the fast ``__init__``;
``Op.to_wire``'s field names looked up once per class; the runner's event
texts written directly. By valgrind instruction count
(``benchmarks/sweep_instructions.py``, 15 seeds x 100 ops): 43.5 M a seed at
the start of the pass, 43.3 (cycles), 42.7 (collector), 41.5 (texts,
Action), 41.1 (to_wire), 40.8 M after; the release 52.1 M (1.20x -> 1.28x).
This benchmark at load 16-18 (CPU time, ``--seeds 2000 --jobs 2``): 24.5 s
vs the release's 30.3 s, 1.24x, the same hashes; checked ops per CPU second
10,813 vs Hypothesis's 2,490, 4.34x (the release 3.39x). Goals (1.55x; 6x)
not met: at 1.28x the quiet machine's 46.6 s would be ~36 s.

The profile now (py-spy, 200 Hz, 500 seeds x 100 ops in one process, store
write included, 7,824 samples; by the innermost package frame): checkers
35.3 %, model 25.1 % (the values' ``__init__`` 2.7 % of it; +2.9 % the
target's observe), simulator 21.4 %, encoding 7.4 %, store 3.3 %, imports
2.9 %. Hottest own time: the values' ``__init__`` 5.3 %, Monitor.feed 5.2 %,
the C encoder 3.2 % (most of it the replies' results: receipts and logs,
their payloads parsed back to be encoded again), Workload.next 2.5 %, apply's
``_request`` 2.1 %, ``_Recorder.add`` 2.0 %, Tracker.settle 1.8 %, pyarrow's
tables 1.7 %, ``_request_text`` 1.7 %, Chooser.below 1.6 %,
IndependenceChecker.end 1.5 %, BarrierEventChecker.end 1.5 %, observe 1.4 %,
``observed_text`` 1.3 %, StepCtx.__init__ 1.3 %. Left: a reply's result
text without parsing the payloads back (the model's replies are
dictionaries: that is its interface), the chooser's per-draw overhead.

Issue 21, fifth pass, the simulator's side (2026-12-03; py-spy, 500 seeds in
batches of 100 as a worker runs them; callgrind with collection toggled on
the batch only). Hottest own time outside the checkers: the C encoder 3.7 %
(2.8 % of it the replies' results), ``parse_json`` 2.7 % (``json.loads``'s
wrappers around the scanner), the ``Step`` built in ``_Recorder.add`` 1.3 %,
the chooser 3.7 % all told, ``Swarm.to_dict`` 0.8 % (``asdict``), the store
columns' delivery parse 0.5 %; by instructions, SHA-256 of the trace text
3 % (cheap in time: valgrind does not run the CPU's SHA instructions) and
pyarrow's tables ~3 % at 6 seeds a batch (a fixed cost per batch, small at
a sweep's 100). Kept: the model's receipts and logs carry their reply text
(``Ok.text``, not compared); ``parse_json`` calls the scanner; values of
five fields or more are built as a twin class with the same slots and
turned back (``model/frozen.py``); the chooser's live draws call
``random()`` and ``append`` directly; ``Swarm.to_dict`` field by field;
the delivery tail parsed once; pyarrow preloaded by the forkserver (it was
imported in each worker's first batch, ~0.7 s CPU each; not in the
instruction count, which subtracts start-up); a step that changed nothing
observes the one shared ``NOTHING``. By instruction count
(``benchmarks/sweep_instructions.py``, 15 seeds x 100 ops, load 7-11): 40.1 M
a seed at the start of the pass, 37.4 M after; the release 52.3 M (1.40x,
1.28x before). The checkers' side of the pass (the monitor, ``invariants/``)
is measured on its own branch; bench_sweep runs once both are merged.

Issue 21, fifth pass, the monitor (2026-12-03). Profile by callgrind
(client requests around the monitor alone, in process, warm: 20 g4 traces,
2,148 steps): 285.0 M instructions, 87.8 M of them the tracker and the
dispatch loop with no checker; each checker's share (all of them minus all
but it): ReuseChecker 20.6 M, IndependenceChecker 19.2, DurabilityChecker
14.1, RevertChecker 11.1, BoundaryContentChecker 9.3, AdmissionOrderChecker
9.1, ReplayChecker 9.1, LifecycleChecker 8.3, BarrierEventChecker 7.1, the
other 24 at most 7.7 each. Of the steps, 60 % moved nothing and 31 % were
refused. Kept: a step that moved nothing calls only the checkers whose
``end`` judges its request type there, refused or not (``Checker.still``,
``Checker.refused``), and their ``begin``; the step's facts with fewer type
tests and calls (285.0 -> 270.1 -> 254.8 M). Work per seed
(``benchmarks/sweep_instructions.py``, 15 seeds x 100 ops): 40.8 M ->
38.5 M; the release 52.5 M (1.28x -> 1.36x). This benchmark at load 6.7-8.0
(``--seeds 2000 --jobs 2``): 34.2 s vs the release's 39.6 s CPU (1.16x: at
such load CPU time moves by more than the gain), the same hashes; checked
ops 3.60x Hypothesis (the release 3.19x, the same run). Left: ReuseChecker's
and IndependenceChecker's every-request work (the owner look-ups, the named
sessions' set), the tracker's ``observe`` and ``settle`` on every step.

Issue 21, the checked comparison made steady (2026-12-06, main 380ab5a plus
the store's changes): interleaved rounds and the instruction count above;
the store's batch tables built through pyarrow's system memory pool (8
worker batches of 100 seeds: 220 -> 100 ms CPU; the default pool's fresh
arenas cost each worker process twice the building) and its row counts in
one query (3.2 -> 1.2 ms a write). At load 5.9-10.4 (``--seeds 2000 --jobs 2
--checked-rounds 7 --checked-instructions 30 --profile-seeds 0 --base
perf-base-0.2.0``): the sweep 14.2 vs the release's 19.6 s CPU (1.37x), the
same hashes; checked ops by CPU time median 4.14x of 7 rounds (3.66-4.34x),
the release 2.92x (2.80-3.22x); by instructions 5.08x (the sweep side 386 k
instructions a checked op, Hypothesis 1,963 k), the release 3.00x (549 k vs
1,644 k). Goal 6x not met: by instructions it needs the sweep side at
~327 k an op (-15 %). Of the sweep side's 386 k, the store is ~55 k: DuckDB's
insert ~21 k, its checkpoint ~15 k, the statements' planning ~22 M a write
(~7 k an op at 30 seeds a write), the columns and arrow tables ~12 k; the
rest is DuckDB's own work, left. Under cProfile (300
seeds, the profile below): checkers 37.4 %, model 22.4 %, simulator 18.6 %,
builtins 12.4 %, encoding 6.0 %, store 3.2 %; hottest own time
Monitor.feed, apply's ``_request``, dict.get, Workload.next, isinstance,
``_safety``, ``_request_text``, the tracker's ``StepCtx`` and ``observe``,
the execution checker's ``end``, ``_Recorder.add``, the probes' ``feed``,
the chooser's ``below`` and ``weighted``, the model store's ``append``.
Tried and not kept: DuckDB with one thread for the writer (-0.5 % of the
instructions, no CPU gain measured), the arrow JSON extension type for the
JSON columns (it skips DuckDB's check of the text, ~40 ns a value), the
columns appended by comprehensions (slower than the one loop).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import inboxsim
from inboxsim.model import PRESETS
from inboxsim.sim.run import RunOptions
from inboxsim.sim.sweep import BatchTask, SweepPlan, run_batch, sweep
from inboxsim.store.store import Store

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import baseline  # noqa: E402  (benchmarks/ is scripts, not a package)
import callgrind  # noqa: E402

PACKAGE = str(Path(inboxsim.__file__).parent) + "/"  # the repository root is the package
AREAS = (  # first match wins: package folders by relative path, then libraries
    ("model/", "model"),
    ("invariants/", "checkers"),
    ("trace/encode", "encoding"),
    ("trace/", "simulator"),
    ("targets/", "model"),
    ("sim/", "simulator"),
    ("store/", "store"),
)
LIBRARIES = (
    ("json", "encoding"),
    ("hashlib", "encoding"),
    ("duckdb", "store"),
    ("pyarrow", "store"),
)


def area_of(path: str) -> str:
    if path.startswith(PACKAGE):
        relative = path[len(PACKAGE) :]
        return next(
            (name for prefix, name in AREAS if relative.startswith(prefix)), "other inboxsim"
        )
    return next((name for needle, name in LIBRARIES if needle in path), "other (builtins, stdlib)")


def measure(
    seeds: int, ops: int, jobs: int, policy: str, checkers: str | None, folder: Path
) -> dict[str, Any]:
    plan = SweepPlan(
        policy, PRESETS[policy], RunOptions(ops=ops), 0, seeds, jobs, checkers=checkers
    )
    before = os.times()
    started = time.perf_counter()
    with Store(folder / f"bench-{jobs}.duckdb") as store:
        report = sweep(plan, store)
    seconds = time.perf_counter() - started
    after = os.times()
    # CPU time of this process, and of running the seeds wherever they ran
    # (workers report their own): robust to other load on a shared machine,
    # where wall time is not. With one job the runs are inside the parent's.
    parent = after.user + after.system - before.user - before.system
    workers = report.run_cpu if jobs > 1 else 0.0
    size = (folder / f"bench-{jobs}.duckdb").stat().st_size / 1e6
    print(
        f"jobs {jobs}: {report.runs} seeds, {report.ops} ops in {seconds:.1f} s wall: "
        f"{report.runs / seconds:,.0f} seeds/s, {report.ops / seconds:,.0f} ops/s; "
        f"CPU {parent:.1f} s parent + {workers:.1f} s workers = "
        f"{1000 * (parent + workers) / max(report.runs, 1):.2f} ms per seed "
        f"({len(report.failing)} failing, {len(report.missing_probes)} required probes missed, "
        f"database {size:.0f} MB)",
        flush=True,
    )
    return {
        "side": "this checkout",
        "jobs": jobs,
        "runs": report.runs,
        "ops": report.ops,
        "wall": seconds,
        "parent": parent,
        "workers": workers,
        "cpu": parent + workers,
        "failing": len(report.failing),
    }


def profile(seeds: int, ops: int, policy: str, checkers: str | None, folder: Path) -> None:
    task = BatchTask(
        tuple(range(seeds)), 0, 0, PRESETS[policy], RunOptions(ops=ops), True, checkers
    )
    run_batch(
        BatchTask((10_000_000,), 0, 0, PRESETS[policy], RunOptions(ops=ops), True, checkers)
    )  # warm up
    profiler = cProfile.Profile()
    with Store(folder / "profile.duckdb") as store:
        profiler.enable()
        outcome = run_batch(task)
        assert outcome.tables is not None
        store.write(outcome.tables)
        profiler.disable()
    stats = pstats.Stats(profiler)
    total = sum(v[2] for v in stats.stats.values())  # type: ignore[attr-defined]
    areas: dict[str, float] = defaultdict(float)
    for (path, _, _), (_, _, tottime, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        areas[area_of(path)] += tottime
    print(
        f"\nprofile of {seeds} seeds in one process ({total:.2f} s under cProfile), time by area:"
    )
    for area, seconds in sorted(areas.items(), key=lambda kv: -kv[1]):
        print(f"  {area:<26} {seconds:6.2f} s  {100 * seconds / total:5.1f} %")
    print("\nhottest functions (own time):")
    stats.sort_stats("tottime").print_stats(20)


# The measuring scripts both sides run (each under its own interpreter), through
# the API both releases share (0.2.0 kept the store in reports/ and the
# Hypothesis machine in sim/); the last line of output is JSON.
SWEEP_SCRIPT = """
import hashlib, json, os, sys, tempfile, time
from pathlib import Path
from inboxsim.model import PRESETS
from inboxsim.sim.run import RunOptions
from inboxsim.sim.sweep import SweepPlan, sweep
try:
    from inboxsim.store.store import Store
except ImportError:
    from inboxsim.reports.store import Store

a = json.loads(sys.argv[1])
plan = SweepPlan(a["policy"], PRESETS[a["policy"]], RunOptions(ops=a["ops"]), 0, a["seeds"],
                 a["jobs"])
with tempfile.TemporaryDirectory() as tmp:
    before, started = os.times(), time.perf_counter()
    with Store(Path(tmp) / "bench.duckdb") as store:
        report = sweep(plan, store)
    wall = time.perf_counter() - started
    after = os.times()
parent = after.user + after.system - before.user - before.system
workers = report.run_cpu if a["jobs"] > 1 else 0.0
digest = hashlib.sha256("".join(h for _, h in sorted(report.hashes.items())).encode())
print(json.dumps({"runs": report.runs, "ops": report.ops, "wall": wall, "parent": parent,
                  "workers": workers, "failing": len(report.failing),
                  "hashes": digest.hexdigest()[:16]}))
"""

CHECKED_SCRIPT = """
import contextlib, io, json, sys, tempfile, time
from pathlib import Path
from inboxsim.model import PRESETS
from inboxsim.sim.run import RunOptions

a = json.loads(sys.argv[1])
policy, options, count = PRESETS[a["policy"]], RunOptions(ops=a["ops"]), a["count"]
failed = ""
if a["side"] == "sweep":
    from inboxsim.sim.sweep import BatchTask, run_batch
    try:
        from inboxsim.store.store import Store
    except ImportError:
        from inboxsim.reports.store import Store

    def batch(first, seeds):
        outcome = run_batch(BatchTask(seeds, first, 0, policy, options, True, None))
        store.write(outcome.tables)
        return sum(s.ops for s in outcome.summaries), len(seeds)

    with tempfile.TemporaryDirectory() as tmp:
        with Store(Path(tmp) / "checked.duckdb") as store:
            batch(0, (10_000_000,))  # warm-up: imports, first-use caches, the first write
            store.con.execute("CHECKPOINT")  # the warm-up's rows out of the way
            cpu = time.process_time()
            ops, units = batch(1, tuple(range(count))) if count else (0, 0)
        # The close included: its checkpoint writes the batch into the file.
        cpu = time.process_time() - cpu
else:
    from hypothesis import HealthCheck, settings
    from hypothesis.stateful import run_state_machine_as_test
    try:
        from inboxsim.search.stateful import InboxMachine
    except ImportError:
        from inboxsim.sim.stateful import InboxMachine

    judged = [0, 0]  # steps, examples

    class Counted(InboxMachine):
        POLICY = a["policy"]

        def teardown(self):
            judged[0] += len(self.steps)
            judged[1] += 1
            super().teardown()

    def examples(n):
        config = settings(max_examples=n, stateful_step_count=a["ops"], deadline=None,
                          database=None, derandomize=True,
                          suppress_health_check=list(HealthCheck))
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                run_state_machine_as_test(Counted, settings=config)
        except Exception as exc:
            text = str(exc).splitlines()[0] if str(exc) else ""
            return f"{type(exc).__name__}: {text}"[:200]
        return ""

    examples(1)  # warm-up: imports, the strategies resolved, the first example
    judged[:] = [0, 0]
    cpu = time.process_time()
    failed = examples(count) if count else ""
    cpu = time.process_time() - cpu
    ops, units = judged
print(json.dumps({"side": a["side"], "ops": ops, "units": units, "cpu": cpu, "failed": failed}))
"""
SIDES = ("sweep", "hypothesis")


@dataclass
class Checked:
    """One interpreter's checked operations, sweep vs Hypothesis: each round's
    figures (by CPU time) and the figures by instruction count."""

    side: baseline.Side
    rounds: list[dict[str, Any]] = field(default_factory=list)
    instructions: dict[str, Any] | None = None

    def ratios(self) -> list[float]:
        return [r["ratio"] for r in self.rounds]

    def summary(self) -> dict[str, Any]:
        ratios = self.ratios()
        return {
            "side": self.side.label,
            "version": self.side.version,
            "rounds": self.rounds,
            "median": statistics.median(ratios) if ratios else None,
            "min": min(ratios, default=None),
            "max": max(ratios, default=None),
            "instructions": self.instructions,
        }


def side_by_side(args: argparse.Namespace, jobs: list[int], figures: dict[str, Any]) -> None:
    """This checkout and the release ``--base`` names: the same sweeps (and
    the checked-operations comparison) on each side, then the ratios."""
    print(f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f} before", flush=True)
    with baseline.sides(args) as sides:
        for j in jobs:
            bound = {"policy": args.policy, "seeds": args.seeds, "ops": args.ops, "jobs": j}
            measured = []
            for side in sides:
                print(f"{side.label}: sweep at {j} job(s) ...", file=sys.stderr, flush=True)
                m = side.run(SWEEP_SCRIPT, bound)
                measured.append(m)
                r = m.result
                cpu = r["parent"] + r["workers"]
                figures["sweeps"].append(
                    {"side": side.label, "version": side.version, "jobs": j, "cpu": cpu, **r}
                    | {"load": [m.load_before[0], m.load_after[0]]}
                )
                print(
                    f"{side.label:<28} inboxsim {side.version:<6} jobs {j}: {r['runs']:,} seeds, "
                    f"{r['ops']:,} ops, wall {r['wall']:6.1f} s ({r['runs'] / r['wall']:,.0f} "
                    f"seeds/s), CPU {cpu:6.1f} s ({r['parent']:.1f} parent + "
                    f"{r['workers']:.1f} workers; {1000 * cpu / max(r['runs'], 1):.2f} ms per "
                    f"seed), {r['failing']} failing, hashes {r['hashes']}, {m.load_text()}",
                    flush=True,
                )
            if len(measured) == 2:
                _ratios(j, measured[0], measured[1])
        checked_operations(sides, args, figures)


def _ratios(jobs: int, new: baseline.Measured, old: baseline.Measured) -> None:
    n, o = new.result, old.result
    same = "the same trace hashes" if n["hashes"] == o["hashes"] else "DIFFERENT trace hashes"
    print(
        f"  jobs {jobs}: wall {baseline.ratio(n['wall'], o['wall'])}, CPU "
        f"{baseline.ratio(n['parent'] + n['workers'], o['parent'] + o['workers'])}; {same}",
        flush=True,
    )


def checked_operations(
    sides: list[baseline.Side], args: argparse.Namespace, figures: dict[str, Any]
) -> None:
    """Checked operations, sweep vs Hypothesis, on each side: by CPU time in
    ``--checked-rounds`` interleaved rounds, then by instruction count."""
    if not args.checked_seeds:
        return
    results = [Checked(side) for side in sides]
    for n in range(args.checked_rounds):
        # Each process measures one side; a round runs them back to back, every
        # interpreter's pair, and every other round in the reverse order, so no
        # side always runs first (or last) as the load drifts.
        order = [(c, which) for c in results for which in SIDES]
        if n % 2:
            order.reverse()
        measured: dict[tuple[int, str], baseline.Measured] = {}
        for c, which in order:
            print(f"{c.side.label}: checked ops, {which} ...", file=sys.stderr, flush=True)
            measured[id(c), which] = c.side.run(CHECKED_SCRIPT, _checked_args(args, which))
        for c in results:
            c.rounds.append(_round(c, measured[id(c), "sweep"], measured[id(c), "hypothesis"]))
            r = c.rounds[-1]
            print(
                f"{c.side.label:<28} round {n + 1}/{args.checked_rounds}: checked ops per CPU "
                f"second: sweep {r['sweep_rate']:,.0f} ({r['sweep_ops']:,} ops of "
                f"{r['seeds']} seeds, stored, in {r['sweep_cpu']:.2f} s) vs Hypothesis "
                f"{r['hypothesis_rate']:,.0f} ({r['hypothesis_ops']:,} ops of "
                f"{r['examples']} examples in {r['hypothesis_cpu']:.2f} s): {r['ratio']:.2f}x, "
                f"load {r['load'][0]:.1f} -> {r['load'][1]:.1f}"
                + (f"; Hypothesis failed: {r['failed']}" if r["failed"] else ""),
                flush=True,
            )
    if args.checked_instructions:
        for c in results:
            c.instructions = by_instructions(c.side, args)
    print("checked operations, sweep vs Hypothesis (same model, monitor and invariants):")
    for c in results:
        ratios, loads = c.ratios(), [x for r in c.rounds for x in r["load"]]
        line = f"  {c.side.label:<28}"
        if ratios:  # none with --checked-rounds 0 (instructions only)
            line += (
                f" by CPU time: median {statistics.median(ratios):.2f}x of "
                f"{len(ratios)} round(s) ({min(ratios):.2f}-{max(ratios):.2f}x, load "
                f"{min(loads):.1f}-{max(loads):.1f});"
            )
        if c.instructions is not None:
            i = c.instructions
            line += (
                f" by instructions: {i['ratio']:.2f}x (medians of {args.checked_counts} counts: "
                f"sweep {_per_op(i['sweep'])} a checked op over {i['sweep']['ops']:,} ops, "
                f"Hypothesis {_per_op(i['hypothesis'])} over {i['hypothesis']['ops']:,})"
            )
        print(line, flush=True)
    figures["checked"] = [c.summary() for c in results]


def _checked_args(args: argparse.Namespace, which: str, count: int | None = None) -> dict[str, Any]:
    if count is None:
        count = args.checked_seeds if which == "sweep" else args.hypothesis_examples
    return {"policy": args.policy, "ops": args.ops, "side": which, "count": count}


def _round(c: Checked, sweep: baseline.Measured, hypothesis: baseline.Measured) -> dict[str, Any]:
    s, h = sweep.result, hypothesis.result
    sweep_rate = s["ops"] / max(s["cpu"], 1e-9)
    hypothesis_rate = h["ops"] / max(h["cpu"], 1e-9)
    loads = (sweep.load_before[0], sweep.load_after[0], hypothesis.load_before[0])
    return {
        "sweep_ops": s["ops"],
        "seeds": s["units"],
        "sweep_cpu": s["cpu"],
        "sweep_rate": sweep_rate,
        "hypothesis_ops": h["ops"],
        "examples": h["units"],
        "hypothesis_cpu": h["cpu"],
        "hypothesis_rate": hypothesis_rate,
        "ratio": sweep_rate / max(hypothesis_rate, 1e-9),
        "load": [
            min(loads + (hypothesis.load_after[0],)),
            max(loads + (hypothesis.load_after[0],)),
        ],
        "failed": h["failed"],
    }


def by_instructions(side: baseline.Side, args: argparse.Namespace) -> dict[str, Any]:
    """Checked ops per instruction, sweep vs Hypothesis, under callgrind: each
    side's script with ``--checked-instructions`` seeds (examples) minus the
    same with none (start-up, imports and the warm-up left out)."""
    figures: dict[str, Any] = {}
    for which in SIDES:
        print(
            f"{side.label}: checked ops, {which}, under callgrind ...", file=sys.stderr, flush=True
        )
        spent, result = [], {}
        for _ in range(args.checked_counts):
            counted, result = _callgrind(
                side.python, _checked_args(args, which, args.checked_instructions)
            )
            alone, _ = _callgrind(side.python, _checked_args(args, which, 0))
            spent.append(counted - alone)
        ops = max(result["ops"], 1)
        figures[which] = {
            "ops": result["ops"],
            "units": result["units"],
            "instructions": statistics.median(spent),
            "per_op": statistics.median(spent) / ops,
            "per_op_range": [min(spent) / ops, max(spent) / ops],
            "failed": result["failed"],
        }
    figures["ratio"] = figures["hypothesis"]["per_op"] / max(figures["sweep"]["per_op"], 1e-9)
    return figures


def _per_op(side: dict[str, Any]) -> str:
    low, high = side["per_op_range"]
    spread = f" ({low / 1e3:,.1f}-{high / 1e3:,.1f} k)" if high > low else ""
    return f"{side['per_op'] / 1e3:,.1f} k{spread}"


def _callgrind(python: str, args: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    total, printed = callgrind.count(python, CHECKED_SCRIPT, json.dumps(args))
    return total, json.loads(printed.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, default=10_000)
    parser.add_argument("--ops", type=int, default=100)
    parser.add_argument("--jobs", default="1,2", help="comma-separated job counts to measure")
    parser.add_argument("--policy", default="g4")
    parser.add_argument("--profile-seeds", type=int, default=300)
    parser.add_argument(
        "--checkers", default=None, help="checkers' module (default inboxsim.invariants)"
    )
    parser.add_argument(
        "--checked-seeds",
        type=int,
        default=200,
        help="seeds of the sweep side of checked ops/s vs Hypothesis (0: skip)",
    )
    parser.add_argument(
        "--hypothesis-examples",
        type=int,
        default=150,
        help="examples of the Hypothesis side (up to --ops rule steps each)",
    )
    parser.add_argument(
        "--checked-rounds",
        type=int,
        default=1,
        help="rounds of the checked comparison by CPU time, the sides interleaved; "
        "the median ratio is reported with the spread",
    )
    parser.add_argument(
        "--checked-instructions",
        type=int,
        default=0,
        metavar="N",
        help="also the checked ratio by instruction count under valgrind's callgrind: "
        "N seeds vs N examples (0: skip)",
    )
    parser.add_argument(
        "--checked-counts",
        type=int,
        default=3,
        metavar="K",
        help="counts of each side under callgrind; the median is the figure (default 3)",
    )
    parser.add_argument("--json", metavar="FILE", help="also write the figures to FILE as JSON")
    baseline.add_arguments(parser)
    args = parser.parse_args()
    jobs = [int(j) for j in args.jobs.split(",") if j]
    figures: dict[str, Any] = {"cores": os.cpu_count(), "sweeps": [], "checked": []}
    if args.base:
        side_by_side(args, jobs, figures)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            for j in jobs:
                figures["sweeps"].append(
                    measure(args.seeds, args.ops, j, args.policy, args.checkers, folder)
                )
            checked_operations([baseline.current()], args, figures)
            if args.profile_seeds:
                profile(args.profile_seeds, args.ops, args.policy, args.checkers, folder)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
