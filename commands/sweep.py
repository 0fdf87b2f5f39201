"""``inboxsim sweep``: seeds through the simulator into the trace store."""

from __future__ import annotations

from ..procs.interrupt import Interrupted
from ..sim.console import SweepProgress, print_summary
from ..sim.executor import check_executor
from ..sim.sweep import SweepPlan, default_jobs, resume_line
from ..sim.sweep import sweep as run_sweep
from ..store.store import Store
from .options import sim_inputs
from .output import emit_json


def sweep(
    *,
    seeds: int,
    seed_start: int,
    policy: str,
    ops: int,
    jobs: int | None,
    db: str,
    time_budget: float | None,
    target: str,
    only_expected: bool,
    executor: str,
    scheduler: str | None,
    resume: bool,
    as_json: bool,
    concurrency: int = 1,
) -> int:
    the_policy, options = sim_inputs(policy, ops, target, only_expected, concurrency)
    check_executor(executor, scheduler)
    plan = SweepPlan(
        policy,
        the_policy,
        options,
        seed_start,
        seeds,
        jobs or default_jobs(),
        time_budget,
        executor=executor,
        scheduler=scheduler,
        resume=resume,
    )
    report = None
    try:
        with Store(db) as store:
            with SweepProgress(seeds) as progress:
                report = run_sweep(plan, store, progress)
        if as_json:
            document = report.document()
            document["db"] = db
            emit_json(document)
        else:
            print_summary(report)
    except Interrupted as stop:
        if stop.kept is None and report is not None:  # after the sweep: all of it is kept
            stop.kept = resume_line(plan, db)
        raise
    return report.exit_code
