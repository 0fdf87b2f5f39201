"""Store files as older inboxsim versions wrote them, for the migration tests.

The DDL of each old version is frozen here (copied from the release that
wrote it), so a test of an old file does not change when the current schema does.
"""

from __future__ import annotations

import duckdb

# Schema version 2, as reports/store.py wrote it before version 3.
V2_DDL = (
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
        scenario VARCHAR
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
    """CREATE TABLE IF NOT EXISTS failing_seeds (
        policy VARCHAR NOT NULL,
        options VARCHAR NOT NULL,
        seed UBIGINT NOT NULL,
        PRIMARY KEY (policy, options, seed)
    )""",
)

V2_RUN_COLUMNS = (
    "run_id, sweep_id, seed, policy, target, version, options, swarm, decisions, verdict, "
    "liveness, trace_hash, ops, seconds, exercised, scenario"
)
V2_TABLES = ("steps", "events", "violations", "probes")


def v2_copy(path: str, v2: str) -> None:
    """Copy a current store's runs into a new file as a v2 inboxsim wrote them:
    no policies, scenario_runs or mutants tables, no ``runs.policy_hash``."""
    with duckdb.connect(path) as con:
        con.execute(f"ATTACH '{v2}' AS old")
        for ddl in V2_DDL:
            con.execute(ddl.replace("IF NOT EXISTS ", "IF NOT EXISTS old."))
        con.execute("INSERT INTO old.meta VALUES ('schema_version', '2')")
        con.execute(f"INSERT INTO old.runs SELECT {V2_RUN_COLUMNS} FROM runs")
        for t in V2_TABLES:
            con.execute(f"INSERT INTO old.{t} SELECT * FROM {t}")
        con.execute("INSERT INTO old.failing_seeds SELECT * FROM failing_seeds")


def v1_copy(path: str, v1: str) -> None:
    """As :func:`v2_copy`, as a v1 inboxsim wrote it: no events, no scenario, no views."""
    with duckdb.connect(path) as con:
        con.execute(f"ATTACH '{v1}' AS old")
        for ddl in V2_DDL:
            if "events" in ddl.split("(")[0]:
                continue
            con.execute(
                ddl.replace("IF NOT EXISTS ", "IF NOT EXISTS old.").replace(
                    ",\n        scenario VARCHAR", ""
                )
            )
        con.execute("INSERT INTO old.meta VALUES ('schema_version', '1')")
        cols = V2_RUN_COLUMNS.replace(", scenario", "")
        con.execute(f"INSERT INTO old.runs SELECT {cols} FROM runs")
        for t in ("steps", "violations", "probes"):
            con.execute(f"INSERT INTO old.{t} SELECT * FROM {t}")


def v3_copy(path: str, v3: str) -> None:
    """Copy a current store as a v3 inboxsim wrote it: no ``meta.row_counts``,
    no ``distinct_runs`` view, and views that count every row of ``runs``."""
    import shutil

    from inboxsim.reports.views import VIEWS

    shutil.copy(path, v3)
    with duckdb.connect(v3) as con:
        con.execute("DELETE FROM meta WHERE key = 'row_counts'")
        con.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
        for name, body in VIEWS.items():
            if name != "distinct_runs":
                v3_body = body.replace("distinct_runs", "runs")
                con.execute(f"CREATE OR REPLACE VIEW {name} AS {v3_body}")
        con.execute("DROP VIEW distinct_runs")


def v4_copy(path: str, v4: str) -> None:
    """Copy a current store into a new file as a v4 inboxsim wrote it: every
    table but ``shrunk``, row counts recorded without it. (Built anew rather
    than dropping the table from a copy: DuckDB shortens a file whose last
    blocks a drop frees, which the store's size check reads as truncated.)"""
    import json

    with duckdb.connect(path, read_only=True) as con:
        tables = con.execute(
            "SELECT table_name, sql FROM duckdb_tables() WHERE table_name != 'shrunk'"
        ).fetchall()
        views = con.execute("SELECT sql FROM duckdb_views() WHERE NOT internal").fetchall()
    with duckdb.connect(v4) as con:
        for _name, sql in tables:
            con.execute(sql)
        for (sql,) in views:
            con.execute(sql)
        con.execute(f"ATTACH '{path}' AS src (READ_ONLY)")
        for name, _sql in tables:
            con.execute(f"INSERT INTO {name} SELECT * FROM src.{name}")
        con.execute("DETACH src")
        counts = json.loads(
            con.execute("SELECT value FROM meta WHERE key = 'row_counts'").fetchone()[0]
        )
        counts.pop("shrunk", None)
        con.execute(
            "UPDATE meta SET value = ? WHERE key = 'row_counts'",
            [json.dumps(counts, sort_keys=True, separators=(",", ":"))],
        )
        con.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
