"""Admission and exact retry: prompt, synthetic and compact (the ``session_pending`` side).

Retry identity (policy g4): the complete payload with its defaults applied,
compared as JSON values, plus delivery. Before promotion a retry is judged
against the pending row; after promotion against the admission record kept on
the transcript row, and it returns that original receipt field for field. IDs
are one namespace (``Store.owner``): an ID belongs to one session and one kind
for good; fork copies are their own kind, so reusing one conflicts. In its own
session and kind, an ID that is neither pending nor visible (its lifecycle
ended) admits a new input. All functions here run inside the caller's
transaction.
"""

from __future__ import annotations

from typing import Any

from common import CONFLICT, MUTANT, AdapterError, invalid, same_json
from storage import Store

DELIVERIES = ("steer", "queue")


# --- payloads -----------------------------------------------------------------


def _text(req: dict[str, Any]) -> str:
    text = req.get("text")
    if not isinstance(text, str):
        raise invalid("text must be a string")
    return text


def _field(req: dict[str, Any], name: str, kind: type, default: Any) -> Any:
    value = req.get(name)
    if value is None:
        return default
    if not isinstance(value, kind):
        raise invalid(f"{name} must be a {kind.__name__}")
    return value


def user_data(req: dict[str, Any]) -> dict[str, Any]:
    """The user payload with its defaults applied, as stored and returned in receipts."""
    return {
        "text": _text(req),
        "files": _field(req, "files", list, []),
        "agents": _field(req, "agents", list, []),
        "metadata": _field(req, "metadata", dict, {}),
    }


def synthetic_data(req: dict[str, Any]) -> dict[str, Any]:
    return {
        "text": _text(req),
        "description": _field(req, "description", str, None),
        "metadata": _field(req, "metadata", dict, {}),
    }


def delivery_of(req: dict[str, Any]) -> str:
    delivery = req.get("delivery")
    if delivery is None:
        return "steer"
    if delivery not in DELIVERIES:
        raise invalid("delivery must be steer or queue")
    return str(delivery)


def resume_of(req: dict[str, Any]) -> bool:
    resume = req.get("resume")
    if resume is None:
        return True
    if not isinstance(resume, bool):
        raise invalid("resume must be a boolean")
    return resume


def input_id_of(req: dict[str, Any]) -> str | None:
    ident = req.get("input")
    if ident is not None and (not isinstance(ident, str) or not ident):
        raise invalid("input must be a non-empty string")
    return ident


# --- receipts -------------------------------------------------------------------


def pending_receipt(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "input": row["id"],
        "session": row["session_id"],
        "type": row["type"],
        "data": row["data"],
        "delivery": row["delivery"],
        "admitted_seq": row["admitted_seq"],
        "time": row["time_created"],
    }


def promoted_receipt(msg: dict[str, Any]) -> dict[str, Any]:
    """The original receipt, rebuilt from the admission record kept on the message."""
    return {
        "input": msg["id"],
        "session": msg["session_id"],
        "type": msg["type"],
        "data": msg["data"],
        "delivery": msg["delivery"],
        "admitted_seq": msg["admitted_seq"],
        "time": msg[
            "time_created" if MUTANT == "retry-receipt-promotion-time" else "admitted_time"
        ],
    }


# --- user and synthetic admission -------------------------------------------------


def _foreign(owner: tuple[str, str] | None, sid: str, kind: str) -> bool:
    """Does the ID belong to another session, or to another kind of input?"""
    if owner is None:
        return False
    if MUTANT == "owner-ignores-kind":  # ownership checked by session alone
        return owner[0] != sid
    return owner != (sid, kind)


def _conflict(kind: str, ident: str) -> AdapterError:
    return AdapterError(CONFLICT[kind], f"input {ident} conflicts with an earlier use of the ID")


def _judge_retry(
    kind: str, ident: str, receipt: dict[str, Any], data: Any, delivery: str
) -> dict[str, Any]:
    old, new = receipt["data"], data
    if MUTANT == "retry-text-only":
        old, new = old["text"], new["text"]
    elif MUTANT == "retry-ignores-metadata":
        old, new = dict(old, metadata=None), dict(new, metadata=None)
    same_delivery = receipt["delivery"] == delivery or MUTANT == "retry-ignores-delivery"
    if not same_json(old, new) or not same_delivery:
        raise _conflict(kind, ident)
    return receipt


def new_admission(
    store: Store, sid: str, kind: str, ident: str, data: dict[str, Any], delivery: str, now: int
) -> dict[str, Any]:
    if MUTANT == "promote-without-admission":  # the seq is taken, the admitted event never logged
        (seq,) = store.one("SELECT next_seq FROM session WHERE id = ?", sid)  # type: ignore[misc]
        store.db.execute("UPDATE session SET next_seq = ? WHERE id = ?", (seq + 1, sid))
    else:
        seq = store.append(sid, "admitted", now, ident, type=kind, data=data, delivery=delivery)
    store.insert_pending(ident, sid, kind, data, delivery, seq, now)
    return pending_receipt(store.pending_row(ident))  # type: ignore[arg-type]


def admit_input(
    store: Store,
    sid: str,
    kind: str,
    ident: str | None,
    data: dict[str, Any],
    delivery: str,
    now: int,
) -> tuple[dict[str, Any], bool]:
    """Admit a user or synthetic input, or judge a retry. Returns (receipt, fresh)."""
    if ident is None:
        if MUTANT == "dedup-by-content":
            for row in store.pending(sid):
                if (
                    row["type"] == kind
                    and same_json(row["data"], data)
                    and row["delivery"] == delivery
                ):
                    return pending_receipt(row), False
        ident = store.fresh_id("sq_in_")
        if not (MUTANT == "omitted-id-reuses-last" and store.owner(ident) is not None):
            return new_admission(store, sid, kind, ident, data, delivery, now), True
    owner = store.owner(ident)
    if _foreign(owner, sid, kind):
        if not (MUTANT == "per-session-ids" and owner is not None and owner[0] != sid):
            raise _conflict(kind, ident)
    pending = store.pending_row(ident)
    if pending is not None:
        receipt = _judge_retry(kind, ident, pending_receipt(pending), data, delivery)
        if MUTANT == "retry-appends-admission":  # re-inserted: a second admission of the row
            seq = store.append(sid, "admitted", now, ident, type=kind, data=data, delivery=delivery)
            store.delete_pending(ident)
            store.insert_pending(ident, sid, kind, data, delivery, seq, now)
            receipt = pending_receipt(store.pending_row(ident))  # type: ignore[arg-type]
        return receipt, False
    msg = store.message(ident)
    if msg is not None:
        return _judge_retry(kind, ident, promoted_receipt(msg), data, delivery), False
    return new_admission(store, sid, kind, ident, data, delivery, now), True


# --- compaction barrier -----------------------------------------------------------------


def admit_compaction(
    store: Store, sid: str, ident: str | None, now: int
) -> tuple[dict[str, Any], bool]:
    """Admit the session's barrier, or coalesce into the one already pending."""
    if ident is not None:
        if _foreign(store.owner(ident), sid, "compaction"):
            raise _conflict("compaction", ident)
    barrier = store.barrier(sid)
    if barrier is not None and not (
        MUTANT == "second-barrier" and ident not in (None, barrier["id"])
    ):
        return pending_receipt(barrier), False
    if ident is None:
        ident = store.fresh_id("sq_cp_")
    seq = store.append(sid, "compaction_admitted", now, ident)
    store.insert_pending(ident, sid, "compaction", {}, None, seq, now)
    return pending_receipt(store.pending_row(ident)), True  # type: ignore[arg-type]
