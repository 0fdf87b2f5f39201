"""Durable state: the SQLite schema and its small row-level helpers.

G4-shaped tables: ``session``, ``event`` (per-session aggregate ``seq``),
``session_pending`` (a row exists only while its input is pending),
``session_message`` (the transcript; promoted rows keep their admission
record so that retries after promotion return the original receipt), and
``input_id``, the one ID namespace: every input ID ever admitted or copied,
with the session and kind it belongs to for good (a fork's copy is kind
``copy``). A row there outlives the input's lifecycle (a revert truncated it,
its barrier was consumed): the ID may then be admitted again only in that
session and as that kind, and generated IDs skip it. Every write happens
inside ``Store.tx()``; one call of it is one durability point.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import interleave
from common import MUTANT, AdapterError, dumps

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS session (
    id TEXT PRIMARY KEY,
    parent_id TEXT,
    fork_seq INTEGER,
    revert TEXT,
    next_seq INTEGER NOT NULL,
    time_created INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS event (
    session_id TEXT NOT NULL REFERENCES session(id),
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    time INTEGER NOT NULL,
    input TEXT,
    data TEXT NOT NULL,
    UNIQUE (session_id, seq)
);
CREATE TABLE IF NOT EXISTS session_pending (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES session(id),
    type TEXT NOT NULL CHECK (type IN ('user', 'synthetic', 'compaction')),
    data TEXT NOT NULL,
    delivery TEXT CHECK (delivery IN ('steer', 'queue')),
    admitted_seq INTEGER NOT NULL,
    time_created INTEGER NOT NULL,
    UNIQUE (session_id, admitted_seq)
);
CREATE INDEX IF NOT EXISTS session_pending_delivery
    ON session_pending (session_id, delivery, admitted_seq);
CREATE UNIQUE INDEX IF NOT EXISTS session_pending_one_barrier
    ON session_pending (session_id) WHERE type = 'compaction';
CREATE TABLE IF NOT EXISTS input_id (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES session(id),
    type TEXT NOT NULL CHECK (type IN ('user', 'synthetic', 'compaction', 'copy'))
);
CREATE TABLE IF NOT EXISTS session_message (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES session(id),
    type TEXT NOT NULL,
    seq INTEGER NOT NULL,
    time_created INTEGER NOT NULL,
    data TEXT NOT NULL,
    copied_from TEXT,
    delivery TEXT,
    admitted_seq INTEGER,
    admitted_time INTEGER,
    UNIQUE (session_id, seq)
);
"""

PENDING_COLS = "id, session_id, type, data, delivery, admitted_seq, time_created"
MESSAGE_COLS = (
    "id, session_id, type, seq, time_created, data, copied_from,"
    " delivery, admitted_seq, admitted_time"
)


def _pending(row: tuple[Any, ...] | None) -> dict[str, Any] | None:
    if row is None:
        return None
    keys = ("id", "session_id", "type", "data", "delivery", "admitted_seq", "time_created")
    out = dict(zip(keys, row, strict=True))
    out["data"] = json.loads(out["data"])
    return out


def _message(row: tuple[Any, ...] | None) -> dict[str, Any] | None:
    if row is None:
        return None
    keys = (
        "id",
        "session_id",
        "type",
        "seq",
        "time_created",
        "data",
        "copied_from",
        "delivery",
        "admitted_seq",
        "admitted_time",
    )
    out = dict(zip(keys, row, strict=True))
    out["data"] = json.loads(out["data"])
    return out


