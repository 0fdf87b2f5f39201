"""``inboxsim validate --opencode-db PATH``: judge a real OpenCode database.

OpenCode (1.18.33, inbox generation G2) keeps its durable log in the SQLite
table ``event(aggregate_id, seq, type, data)`` (one aggregate per session,
``type`` with a version suffix such as ``session.next.prompt.admitted.1``)
and its inbox projection in ``session_input(id, session_id, prompt, delivery,
admitted_seq, promoted_seq, time_created)``, a row kept after promotion
(``opencode-binary.md`` section 4).

The database is opened read-only (a ``file:...?mode=ro`` URI): nothing is
written to it, ever. Each session's events are translated into protocol
events the way the adapter does (``impls/opencode/adapter.py``):
``session.next.prompt.admitted`` -> ``admitted``, ``session.next.prompted``
-> ``promoted``, ``session.next.step.*`` -> ``step_*``,
``session.next.revert.*`` -> ``revert_staged {message}``, ``revert_cleared``,
``revert_committed {to}``, anything else ``other:<name>``; the input (of an
admission or promotion) is the event's ``messageID`` and the time its
``timestamp`` (wall-clock milliseconds). They are then judged with every
invariant the durable log alone decides (:mod:`.validate`), per session.

The ``session_input`` rows add two checks of the projection against the log:

- ``admission-projects-row``: every admission has its row, with
  ``admitted_seq`` the admission's seq and the same delivery, and every row
  has its admission; a committed revert deletes the rows of the inputs it
  discards (admitted or promoted at or past the policy's cut, ``Policy.revert_cut``:
  1.18.33 deletes rows with ``admitted_seq`` or ``promoted_seq`` after the
  boundary's message), so those admissions have none;
- ``replay-matches-views``: a row's ``promoted_seq`` is the seq of the
  ``promoted`` event that names it, and is NULL exactly when no such event
  exists (the pending inbox is what folding the log leaves).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ..errors import HarnessError
from ..impls.opencode.events import EVENT_MAP
from ..invariants.registry import expected
from ..model import Event, Policy
from ..model.values import canonical_json
from ..policy_file import load_policy
from .validate import ValidateResult, judged_under, validate_events

ROWS = "admission-projects-row"
REPLAY = "replay-matches-views"
NEEDED = {
    "event": {"aggregate_id", "seq", "type", "data"},
    "session_input": {"id", "session_id", "delivery", "admitted_seq", "promoted_seq"},
}


@dataclass
class Row:
    input: str
    delivery: str
    admitted_seq: int
    promoted_seq: int | None


@dataclass
class DbResult:
    """The verdict on one database: one :class:`ValidateResult` per session."""

    path: str
    policy: str
    sessions: list[ValidateResult] = field(default_factory=list)

    @property
    def violations(self) -> list[dict[str, Any]]:
        return [v for s in self.sessions for v in s.violations]

    @property
    def exit_code(self) -> int:
        return 1 if self.violations else 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "opencode_db": self.path,
            "policy": self.policy,
            "sessions": {s.sessions[0]: s.to_dict() for s in self.sessions if s.sessions},
            "violations": self.violations,
            "exit_code": self.exit_code,
        }

    def lines(self) -> list[str]:
        events = sum(s.events for s in self.sessions)
        out = [
            f"{self.path}: OpenCode database, {len(self.sessions)} session(s), "
            f"{events} events, policy {self.policy}"
        ]
        for s in self.sessions:
            failed = sorted({v["invariant"] for v in s.violations})
            verdict = "VIOLATED " + ", ".join(failed) if failed else "held"
            out.append(f"  {s.file}: {s.events} events, {verdict}")
            for v in s.violations:
                out.append(f"    {v['invariant']} (seq {v['lines']}): {v['message']}")
        if self.sessions:
            judged = self.sessions[0].judged
            exercised = {i for s in self.sessions for i in s.exercised}
            failed_any = {v["invariant"] for v in self.violations}
            out.append("invariants over all sessions:")
            for inv in judged:
                verdict = (
                    "violated"
                    if inv in failed_any
                    else ("held" if inv in exercised else "not exercised")
                )
                out.append(f"  {inv:<28} {verdict}")
        out.append("VIOLATED" if self.violations else "HELD")
        return out


# --- reading ----------------------------------------------------------------------


def connect(path: str | Path) -> sqlite3.Connection:
    """The database, read-only, or a HarnessError saying why it cannot be judged."""
    file = Path(path)
    if not file.exists():
        raise HarnessError(f"--opencode-db: {path} does not exist")
    if not file.is_file():
        raise HarnessError(f"--opencode-db: {path} is not a file")
    uri = f"file:{quote(str(file.resolve()))}?mode=ro"
    try:
        con = sqlite3.connect(uri, uri=True, timeout=5)
        tables = {
            name: {c[1] for c in con.execute(f"PRAGMA table_info({name})")} for name in NEEDED
        }
    except sqlite3.DatabaseError as exc:
        raise HarnessError(
            f"--opencode-db: {path} is not a readable SQLite database ({exc})"
        ) from None
    for name, columns in NEEDED.items():
        missing = sorted(columns - tables[name])
        if not tables[name]:
            con.close()
            raise HarnessError(
                f"--opencode-db: {path} is not an OpenCode database: it has no {name} table"
            )
        if missing:
            con.close()
            raise HarnessError(
                f"--opencode-db: {path}: table {name} lacks column(s) {', '.join(missing)}; "
                "not an OpenCode 1.18 database"
            )
    return con


def _native(kind: str) -> str:
    """``session.next.step.ended.2`` -> ``session.next.step.ended``."""
    head, _, tail = kind.rpartition(".")
    return head if head and tail.isdigit() else kind


def _event(session: str, seq: int, kind: str, raw: str) -> Event:
    try:
        data = json.loads(raw)
    except json.JSONDecodeError:
        raise HarnessError(
            f"--opencode-db: event {seq} of session {session} has data that is not JSON"
        ) from None
    if not isinstance(data, dict):
        data = {}
    native = _native(kind)
    name = EVENT_MAP.get(native, f"other:{native}")
    when = data.get("timestamp")
    if when is None:
        when = ((data.get("info") or {}).get("time") or {}).get("created")
    message = data.get("messageID")
    message = message if isinstance(message, str) else None
    payload: dict[str, Any] = {}
    if name in ("admitted", "promoted"):
        payload["delivery"] = data.get("delivery")
    elif name == "revert_staged":
        payload["message"] = (data.get("revert") or {}).get("messageID")
    elif name == "revert_committed":
        payload["to"] = message
    return Event(
        session,
        seq,
        name,
        int(when) if isinstance(when, (int, float)) else 0,
        message if name in ("admitted", "promoted") else None,
        canonical_json(payload),
    )


def read_sessions(con: sqlite3.Connection) -> dict[str, list[Event]]:
    """Each session's events in seq order (aggregates that hold session events)."""
    try:
        rows = con.execute(
            "SELECT aggregate_id, seq, type, data FROM event "
            "WHERE aggregate_id IN (SELECT DISTINCT aggregate_id FROM event "
            "WHERE type LIKE 'session.%') ORDER BY aggregate_id, seq"
        ).fetchall()
    except sqlite3.DatabaseError as exc:
        raise HarnessError(f"--opencode-db: cannot read the event table ({exc})") from None
    out: dict[str, list[Event]] = {}
    for aggregate, seq, kind, raw in rows:
        out.setdefault(str(aggregate), []).append(_event(str(aggregate), int(seq), str(kind), raw))
    return out


