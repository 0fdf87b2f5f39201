"""The trace store: a DuckDB database of runs, their steps, durable events,
violations and probes.

A versioned schema (``meta.schema_version``); an older file is migrated in
place when opened (:mod:`.migrate`), a newer one is refused with a clear
message. One process writes a database at a time (the
sweep's parent; its workers only return data), and each batch of runs is
written whole in one transaction (a sweep's batches several to one:
:meth:`Store.batches`), so a sweep that dies leaves whole runs only.

Every command that opens a store, reader or writer, makes the same check
first (:meth:`Store.verify`), and refuses with one line a file that fails it,
before anything is written:

- the file is no shorter than its own header says (DuckDB records how many
  blocks the file holds: a truncated copy opens and fails on a later read);
- it is an inboxsim store (a ``meta`` table with a schema version), of a
  version this inboxsim reads;
- every table holds the rows the last committed transaction recorded in
  ``meta.row_counts`` (each write records them in its own transaction).

It does not read every block: a byte flipped inside a data block is found by
DuckDB's own checksum when that block is read (``check`` reads them all), and
reported as a damaged file then.

Bulk writes go through pyarrow Tables built from column lists (:mod:`.columns`)
(each inserted as a DuckDB relation over an arrow scan): two orders of
magnitude faster than ``executemany`` for the million-row step tables a sweep
produces (python-ecosystem.md, section 1).

A transaction that adds at least a row group (:data:`ROW_GROUP` rows) to a
table has DuckDB write that table's rows into the file at once, compressed;
smaller ones go through the write-ahead log first and are compressed by the
next checkpoint, which compresses the last, partly filled row group again
each time: a sweep that commits its batches two row groups of steps at a time
spends a third less in DuckDB than one that commits each batch of 100 seeds.

Tables:

- ``meta(key, value)``: ``schema_version``; ``row_counts`` (v4): each
  table's rows after the last committed write, as JSON.
- ``runs``: one row per run: seed, policy, target, version, options and swarm
  (JSON), the decision list, verdict, liveness verdict, trace hash, step
  count, wall seconds (reporting only), the invariants exercised.
- ``steps``: one row per step: phase, kind, decision label, and the request,
  reply and observations as canonical JSON (the trace hash covers exactly
  these plus the header).
- ``events`` (v2): one row per durable event a step appended: session, seq,
  type, input, time, and for admissions the delivery, so SQL can ask about
  promotion latency and inbox depth without parsing ``steps.observed``.
- ``violations``: invariant, the steps it cites, the message.
- ``probes``: coverage probe hit counts per run (probes hit at least once).
- ``failing_seeds``: seeds that failed, by policy and options; the next sweep
  with the same policy and options runs them first (like Hypothesis' example
  database), and forgets those that pass.

- ``policies`` (v3): every field of each policy runs ran under, as JSON, keyed
  by a content hash that ``runs.policy_hash`` names, and ``preset``: the
  preset's name when the policy was that preset as then defined; a custom
  TOML policy is rebuilt from it by ``check`` and ``diff --rerun`` after its
  file is gone.
- ``scenario_runs`` (v3): per scenario run (``inboxsim run --db``): the
  scenario's name and file, whether it passed, its expectations checked and
  failed, and every failure (JSON). The run itself is a ``runs`` row like any.
- ``mutants`` (v3): planted-bug results by campaign: what killed each mutant
  (``killed_by_kind``, ``killed_by``), the seed, the time to detect, the runs
  it took, the shrunk length; written by :meth:`Store.write_mutants`.
- ``shrunk`` (v5): the report's cache of shrunk counterexamples, one per
  failing seeded run shrunk and invariant, by the inboxsim that shrank it
  (:mod:`.shrink_cache`), so a second report does not shrink again.

Views for the common questions are in :mod:`.views` (documented in
``docs/queries.md``). Version 2 added ``events``, ``runs.scenario`` and the
views; version 3 ``policies``, ``runs.policy_hash``, ``scenario_runs`` and
``mutants``; version 4 ``meta.row_counts`` and the ``distinct_runs`` view,
which the counting views and the report count runs by (a run stored twice,
say by a sweep re-run after a kill, is one run); version 5 ``shrunk``.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from .. import __version__
from ..errors import HarnessError
from ..procs.interrupt import deferred
from .columns import BatchColumns, options_key
from .migrate import MIGRATIONS, migrate
from .mutants import mutant_row
from .policies import policy_record
from .schema import COUNTED, DDL, SCHEMA_VERSION, TABLES, record_row_counts, row_counts
from .views import create_views

ROW_GROUP = 122_880  # DuckDB's rows per row group (its default row_group_size)
_EMPTY = -1  # schema_version() of a file with no tables at all: a new store

# Before block 0, a DuckDB file holds its main header and two database
# headers of 4 KiB each (DuckDB's Storage::FILE_HEADER_SIZE); then
# ``total_blocks`` blocks of ``block_size`` bytes.
_HEADER_BYTES = 3 * 4096


class Store:
    """An open trace store. Open it only in the process that writes it, and
    never across a fork (a forked child could write through the inherited
    connection without DuckDB's file lock noticing).

    ``read_only``: for commands that only read (check, report, diff); DuckDB
    lets several read-only connections share a file. ``must_exist``: a missing
    file is an error rather than a new, empty store (a reader given a wrong
    path should say so, not report on nothing).

    Every failure to open is a :class:`HarnessError` with a one-line reason:
    a missing file, a file that is not a DuckDB database, a file locked by
    another process, or a store of a newer schema version.
    """

    def __init__(
        self, path: str | Path, *, read_only: bool = False, must_exist: bool = False
    ) -> None:
        import duckdb

        self.path = str(path)
        self.read_only = read_only
        # Every counted table's rows as the last transaction through this
        # store left them (None: not known, counted again at the next one),
        # and the policies its committed writes hold: what lets a write
        # record its counts and skip a stored policy without a query.
        self.counts: dict[str, int] | None = None
        self.policies: set[str] = set()
        memory = self.path == ":memory:"
        if not memory and Path(self.path).is_dir():
            raise HarnessError(f"the database {self.path} is a directory, not a DuckDB file")
        if not memory and (read_only or must_exist) and not Path(self.path).is_file():
            raise HarnessError(f"the database {self.path} does not exist")
        try:
            if not memory:
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self.con = duckdb.connect(self.path, read_only=read_only)
        except (OSError, duckdb.Error) as exc:
            raise HarnessError(_open_error(self.path, exc)) from None
        try:
            self._check_size()
            self._ensure_schema()
            self.verify()
        except HarnessError:
            self.con.close()
            raise
        except duckdb.Error as exc:
            self.con.close()
            message = _open_error(self.path, exc)
            if message.startswith("cannot open"):
                message = f"the database {self.path} is not usable: {_reason(exc)}"
            raise HarnessError(message) from None

    def _check_size(self) -> None:
        """Refuse a file shorter than the blocks its header counts: a
        truncated copy, which opens and would fail on a later read (or take
        a writer's batch and then be unreadable to everyone).

        DuckDB itself shortens the file when a checkpoint frees its last
        blocks, and the header's count still includes them (as free blocks):
        a file that ends on a block boundary and holds at least as many
        blocks as are in use is whole."""
        if self.path == ":memory:":
            return
        row = self.con.execute("PRAGMA database_size").fetchone()
        if row is None:
            return
        block_size, blocks, used = int(row[2]), int(row[3]), int(row[4])
        expected = _HEADER_BYTES + block_size * blocks
        size = os.path.getsize(self.path)
        whole = size >= _HEADER_BYTES and (size - _HEADER_BYTES) % block_size == 0
        if size < expected and not (whole and size >= _HEADER_BYTES + block_size * used):
            raise HarnessError(
                f"the database {self.path} is truncated ({size} bytes where its header "
                f"counts {expected}): restore it or use another --db"
            )

    def verify(self) -> None:
        """The check every open makes (see the module's docstring): a
        :class:`HarnessError` naming the first table whose row count differs
        from what the last committed write recorded. A store written before
        v4 recorded nothing yet and passes (its migration records them)."""
        row = self.con.execute("SELECT value FROM meta WHERE key = 'row_counts'").fetchone()
        if row is None:
            return
        try:
            recorded = json.loads(row[0])
        except ValueError:
            raise HarnessError(
                f"the database {self.path} is damaged: its recorded row counts are not JSON"
            ) from None
        found = row_counts(self.con)
        for table in COUNTED:
            if recorded.get(table, 0) != found.get(table, 0):
                self.counts = None
                raise HarnessError(
                    f"the database {self.path} is inconsistent: table {table} holds "
                    f"{found.get(table, 0)} rows where the last committed write left "
                    f"{recorded.get(table, 0)} (changed outside inboxsim, or damaged): "
                    "restore it or use another --db"
                )
        self.counts = found

    def schema_version(self) -> int | None:
        """The version the file records, or None when it has no meta table."""
        tables = {
            row[0] for row in self.con.execute("SELECT table_name FROM duckdb_tables()").fetchall()
        }
        if "meta" not in tables:
            return None if tables else _EMPTY
        row = self.con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        try:
            return int(row[0]) if row else None
        except ValueError:
            return None

    def _ensure_schema(self) -> None:

        con = self.con
        found = self.schema_version()
        if found is None:
            raise HarnessError(
                f"the database {self.path} is not an inboxsim store (no schema version)"
            )
        if found == SCHEMA_VERSION:
            return
        if found > SCHEMA_VERSION:
            raise HarnessError(
                f"the database {self.path} has schema version {found}, newer than this "
                f"inboxsim's {SCHEMA_VERSION}: upgrade inboxsim or use another --db"
            )
        if self.read_only:
            # An empty file opened for reading is not a store either.
            if found == _EMPTY:
                raise HarnessError(f"the database {self.path} is empty (no inboxsim store in it)")
            raise _NeedsMigration(found)
        if found != _EMPTY and found not in MIGRATIONS:
            raise HarnessError(
                f"the database {self.path} has schema version {found}, which this inboxsim "
                f"cannot migrate (it reads versions {min(MIGRATIONS)} to {SCHEMA_VERSION}): "
                "use another --db"
            )
        if found == _EMPTY:
            with self.transaction():
                for ddl in DDL:
                    con.execute(ddl)
                create_views(con)
                con.execute("INSERT INTO meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])
            return
        migrate(con, found, SCHEMA_VERSION)

    # --- reading --------------------------------------------------------------

    def next_ids(self) -> tuple[int, int]:
        """The next free (run_id, sweep_id)."""
        row = self.con.execute("SELECT max(run_id), max(sweep_id) FROM runs").fetchone()
        assert row is not None
        return (0 if row[0] is None else row[0] + 1), (0 if row[1] is None else row[1] + 1)

    def failing_seeds(self, policy: str, options: dict[str, Any]) -> list[int]:
        rows = self.con.execute(
            "SELECT seed FROM failing_seeds WHERE policy = ? AND options = ? ORDER BY seed",
            [policy, options_key(options)],
        ).fetchall()
        return [int(r[0]) for r in rows]

    def seeded_runs(self, policy: Any, options: dict[str, Any]) -> dict[int, SeededRun]:
        """The seeded runs the store holds under ``policy`` (a
        :class:`~inboxsim.model.Policy`: its name and fields) and ``options``,
        by this inboxsim version: each seed's latest run (``distinct_runs``).
        What ``sweep --resume`` counts instead of running again."""

        key = [policy.name, policy_record(policy)[0], options_key(options), __version__]
        where = (
            "FROM distinct_runs WHERE scenario IS NULL AND seed IS NOT NULL AND policy = ? "
            "AND policy_hash = ? AND options = ? AND version = ?"
        )
        runs = self.con.execute(
            f"SELECT run_id, seed, verdict, liveness, ops, trace_hash {where}", key
        ).fetchall()
        violations: dict[int, list[tuple[str, tuple[int, ...], str]]] = {}
        for run_id, invariant, steps, message in self.con.execute(
            "SELECT run_id, invariant, steps, message FROM violations "
            f"WHERE run_id IN (SELECT run_id {where}) ORDER BY run_id, rowid",
            key,
        ).fetchall():
            violations.setdefault(run_id, []).append((invariant, tuple(steps), message))
        probes: dict[int, dict[str, int]] = {}
        for run_id, probe, hits in self.con.execute(
            f"SELECT run_id, probe, hits FROM probes WHERE run_id IN (SELECT run_id {where})", key
        ).fetchall():
            probes.setdefault(run_id, {})[probe] = hits
        return {
            int(seed): SeededRun(
                int(seed),
                verdict,
                liveness,
                ops,
                trace_hash,
                tuple(violations.get(run_id, ())),
                probes.get(run_id, {}),
            )
            for run_id, seed, verdict, liveness, ops, trace_hash in runs
        }

    # --- writing ----------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Any]:
        """One transaction on the store's connection that also records every
        table's row count in ``meta.row_counts`` before it commits, so that
        the next open can tell a store that lost or gained rows outside
        inboxsim. On a failure it rolls back and re-raises that failure: a
        rollback that fails in turn (DuckDB may have invalidated the
        connection) never hides it."""
        known = self._begin()
        try:
            yield self.con
            self._commit(known)
        except BaseException:
            self._rollback()
            raise

    def _begin(self) -> dict[str, int] | None:
        """Begin a transaction; the row counts the last one left (None: not known)."""
        known, self.counts = self.counts, None
        self.con.execute("BEGIN TRANSACTION")
        return known

    def _commit(self, known: dict[str, int] | None, added: dict[str, int] | None = None) -> None:
        """Record the row counts and commit. ``added``: the rows the
        transaction added to each table (the counts its statements returned),
        and nothing else changed: the counts recorded are then ``known`` plus
        these, without counting every table again (a quarter of a batch's
        planning). Without it, or when ``known`` is None, every table is
        counted."""
        if added is not None and known is not None:
            counts = dict(known)
            for table, n in added.items():
                counts[table] = counts.get(table, 0) + n
            record_row_counts(self.con, counts)
        else:
            counts = record_row_counts(self.con)
        self.con.execute("COMMIT")
        self.counts = counts

    def _rollback(self) -> None:
        import duckdb

        with contextlib.suppress(duckdb.Error):
            self.con.execute("ROLLBACK")

    def write(self, tables: dict[str, Any], remember: Remember | None = None) -> None:
        """Insert one batch of runs (pyarrow Tables by name) in one
        transaction, with ``remember``'s update of the failing seeds."""
        with self.batches() as writer:
            writer.write(tables, remember)

    @contextlib.contextmanager
    def batches(self, rows: int = 0, seconds: float = 0.0) -> Iterator[BatchWriter]:
        """A writer of batches (each as :meth:`write` takes it) into one
        transaction, committed once one table has taken ``rows`` rows in it
        or it is ``seconds`` old (both 0: after each batch); what is left is
        committed when the block ends, normally or by an exception (an
        interrupt, a worker lost): the batches are whole, whatever stopped
        the block. A batch that fails to write rolls back with it those not
        yet committed."""
        writer = BatchWriter(self, rows, seconds)
        try:
            yield writer
        finally:
            writer.commit()

    def update_failing(
        self, policy: str, options: dict[str, Any], failed: Iterable[int], passed: Iterable[int]
    ) -> None:
        """Remember seeds that failed; forget remembered seeds that now pass."""
        with self.transaction() as con:
            _remember(con, Remember(policy, options, tuple(failed), tuple(passed)))

    def write_mutants(self, rows: Iterable[dict[str, Any]]) -> int:
        """Record one campaign of planted-bug results (the kill matrix) in one
        transaction; returns its ``campaign_id``. Each row: ``mutant``,
        ``killed_by_kind`` (one of :data:`.mutants.KILL_KINDS`), ``killed_by`` (the
        invariant id or the divergence, None when not killed), ``seed`` (None
        for a scenario kill), ``seconds_to_detect``, ``runs``, ``shrunk_ops``.
        A row that breaks these rules is a :class:`HarnessError` naming it, and
        nothing of the campaign is written."""
        checked = [mutant_row(n, row) for n, row in enumerate(rows, 1)]
        with self.transaction() as con:
            row = con.execute("SELECT coalesce(max(campaign_id) + 1, 0) FROM mutants").fetchone()
            campaign = int(row[0]) if row else 0
            # A campaign is tens of rows, once: executemany is plenty here.
            con.executemany(
                "INSERT INTO mutants (campaign_id, mutant, killed_by_kind, killed_by, seed, "
                "seconds_to_detect, runs, shrunk_ops) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [(campaign, *r) for r in checked],
            )
        return campaign

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        self.close()
        # A file damaged past its header opens fine and fails on a later read
        # or write: say so in one line, as for a file that does not open.
        if isinstance(exc, BaseException) and _damaged(exc):
            raise HarnessError(_open_error(self.path, exc)) from None


class SeededRun(NamedTuple):
    """A stored seeded run, as much of it as a sweep's tally needs."""

    seed: int
    verdict: str
    liveness: str
    ops: int
    trace_hash: str
    violations: tuple[tuple[str, tuple[int, ...], str], ...]  # invariant, steps, message
    probes: dict[str, int]  # probe -> hits


class Remember(NamedTuple):
    """A batch's update of the remembered failing seeds (``failing_seeds``)."""

    policy: str  # the policy as the user gave it: a preset name or a TOML file
    options: dict[str, Any]
    failed: tuple[int, ...]  # seeds that failed: remember them
    passed: tuple[int, ...]  # remembered seeds that passed: forget them


class BatchWriter:
    """Batches of runs inserted into one open transaction, committed together
    (:meth:`Store.batches`). Each batch goes in with its update of the
    remembered failing seeds, so an interrupted sweep keeps the seeds of
    every batch it stored."""

    def __init__(self, store: Store, rows: int, seconds: float) -> None:
        self.store = store
        self.rows = rows
        self.seconds = seconds
        self.opened = 0.0  # when the open transaction began (time.monotonic)
        self.known: dict[str, int] | None = None  # the counts before the open transaction
        self.added: dict[str, int] | None = None  # rows it added by table; None: none open
        self.policies: set[str] = set()  # the policies it stored

    def write(self, tables: dict[str, Any], remember: Remember | None = None) -> None:
        """Insert one batch (pyarrow Tables by name); commit when a table has
        taken the writer's rows since the last commit, or its seconds have
        passed since."""
        store, con = self.store, self.store.con
        if self.added is None:
            self.known, self.added = store._begin(), {}
            self.opened = time.monotonic()
        added = self.added
        try:
            for name in TABLES:
                table = tables.get(name)
                if table is None or not table.num_rows:
                    continue
                if name == "policies":
                    n = self._insert_policies(table)
                else:
                    # An arrow scan inserted as a relation: no view registered
                    # and dropped per table, no statement text planned (a
                    # quarter of a batch's planning). All its rows or none.
                    con.from_arrow(table).insert_into(name)
                    n = table.num_rows
                added[name] = added.get(name, 0) + n
            if remember is not None:
                added["failing_seeds"] = added.get("failing_seeds", 0) + _remember(con, remember)
        except BaseException:
            self.added, self.policies = None, set()
            store._rollback()
            raise
        if (
            max(added.values(), default=0) >= self.rows
            or time.monotonic() - self.opened >= self.seconds
        ):
            self.commit()

    def _insert_policies(self, table: Any) -> int:
        """Insert the policies neither the store's writes nor the open
        transaction hold (an earlier sweep may have: OR IGNORE); the rows
        added."""
        added = 0
        for row in table.to_pylist():
            digest = row["policy_hash"]
            if digest in self.store.policies or digest in self.policies:
                continue
            found = self.store.con.execute(
                "INSERT OR IGNORE INTO policies (policy_hash, name, preset, fields) "
                "VALUES (?, ?, ?, ?)",
                [digest, row["name"], row["preset"], row["fields"]],
            ).fetchone()
            added += int(found[0]) if found else 0
            self.policies.add(digest)
        return added

    def commit(self) -> None:
        """Commit the batches written since the last commit, if any; an
        interrupt waits until it is done (a commit cut in two rolls back)."""
        if self.added is None:
            return
        added, self.added = self.added, None
        with deferred():
            try:
                self.store._commit(self.known, added)
            except BaseException:
                self.policies = set()
                self.store._rollback()
                raise
            self.store.policies |= self.policies
            self.policies = set()


def _remember(con: Any, update: Remember) -> int:
    """Apply ``update``; the rows it added to ``failing_seeds`` (fewer than
    none when it forgot more than it remembered)."""
    key = options_key(update.options)
    added = 0
    for seed in update.passed:
        row = con.execute(
            "DELETE FROM failing_seeds WHERE policy = ? AND options = ? AND seed = ?",
            [update.policy, key, seed],
        ).fetchone()
        added -= int(row[0]) if row else 0
    for seed in update.failed:
        row = con.execute(
            "INSERT OR IGNORE INTO failing_seeds VALUES (?, ?, ?)", [update.policy, key, seed]
        ).fetchone()
        added += int(row[0]) if row else 0
    return added


class _NeedsMigration(HarnessError):
    """A reader found an older schema: :func:`open_store` migrates and retries."""

    def __init__(self, found: int) -> None:
        super().__init__(f"schema version {found} needs migrating")
        self.found = found


def check_writable(path: str | Path) -> None:
    """Open ``path`` as a writer would, and close it: every refusal a writer
    makes (see :class:`Store`), before a long run rather than after it."""
    Store(path).close()


def open_store(path: str | Path) -> Store:
    """Open a store for reading. An older file is migrated first (one short
    writable open), so readers always see the current schema and views."""
    try:
        return Store(path, read_only=True)
    except _NeedsMigration:
        Store(path, must_exist=True).close()
        return Store(path, read_only=True)


def _reason(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


_DAMAGE = ("Could not read enough bytes", "Corrupt", "checksum", "not a valid DuckDB database")


def _damaged(exc: BaseException) -> bool:
    """A DuckDB error that says the file is damaged (not a bug in a query)."""
    import duckdb

    text = str(exc)
    return isinstance(exc, duckdb.Error) and any(
        marker.lower() in text.lower() for marker in _DAMAGE
    )


def _open_error(path: str, exc: BaseException) -> str:
    """One line that says what is wrong with the file, in the user's terms."""
    text = str(exc)
    if "Could not set lock" in text or "Conflicting lock" in text:
        holder = ""
        if "(PID" in text:
            holder = " (PID " + text.split("(PID", 1)[1].split(")", 1)[0].strip() + ")"
        return (
            f"the database {path} is locked by another process{holder}: "
            "wait for it to finish or use another --db"
        )
    if "Could not read enough bytes" in text:
        return (
            f"the database {path} is truncated or corrupt (a read past its end failed): "
            "restore it or use another --db"
        )
    if "checksum" in text.lower() and " at location " in text:
        where = text.rsplit(" at location ", 1)[1].split()[0].rstrip(".")
        return (
            f"the database {path} is damaged: the block at byte {where} fails its checksum "
            "(what was written is not what is read back): restore it or use another --db"
        )
    if "not a valid DuckDB database" in text or "Corrupt" in text or "checksum" in text.lower():
        return (
            f"the database {path} is not a readable DuckDB file (corrupt, or another kind of file)"
        )
    if "WAL" in text and ("replaying" in text or "does not match" in text):
        why = "does not match it" if "does not match" in text else f"fails: {_reason(exc)}"
        return (
            f"the database {path} cannot be opened with the write-ahead log beside it "
            f"({path}.wal {why}): restore the two files together, or move {path}.wal "
            "aside to open the store as last checkpointed"
        )
    return f"cannot open the database {path}: {_reason(exc)}"


def write_results(
    store: Store,
    results: Sequence[Any],
    first_run_id: int,
    sweep_id: int,
    policy: Any = None,
) -> None:
    """Convenience: write a list of run results (all under ``policy``) as one batch."""
    cols = BatchColumns()
    for offset, result in enumerate(results):
        cols.add_run(first_run_id + offset, sweep_id, result, policy)
    store.write(cols.tables())
