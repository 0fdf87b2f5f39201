"""Transcript history operations: staged/committed revert and fork.

Each public function runs inside the caller's transaction (one durability point).
"""

from __future__ import annotations

from typing import Any

from common import MUTANT, AdapterError, invalid
from storage import Store


def _boundary(store: Store, sid: str, message: Any) -> dict[str, Any]:
    if not isinstance(message, str):
        raise invalid("message must be a string")
    msg = store.message(message)
    if msg is None or msg["session_id"] != sid:
        raise AdapterError("message_not_found", f"message {message} is not in session {sid}")
    return msg


def stage(store: Store, sid: str, message: Any, now: int) -> None:
    msg = _boundary(store, sid, message)
    store.append(sid, "revert_staged", now, message=msg["id"])
    store.set_revert(sid, msg["id"])


def clear(store: Store, sid: str, now: int) -> None:
    if store.require(sid)["revert"] is None:
        return
    store.append(sid, "revert_cleared", now)
    store.set_revert(sid, None)


def commit(store: Store, sid: str, now: int) -> None:
    """Commit a staged revert, if any: truncate transcript and user/synthetic pending rows."""
    staged = store.require(sid)["revert"]
    if staged is None:
        return
    msg = store.message(staged)
    store.append(sid, "revert_committed", now, to=staged)
    if msg is not None:
        store.truncate(sid, msg["seq"])
    store.set_revert(sid, None)


def fork(store: Store, parent: str, child: Any, before: Any, now: int) -> None:
    """Copy the parent's transcript (before ``before``, or all of it) into a new session."""
    source = store.require(parent)
    if not isinstance(child, str) or not child:
        raise invalid("child must be a non-empty string")
    if store.session(child) is not None:
        raise invalid(f"session {child} already exists")
    history = store.messages(parent)
    if before is None:
        cutoff = source["next_seq"] - 1
    else:
        cutoff = _boundary(store, parent, before)["seq"] - (
            0 if MUTANT == "fork-cutoff-inclusive" else 1
        )
        history = [m for m in history if m["seq"] <= cutoff]
    store.insert_session(child, now, parent=parent, fork_seq=cutoff)
    data: dict[str, Any] = {"parent": parent, "parent_seq": cutoff}
    if before is not None:
        data["from"] = before
    store.append(child, "forked", now, **data)
    store.db.execute("UPDATE session SET next_seq = ? WHERE id = ?", (max(1, cutoff + 1), child))
    for msg in history:
        _copy(store, child, msg)
    if MUTANT == "fork-copies-pending":  # the parent's inbox copied along with its transcript
        for row in store.pending(parent):
            if row["type"] != "compaction" and row["admitted_seq"] <= cutoff:
                store.insert_pending(
                    store.fresh_id("sq_fk_"),
                    child,
                    row["type"],
                    row["data"],
                    row["delivery"],
                    row["admitted_seq"],
                    row["time_created"],
                )


def _copy(store: Store, child: str, msg: dict[str, Any]) -> None:
    ident = store.fresh_id("sq_fk_")
    root = msg["id"] if MUTANT == "copied-from-not-root" else (msg["copied_from"] or msg["id"])
    store.insert_message(
        {
            "id": ident,
            "session_id": child,
            "type": msg["type"],
            "seq": msg["seq"],
            "time_created": msg["time_created"],
            "data": msg["data"],
            "copied_from": root,
        }
    )
