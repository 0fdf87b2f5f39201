"""Sweeps: jobs, probes, the store, remembered failing seeds."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from inboxsim.errors import HarnessError
from inboxsim.model import PRESETS
from inboxsim.sim.run import RunOptions
from inboxsim.sim.sweep import SweepPlan, SweepReport, resume_line, sweep
from inboxsim.store.schema import SCHEMA_VERSION
from inboxsim.store.store import Store
from inboxsim.tests.sim_helpers import checkers_module
from inboxsim.trace.probes import PROBES, REQUIRED


def _plan(
    seeds: int, policy: str = "g4", jobs: int = 1, start: int = 0, ops: int = 100
) -> SweepPlan:
    return SweepPlan(
        policy, PRESETS[policy], RunOptions(ops=ops), start, seeds, jobs, checkers=checkers_module()
    )


@pytest.fixture(scope="module")
def default_sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[SweepReport, Path]:
    """The default mix, a few hundred seeds, stored."""
    db = tmp_path_factory.mktemp("sweep") / "default.duckdb"
    with Store(db) as store:
        report = sweep(_plan(300), store)
    return report, db


def test_the_default_sweep_holds_and_hits_every_required_probe(
    default_sweep: tuple[SweepReport, Path],
) -> None:
    report, _ = default_sweep
    assert report.runs == 300 and not report.failing
    assert report.missing_probes == [] and report.exit_code == 0
    assert set(REQUIRED) <= set(report.probe_runs)
    doc = report.document()
    assert [name for name, p in doc["probes"].items() if p["required"] and not p["runs"]] == []


def test_the_store_keeps_every_run_step_and_probe(default_sweep: tuple[SweepReport, Path]) -> None:
    report, db = default_sweep
    con = duckdb.connect(str(db), read_only=True)
    try:
        assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (
            str(SCHEMA_VERSION),
        )
        assert con.execute("SELECT count(*), sum(ops) FROM runs").fetchone() == (300, report.ops)
        assert con.execute("SELECT count(*) FROM steps").fetchone() == (report.ops,)
        hashes = dict(con.execute("SELECT seed, trace_hash FROM runs").fetchall())
        assert hashes == report.hashes
        probes = dict(con.execute("SELECT probe, sum(hits) FROM probes GROUP BY probe").fetchall())
        assert probes == report.probe_hits
        # Steps are JSON, queryable as such; exactly the crash steps have no request.
        mismatched = "SELECT count(*) FROM steps WHERE (kind = 'crash') <> (request IS NULL)"
        assert con.execute(mismatched).fetchone() == (0,)
        assert con.execute(
            "SELECT count(*) FROM steps"
            " WHERE json_extract_string(request, '$.op') = 'hello' AND idx = 0"
        ).fetchone() == (300,)
    finally:
        con.close()


def test_one_and_two_jobs_give_the_same_traces() -> None:
    one = sweep(_plan(120, ops=60), None)
    two = sweep(_plan(120, ops=60, jobs=2), None)
    assert one.hashes == two.hashes and len(one.hashes) == 120
    assert one.probe_hits == two.probe_hits


def test_an_unreachable_dask_scheduler_is_a_harness_error() -> None:
    plan = _plan(2, jobs=1)
    unreachable = SweepPlan(
        **{**_fields(plan), "executor": "dask", "scheduler": "tcp://127.0.0.1:9"}
    )
    with pytest.raises(HarnessError, match="Dask scheduler"):
        sweep(unreachable, None)


def _fields(plan: SweepPlan) -> dict[str, object]:
    return {name: getattr(plan, name) for name in SweepPlan.__slots__}  # type: ignore[attr-defined]


def test_failing_seeds_are_remembered_and_run_first(tmp_path: Path) -> None:
    db = tmp_path / "g2.duckdb"
    with Store(db) as store:
        first = sweep(_plan(40, "g2", ops=60), store)
    assert first.failing and first.exit_code == 1
    assert all(any("monoton" in v[0] for v in found) for found in first.failing.values())
    with Store(db) as store:
        assert store.failing_seeds("g2", {"ops": 60}) == sorted(first.failing)
        assert store.failing_seeds("g2", {"ops": 61}) == []
        second = sweep(_plan(5, "g2", start=1000, ops=60), store)
        order = [
            r[0]
            for r in store.con.execute(
                "SELECT seed FROM runs WHERE sweep_id = 1 ORDER BY run_id"
            ).fetchall()
        ]
    assert second.remembered == tuple(sorted(first.failing))
    assert order == sorted(first.failing) + list(range(1000, 1005))


def test_a_remembered_seed_that_passes_is_forgotten(tmp_path: Path) -> None:
    with Store(tmp_path / "g4.duckdb") as store:
        store.update_failing("g4", {"ops": 30}, failed=[7, 8], passed=[])
        report = sweep(_plan(3, ops=30), store)
        assert report.remembered == (7, 8) and report.runs == 5
        assert store.failing_seeds("g4", {"ops": 30}) == []


def test_run_ids_stay_unique_across_sweeps(tmp_path: Path) -> None:
    with Store(tmp_path / "ids.duckdb") as store:
        sweep(_plan(4, ops=20), store)
        sweep(_plan(4, ops=20), store)
        rows = store.con.execute(
            "SELECT count(*), count(DISTINCT run_id), max(sweep_id) FROM runs"
        ).fetchone()
    assert rows == (8, 8, 1)


def test_a_local_worker_that_dies_is_a_harness_error_keeping_what_was_written(
    tmp_path: Path,
) -> None:
    # Each worker dies on its ninth run (tests/dying_checkers.py): the batches
    # of four seeds written before that stay whole, and the error says so.
    plan = SweepPlan(
        "g4", PRESETS["g4"], RunOptions(ops=20), 0, 40, 2, None, 4, "inboxsim.tests.dying_checkers"
    )
    db = tmp_path / "died.duckdb"
    with Store(db) as store, pytest.raises(HarnessError, match="a local worker process died"):
        sweep(plan, store)
    con = duckdb.connect(str(db), read_only=True)
    try:
        seeds = [row[0] for row in con.execute("SELECT seed FROM runs ORDER BY seed").fetchall()]
    finally:
        con.close()
    assert len(seeds) % 4 == 0 and 4 <= len(seeds) < 40
    assert len(set(seeds)) == len(seeds)


class _Ticks:
    """A clock that moves 0.05 s per reading: the budget runs out after a
    fixed number of readings, whatever the machine's load (no wall clock)."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        self.now += 0.05
        return self.now

    def process_time(self) -> float:
        return 0.0


