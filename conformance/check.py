"""Conformance: an adapter in lockstep with the reference model
(``docs/cli.md``, "Lockstep: what conformance compares").

:func:`conformance` runs, against one adapter command:

1. the named scenario library (:mod:`.scenario`), each scenario with a fresh
   ``LockstepTarget(ModelTarget(policy), AdapterTarget(command))``
   (:mod:`.lockstep_targets`); the scenario's own expectations and the
   invariants are judged on the target's trace, and the first difference
   from the model stops it;
2. a seeded sweep (:mod:`.seeds`): ``run_seed(seed, ..., target=factory)``
   through :mod:`.run` with the same lockstep target, each seed in a fresh
   data folder, stopping each run at its first divergence or violation;
3. the first failures shrunk through the same adapter (:mod:`.repro`).

Invariants are judged with ``only_expected``: the target is compared with
the model under ``policy``, so an invariant the policy itself departs from
(``g2``'s admission-time stamps and monotonic visible time) is not the
target's failure. A scenario whose ``breaks_under`` lists the policy is
written for other rules: it is recorded as not testable, not run.

The result is a :class:`.report.ConformanceReport`: one :class:`.report.Item`
per scenario, per seed and per invariant (and per hello feature one side
lacks), each with a verdict (``held``, ``violated``, ``diverged``, ``protocol
error``, ``not testable``), a detail (the divergence rendered side by side, or
the violation message) and a repro command (:mod:`.command_lines`).
:func:`.rows.store_results` writes the items into a ``conformance`` table of
the DuckDB store.
"""

from __future__ import annotations

import contextlib
import shlex
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..errors import HarnessError
from ..invariants.registry import REGISTRY, expected
from ..policy_file import load_policy
from ..procs import scratch
from ..scenarios.load import load_library, load_scenario, select_library
from ..sim.executor import check_executor
from ..targets.adapter import DEFAULT_TIMEOUT, ReadyWatch, split_command
from .command_lines import DEFAULT_OPS
from .report import SHRINKABLE, ConformanceReport, Item
from .repro import attach_repro
from .scenario import scenario_item
from .seeds import SeedRun, seed_outcomes

DEFAULT_SHRINK_SECONDS = 60.0  # the budget of each

Progress = Callable[[str], None]


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
    group_kills: bool = True,
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
    workers): see :func:`seed_outcomes`. The library always runs here.
    ``concurrency`` > 1 makes each seed send concurrent groups of up to that
    many requests (the adapter must list the feature ``group``; see
    :func:`seed_item`); ``free_running``: without schedules, even where the
    adapter has pause points; ``group_kills`` (the default): groups also
    carry kills mid-group where the adapter serves groups and failpoints."""

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
        run = SeedRun(
            argv, the_policy, policy, ops, timeout, name, concurrency, free_running, group_kills
        )
        outcomes = stack.enter_context(
            contextlib.closing(
                seed_outcomes(
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
                report.totals["mid_group_kills"] += outcome.mid_group_kills
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
                group_kills,
            )
    report.seconds = time.perf_counter() - started
    return report


__all__ = ["DEFAULT_SHRINK_SECONDS", "conformance"]
