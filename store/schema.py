"""The store's schema: its version, the tables' DDL, the verdicts the conformance
table holds, and the row counts that every write records and every open compares
(:mod:`.store` opens and writes, :mod:`.migrate` moves an older file forward; both
build on this)."""

from __future__ import annotations

import json
from typing import Any

SCHEMA_VERSION = 5

DDL = (
    "CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR NOT NULL)",
    """CREATE TABLE IF NOT EXISTS runs (
        run_id BIGINT NOT NULL,
        sweep_id BIGINT NOT NULL,
        seed UBIGINT,
        policy VARCHAR NOT NULL,
        target VARCHAR NOT NULL,
        version VARCHAR NOT NULL,
        options JSON NOT NULL,
        swarm JSON NOT NULL,
        decisions INTEGER[] NOT NULL,
        verdict VARCHAR NOT NULL,
        liveness VARCHAR NOT NULL,
        trace_hash VARCHAR NOT NULL,
        ops INTEGER NOT NULL,
        seconds DOUBLE NOT NULL,
        exercised VARCHAR[] NOT NULL,
        scenario VARCHAR,
        policy_hash VARCHAR
    )""",
    """CREATE TABLE IF NOT EXISTS steps (
        run_id BIGINT NOT NULL,
        idx INTEGER NOT NULL,
        phase VARCHAR NOT NULL,
        kind VARCHAR NOT NULL,
        decision VARCHAR NOT NULL,
        request JSON,
        reply JSON,
        observed JSON NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS events (
        run_id BIGINT NOT NULL,
        step INTEGER NOT NULL,
        session VARCHAR NOT NULL,
        seq BIGINT NOT NULL,
        type VARCHAR NOT NULL,
        input VARCHAR,
        time BIGINT NOT NULL,
        delivery VARCHAR
    )""",
    """CREATE TABLE IF NOT EXISTS violations (
        run_id BIGINT NOT NULL,
        invariant VARCHAR NOT NULL,
        steps INTEGER[] NOT NULL,
        message VARCHAR NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS probes (
        run_id BIGINT NOT NULL,
        probe VARCHAR NOT NULL,
        hits INTEGER NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS policies (
        policy_hash VARCHAR PRIMARY KEY,
        name VARCHAR NOT NULL,
        preset VARCHAR,
        fields JSON NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS scenario_runs (
        run_id BIGINT NOT NULL,
        scenario VARCHAR NOT NULL,
        file VARCHAR NOT NULL,
        passed BOOLEAN NOT NULL,
        expectations INTEGER NOT NULL,
        expectations_failed INTEGER NOT NULL,
        failures JSON NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS mutants (
        campaign_id BIGINT NOT NULL,
        mutant VARCHAR NOT NULL,
        killed_by_kind VARCHAR NOT NULL,
        killed_by VARCHAR,
        seed UBIGINT,
        seconds_to_detect DOUBLE,
        runs INTEGER NOT NULL,
        shrunk_ops INTEGER,
        recorded_at TIMESTAMP NOT NULL DEFAULT current_timestamp
    )""",
    """CREATE TABLE IF NOT EXISTS shrunk (
        seed UBIGINT NOT NULL,
        policy VARCHAR NOT NULL,
        policy_hash VARCHAR,
        options VARCHAR NOT NULL,
        run_version VARCHAR NOT NULL,
        invariant VARCHAR NOT NULL,
        version VARCHAR NOT NULL,
        outcome VARCHAR NOT NULL,
        example JSON NOT NULL,
        recorded_at TIMESTAMP NOT NULL DEFAULT current_timestamp
    )""",
    """CREATE TABLE IF NOT EXISTS failing_seeds (
        policy VARCHAR NOT NULL,
        options VARCHAR NOT NULL,
        seed UBIGINT NOT NULL,
        PRIMARY KEY (policy, options, seed)
    )""",
)
# The verdicts of the ``conformance`` table's ``verdict`` column, in the order a
# summary lists them: what ``inboxsim conformance`` writes and the report reads.
VERDICTS = (
    "held",
    "violated",
    "diverged",
    "nondeterministic",
    "protocol error",
    "not testable",
    "not exercised",
)
FAILING = frozenset({"violated", "diverged", "nondeterministic", "protocol error"})
"""The verdicts that fail a run (exit code 1)."""
TABLES = ("runs", "steps", "events", "violations", "probes", "policies", "scenario_runs")
COUNTED = (*TABLES, "failing_seeds", "mutants", "shrunk", "conformance")
"""The tables whose row counts every write records and every open compares
(``conformance`` is created by the first ``conformance --db``)."""


def row_counts(con: Any) -> dict[str, int]:
    """The row count of each of :data:`COUNTED` that the file holds."""
    present = {
        r[0]
        for r in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main'"
        ).fetchall()
    }
    tables = [t for t in COUNTED if t in present]
    if not tables:
        return {}
    # One query for them all: a write records them in each transaction, and a
    # query per table cost more than the counting.
    rows = con.execute(
        " UNION ALL ".join(f"SELECT '{t}', count(*) FROM {t}" for t in tables)
    ).fetchall()
    return {table: int(n) for table, n in rows}


def record_row_counts(con: Any, counts: dict[str, int] | None = None) -> dict[str, int]:
    """Record ``counts`` (by default :func:`row_counts`) in ``meta``, inside
    the caller's transaction; return them."""
    if counts is None:
        counts = row_counts(con)
    text = json.dumps(counts, sort_keys=True, separators=(",", ":"))
    # An update where the row is there (every write but a new store's first):
    # an upsert checks its key against the table's index on top.
    row = con.execute("UPDATE meta SET value = ? WHERE key = 'row_counts'", [text]).fetchone()
    if not row or not row[0]:
        con.execute("INSERT INTO meta VALUES ('row_counts', ?)", [text])
    return counts
