"""Conformance: an adapter in lockstep with the reference model
(``docs/cli.md``, "Lockstep: what conformance compares").

:func:`conformance` runs, against one adapter command:

1. the named scenario library, each scenario with a fresh
   ``LockstepTarget(ModelTarget(policy), AdapterTarget(command))``; the
   scenario's own expectations and the invariants are judged on the
   target's trace, and the first difference from the model stops it;
2. a seeded sweep: ``run_seed(seed, ..., target=factory)`` through
   :mod:`.run` with the same lockstep target, each seed in a fresh data
   folder, stopping each run at its first divergence or violation.

Invariants are judged with ``only_expected``: the target is compared with
the model under ``policy``, so an invariant the policy itself departs from
(``g2``'s admission-time stamps and monotonic visible time) is not the
target's failure. A scenario whose ``breaks_under`` lists the policy is
written for other rules: it is recorded as not testable, not run.

The result is a :class:`ConformanceReport`: one :class:`Item` per scenario,
per seed and per invariant (and per hello feature one side lacks), each with
a verdict (``held``, ``violated``, ``diverged``, ``protocol error``, ``not
testable``), a detail (the divergence rendered side by side, or the
violation message) and a repro command. :func:`store_results` writes the
items into a ``conformance`` table of the DuckDB store.
"""

from __future__ import annotations

import contextlib
import functools
import json
import shlex
import sys
import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import HarnessError
from ..impls import sqlite_inbox
from ..impls.opencode import RECOMMENDED_TIMEOUT, adapter_command
from ..invariants import Monitor
from ..invariants.registry import REGISTRY, expected
from ..model import Crashed, Policy
from ..policy_file import load_policy
from ..procs import scratch
from ..scenarios.load import load_library, load_scenario, select_library
from ..scenarios.runner import run_scenario
from ..search.lockstep import Divergence, LockstepTarget, NotTestable
from ..search.repro import shrink_conformance, shrink_conformance_scenario
from ..search.shrink import failure_key
from ..sim.executor import check_executor, run_tasks
from ..sim.run import RunOptions, run_seed
from ..store.schema import FAILING, VERDICTS
from ..store.store import Store
from ..targets.adapter import (
    DEFAULT_TIMEOUT,
    AdapterTarget,
    ReadyWatch,
    check_startable,
    never_ready,
    split_command,
)
from ..targets.protocol import ProtocolError
from ..targets.target import ModelTarget
from ..trace.record import group_of, unseen
from .group_repro import shrink_concurrent_seed
from .mutants import MUTANTS, check_mutant

TARGETS = ("sqlite", "model-adapter", "opencode")
DEFAULT_OPS = 40
SHRINKABLE = frozenset({"diverged", "violated"})  # failures shrunk to a repro file
SEED_ROWS = 50  # more seeds than this: the summary lists only those that did not hold
DEFAULT_SHRINK_SECONDS = 60.0  # the budget of each

Progress = Callable[[str], None]


@dataclass
class Item:
    """One row of the conformance matrix."""

    kind: str  # "scenario", "seed", "invariant", "feature"
    item: str
    verdict: str
    detail: str = ""
    repro: str = ""
    seconds: float = 0.0
    repro_file: str = ""  # a minimal repro scenario, shrunk through the same adapter
    steps: int = 0  # requests the run made (a seed's; for ops/s)
    # a failure as data: its key (what the report groups by), the divergence
    # (Divergence.to_dict) or violations, and the minimal repro's (``repro``)
    failure: dict[str, Any] = field(default_factory=dict)
    # Whether the run's adapter answered hello, and if it never did, why
    # (adapter.never_ready): what conformance's ReadyWatch counts.
    ready: bool = False
    never_ready: str = ""

    @property
    def failed(self) -> bool:
        return self.verdict in FAILING

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "item": self.item,
            "verdict": self.verdict,
            "detail": self.detail,
            "repro": self.repro,
            "repro_file": self.repro_file,
            "seconds": round(self.seconds, 3),
            "steps": self.steps,
            "failure": self.failure,
        }


def divergence_failure(div: Divergence) -> dict[str, Any]:
    """An :attr:`Item.failure` for a divergence."""

    return {"key": failure_key(div), "divergence": div.to_dict()}


