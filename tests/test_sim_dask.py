"""Sweeps on a Dask cluster (the ``dask`` extra): the same store as a local
sweep, batches really spread over worker processes, and a worker killed
mid-batch loses nothing and duplicates nothing."""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dask
import distributed
import duckdb
import pytest

from inboxsim.errors import HarnessError
from inboxsim.model import PRESETS
from inboxsim.sim.run import RunOptions
from inboxsim.sim.sweep import SweepPlan, SweepReport, sweep
from inboxsim.store.store import Store
from tests.sim_helpers import checkers_module

# Every wait in these tests is bounded: a sweep that has not finished by then
# fails the test instead of hanging the suite.
SWEEP_TIMEOUT = 240.0
RUN_COLUMNS = "run_id, seed, policy, options, swarm, decisions, verdict, liveness, trace_hash, ops"


def _plan(seeds: int, ops: int, batch: int, **dask: Any) -> SweepPlan:
    return SweepPlan(
        "g4",
        PRESETS["g4"],
        RunOptions(ops=ops),
        0,
        seeds,
        2,
        batch_size=batch,
        checkers=checkers_module(),
        **dask,
    )


def _stored_sweep(plan: SweepPlan, db: Path, progress: Any = None) -> SweepReport:
    """Run ``plan`` into ``db`` in a thread, failing (not hanging) past SWEEP_TIMEOUT."""
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            with Store(db) as store:
                box["report"] = sweep(plan, store, progress or (lambda report: None))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
            box["error"] = exc

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    thread.join(SWEEP_TIMEOUT)
    if thread.is_alive():
        pytest.fail(f"the sweep did not finish within {SWEEP_TIMEOUT:g} s")
    if "error" in box:
        raise box["error"]
    report: SweepReport = box["report"]
    return report


def _differences(a: Path, b: Path) -> tuple[int, int, int]:
    """Rows of runs in one store and not the other, both ways, and the steps' difference."""
    con = duckdb.connect()
    try:
        con.execute(f"ATTACH '{a}' AS a (READ_ONLY)")
        con.execute(f"ATTACH '{b}' AS b (READ_ONLY)")
        only = [
            con.execute(
                f"SELECT count(*) FROM (SELECT {RUN_COLUMNS} FROM {x}.runs"
                f" EXCEPT ALL SELECT {RUN_COLUMNS} FROM {y}.runs)"
            ).fetchone()[0]  # type: ignore[index]
            for x, y in (("a", "b"), ("b", "a"))
        ]
        steps = con.execute(
            "SELECT count(*) FROM (SELECT * FROM a.steps EXCEPT ALL SELECT * FROM b.steps)"
        ).fetchone()[0]  # type: ignore[index]
        return only[0], only[1], steps
    finally:
        con.close()


def test_without_dask_the_dask_executor_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # `import distributed` now fails
    with pytest.raises(HarnessError, match=r"pip install 'inboxsim\[dask\]'"):
        sweep(_plan(2, 5, 1, executor="dask"), None)


def test_two_dask_workers_write_the_same_store_as_a_local_sweep(tmp_path: Path) -> None:
    local = _stored_sweep(_plan(40, 60, 5), tmp_path / "local.duckdb")
    on_dask = _stored_sweep(_plan(40, 60, 5, executor="dask"), tmp_path / "dask.duckdb")
    # The batches really ran in two worker processes, neither of them this one.
    pids = {pid for _host, pid in on_dask.workers}
    assert len(pids) >= 2 and os.getpid() not in pids
    assert sum(batches for batches, _ in on_dask.workers.values()) == 8
    assert on_dask.document()["workers"] and on_dask.document()["throughput"]["executor"] == "dask"
    # The same file: every run row (ids, verdicts, trace hashes, decisions) and every step.
    assert _differences(tmp_path / "local.duckdb", tmp_path / "dask.duckdb") == (0, 0, 0)
    con = duckdb.connect(str(tmp_path / "dask.duckdb"), read_only=True)
    try:
        assert con.execute("SELECT count(*), count(DISTINCT seed) FROM runs").fetchone() == (40, 40)
        hashes = dict(con.execute("SELECT seed, trace_hash FROM runs").fetchall())
    finally:
        con.close()
    assert hashes == local.hashes == on_dask.hashes


def _killer(observer: Any, killed: dict[str, Any]) -> Any:
    """A progress callback that, after the first batch lands, SIGKILLs a
    worker process with a batch in flight (its nanny starts a new one)."""

    pids = observer.run(os.getpid)  # asked up front: the kill follows the look at once

    def kill_a_busy_worker(report: SweepReport) -> None:
        if killed:
            return
        for address, keys in observer.processing().items():
            if keys:
                pid = pids[address]
                killed.update(address=address, pid=pid, keys=list(keys), runs=report.runs)
                os.kill(pid, signal.SIGKILL)
                return

    return kill_a_busy_worker


@pytest.fixture
def cluster() -> Iterator[Any]:
    """Two single-threaded worker processes, each under a nanny that restarts it."""
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as c:
        yield c