class Store:
    def __init__(self, folder: str, boot: int | None = None) -> None:
        """The process's store (``boot`` None: migrate and count a boot), or
        one more connection for a group's member thread (``boot`` given)."""
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, "inbox.sqlite3")
        self.db = sqlite3.connect(path, isolation_level=None, timeout=30, check_same_thread=False)
        if boot is not None:
            self.db.execute("PRAGMA synchronous=FULL")
            self.db.execute("PRAGMA foreign_keys=ON")
            self.boot = boot
            return
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.execute("PRAGMA foreign_keys=ON")
        schema = SCHEMA
        if MUTANT == "second-barrier":  # no one-barrier rule
            schema = schema.replace(
                "CREATE UNIQUE INDEX IF NOT EXISTS session_pending_one_barrier",
                "CREATE INDEX IF NOT EXISTS session_pending_one_barrier",
            )
        with self.tx():
            for statement in schema.split(";"):
                if statement.strip():
                    self.db.execute(statement)
            self.boot = self.bump("boot")
            if MUTANT == "fork-copy-ids-unstable":  # copies named anew by each process
                # (rowid: seq repeats across sessions, and the new IDs must not collide)
                self.db.execute(
                    "UPDATE session_message SET id = 'sq_fk_b' || ? || '_' || rowid"
                    " WHERE copied_from IS NOT NULL",
                    (self.boot,),
                )
            if MUTANT == "volatile-inbox":  # the inbox treated as a cache: dropped at start
                self.db.execute("DELETE FROM session_pending WHERE type != 'compaction'")

    # --- transactions -------------------------------------------------

    @contextmanager
    def tx(self) -> Iterator[None]:
        """One durability point: everything inside commits together or not at
        all. In a scheduled group it is a pause point (``interleave.py``)."""
        group = interleave.current()
        if group is not None:
            group.pause("begin", interleave.WRITE)
        try:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
            self.db.execute("COMMIT")
        finally:
            if group is not None:
                group.release(interleave.WRITE)

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """A read transaction: every read inside sees one committed state (WAL
        snapshot), so a decision taken from several reads is taken from one
        moment. In a scheduled group it is the pause point ``read`` (it waits
        for no lock: WAL readers never block). Never inside ``tx()``."""
        group = interleave.current()
        if group is not None:
            group.pause("read", None)
        self.db.execute("BEGIN")
        try:
            yield
        finally:
            self.db.execute("COMMIT")

    def one(self, sql: str, *args: Any) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = self.db.execute(sql, args).fetchone()
        return row

    def all(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        return list(self.db.execute(sql, args).fetchall())

    # --- counters and IDs -----------------------------------------------

    def bump(self, key: str) -> int:
        """Increment a persisted counter and return its new value (own write, caller's tx)."""
        row = self.one("SELECT value FROM meta WHERE key = ?", key)
        value = (row[0] if row else 0) + 1
        self.db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))
        return value

    def id_in_use(self, ident: str) -> bool:
        if MUTANT == "ids-freed-for-everyone":  # only live rows hold an ID
            tables: tuple[str, ...] = ("session", "session_pending", "session_message")
        else:
            tables = ("session", "input_id")
        return any(self.one(f"SELECT 1 FROM {table} WHERE id = ?", ident) for table in tables)

    def fresh_id(self, prefix: str) -> str:
        """A generated ID from a persisted counter, skipping any ID ever used."""
        if MUTANT == "omitted-id-reuses-last" and prefix == "sq_in_":
            row = self.one("SELECT value FROM meta WHERE key = 'ids'")
            if row is not None:  # the counter is read, not bumped
                return f"{prefix}{row[0]:06d}"
        while True:
            ident = f"{prefix}{self.bump('ids'):06d}"
            if not self.id_in_use(ident):
                return ident

    def own(self, ident: str, sid: str, kind: str) -> None:
        """Record that ``ident`` belongs to ``sid`` as ``kind`` (``copy`` for a
        fork's copy), for good; a re-admission in its own session and kind
        finds the row already there."""
        self.db.execute(
            "INSERT OR IGNORE INTO input_id (id, session_id, type) VALUES (?, ?, ?)",
            (ident, sid, kind),
        )

    def owner(self, ident: str) -> tuple[str, str] | None:
        """(session, kind) an input ID belongs to, live or not; a fork's copy is kind ``copy``."""
        if MUTANT == "ids-freed-for-everyone":
            return self.live_owner(ident)
        row = self.one("SELECT session_id, type FROM input_id WHERE id = ?", ident)
        return (row[0], row[1]) if row else None

    def live_owner(self, ident: str) -> tuple[str, str] | None:
        """(session, kind) of the pending row or visible message holding ``ident`` now."""
        row = self.one("SELECT session_id, type FROM session_pending WHERE id = ?", ident)
        if row is None:
            row = self.one(
                "SELECT session_id, CASE WHEN copied_from IS NULL THEN type ELSE 'copy' END"
                " FROM session_message WHERE id = ?",
                ident,
            )
        return (row[0], row[1]) if row else None

    # --- sessions and events ------------------------------------------

    def session(self, sid: str) -> dict[str, Any] | None:
        row = self.one(
            "SELECT id, parent_id, fork_seq, revert, next_seq, time_created"
            " FROM session WHERE id = ?",
            sid,
        )
        if row is None:
            return None
        keys = ("id", "parent_id", "fork_seq", "revert", "next_seq", "time_created")
        return dict(zip(keys, row, strict=True))

    def require(self, sid: Any) -> dict[str, Any]:
        if not isinstance(sid, str):
            raise AdapterError("invalid_request", "session must be a string")
        found = self.session(sid)
        if found is None:
            raise AdapterError("session_not_found", f"unknown session {sid}")
        return found

    def insert_session(
        self,
        sid: str,
        now: int,
        parent: str | None = None,
        fork_seq: int | None = None,
        next_seq: int = 0,
    ) -> None:
        self.db.execute(
            "INSERT INTO session (id, parent_id, fork_seq, revert, next_seq, time_created)"
            " VALUES (?, ?, ?, NULL, ?, ?)",
            (sid, parent, fork_seq, next_seq, now),
        )

    def set_revert(self, sid: str, message: str | None) -> None:
        self.db.execute("UPDATE session SET revert = ? WHERE id = ?", (message, sid))

    def append(
        self, sid: str, kind: str, now: int, input_id: str | None = None, **data: Any
    ) -> int:
        """Append one durable event to the session's stream; returns its seq."""
        (seq,) = self.one("SELECT next_seq FROM session WHERE id = ?", sid) or (None,)
        if seq is None:
            raise AdapterError("session_not_found", f"unknown session {sid}")
        self.db.execute(
            "INSERT INTO event (session_id, seq, type, time, input, data)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (sid, seq, kind, now, input_id, dumps(data)),
        )
        self.db.execute("UPDATE session SET next_seq = ? WHERE id = ?", (seq + 1, sid))
        return int(seq)

    def events(self, sid: str, after: int | None) -> list[dict[str, Any]]:
        rows = self.all(
            "SELECT seq, type, time, input, data FROM event WHERE session_id = ? AND seq > ?"
            " ORDER BY seq",
            sid,
            -(2**62) if after is None else after,
        )
        out = []
        for seq, kind, time, input_id, data in rows:
            event: dict[str, Any] = {
                "seq": seq,
                "type": kind,
                "time": time,
                "data": json.loads(data),
            }
            if input_id is not None:
                event["input"] = input_id
            out.append(event)
        return out

    # --- pending rows -----------------------------------------------------

    def pending(self, sid: str) -> list[dict[str, Any]]:
        rows = self.all(
            f"SELECT {PENDING_COLS} FROM session_pending"
            " WHERE session_id = ? ORDER BY admitted_seq",
            sid,
        )
        return [_pending(r) for r in rows]  # type: ignore[misc]

    def pending_row(self, ident: str) -> dict[str, Any] | None:
        return _pending(self.one(f"SELECT {PENDING_COLS} FROM session_pending WHERE id = ?", ident))

    def barrier(self, sid: str) -> dict[str, Any] | None:
        return _pending(
            self.one(
                f"SELECT {PENDING_COLS} FROM session_pending"
                " WHERE session_id = ? AND type = 'compaction'",
                sid,
            )
        )

    def steers(self, sid: str) -> list[dict[str, Any]]:
        return [
            r
            for r in self.pending(sid)
            if r["type"] != "compaction"
            and (r["delivery"] == "steer" or MUTANT == "queue-as-steer")
        ]

    def oldest_queued(self, sid: str) -> dict[str, Any] | None:
        queued = [
            r for r in self.pending(sid) if r["type"] != "compaction" and r["delivery"] == "queue"
        ]
        return queued[0] if queued else None

    def insert_pending(
        self,
        ident: str,
        sid: str,
        kind: str,
        data: dict[str, Any],
        delivery: str | None,
        seq: int,
        now: int,
    ) -> None:
        self.db.execute(
            f"INSERT INTO session_pending ({PENDING_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (ident, sid, kind, dumps(data), delivery, seq, now),
        )
        self.own(ident, sid, kind)

    def delete_pending(self, ident: str) -> None:
        self.db.execute("DELETE FROM session_pending WHERE id = ?", (ident,))

    # --- transcript ---------------------------------------------------------

    def messages(self, sid: str) -> list[dict[str, Any]]:
        order = "seq"
        if MUTANT == "transcript-by-admission-order":  # admission order, not promotion order
            order = "COALESCE(admitted_seq, seq)"
        rows = self.all(
            f"SELECT {MESSAGE_COLS} FROM session_message WHERE session_id = ? ORDER BY {order}",
            sid,
        )
        return [_message(r) for r in rows]  # type: ignore[misc]

    def message(self, ident: str) -> dict[str, Any] | None:
        return _message(self.one(f"SELECT {MESSAGE_COLS} FROM session_message WHERE id = ?", ident))

    def insert_message(self, row: dict[str, Any]) -> None:
        self.db.execute(
            f"INSERT {'OR REPLACE ' if MUTANT == 'double-promotion-after-crash' else ''}"
            f"INTO session_message ({MESSAGE_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                row["id"],
                row["session_id"],
                row["type"],
                row["seq"],
                row["time_created"],
                dumps(row["data"]),
                row.get("copied_from"),
                row.get("delivery"),
                row.get("admitted_seq"),
                row.get("admitted_time"),
            ),
        )
        if row.get("copied_from") is not None:
            self.own(row["id"], row["session_id"], "copy")

    def truncate(self, sid: str, seq: int) -> None:
        """A committed revert: transcript and user/synthetic pending rows from ``seq`` on."""
        keep = ">" if MUTANT == "revert-keeps-boundary" else ">="
        self.db.execute(
            f"DELETE FROM session_message WHERE session_id = ? AND seq {keep} ?", (sid, seq)
        )
        if MUTANT == "revert-keeps-pending":
            return
        self.db.execute(
            "DELETE FROM session_pending WHERE session_id = ? AND admitted_seq >= ?"
            + ("" if MUTANT == "revert-removes-barrier" else " AND type != 'compaction'"),
            (sid, seq),
        )