def violation_failure(violations: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """An :attr:`Item.failure` for invariant violations ((invariant, message), first first)."""
    return {
        "key": f"violated:{violations[0][0]}" if violations else "violated",
        "violations": [list(v) for v in violations],
    }


@dataclass
class ConformanceReport:
    target: str
    command: list[str]
    policy: str
    items: list[Item] = field(default_factory=list)
    seconds: float = 0.0
    # Over the seeds that ran to their end: steps, kills between requests
    # (SIGKILL) and failpoint crashes (the adapter died at a ``crash_at``).
    totals: dict[str, int] = field(
        default_factory=lambda: {"steps": 0, "kills": 0, "failpoint_crashes": 0}
    )

    @property
    def failures(self) -> list[Item]:
        return [i for i in self.items if i.failed]

    @property
    def passed(self) -> bool:
        return not self.failures

    @property
    def exit_code(self) -> int:
        return 0 if self.passed else 1

    def of(self, kind: str) -> list[Item]:
        return [i for i in self.items if i.kind == kind]

    def counts(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for i in self.items:
            row = out.setdefault(i.kind, dict.fromkeys(VERDICTS, 0))
            row[i.verdict] = row.get(i.verdict, 0) + 1
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "command": self.command,
            "policy": self.policy,
            "passed": self.passed,
            "exit_code": self.exit_code,
            "counts": self.counts(),
            "items": [i.to_dict() for i in self.items],
            "totals": dict(self.totals),
            "seconds": round(self.seconds, 3),
        }

    def lines(self) -> list[str]:
        """The human summary: the matrix, then each failure in full."""
        out = [f"conformance of {self.target} against the model (policy {self.policy})", ""]
        width = max([len(i.item) for i in self.items] + [10])
        for kind in ("scenario", "seed", "invariant", "feature"):
            rows = self.of(kind)
            if not rows:
                continue
            out.append(f"{kind:<{width + 4}}verdict")
            quiet = 0
            for i in rows:
                if kind == "seed" and len(rows) > SEED_ROWS and i.verdict == "held":
                    quiet += 1  # a long sweep: list what did not hold, count the rest
                    continue
                note = ""
                if i.verdict == "not testable" or (i.failed and kind == "invariant"):
                    note = "  (" + i.detail.splitlines()[0][:100] + ")" if i.detail else ""
                if i.repro_file:
                    note += f"  repro file {i.repro_file}"
                out.append(f"  {i.item:<{width}}  {i.verdict}{note}")
            if quiet:
                out.append(f"  ({quiet} more seeds held)")
            out.append("")
        counts = self.counts()
        out.append(
            "totals: "
            + "; ".join(
                f"{kind}s " + ", ".join(f"{n} {v}" for v, n in row.items() if n)
                for kind, row in counts.items()
            )
        )
        if self.of("seed"):
            t = self.totals
            out.append(
                f"seeded runs: {t['steps']} steps, {t['kills']} kills between requests, "
                f"{t['failpoint_crashes']} failpoint crashes"
            )
        failures = [i for i in self.failures if i.kind in ("scenario", "seed")]
        for i in failures:
            out += ["", f"=== {i.kind} {i.item}: {i.verdict}", i.detail]
            if i.repro:
                out.append(f"repro: {i.repro}")
            if i.repro_file:
                out.append(f"minimal repro scenario: {i.repro_file}")
                out.append(
                    "  rerun it alone: "
                    + shlex.join(
                        ["inboxsim", "run", i.repro_file, "--adapter", shlex.join(self.command)]
                    )
                )
        out.append("")
        out.append(f"{'PASSED' if self.passed else 'FAILED'} in {self.seconds:.1f} s")
        return out


# --- resolving the target -------------------------------------------------------


def target_command(
    adapter: str | None, target: str | None, policy: str | None, timeout: float
) -> tuple[list[str], str, float, str]:
    """(argv, policy name, timeout, what to call the target) for the command line's
    ``--adapter COMMAND`` or ``--target NAME``."""
    if (adapter is None) == (target is None):
        raise HarnessError("give one of --adapter COMMAND or --target NAME")
    if adapter is not None:
        try:
            argv = split_command(adapter)
        except ValueError as exc:
            raise HarnessError(f"--adapter: {exc}") from None
        if not argv:
            raise HarnessError("--adapter: the command is empty")
        check_startable(argv)
        return argv, policy or "g4", timeout, adapter
    if target == "sqlite":
        path = Path(sqlite_inbox.__file__).resolve().parent / "adapter.py"
        return [sys.executable, str(path)], policy or "g4", timeout, "sqlite"
    if target == "model-adapter":
        name = policy or "g4"
        return (
            [sys.executable, "-m", "inboxsim.targets.model_adapter", "--policy", name],
            name,
            timeout,
            "model-adapter",
        )
    if target == "opencode":
        return adapter_command(), policy or "g2", max(timeout, RECOMMENDED_TIMEOUT), "opencode"
    raise HarnessError(
        f"--target {target!r} is not a conformance target: one of {', '.join(TARGETS)}"
    )


def repro_command(
    command: Sequence[str],
    policy: str,
    *,
    scenario: str | None = None,
    seed: int | None = None,
    ops: int = DEFAULT_OPS,
    timeout: float = DEFAULT_TIMEOUT,
    concurrency: int = 1,
    free: bool = False,
) -> str:
    words = ["inboxsim", "conformance", "--adapter", shlex.join(command), "--policy", policy]
    if timeout != DEFAULT_TIMEOUT:
        words += ["--adapter-timeout", f"{timeout:g}"]
    if scenario is not None:
        words += ["--scenario", scenario, "--seeds", "0"]
    if seed is not None:
        words += ["--no-library", "--seed-start", str(seed), "--seeds", "1", "--ops", str(ops)]
    if concurrency > 1:
        words += ["--concurrency", str(concurrency)] + (["--free-running"] if free else [])
    return shlex.join(words)


# --- one scenario, one seed ---------------------------------------------------------


class _Lockstep:
    """Makes lockstep targets, each adapter in a fresh folder, and closes them."""

    def __init__(
        self, command: Sequence[str], timeout: float, base: Path, name: str, free: bool = False
    ) -> None:
        self.command = list(command)
        self.free = free
        self.timeout = timeout
        self.base = base
        self.name = name
        self.made: list[LockstepTarget] = []
        self.counter = 0

    def __call__(self, policy: Policy, step_limit: int) -> LockstepTarget:
        self.counter += 1
        folder = self.base / f"run-{self.counter}"
        lock = LockstepTarget(
            ModelTarget(policy, step_limit),
            AdapterTarget(self.command, folder, step_limit, self.timeout, name=self.name),
            free=self.free,
        )
        self.made.append(lock)
        return lock

    def adapters(self) -> list[AdapterTarget]:
        return [lock.target for lock in self.made if isinstance(lock.target, AdapterTarget)]

    def readiness(self, item: Item, error: BaseException | None) -> None:
        """Record on ``item`` whether an adapter of the run answered hello."""
        adapters = self.adapters()
        item.ready = any(a.hello is not None for a in adapters)
        if error is not None:
            item.never_ready = never_ready(adapters, error) or ""

    def not_testable(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for lock in self.made:
            for k, v in lock.not_testable.items():
                out.setdefault(k, v)
        return out

    def close(self) -> None:
        """Close every target (idempotent: closing a target twice does nothing);
        they stay listed, so that :meth:`readiness` can still be asked."""
        for lock in self.made:
            try:
                lock.close()
            except Exception:  # noqa: BLE001 - closing a broken adapter must not mask the verdict
                pass


def _monitor_factory() -> Any:

    def make(policy: Policy, hello: dict[str, Any], *_: Any) -> Any:
        return Monitor(policy, hello, only_expected=True)

    return make


def _protocol_detail(exc: ProtocolError, lockstep: _Lockstep) -> str:
    text = str(exc)
    for lock in lockstep.made:
        target = lock.target
        if isinstance(target, AdapterTarget):
            tail = target.stderr_text(1500)
            if tail:
                text += "\nadapter stderr (last lines):\n" + tail
    return text


def scenario_item(
    loaded: Any,
    command: Sequence[str],
    policy: Policy,
    policy_arg: str,
    timeout: float,
    base: Path,
    name: str = "target",
) -> tuple[Item, dict[str, str]]:
    """Run one library scenario in lockstep; its matrix row and what was not testable."""

    scenario = loaded.scenario
    repro = repro_command(command, policy_arg, scenario=scenario.name, timeout=timeout)
    if policy.name in scenario.breaks_under:
        return (
            Item(
                "scenario",
                scenario.name,
                "not testable",
                f"its expectations are {Path(scenario.policy).stem}'s and break under "
                f"{policy.name}",
                repro,
            ),
            {},
        )
    started = time.perf_counter()
    lockstep = _Lockstep(command, timeout, base, name)
    item: Item
    error: ProtocolError | None = None
    try:
        result = run_scenario(
            loaded, policy=policy, target_factory=lockstep, monitor=_monitor_factory()
        )
    except Divergence as div:
        item = Item("scenario", scenario.name, "diverged", div.render(), repro)
        item.failure = divergence_failure(div)
    except NotTestable as exc:
        item = Item("scenario", scenario.name, "not testable", str(exc), repro)
    except ProtocolError as exc:
        error = exc
        item = Item(
            "scenario", scenario.name, "protocol error", _protocol_detail(exc, lockstep), repro
        )
        item.failure = {"key": "protocol error"}
    else:
        if result.failures:
            broken = [f for f in result.failures if f.invariant is not None]
            verdict = "violated"
            detail = "\n".join(str(f) for f in (broken or list(result.failures)))
            item = Item("scenario", scenario.name, verdict, detail, repro)
            item.failure = (
                violation_failure(
                    [(f.invariant, f.message) for f in broken if f.invariant is not None]
                )
                if broken
                else {"key": "expectation", "message": str(result.failures[0])}
            )
        else:
            item = Item("scenario", scenario.name, "held", "", repro)
    finally:
        not_testable = lockstep.not_testable()
        lockstep.close()
    lockstep.readiness(item, error)
    item.seconds = time.perf_counter() - started
    return item, not_testable


@dataclass
class SeedOutcome:
    item: Item
    violations: list[tuple[str, str]]  # (invariant, message)
    exercised: set[str]
    not_testable: dict[str, str]
    steps: int = 0
    kills: int = 0  # SIGKILLs between requests (a run that ended; 0 otherwise)
    failpoint_crashes: int = 0  # requests the adapter died in, at their crash_at
    replies: list[str] = field(default_factory=list)  # the target's, normalized, in order


def seed_item(
    seed: int,
    command: Sequence[str],
    policy: Policy,
    policy_arg: str,
    ops: int,
    timeout: float,
    base: Path,
    name: str = "target",
    concurrency: int = 1,
    free: bool = False,
) -> SeedOutcome:
    """One seeded run through :func:`.run.run_seed` with a lockstep target.

    With ``concurrency`` > 1 the seed sends concurrent groups, each judged by
    the linearizability search; a seed that fails is run once more against a
    fresh target first, and when the target's own replies differ between the
    two runs (the same requests and schedules) the verdict is
    ``nondeterministic``, with both runs' replies, rather than the failure.
    ``free``: groups run without a schedule even where the target has pause
    points (the rerun is then a reproduction rate of one, not a replay)."""
    outcome = _seed_once(
        seed, command, policy, policy_arg, ops, timeout, base, name, concurrency, free
    )
    if concurrency > 1 and outcome.item.verdict in SHRINKABLE:
        first = outcome.replies
        again = _seed_once(
            seed, command, policy, policy_arg, ops, timeout, base / "again", name, concurrency, free
        )
        if free:
            outcome.item.detail += f"\nrun again free: {again.item.verdict}" + (
                " (reproduced)" if again.item.verdict in SHRINKABLE else " (did not reproduce)"
            )
        elif again.replies != first:
            at = next(
                (i for i, (a, b) in enumerate(zip(first, again.replies, strict=False)) if a != b),
                min(len(first), len(again.replies)),
            )
            item = outcome.item
            item.detail = (
                f"the target answered differently when the seed ran again (same requests, same "
                f"schedules): reply {at} was {_nth(first, at)} then {_nth(again.replies, at)}; "
                f"the first run's verdict was {item.verdict}:\n{item.detail}"
            )
            item.failure = {
                "key": "nondeterministic",
                "first": {"verdict": item.verdict, "replies": first},
                "again": {"verdict": again.item.verdict, "replies": again.replies},
            }
            item.verdict = "nondeterministic"
            outcome.violations = []
    return outcome


def _nth(replies: Sequence[str], i: int) -> str:
    return replies[i] if i < len(replies) else "(no reply: the run had ended)"


def _seed_once(
    seed: int,
    command: Sequence[str],
    policy: Policy,
    policy_arg: str,
    ops: int,
    timeout: float,
    base: Path,
    name: str,
    concurrency: int,
    free: bool = False,
) -> SeedOutcome:
    repro = repro_command(
        command, policy_arg, seed=seed, ops=ops, timeout=timeout, concurrency=concurrency, free=free
    )
    lockstep = _Lockstep(command, timeout, base / f"seed-{seed}", name, free)
    started = time.perf_counter()
    violations: list[tuple[str, str]] = []
    exercised: set[str] = set()
    steps = kills = crashes = requests = 0
    error: ProtocolError | None = None
    try:
        options = RunOptions(ops=ops, only_expected=True, concurrency=concurrency)
        result = run_seed(seed, policy, options, target=lockstep)
    except Divergence as div:
        item = Item("seed", str(seed), "diverged", div.render(), repro)
        item.failure = divergence_failure(div)
        steps = requests = div.step + 1
    except NotTestable as exc:
        item = Item("seed", str(seed), "not testable", str(exc), repro)
    except ProtocolError as exc:
        error = exc
        item = Item("seed", str(seed), "protocol error", _protocol_detail(exc, lockstep), repro)
        item.failure = {"key": "protocol error"}
    else:
        steps = result.ops
        kills = sum(1 for s in result.trace.steps if s.kind == "crash")
        mid_group = sum(1 for s in result.trace.steps if s.kind == "crash" and group_of(s.decision))
        crashes = sum(
            1 for s in result.trace.steps if isinstance(s.reply, Crashed) and not unseen(s.reply)
        )
        requests = len(result.trace.steps)  # every request, restarts and liveness included
        exercised = set(result.exercised)
        violations = [(v.invariant, v.message) for v in result.violations]
        if violations:
            detail = "\n".join(f"{inv}: {msg}" for inv, msg in violations)
            item = Item("seed", str(seed), "violated", detail, repro)
            item.failure = violation_failure(violations)
        else:
            item = Item(
                "seed",
                str(seed),
                "held",
                f"{result.ops} steps, {kills} kills ({mid_group} mid-group), "
                f"{crashes} failpoint crashes",
                repro,
            )
    finally:
        not_testable = lockstep.not_testable()
        lockstep.close()
    lockstep.readiness(item, error)
    item.seconds = time.perf_counter() - started
    item.steps = requests
    replies = [r for lock in lockstep.made for r in lock.replies]
    return SeedOutcome(item, violations, exercised, not_testable, steps, kills, crashes, replies)


# --- seeds in worker processes ----------------------------------------------------

SEED_BATCH = 25  # most seeds per task (fewer when there are few seeds per worker)


@dataclass(frozen=True)
class _SeedRun:
    """What a seeded lockstep run needs, shipped to a worker with its seeds."""

    argv: list[str]
    policy: Policy
    policy_arg: str
    ops: int
    timeout: float
    name: str
    concurrency: int = 1
    free: bool = False


def _seed_batch(run: _SeedRun, seeds: tuple[int, ...]) -> list[SeedOutcome]:
    """Run seeds in a worker (a local process or a Dask worker): its own adapter
    processes in its own temporary folder. A shipped target's command is
    resolved here (its interpreter and path on this machine); an --adapter
    command must be runnable as given."""
    argv = run.argv
    if run.name in TARGETS:
        argv = target_command(None, run.name, run.policy_arg, run.timeout)[0]
    out = []
    watch = ReadyWatch()  # a dead adapter ends the batch early, not after every seed's timeout
    with scratch.folder("conformance") as folder:
        for seed in seeds:
            outcome = seed_item(
                seed,
                argv,
                run.policy,
                run.policy_arg,
                run.ops,
                run.timeout,
                folder,
                run.name,
                run.concurrency,
                run.free,
            )
            # The repro is the client's command line, whatever this machine's paths.
            outcome.item.repro = repro_command(
                run.argv,
                run.policy_arg,
                seed=seed,
                ops=run.ops,
                timeout=run.timeout,
                concurrency=run.concurrency,
                free=run.free,
            )
            out.append(outcome)
            watch.see(outcome.item.never_ready, outcome.item.ready)
    return out


def _seed_outcomes(
    run: _SeedRun,
    seeds: range,
    base: Path,
    jobs: int,
    executor: str,
    scheduler: str | None,
    say: Progress,
) -> Generator[tuple[int, SeedOutcome]]:
    """(seed, outcome) in seed order: here, one after another (one local job),
    or in batches over ``jobs`` local worker processes or a Dask cluster, whose
    workers each start their own adapter processes; a batch whose Dask worker
    died is rerun by Dask and counted once."""
    total = len(seeds)
    if executor == "local" and (jobs <= 1 or total <= 1):
        for n, seed in enumerate(seeds, start=1):
            say(f"conformance: seed {seed} ({n}/{total})")
            yield (
                seed,
                seed_item(
                    seed,
                    run.argv,
                    run.policy,
                    run.policy_arg,
                    run.ops,
                    run.timeout,
                    base,
                    run.name,
                    run.concurrency,
                    run.free,
                ),
            )
        return

    def cut(slots: int) -> list[tuple[int, ...]]:
        # a few batches per worker keep every worker busy to the end
        size = max(1, min(SEED_BATCH, -(-total // (slots * 4))))
        return [tuple(seeds[i : i + size]) for i in range(0, total, size)]

    done = 0
    for batch, outcomes in run_tasks(
        functools.partial(_seed_batch, run),
        cut,
        kind=executor,
        jobs=jobs,
        scheduler=scheduler,
        preload=("inboxsim.conformance.check", "inboxsim.invariants"),
        what=lambda batch: f"conformance seeds {batch[0]}..{batch[-1]}",
        in_order=True,
    ):
        for seed, outcome in zip(batch, outcomes, strict=True):
            done += 1
            say(f"conformance: seed {seed} ({done}/{total})")
            yield seed, outcome


# --- the whole check --------------------------------------------------------------


def conformance(
    command: Sequence[str] | str,
    policy: str = "g4",
    seeds: int = 3,
    *,
    ops: int = DEFAULT_OPS,
    seed_start: int = 0,
    timeout: float = DEFAULT_TIMEOUT,
    scenarios: Sequence[str] | None = None,
    library: bool = True,
    workdir: str | Path | None = None,
    progress: Progress | None = None,
    target_name: str | None = None,
    shrink: int = 0,
    repro_dir: str | Path | None = None,
    shrink_seconds: float = DEFAULT_SHRINK_SECONDS,
    shrink_runs: int = 300,
    jobs: int = 1,
    executor: str = "local",
    scheduler: str | None = None,
    concurrency: int = 1,
    free_running: bool = False,
) -> ConformanceReport:
    """Check an adapter (``command``: argv list or a command line) against the
    model under ``policy``: the scenario library (``scenarios`` narrows it to
    some names, topic folders or globs; ``library=False`` skips it), then ``seeds`` seeds from
    ``seed_start``. Never raises for the target's failures: they are the
    report's items. Raises :class:`HarnessError` for bad usage.

    The first ``shrink`` (the command line: 3) diverged or violated scenarios and seeds are shrunk
    through the same adapter (at most ``shrink_seconds`` each) to a minimal
    repro scenario file in ``repro_dir`` (default ``./inboxsim-repros``),
    named in the item's ``repro_file``. ``jobs`` > 1 runs the seeds in that
    many worker processes, each starting its own adapters; ``executor="dask"``
    runs them on a Dask cluster (``scheduler``, or a local one of ``jobs``
    workers): see :func:`_seed_outcomes`. The library always runs here.
    ``concurrency`` > 1 makes each seed send concurrent groups of up to that
    many requests (the adapter must list the feature ``group``; see
    :func:`seed_item`); ``free_running``: without schedules, even where the
    adapter has pause points."""

    argv = split_command(command) if isinstance(command, str) else list(command)
    if not argv:
        raise HarnessError("an adapter needs a command to run")
    if seeds < 0 or seed_start < 0 or ops < 0:
        raise HarnessError("--seeds, --seed-start and --ops must be non-negative")
    if jobs < 1:
        raise HarnessError(f"--jobs must be at least 1, not {jobs}")
    if concurrency < 1:
        raise HarnessError(f"--concurrency must be at least 1, not {concurrency}")

    check_executor(executor, scheduler)
    the_policy = load_policy(policy)
    say = progress or (lambda _msg: None)
    name = target_name or shlex.join(argv)
    report = ConformanceReport(name, argv, the_policy.name)
    started = time.perf_counter()
    chosen: list[Any] = []
    if library:
        # names, topic folders or globs (scenarios.load.select_library)
        chosen = (
            [load_scenario(p) for p in select_library(scenarios)] if scenarios else load_library()
        )
    not_testable: dict[str, str] = {}
    failing: list[tuple[Item, Any]] = []  # (item, the loaded scenario or the seed)
    watch = ReadyWatch()
    with contextlib.ExitStack() as stack:
        base = (
            Path(workdir)
            if workdir is not None
            else stack.enter_context(scratch.folder("conformance"))
        )
        for n, loaded_scenario in enumerate(chosen, start=1):
            say(f"conformance: scenario [{n}/{len(chosen)}] {loaded_scenario.scenario.name}")
            item, nt = scenario_item(
                loaded_scenario,
                argv,
                the_policy,
                policy,
                timeout,
                base / f"scenario-{n}",
                name,
            )
            report.items.append(item)
            watch.see(item.never_ready, item.ready)
            if item.verdict in SHRINKABLE:
                failing.append((item, loaded_scenario))
            for k, v in nt.items():
                not_testable.setdefault(k, v)
        exercised: set[str] = set()
        violated: dict[str, tuple[int, str, str]] = {}
        run = _SeedRun(argv, the_policy, policy, ops, timeout, name, concurrency, free_running)
        outcomes = stack.enter_context(
            contextlib.closing(
                _seed_outcomes(
                    run, range(seed_start, seed_start + seeds), base, jobs, executor, scheduler, say
                )
            )
        )
        for seed, outcome in outcomes:
            report.items.append(outcome.item)
            watch.see(outcome.item.never_ready, outcome.item.ready)
            first_line = outcome.item.detail.splitlines()[0] if outcome.item.detail else ""
            say(f"conformance: seed {seed}: {outcome.item.verdict}; {first_line}")
            if outcome.item.verdict in ("held", "violated"):
                report.totals["steps"] += outcome.steps
                report.totals["kills"] += outcome.kills
                report.totals["failpoint_crashes"] += outcome.failpoint_crashes
            if outcome.item.verdict in SHRINKABLE:
                failing.append((outcome.item, seed))
            exercised |= outcome.exercised
            for inv, msg in outcome.violations:
                violated.setdefault(inv, (seed, msg, outcome.item.repro))
            for k, v in outcome.not_testable.items():
                not_testable.setdefault(k, v)
        if seeds:
            keep = expected(the_policy)
            for inv_id in REGISTRY:
                if inv_id not in keep:
                    continue
                if inv_id in violated:
                    seed, msg, repro = violated[inv_id]
                    report.items.append(
                        Item("invariant", inv_id, "violated", f"seed {seed}: {msg}", repro)
                    )
                elif inv_id in exercised:
                    report.items.append(Item("invariant", inv_id, "held"))
                else:
                    report.items.append(
                        Item(
                            "invariant",
                            inv_id,
                            "not exercised",
                            "no seed that ran to its end reached a step where it could fail",
                        )
                    )
        for feature, why in sorted(not_testable.items()):
            report.items.append(Item("feature", feature, "not testable", why))
        out = Path(repro_dir) if repro_dir is not None else Path("inboxsim-repros")
        for item, what in failing[: max(0, shrink)]:
            say(f"conformance: shrinking {item.kind} {item.item} through the adapter")
            attach_repro(
                item,
                what,
                argv,
                the_policy,
                ops,
                timeout,
                base,
                name,
                out,
                shrink_seconds,
                shrink_runs,
                concurrency,
            )
    report.seconds = time.perf_counter() - started
    return report


def attach_repro(
    item: Item,
    what: Any,
    argv: list[str],
    policy: Policy,
    ops: int,
    timeout: float,
    base: Path,
    name: str,
    out: Path,
    seconds: float,
    runs: int,
    concurrency: int = 1,
) -> None:
    """Shrink one failure through the adapter; the file's path and how it was
    checked go into the item (a shrink that fails is said, never raised). A
    concurrent seed becomes a group scenario file (``group_repro.py``)."""
    try:
        if isinstance(what, int) and concurrency > 1:
            repro = shrink_concurrent_seed(
                what,
                argv,
                policy,
                ops=ops,
                concurrency=concurrency,
                workdir=base / f"group-repro-{what}",
                out=out,
                timeout=timeout,
                name=name,
                seconds=seconds,
                runs=runs,
            )
            if repro is None:
                item.detail += "\n(no minimal repro: the failure did not recur as a group file)"
                return
        elif isinstance(what, int):
            repro = shrink_conformance(
                what,
                argv,
                policy,
                ops=ops,
                timeout=timeout,
                time_limit=seconds,
                max_runs=runs,
                workdir=base,
                name=name,
                out=out,
            )
        else:
            repro = shrink_conformance_scenario(
                what,
                argv,
                policy,
                timeout=timeout,
                time_limit=seconds,
                max_runs=runs,
                workdir=base,
                name=name,
                out=out,
            )
    except Exception as exc:  # noqa: BLE001 - the verdict stands without its repro
        item.detail += f"\n(no minimal repro: shrinking failed: {type(exc).__name__}: {exc})"
        return
    if repro is None or repro.path is None:
        item.detail += "\n(no minimal repro: the failure did not recur when run again)"
        return
    item.repro_file = repro.path
    item.failure["repro"] = {
        "path": repro.path,
        "key": repro.key,
        "text": repro.text,
        "steps": repro.steps,
        "original_steps": repro.original_steps,
        "verified": repro.verified,
        "standalone": repro.standalone,
        "model_passes": repro.model_passes,
        "divergence": repro.divergence,
    }
    item.detail += (
        f"\nminimal repro: {repro.path} ({repro.steps} steps, from {repro.original_steps}; "
        f"{repro.key}; fails in lockstep: {'yes' if repro.verified else 'NO'}; "
        f"fails alone: {'yes' if repro.standalone else 'no'}; "
        f"passes on the model: {'yes' if repro.model_passes else 'NO'})"
    )


# --- storing --------------------------------------------------------------------

DDL = """
CREATE TABLE IF NOT EXISTS conformance (
    conformance_id BIGINT,
    target VARCHAR,
    command VARCHAR,
    policy VARCHAR,
    kind VARCHAR,
    item VARCHAR,
    verdict VARCHAR,
    detail VARCHAR,
    repro VARCHAR,
    repro_file VARCHAR,
    seconds DOUBLE,
    recorded_at TIMESTAMP DEFAULT current_timestamp,
    steps BIGINT,
    failure JSON
)
"""


def store_results(db: str | Path, report: ConformanceReport) -> int:
    """Append the report's items to the store's ``conformance`` table (created
    if missing, through the store's own connection); returns the batch id."""

    with Store(db) as store, store.transaction() as con:
        con.execute(DDL)
        # stores written before repro files and request counts existed
        con.execute("ALTER TABLE conformance ADD COLUMN IF NOT EXISTS repro_file VARCHAR")
        con.execute("ALTER TABLE conformance ADD COLUMN IF NOT EXISTS steps BIGINT")
        con.execute("ALTER TABLE conformance ADD COLUMN IF NOT EXISTS failure JSON")
        row = con.execute("SELECT coalesce(max(conformance_id), 0) + 1 FROM conformance").fetchone()
        batch = int(row[0]) if row else 1
        con.executemany(
            "INSERT INTO conformance (conformance_id, target, command, policy, kind, item, "
            "verdict, detail, repro, repro_file, seconds, steps, failure) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    batch,
                    report.target,
                    json.dumps(report.command),
                    report.policy,
                    i.kind,
                    i.item,
                    i.verdict,
                    i.detail,
                    i.repro,
                    i.repro_file,
                    i.seconds,
                    i.steps,
                    json.dumps(i.failure, sort_keys=True, default=str) if i.failure else None,
                )
                for i in report.items
            ],
        )
    return batch


__all__ = [
    "ConformanceReport",
    "Item",
    "conformance",
    "repro_command",
    "shrink_conformance",
    "store_results",
    "target_command",
]


# --- the mutant kill matrix, across processes ------------------------------------


def _check_one(args: tuple[str, tuple[int, ...], int, float | None]) -> Any:

    name, seeds, ops, shrink_seconds = args
    return check_mutant(
        name,
        load_library(),
        seeds,
        ops=ops,
        first_only=True,
        shrink=shrink_seconds is not None,
        shrink_seconds=shrink_seconds or 0.0,
    )


def mutant_matrix(
    names: Sequence[str] | None = None,
    seeds: int = 5,
    *,
    ops: int = 60,
    jobs: int = 1,
    progress: Progress | None = None,
    shrink_seconds: float | None = None,
) -> list[Any]:
    """:func:`.mutants.check_mutant` for each mutant (all by default), stopping
    each at its first detection that counts, ``jobs`` mutants at a time in
    worker processes; with ``shrink_seconds``, each first detection is then
    shrunk through the adapter for at most that long. Returns the
    KillResults in the order of ``names``."""

    chosen = list(MUTANTS) if names is None else list(names)
    unknown = [n for n in chosen if n not in MUTANTS]
    if unknown:
        raise HarnessError(f"unknown mutant(s) {', '.join(unknown)}; see `inboxsim mutants --list`")
    say = progress or (lambda _msg: None)
    work = [(n, tuple(range(seeds)), ops, shrink_seconds) for n in chosen]
    results: dict[str, Any] = {}
    for w, killed in run_tasks(
        _check_one,
        lambda slots: work,
        jobs=jobs if len(work) > 1 else 1,
        preload=("inboxsim.conformance.check",),
        what=lambda w: f"mutant {w[0]}",
    ):
        results[w[0]] = killed
        verdict = "killed" if killed.killed else "SURVIVED"
        say(f"mutants: [{len(results)}/{len(work)}] {w[0]}: {verdict}")
    return [results[n] for n in chosen]
