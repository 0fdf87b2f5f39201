"""A conformance report's items as rows of the store's ``conformance`` table
(:func:`store_results`, ``inboxsim conformance --db``); the report pages read
them back (``reports/conformance_view.py``)."""

from __future__ import annotations

import json
from pathlib import Path

from ..store.store import Store
from .report import ConformanceReport

DDL = """
CREATE TABLE IF NOT EXISTS conformance (
    conformance_id BIGINT,
    target VARCHAR,
    command VARCHAR,
    policy VARCHAR,
    kind VARCHAR,
    item VARCHAR,
    verdict VARCHAR,
    detail VARCHAR,
    repro VARCHAR,
    repro_file VARCHAR,
    seconds DOUBLE,
    recorded_at TIMESTAMP DEFAULT current_timestamp,
    steps BIGINT,
    failure JSON
)
"""


def store_results(db: str | Path, report: ConformanceReport) -> int:
    """Append the report's items to the store's ``conformance`` table (created
    if missing, through the store's own connection); returns the batch id."""

    with Store(db) as store, store.transaction() as con:
        con.execute(DDL)
        # stores written before repro files and request counts existed
        con.execute("ALTER TABLE conformance ADD COLUMN IF NOT EXISTS repro_file VARCHAR")
        con.execute("ALTER TABLE conformance ADD COLUMN IF NOT EXISTS steps BIGINT")
        con.execute("ALTER TABLE conformance ADD COLUMN IF NOT EXISTS failure JSON")
        row = con.execute("SELECT coalesce(max(conformance_id), 0) + 1 FROM conformance").fetchone()
        batch = int(row[0]) if row else 1
        con.executemany(
            "INSERT INTO conformance (conformance_id, target, command, policy, kind, item, "
            "verdict, detail, repro, repro_file, seconds, steps, failure) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    batch,
                    report.target,
                    json.dumps(report.command),
                    report.policy,
                    i.kind,
                    i.item,
                    i.verdict,
                    i.detail,
                    i.repro,
                    i.repro_file,
                    i.seconds,
                    i.steps,
                    json.dumps(i.failure, sort_keys=True, default=str) if i.failure else None,
                )
                for i in report.items
            ],
        )
    return batch
