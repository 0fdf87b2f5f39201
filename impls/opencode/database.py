"""Read-only queries of the OpenCode server's SQLite database
(``opencode.db``, opened ``mode=ro``): what the HTTP routes do not serve, or
serve in another order (``session_message`` by ``seq``, not by ID), and
what quiescence watches. A fresh connection per query: the server writes
between them. Rows come back with OpenCode's own IDs; ``records`` maps them.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Any


class Database:
    def __init__(self, path: Path) -> None:
        self.path = path

    def connect(self) -> sqlite3.Connection:
        return sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=5)

    def rows(self, query: str, *args: Any) -> list[Any]:
        with contextlib.closing(self.connect()) as db:
            return db.execute(query, args).fetchall()

    def session_exists(self, oc: str) -> bool:
        try:
            return bool(self.rows("SELECT 1 FROM session WHERE id = ?", oc))
        except sqlite3.OperationalError:
            return False  # no table yet: a server that never made a session

    def last_seq(self, oc: str) -> int:
        """The session's newest event seq (-1: none)."""
        row = self.rows("SELECT max(seq) FROM event WHERE aggregate_id = ?", oc)
        return -1 if not row or row[0][0] is None else int(row[0][0])

    def has_pending(self, oc: str) -> bool:
        query = "SELECT 1 FROM session_input WHERE session_id = ? AND promoted_seq IS NULL"
        return bool(self.rows(query, oc))

    def user_messages(self, oc: str) -> list[tuple[str, str, int, int]]:
        """The session's visible user messages by seq: (id, data JSON, seq, time_created)."""
        return [
            (i, d, int(q), t)
            for i, d, q, t in self.rows(
                "SELECT id, data, seq, time_created FROM session_message "
                "WHERE session_id = ? AND type = 'user' ORDER BY seq",
                oc,
            )
        ]

    def pending(self, oc: str) -> list[tuple[str, str, int, int]]:
        """Rows not promoted yet, by admission: (id, delivery, admitted_seq, time_created)."""
        return self.rows(
            "SELECT id, delivery, admitted_seq, time_created FROM session_input "
            "WHERE session_id = ? AND promoted_seq IS NULL ORDER BY admitted_seq",
            oc,
        )

    def created(self, oc: str) -> tuple[str, str] | None:
        """Seq 0 of the session's log (``session.created``): type and data JSON.
        The history route serves ``SessionDurableEvent``s only and omits it."""
        rows = self.rows("SELECT type, data FROM event WHERE aggregate_id = ? AND seq = 0", oc)
        return (rows[0][0], rows[0][1]) if rows else None
