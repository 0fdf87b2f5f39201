"""The seeded part of a conformance check: one seed in lockstep
(:func:`seed_item`, a :class:`SeedRun` and the seed), and the seeds of a
check run here or in batches over worker processes or a Dask cluster
(:func:`seed_outcomes`)."""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..model import Crashed, Policy
from ..procs import scratch
from ..search.divergence import Divergence
from ..search.lockstep import NotTestable
from ..sim.executor import run_tasks
from ..sim.run import RunOptions, run_seed
from ..targets.adapter import ReadyWatch
from ..targets.protocol import ProtocolError
from ..trace.record import group_of, unseen
from .command_lines import TARGETS, repro_command, target_command
from .lockstep_targets import LockstepTargets, protocol_detail
from .report import SHRINKABLE, Item, divergence_failure, violation_failure


@dataclass(frozen=True)
class SeedRun:
    """What a seeded lockstep run needs (the adapter command, the policy and
    its name as given, the run's size and concurrency), shipped to a worker
    with its seeds."""

    argv: list[str]
    policy: Policy
    policy_arg: str
    ops: int
    timeout: float
    name: str
    concurrency: int = 1
    free: bool = False
    group_kills: bool = True  # kills mid-group (off: conformance --no-group-kills)

    def repro(self, seed: int) -> str:
        """The command line that runs ``seed`` alone, as this run did."""
        return repro_command(
            self.argv,
            self.policy_arg,
            seed=seed,
            ops=self.ops,
            timeout=self.timeout,
            concurrency=self.concurrency,
            free=self.free,
            group_kills=self.group_kills,
        )


@dataclass
class SeedOutcome:
    item: Item
    violations: list[tuple[str, str]]  # (invariant, message)
    exercised: set[str]
    not_testable: dict[str, str]
    steps: int = 0
    kills: int = 0  # SIGKILLs (a run that ended; 0 otherwise), mid-group ones included
    failpoint_crashes: int = 0  # requests the adapter died in, at their crash_at
    mid_group_kills: int = 0  # of ``kills``, those with a group's members in flight
    replies: list[str] = field(default_factory=list)  # the target's, normalized, in order


def seed_item(run: SeedRun, seed: int, base: Path) -> SeedOutcome:
    """One seeded run through :func:`.run.run_seed` with a lockstep target.

    With ``run.concurrency`` > 1 the seed sends concurrent groups, each judged by
    the linearizability search; a seed that fails is run once more against a
    fresh target first, and when the target's own replies differ between the
    two runs (the same requests and schedules) the verdict is
    ``nondeterministic``, with both runs' replies, rather than the failure.
    ``run.free``: groups run without a schedule even where the target has pause
    points (the rerun is then a reproduction rate of one, not a replay)."""
    outcome = _seed_once(run, seed, base)
    if run.concurrency > 1 and outcome.item.verdict in SHRINKABLE:
        first = outcome.replies
        again = _seed_once(run, seed, base / "again")
        if run.free:
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


def _seed_once(run: SeedRun, seed: int, base: Path) -> SeedOutcome:
    repro = run.repro(seed)
    lockstep = LockstepTargets(
        run.argv, run.timeout, base / f"seed-{seed}", run.name, run.free, run.group_kills
    )
    started = time.perf_counter()
    violations: list[tuple[str, str]] = []
    exercised: set[str] = set()
    steps = kills = crashes = mid_group = requests = 0
    error: ProtocolError | None = None
    try:
        options = RunOptions(ops=run.ops, only_expected=True, concurrency=run.concurrency)
        result = run_seed(seed, run.policy, options, target=lockstep)
    except Divergence as div:
        item = Item("seed", str(seed), "diverged", div.render(), repro)
        item.failure = divergence_failure(div)
        steps = requests = div.step + 1
    except NotTestable as exc:
        item = Item("seed", str(seed), "not testable", str(exc), repro)
    except ProtocolError as exc:
        error = exc
        item = Item("seed", str(seed), "protocol error", protocol_detail(exc, lockstep), repro)
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
    return SeedOutcome(
        item, violations, exercised, not_testable, steps, kills, crashes, mid_group, replies
    )


# --- seeds in worker processes ----------------------------------------------------

SEED_BATCH = 25  # most seeds per task (fewer when there are few seeds per worker)


def _seed_batch(run: SeedRun, seeds: tuple[int, ...]) -> list[SeedOutcome]:
    """Run seeds in a worker (a local process or a Dask worker): its own adapter
    processes in its own temporary folder. A shipped target's command is
    resolved here (its interpreter and path on this machine); an --adapter
    command must be runnable as given."""
    here = run
    if run.name in TARGETS:
        argv = target_command(None, run.name, run.policy_arg, run.timeout)[0]
        here = dataclasses.replace(run, argv=argv)
    out = []
    watch = ReadyWatch()  # a dead adapter ends the batch early, not after every seed's timeout
    with scratch.folder("conformance") as folder:
        for seed in seeds:
            outcome = seed_item(here, seed, folder)
            # The repro is the client's command line, whatever this machine's paths.
            outcome.item.repro = run.repro(seed)
            out.append(outcome)
            watch.see(outcome.item.never_ready, outcome.item.ready)
    return out


def seed_outcomes(
    run: SeedRun,
    seeds: range,
    base: Path,
    jobs: int,
    executor: str,
    scheduler: str | None,
    say: Callable[[str], None],
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
                seed_item(run, seed, base),
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
        preload=("inboxsim.conformance.seeds", "inboxsim.invariants"),
        what=lambda batch: f"conformance seeds {batch[0]}..{batch[-1]}",
        in_order=True,
    ):
        for seed, outcome in zip(batch, outcomes, strict=True):
            done += 1
            say(f"conformance: seed {seed} ({done}/{total})")
            yield seed, outcome
