"""Schema migrations, one function per version step, each run in one transaction.

A store records its schema version in ``meta``. Opening an older file for
writing migrates it forward step by step; a reader that finds an older file
reopens it for writing once to migrate (see :func:`inboxsim.reports.store.open_store`).
Each step is plain SQL over the existing rows, so a migrated file holds the
same rows a fresh sweep would have written (tests/test_store_migrate.py).
"""

from __future__ import annotations

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


MIGRATIONS: dict[int, Callable[[Any], None]] = {1: _v1_to_v2}
"""``MIGRATIONS[n]`` turns a version-``n`` store into version ``n + 1``."""


def migrate(con: Any, found: int, target: int) -> None:
    """Migrate from ``found`` to ``target``, one transaction per step, so a
    crash mid-way leaves a file at some whole version."""
    for version in range(found, target):
        con.execute("BEGIN TRANSACTION")
        try:
            MIGRATIONS[version](con)
            if version + 1 == target:
                create_views(con)
            con.execute(
                "UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(version + 1)]
            )
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