def test_a_time_budget_stops_starting_new_seeds(monkeypatch: pytest.MonkeyPatch) -> None:
    import inboxsim.sim.sweep as sweep_module

    monkeypatch.setattr(sweep_module, "time", _Ticks())
    plan = SweepPlan(
        "g4", PRESETS["g4"], RunOptions(ops=30), 0, 10_000, 1, 0.2, 10, checkers_module()
    )
    report = sweep(plan, None)
    assert report.stopped_by_budget and 0 < report.runs < 10_000
    assert report.document()["seeds"]["stopped_by_time_budget"] is True


def test_a_required_probe_never_hit_fails_the_sweep() -> None:
    report = sweep(_plan(2, ops=5), None)
    assert report.missing_probes and report.exit_code == 1


def test_probes_a_target_cannot_show_are_not_required() -> None:
    report = SweepReport(_plan(1, "g2"), features=("compaction",))
    assert "revert.discards_synthetic" not in report.missing_probes
    assert "barrier.steers_waiting" in report.missing_probes
    assert {p.name for p in PROBES} >= set(REQUIRED)


def test_a_store_of_another_schema_or_kind_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "other.duckdb"
    con = duckdb.connect(str(other))
    con.execute("CREATE TABLE t (x INTEGER)")
    con.close()
    with pytest.raises(HarnessError, match="not an inboxsim store"):
        Store(other)
    old = tmp_path / "old.duckdb"
    Store(old).close()
    con = duckdb.connect(str(old))
    con.execute("UPDATE meta SET value = '0' WHERE key = 'schema_version'")
    con.close()
    with pytest.raises(HarnessError, match="schema version 0"):
        Store(old)
    garbage = tmp_path / "garbage.duckdb"
    garbage.write_bytes(b"not a database" * 100)
    with pytest.raises(HarnessError):
        Store(garbage)


