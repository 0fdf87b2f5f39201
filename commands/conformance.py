"""``inboxsim conformance``: a target in lockstep with the model, over the
scenario library and then a seeded sweep."""

from __future__ import annotations

from ..conformance.check import conformance as run_conformance
from ..conformance.command_lines import target_command
from ..conformance.rows import store_results
from ..errors import HarnessError
from ..store.store import check_writable
from .output import echo, emit_json, progress


def conformance(
    *,
    adapter: str | None,
    target: str | None,
    policy: str | None,
    seeds: int,
    seed_start: int,
    ops: int,
    scenario: list[str] | None,
    no_library: bool,
    adapter_timeout: float,
    db: str | None,
    executor: str,
    scheduler: str | None,
    jobs: int,
    shrink: int,
    repro_dir: str,
    shrink_seconds: float,
    as_json: bool,
    concurrency: int = 1,
    free_running: bool = False,
    group_kills: bool = True,
) -> int:
    if no_library and seeds == 0:
        raise HarnessError(
            "nothing to test: --no-library and --seeds 0 run no scenario and no seed"
        )
    argv, policy_name, timeout, label = target_command(adapter, target, policy, adapter_timeout)
    if db is not None:
        check_writable(db)  # a bad --db fails before the run, not after it
    result = run_conformance(
        argv,
        policy_name,
        seeds,
        ops=ops,
        seed_start=seed_start,
        timeout=timeout,
        scenarios=scenario or None,
        library=not no_library,
        progress=progress,
        target_name=label,
        executor=executor,
        scheduler=scheduler,
        shrink=shrink,
        jobs=jobs,
        repro_dir=repro_dir,
        shrink_seconds=shrink_seconds,
        concurrency=concurrency,
        free_running=free_running,
        group_kills=group_kills,
    )
    batch = store_results(db, result) if db is not None else None
    if as_json:
        document = result.to_dict()
        if db is not None:
            document["db"] = db
            document["conformance_id"] = batch
        emit_json(document)
    else:
        for line in result.lines():
            echo(line)
        if db is not None:
            echo(f"stored as conformance batch {batch} in {db}")
    return int(result.exit_code)