def read_rows(con: sqlite3.Connection) -> dict[str, list[Row]]:
    try:
        rows = con.execute(
            "SELECT session_id, id, delivery, admitted_seq, promoted_seq FROM session_input "
            "ORDER BY session_id, admitted_seq"
        ).fetchall()
    except sqlite3.DatabaseError as exc:
        raise HarnessError(f"--opencode-db: cannot read session_input ({exc})") from None
    out: dict[str, list[Row]] = {}
    for session, ident, delivery, admitted, promoted in rows:
        out.setdefault(str(session), []).append(
            Row(
                str(ident),
                str(delivery),
                int(admitted),
                None if promoted is None else int(promoted),
            )
        )
    return out


# --- judging ----------------------------------------------------------------------


def live_inputs(events: list[Event], policy: Policy) -> tuple[dict[str, Event], dict[str, Event]]:
    """The admissions and promotions whose rows the log leaves (by input):
    each input's latest lifecycle, less those a committed revert discarded."""
    admitted: dict[str, Event] = {}
    promoted: dict[str, Event] = {}
    for e in events:
        if e.type == "admitted" and e.input is not None:
            admitted[e.input] = e
            promoted.pop(e.input, None)
        elif e.type == "promoted" and e.input is not None:
            promoted[e.input] = e
        elif e.type == "revert_committed":
            boundary = promoted.get(json.loads(e.data).get("to") or "")
            if boundary is None:
                continue  # a boundary the log never promoted: replay's to judge
            cut = policy.revert_cut(boundary.seq)
            gone = {x for x, a in admitted.items() if a.seq >= cut}
            gone |= {x for x, p in promoted.items() if p.seq >= cut}
            for x in gone:
                admitted.pop(x, None)
                promoted.pop(x, None)
    return admitted, promoted