def test_a_batch_that_comes_back_twice_is_written_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rerun batch whose first run also came back (a worker lost, then
    found) is absorbed once: keyed by its first run id."""
    from inboxsim.sim import sweep as sweep_module

    def twice(fn, make_tasks, **_options):  # type: ignore[no-untyped-def]
        for task in make_tasks(2):
            yield task, fn(task)
            yield task, fn(task)

    monkeypatch.setattr(sweep_module, "run_tasks", twice)
    with Store(tmp_path / "twice.duckdb") as store:
        report = sweep(_plan(12, ops=20, jobs=2), store)
        rows = store.con.execute("SELECT count(*), count(DISTINCT seed) FROM runs").fetchone()
    assert rows == (12, 12) and report.runs == 12
    assert sum(b for b, _ in report.workers.values()) == 3  # batches of 5, 5 and 2


class _Interrupt:
    """A progress callback that interrupts the sweep (as Ctrl-C would) after
    ``batches`` batches were stored."""

    def __init__(self, batches: int) -> None:
        self.left = batches

    def __call__(self, report: SweepReport) -> None:
        self.left -= 1
        if self.left == 0:
            raise KeyboardInterrupt


def _interrupted(db: Path, plan: SweepPlan, batches: int) -> None:
    with Store(db) as store, pytest.raises(KeyboardInterrupt):
        sweep(plan, store, _Interrupt(batches))


def _g2(start: int, count: int, batch: int) -> SweepPlan:
    """A g2 sweep (which fails often) in batches of ``batch`` seeds."""
    return SweepPlan(
        "g2", PRESETS["g2"], RunOptions(ops=60), start, count, 1, None, batch, checkers_module()
    )


def _resuming(plan: SweepPlan) -> SweepPlan:
    return SweepPlan(**{**_fields(plan), "resume": True})


def test_an_interrupted_sweep_keeps_its_remembered_failing_seeds(tmp_path: Path) -> None:
    """Each batch writes its failing seeds with its runs (the list was
    written at the end only, so an interrupted sweep lost it)."""
    db = tmp_path / "g2.duckdb"
    _interrupted(db, _g2(0, 200, 20), 3)
    with Store(db) as store:
        failing = store.con.execute(
            "SELECT DISTINCT seed FROM runs WHERE verdict = 'violated' ORDER BY seed"
        ).fetchall()
        assert store.con.execute("SELECT count(*) FROM runs").fetchone() == (60,)
        assert failing and store.failing_seeds("g2", {"ops": 60}) == [s for (s,) in failing]


def test_resume_runs_only_what_is_missing_and_judges_the_whole_range(tmp_path: Path) -> None:
    """An interrupted sweep, resumed, ends as the uninterrupted sweep does:
    the same failing seeds, hashes, probes and verdict; each seed stored once."""
    plan = _g2(0, 120, 20)
    whole = sweep(plan, None)
    db = tmp_path / "resumed.duckdb"
    _interrupted(db, plan, 2)
    with Store(db) as store:
        resumed = sweep(_resuming(plan), store)
        rows = store.con.execute("SELECT count(*), count(DISTINCT seed) FROM runs").fetchone()
    assert rows == (120, 120)
    assert resumed.resumed == 40 and resumed.runs == 120 and resumed.planned == 120
    assert resumed.hashes == whole.hashes and resumed.failing == whole.failing
    assert resumed.probe_hits == whole.probe_hits and resumed.ops == whole.ops
    assert resumed.exit_code == whole.exit_code == 1
    doc = resumed.document()
    assert doc["seeds"]["resumed"] == 40
    assert [r["seed"] for r in doc["runs"]] == list(range(120))
    assert {r["seed"]: r["trace_hash"] for r in doc["runs"]} == whole.hashes
    # Nothing left: a second resume runs nothing and says the same.
    with Store(db) as store:
        again = sweep(_resuming(plan), store)
    assert again.resumed == 120 and again.failing == whole.failing
    assert again.workers == {}


def test_resume_counts_only_runs_of_the_same_policy_options_and_version(tmp_path: Path) -> None:
    def resumed(plan: SweepPlan, store: Store) -> int:
        return sweep(_resuming(plan), store).resumed

    with Store(tmp_path / "other.duckdb") as store:
        sweep(_plan(10, ops=20), store)
        assert resumed(_plan(10, ops=21), store) == 0
        assert resumed(_plan(10, "g5", ops=20), store) == 0
        store.con.execute("UPDATE runs SET version = '0.0.1'")  # an older inboxsim's runs
        assert resumed(_plan(10, ops=20), store) == 0
        assert resumed(_plan(12, ops=20), store) == 10


def test_the_interrupt_line_says_what_is_stored_and_how_to_go_on(tmp_path: Path) -> None:
    db = tmp_path / "line.duckdb"
    plan = _g2(100, 100, 25)
    _interrupted(db, plan, 2)
    with Store(db) as store:
        failing = store.con.execute(
            "SELECT count(*) FROM runs WHERE verdict = 'violated'"
        ).fetchone()[0]
        held_open = resume_line(plan, str(db), store)
    line = resume_line(plan, str(db))  # the store closed: opened read-only
    assert line == held_open
    assert line == (
        f"kept 50 of the 100 seeds 100..199 in {db} ({failing} failing); go on with: "
        f"inboxsim sweep --seeds 100 --seed-start 100 --policy g2 --ops 60 --db {db} --resume"
    )
    db.write_bytes(b"not a database" * 100)
    assert resume_line(plan, str(db)).startswith(f"the store {db} could not be read")
