"""The trace store: whole-run writes, events, views, migration from v1
(to v4 through v2 and v3), the check every open makes (size, schema, row
counts), runs counted once, and one-line errors for missing, corrupt, locked
and newer files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from inboxsim.errors import HarnessError
from inboxsim.model import PRESETS
from inboxsim.sim.run import RunOptions, run_seed
from inboxsim.sim.sweep import COMMIT_SECONDS
from inboxsim.store import schema
from inboxsim.store.schema import SCHEMA_VERSION
from inboxsim.store.store import Store, open_store, write_results
from tests.harness_faults import end_of_run, harness_of
from tests.store_versions import v1_copy, v3_copy

OPTIONS = RunOptions(ops=30)


@pytest.fixture(scope="module")
def results() -> list:
    return [run_seed(seed, PRESETS["g2"], OPTIONS) for seed in range(6)]


@pytest.fixture()
def db(tmp_path: Path, results: list) -> str:
    path = str(tmp_path / "s.duckdb")
    with Store(path) as s:
        write_results(s, results, 0, 0, PRESETS["g2"])
    return path


def _consistent(con: duckdb.DuckDBPyConnection) -> int:
    """Every stored run has all its steps (0..ops-1) and its events; returns the run count."""
    bad = con.execute(
        """SELECT r.run_id FROM runs r LEFT JOIN
             (SELECT run_id, count(*) n, min(idx) lo, max(idx) hi FROM steps GROUP BY run_id) s
           USING (run_id)
           WHERE s.n IS NULL OR s.n != r.ops OR s.lo != 0 OR s.hi != r.ops - 1"""
    ).fetchall()
    assert bad == []
    orphans = con.execute(
        "SELECT count(*) FROM (SELECT run_id FROM steps UNION SELECT run_id FROM events "
        "UNION SELECT run_id FROM violations UNION SELECT run_id FROM probes) x "
        "WHERE run_id NOT IN (SELECT run_id FROM runs)"
    ).fetchone()
    assert orphans == (0,)
    # The events table holds exactly the events the steps' observations list.
    from_json = con.execute(
        "SELECT coalesce(sum(json_array_length(json_extract(observed, '$.events'))), 0) FROM steps "
        "WHERE observed LIKE '%\"events\"%'"
    ).fetchone()
    assert from_json == con.execute("SELECT count(*) FROM events").fetchone()
    return con.execute("SELECT count(*) FROM runs").fetchone()[0]


def test_rows_match_the_results(db: str, results: list) -> None:
    with open_store(db) as s:
        assert _consistent(s.con) == len(results)
        events = sum(len(st.observed.events) for r in results for st in r.trace.steps)
        assert s.con.execute("SELECT count(*) FROM events").fetchone() == (events,)
        admitted = s.con.execute(
            "SELECT count(*) FILTER (WHERE delivery IS NULL) FROM events WHERE type = 'admitted'"
        ).fetchone()
        assert admitted == (0,)  # every admission carries its delivery
        assert s.schema_version() == SCHEMA_VERSION


def test_views_answer(db: str) -> None:
    with open_store(db) as s:
        q = lambda sql: s.con.execute(sql).fetchall()  # noqa: E731
        lat = q("SELECT delivery, min(latency) FROM promotion_latency GROUP BY ALL")
        assert lat and all(d in ("steer", "queue") and lo >= 0 for d, lo in lat)
        promoted = q("SELECT count(*) FROM events WHERE type = 'promoted'")[0][0]
        assert q("SELECT count(*) FROM promotion_latency")[0][0] == promoted
        assert q("SELECT min(depth) FROM inbox_depth")[0][0] == 0
        v = q("SELECT invariant, policy, runs_violated FROM violations_by_invariant")
        assert v == q(
            "SELECT invariant, 'g2', count(DISTINCT run_id) FROM violations GROUP BY invariant"
        )
        cov = q("SELECT max(runs_hit), max(runs) FROM probe_coverage")[0]
        assert 0 < cov[0] <= cov[1] == 6
        ex = q("SELECT runs_exercised, runs_violated FROM invariant_exercise")
        assert all(0 <= k <= n <= 6 for n, k in ex)


def test_migration_from_v1(db: str, tmp_path: Path) -> None:
    v1 = str(tmp_path / "v1.duckdb")
    v1_copy(db, v1)
    with duckdb.connect(v1, read_only=True) as con:
        assert "events" not in {
            r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()
        }
    with open_store(v1) as s:  # a reader migrates an older file first (v1 -> v2 -> v3)
        assert s.schema_version() == SCHEMA_VERSION
        _consistent(s.con)
        migrated = s.con.execute("SELECT * FROM events ORDER BY ALL").fetchall()
        policies = s.con.execute("SELECT * FROM policies").fetchall()
        hashes = s.con.execute("SELECT DISTINCT policy_hash FROM runs").fetchall()
    with open_store(db) as s:
        assert s.con.execute("SELECT * FROM events ORDER BY ALL").fetchall() == migrated
        # The preset's fields, filled in by v2 -> v3, are those a v3 sweep stores.
        assert s.con.execute("SELECT * FROM policies").fetchall() == policies
        assert s.con.execute("SELECT DISTINCT policy_hash FROM runs").fetchall() == hashes
    with Store(v1) as s:  # and a writer goes on appending to it
        assert s.next_ids() == (6, 1)


def test_newer_version_is_refused(db: str) -> None:
    with duckdb.connect(db) as con:
        con.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(HarnessError, match="schema version 99, newer than this inboxsim's"):
        open_store(db)


def test_missing_corrupt_and_foreign_files(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match="does not exist"):
        open_store(tmp_path / "missing.duckdb")
    junk = tmp_path / "junk.duckdb"
    junk.write_bytes(os.urandom(8192))
    with pytest.raises(HarnessError, match="not a readable DuckDB file"):
        open_store(junk)
    with pytest.raises(HarnessError, match="not a readable DuckDB file"):
        Store(junk)
    other = tmp_path / "other.duckdb"
    with duckdb.connect(str(other)) as con:
        con.execute("CREATE TABLE t (x INT)")
    with pytest.raises(HarnessError, match="not an inboxsim store"):
        open_store(other)


def test_locked_file(db: str) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import duckdb, time; c = duckdb.connect({db!r}); print('held', flush=True); "
            "time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        for opener in (open_store, Store):
            with pytest.raises(HarnessError, match=r"locked by another process \(PID \d+\)"):
                opener(db)
    finally:
        holder.kill()
        holder.wait()


def test_killed_sweep_leaves_whole_runs(tmp_path: Path) -> None:
    """SIGKILL a sweep mid-way, once it has committed batches (its first
    ones after COMMIT_SECONDS): the file opens, and every run in it is whole."""
    path = str(tmp_path / "killed.duckdb")
    sweep = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "inboxsim.cli",
            "sweep",
            "--seeds",
            "20000",
            "--ops",
            "40",
            "--jobs",
            "1",
            "--db",
            path,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    harness = None
    try:
        assert sweep.stderr is not None
        # Plain progress lines on stderr (not a terminal), one a second at
        # most: wait past the first commit (the first batch that arrives
        # COMMIT_SECONDS after the first one), with room for a slow batch.
        first = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if sweep.stderr.readline():
                first = first or time.monotonic()
                if time.monotonic() - first > 2 * COMMIT_SECONDS + 2:
                    break
        assert sweep.poll() is None, "the sweep finished before it could be killed"
        time.sleep(0.2)
        harness = harness_of(sweep.pid)
        sweep.send_signal(signal.SIGKILL)
    finally:
        sweep.kill()
        end_of_run(sweep, harness)  # it ends its processes, then lets go of the store
    assert sweep.returncode == -signal.SIGKILL
    with open_store(path) as s:
        n = _consistent(s.con)
    assert 0 < n < 20000


def test_a_failed_write_raises_its_own_error_and_keeps_the_store(db: str, results: list) -> None:
    """A batch that fails inside its transaction is rolled back and the error
    is DuckDB's own (was a TransactionException from unregistering inside
    the aborted transaction); the store takes the next batch."""
    import pyarrow as pa

    from inboxsim.store.columns import BatchColumns

    cols = BatchColumns()
    cols.add_run(6, 1, results[0], PRESETS["g2"])
    tables = cols.tables()
    # A steps table whose idx column cannot be cast: the insert fails after
    # the runs row of the batch went in.
    steps = tables["steps"]
    bad = steps.set_column(1, "idx", pa.array(["x"] * steps.num_rows))
    with Store(db) as s:
        before = schema.row_counts(s.con)
        with pytest.raises(duckdb.Error) as caught:
            s.write({**tables, "steps": bad})
        assert "TransactionContext" not in str(caught.value)
        assert schema.row_counts(s.con) == before  # nothing of the batch is kept
        s.write(tables)
        assert s.next_ids() == (7, 2)
    with open_store(db) as s:  # and the counts the next open compares agree
        assert _consistent(s.con) == 7


def test_every_write_records_the_row_counts_the_next_open_compares(db: str) -> None:
    with open_store(db) as s:
        recorded = s.con.execute("SELECT value FROM meta WHERE key = 'row_counts'").fetchone()
        assert recorded is not None and '"runs":6' in recorded[0]
    with duckdb.connect(db) as con:  # rows lost outside inboxsim
        con.execute("DELETE FROM steps WHERE run_id = 2")
    for opener in (open_store, Store):
        with pytest.raises(HarnessError, match=r"inconsistent: table steps holds \d+ rows where"):
            opener(db)


def test_a_write_records_what_counting_every_table_finds(db: str, results: list) -> None:
    """A write records its counts as the last ones plus the rows its
    statements added (a policy already stored is not inserted again, seeds
    remembered and forgotten): they are what counting every table finds."""
    from inboxsim.store.columns import BatchColumns
    from inboxsim.store.store import Remember

    def recorded(s: Store) -> dict:
        row = s.con.execute("SELECT value FROM meta WHERE key = 'row_counts'").fetchone()
        return json.loads(row[0])

    with Store(db) as s:
        s.update_failing("g2", {}, [1, 2], [])
        for first, remember in ((6, Remember("g2", {}, (3,), (1,))), (7, None)):
            cols = BatchColumns()
            cols.add_run(first, 1, results[first - 6], PRESETS["g2"])
            s.write(cols.tables(), remember)
            assert recorded(s) == schema.row_counts(s.con)
        assert recorded(s)["policies"] == 1 and recorded(s)["failing_seeds"] == 2
    with open_store(db) as s:
        assert _consistent(s.con) == 8


def test_a_truncated_file_is_refused_by_its_size(db: str, tmp_path: Path) -> None:
    """A copy cut anywhere past its headers opens in DuckDB; the store
    refuses it at once, reader or writer, by the blocks its header counts."""
    size = os.path.getsize(db)
    cut = tmp_path / "cut.duckdb"
    for keep in (size - 1, size // 2, 300_000):
        cut.write_bytes(Path(db).read_bytes()[:keep])
        for opener in (open_store, Store):
            with pytest.raises(HarnessError, match=r"is truncated \(\d+ bytes where its header"):
                opener(cut)
        assert cut.stat().st_size == keep and not Path(str(cut) + ".wal").exists()


def test_migration_from_v3_counts_each_run_once(db: str, tmp_path: Path, results: list) -> None:
    with Store(db) as s:  # the same six seeds stored again: the same runs
        write_results(s, results, 6, 1, PRESETS["g2"])
    v3 = str(tmp_path / "v3.duckdb")
    v3_copy(db, v3)
    with duckdb.connect(v3, read_only=True) as con:
        assert con.execute("SELECT max(runs) FROM probe_coverage").fetchone() == (12,)
    with open_store(v3) as s:
        assert s.schema_version() == SCHEMA_VERSION
        q = lambda sql: s.con.execute(sql).fetchall()  # noqa: E731
        assert q("SELECT count(*) FROM runs") == [(12,)]
        assert q("SELECT count(*), min(run_id) FROM distinct_runs") == [(6, 6)]  # the latest
        assert q("SELECT max(runs) FROM probe_coverage") == [(6,)]
        assert q("SELECT max(runs_exercised) FROM invariant_exercise")[0][0] <= 6
        assert q("SELECT value FROM meta WHERE key = 'row_counts'")


def test_a_run_is_a_different_run_under_other_options_or_versions(db: str, results: list) -> None:
    """The key of distinct_runs: seed, scenario, policy, options, version, target."""
    with Store(db) as s:
        write_results(s, results, 6, 1, PRESETS["g2"])
        s.con.execute("UPDATE runs SET version = '0.0.0' WHERE run_id = 6")
        s.con.execute("""UPDATE runs SET options = '{"ops":31}' WHERE run_id = 7""")
        assert s.con.execute("SELECT count(*) FROM distinct_runs").fetchone() == (8,)


def test_a_file_duckdb_shortened_itself_is_whole(tmp_path: Path) -> None:
    """A checkpoint that frees the last blocks shortens the file while the
    header still counts them: small writes in turn do it. Such a file is
    whole and every open takes it; a cut inside a block is still refused."""
    path = tmp_path / "m.duckdb"
    Store(path).close()
    shortened = 0
    for _ in range(4):
        with Store(path) as s:
            s.write_mutants([{"mutant": "m", "killed_by_kind": "none", "runs": 1}])
        with duckdb.connect(str(path), read_only=True) as con:
            _, _, block, blocks, *_ = con.execute("PRAGMA database_size").fetchone()
        shortened += path.stat().st_size < 3 * 4096 + block * blocks
        with open_store(path) as s:
            assert s.con.execute("SELECT count(*) FROM mutants").fetchone()[0] >= 1
    assert shortened  # the case arose
    cut = tmp_path / "cut.duckdb"
    cut.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(HarnessError, match=r"is truncated \(\d+ bytes where its header"):
        open_store(cut)