def check_rows(events: list[Event], rows: list[Row], policy: Policy) -> list[dict[str, Any]]:
    """The projection (``session_input``) against the log; see the module docstring."""
    found: list[dict[str, Any]] = []
    admitted, promoted = live_inputs(events, policy)
    by_id = {r.input: r for r in rows}
    for ident, ev in admitted.items():
        row = by_id.get(ident)
        if row is None:
            found.append(
                _v(ROWS, [ev.seq], f"{ident} admitted at seq {ev.seq} has no session_input row")
            )
            continue
        delivery = json.loads(ev.data).get("delivery") if ev.data else None
        if row.admitted_seq != ev.seq or (delivery is not None and row.delivery != delivery):
            found.append(
                _v(
                    ROWS,
                    [ev.seq],
                    f"{ident} admitted at seq {ev.seq} ({delivery}) has the row "
                    f"admitted_seq {row.admitted_seq} ({row.delivery})",
                )
            )
    for row in rows:
        if row.input not in admitted:
            found.append(
                _v(
                    ROWS,
                    [row.admitted_seq],
                    f"the session_input row {row.input} (admitted_seq {row.admitted_seq}) "
                    "has no admitted event in the log, or a committed revert discarded it",
                )
            )
        promotion = promoted.get(row.input)
        if promotion is None and row.promoted_seq is not None:
            found.append(
                _v(
                    REPLAY,
                    [row.promoted_seq],
                    f"the row {row.input} says promoted_seq {row.promoted_seq}, but no promoted "
                    "event names it: the log leaves it pending",
                )
            )
        elif promotion is not None and row.promoted_seq != promotion.seq:
            found.append(
                _v(
                    REPLAY,
                    [promotion.seq],
                    f"{row.input} was promoted at seq {promotion.seq}, but its row says "
                    f"promoted_seq {row.promoted_seq}",
                )
            )
    return found


def _v(invariant: str, seqs: list[int], message: str) -> dict[str, Any]:
    return {"invariant": invariant, "lines": seqs, "message": message}


def validate_db(path: str | Path, policy: str = "g2") -> DbResult:
    """Judge every session of an OpenCode database (opened read-only)."""
    the_policy: Policy = load_policy(policy)
    con = connect(path)
    try:
        sessions = read_sessions(con)
        rows = read_rows(con)
    finally:
        con.close()
    if not sessions and not rows:
        raise HarnessError(f"{path} holds no session (nothing to judge): give a database in use")
    result = DbResult(str(path), the_policy.name)
    judged = judged_under(the_policy)
    extra = tuple(i for i in (ROWS,) if i in _expected(the_policy))
    for session in sorted(set(sessions) | set(rows)):
        events = sessions.get(session, [])
        one = validate_events([(e.seq, e) for e in events], the_policy, session)
        one.sessions = [session]
        one.judged = judged + extra
        found = [
            v
            for v in check_rows(events, rows.get(session, []), the_policy)
            if v["invariant"] in one.judged
        ]
        one.violations.extend(found)
        if events and rows.get(session):
            one.exercised = sorted(set(one.exercised) | set(extra))
        result.sessions.append(one)
    return result


def _expected(policy: Policy) -> frozenset[str]:

    return frozenset(expected(policy))


__all__ = ["DbResult", "check_rows", "connect", "live_inputs", "read_sessions", "validate_db"]
