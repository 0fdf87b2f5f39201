"""Schema migrations, one function per version step, each run in one transaction.

A store records its schema version in ``meta``. Opening an older file for
writing migrates it forward step by step; a reader that finds an older file
reopens it for writing once to migrate (see :func:`inboxsim.reports.store.open_store`).
Each step rewrites the existing rows, so a migrated file holds the same rows
a fresh sweep would have written (tests/test_store.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from .views import create_views

# The events of v2, recovered from the JSON each step already kept.
_EVENTS_FROM_STEPS = """
INSERT INTO events
SELECT s.run_id, s.idx, u.e.session, u.e.seq, u.e.type, u.e.input, u.e.time,
       CASE WHEN u.e.type = 'admitted' THEN json_extract_string(u.e.data, '$.delivery') END
FROM steps s,
     unnest(from_json(json_extract(s.observed, '$.events'),
        '[{"session":"VARCHAR","seq":"BIGINT","type":"VARCHAR","input":"VARCHAR","time":"BIGINT","data":"JSON"}]'))
     AS u(e)
WHERE s.observed LIKE '%"events"%'
ORDER BY s.run_id, s.idx, u.e.seq
"""


def _v1_to_v2(con: Any) -> None:
    con.execute("ALTER TABLE runs ADD COLUMN scenario VARCHAR")
    con.execute(
        """CREATE TABLE events (
            run_id BIGINT NOT NULL, step INTEGER NOT NULL, session VARCHAR NOT NULL,
            seq BIGINT NOT NULL, type VARCHAR NOT NULL, input VARCHAR,
            time BIGINT NOT NULL, delivery VARCHAR)"""
    )
    con.execute(_EVENTS_FROM_STEPS)


def _v2_to_v3(con: Any) -> None:
    """Add the policies, scenario and mutant tables. A v2 run kept only its
    policy's name: a preset's name gets the preset's fields (the presets are
    code, so this is what the run ran under unless the preset changed since);
    any other name (a custom TOML policy) keeps a NULL hash, and ``check`` and
    ``diff --rerun`` say so when they meet it."""
    from ..model import PRESETS
    from .policies import policy_record
    from .store import _DDL

    con.execute("ALTER TABLE runs ADD COLUMN policy_hash VARCHAR")
    for ddl in _DDL:
        if any(f"EXISTS {t} (" in ddl for t in ("policies", "scenario_runs", "mutants")):
            con.execute(ddl)
    names = [r[0] for r in con.execute("SELECT DISTINCT policy FROM runs ORDER BY 1").fetchall()]
    for name in names:
        if name not in PRESETS:
            continue
        digest, _, preset, fields = policy_record(PRESETS[name])
        con.execute(
            "INSERT OR IGNORE INTO policies VALUES (?, ?, ?, ?)", [digest, name, preset, fields]
        )
        con.execute("UPDATE runs SET policy_hash = ? WHERE policy = ?", [digest, name])


def _v3_to_v4(con: Any) -> None:
    """Nothing to rewrite: v4 adds ``meta.row_counts`` and the ``distinct_runs``
    view (the counting views count each run once), which :func:`migrate`
    records and creates at the end of every migration."""


def _v4_to_v5(con: Any) -> None:
    """Add ``shrunk``, the report's cache of shrunk counterexamples (empty:
    the next report fills it)."""
    from .store import _DDL

    con.execute(next(ddl for ddl in _DDL if "EXISTS shrunk (" in ddl))


MIGRATIONS: dict[int, Callable[[Any], None]] = {
    1: _v1_to_v2,
    2: _v2_to_v3,
    3: _v3_to_v4,
    4: _v4_to_v5,
}
"""``MIGRATIONS[n]`` turns a version-``n`` store into version ``n + 1``."""


def migrate(con: Any, found: int, target: int) -> None:
    """Migrate from ``found`` to ``target``, one transaction per step, so a
    crash mid-way leaves a file at some whole version; each step records the
    row counts it leaves (``meta.row_counts``)."""
    import duckdb

    from .store import record_row_counts

    for version in range(found, target):
        con.execute("BEGIN TRANSACTION")
        try:
            MIGRATIONS[version](con)
            if version + 1 == target:
                create_views(con)
            con.execute(
                "UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(version + 1)]
            )
            record_row_counts(con)
            con.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(duckdb.Error):
                con.execute("ROLLBACK")
            raise