def test_a_worker_killed_mid_batch_loses_no_seed_and_writes_none_twice(
    tmp_path: Path, cluster: Any
) -> None:
    observer = distributed.Client(cluster.scheduler_address, timeout="20s")
    killed: dict[str, Any] = {}
    kill_a_busy_worker = _killer(observer, killed)
    try:
        # Batches of 15 seeds: long enough to be caught in flight.
        plan = _plan(90, 100, 15, executor="dask", scheduler=cluster.scheduler_address)
        report = _stored_sweep(plan, tmp_path / "killed.duckdb", kill_a_busy_worker)
        assert killed, "no worker had a batch in flight to kill"
        # Each batch that was in flight on the killed worker was run again.
        story = observer.story(*killed["keys"])
    finally:
        observer.close()
    for key in killed["keys"]:
        # The scheduler's log of the batch's task: taken back from the dead
        # worker when it was cleaned up, then finished (put in memory) by
        # another. The kill may land just after the batch finished; its result
        # then died with the worker (a move out of "memory", not "processing")
        # and the batch is run again all the same.
        moves = [
            (e[2], e[3], str(e[5]))
            for e in story
            if e[0] == "scheduler" and e[1] == key and len(e) > 5
        ]
        lost = [
            i
            for i, m in enumerate(moves)
            if m[0] in ("processing", "memory") and m[2].startswith("handle-worker-cleanup")
        ]
        done = [i for i, m in enumerate(moves) if m[:2] == ("processing", "memory")]
        assert lost and done and lost[0] < done[-1], moves
    assert killed["runs"] < 90
    local = sweep(_plan(90, 100, 15), None)
    con = duckdb.connect(str(tmp_path / "killed.duckdb"), read_only=True)
    try:
        rows = con.execute("SELECT seed, count(*) FROM runs GROUP BY seed ORDER BY seed").fetchall()
        hashes = dict(con.execute("SELECT seed, trace_hash FROM runs").fetchall())
    finally:
        con.close()
    assert rows == [(seed, 1) for seed in range(90)]
    assert hashes == local.hashes and report.runs == 90


def test_a_batch_that_keeps_killing_workers_is_a_harness_error_keeping_what_was_written(
    tmp_path: Path,
) -> None:
    # With no failures allowed, Dask gives up on the batch of the killed worker.
    with (
        dask.config.set({"distributed.scheduler.allowed-failures": 0}),
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as strict,
    ):
        observer = distributed.Client(strict.scheduler_address, timeout="20s")
        killed: dict[str, Any] = {}
        try:
            plan = _plan(90, 100, 15, executor="dask", scheduler=strict.scheduler_address)
            with pytest.raises(HarnessError, match="Dask gave up"):
                _stored_sweep(plan, tmp_path / "strict.duckdb", _killer(observer, killed))
        finally:
            observer.close()
    assert killed
    con = duckdb.connect(str(tmp_path / "strict.duckdb"), read_only=True)
    try:
        runs, distinct = con.execute("SELECT count(*), count(DISTINCT seed) FROM runs").fetchone()  # type: ignore[misc]
    finally:
        con.close()
    # The batches written before the error are kept, whole and once each.
    assert runs == distinct and runs >= 15 and runs % 15 == 0


def test_conformance_seeds_on_dask_workers_match_a_local_run(cluster: Any) -> None:
    """Each worker starts its own adapter processes; the report is the local one."""
    from inboxsim.conformance.catalogue import mutant_command
    from inboxsim.conformance.check import conformance

    argv, _ = mutant_command("interrupt-clears-inbox")  # diverges on seed 1 of these four

    def rows(report: Any) -> list[tuple[str, ...]]:
        return [(i.kind, i.item, i.verdict, i.detail, i.repro) for i in report.items]

    local = conformance(argv, "g4", 4, ops=30, library=False)
    observer = distributed.Client(cluster.scheduler_address, timeout="20s")
    try:
        with distributed.get_task_stream(client=observer) as stream:
            on_dask = conformance(
                argv,
                "g4",
                4,
                ops=30,
                library=False,
                executor="dask",
                scheduler=cluster.scheduler_address,
            )
    finally:
        observer.close()
    assert rows(on_dask) == rows(local)
    assert {i.verdict for i in local.of("seed")} == {"held", "diverged"}
    ran = [t for t in stream.data if t["key"].startswith("_seed_batch")]
    assert len(ran) >= 2 and len({t["worker"] for t in ran}) == 2


def test_bad_executor_options_exit_2_before_any_work(capsys: pytest.CaptureFixture[str]) -> None:
    from inboxsim.cli import main

    assert main(["conformance", "--target", "sqlite", "--executor", "ray"]) == 2
    assert "--executor must be 'local' or 'dask'" in capsys.readouterr().err
    assert main(["sweep", "--seeds", "1", "--scheduler", "tcp://127.0.0.1:9"]) == 2
    assert "--scheduler goes with --executor dask" in capsys.readouterr().err


def test_a_scheduler_without_workers_is_a_harness_error_not_a_hang(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from inboxsim.sim import executor

    monkeypatch.setattr(executor, "WORKER_TIMEOUT", 1.0)
    with distributed.LocalCluster(n_workers=0, dashboard_address=None) as empty:
        plan = _plan(4, 5, 2, executor="dask", scheduler=empty.scheduler_address)
        with pytest.raises(HarnessError, match="no Dask worker joined"):
            sweep(plan, None)
