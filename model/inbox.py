"""Admission, exact retry, compaction barriers, fork and revert (spec 3.1-3.3,
3.8-3.10, and the adapter protocol's "Rules the protocol pins down").

The one-namespace rule: an input ID belongs to one session and one kind from
its first admission, for good (a fork's copy: to the child, as a copy). A
reuse in another session or as another kind is a conflict, also after the
lifecycle ended (spec invariants 2 and 38). In its own session and kind a
reuse is judged as a retry while the input is pending or visible; once its
lifecycle ended without it staying visible (a committed revert truncated it,
or its barrier was consumed) it admits a new input there, and only there. A
copy's ID is never admitted: reusing it after a revert removed the copy
conflicts too. Generated IDs skip every ID the index ever held. The one
policy departure, ``ended_ids = "freed_by_revert"`` (OpenCode 1.18.33), lives
in the index (``store.py``): an ID a committed revert freed has no owner
(``Store.owner``), so any session and kind admits it anew.
"""

from __future__ import annotations

from .ops import Compact, Fork, Prompt, Synthetic, payload_text
from .state import Failed, Tx
from .store import SessionLog
from .values import Message, Receipt, parse_json

_CONFLICT = {"user": "prompt_conflict", "synthetic": "synthetic_conflict"}


def admit(tx: Tx, op: Prompt | Synthetic) -> Receipt:
    """Admit a user or synthetic input, or reconcile an exact retry."""
    kind = "user" if isinstance(op, Prompt) else "synthetic"
    log = tx.session(op.session)
    delivery = _delivery(tx, op, kind)
    data = payload_text(op)
    if op.input is None:
        return _admit_new(tx, log, tx.fresh_id("in-"), kind, data, delivery)
    owner = tx.store.owner(op.input)
    if owner is None:
        return _admit_new(tx, log, op.input, kind, data, delivery)
    conflict = Failed(_CONFLICT[kind], f"input {op.input!r} is already used")
    if owner.session != op.session or owner.type != kind:
        raise Failed(
            _CONFLICT[kind],
            f"input {op.input!r} belongs to {owner.type} input of session {owner.session!r}",
        )
    row = log.pending_row(op.input)
    if row is not None:
        return _judge(tx, row, data, delivery, conflict)
    msg = log.message(op.input)
    if msg is not None:
        return _judge_visible(tx, log.id, msg, data, delivery, conflict)
    if owner.copied:
        raise conflict  # a fork's copy a revert removed: copies are never admitted
    # Its lifecycle ended (a committed revert removed it): a new input.
    return _admit_new(tx, log, op.input, kind, data, delivery)


def _delivery(tx: Tx, op: Prompt | Synthetic, kind: str) -> str:
    delivery = op.delivery or "steer"
    if delivery not in ("steer", "queue"):
        raise Failed("invalid_request", f"delivery must be 'steer' or 'queue', not {delivery!r}")
    if kind == "synthetic":
        if tx.policy.synthetic_delivery == "none":
            raise Failed("unsupported", f"policy {tx.policy.name} has no synthetic input")
        if tx.policy.synthetic_delivery == "always_steer":
            return "steer"
    return delivery


def _admit_new(
    tx: Tx, log: SessionLog, input_id: str, kind: str, data: str, delivery: str
) -> Receipt:
    # Canonical text of {"data", "delivery", "type"}, built directly (hot path).
    body = f'{{"data":{data},"delivery":"{delivery}","type":"{kind}"}}'
    tx.append(log.id, "admitted", input_id, body)
    tx.reach("after_admit")
    return tx.log(log.id).pending[-1]


def _judge(tx: Tx, record: Receipt, data: str, delivery: str, conflict: Failed) -> Receipt:
    """An exact retry returns the admission record; anything else conflicts."""
    if tx.policy.retry_identity == "first_wins":
        return record
    if record.data == data and record.delivery == delivery:
        return record
    raise conflict


def _judge_visible(
    tx: Tx, session: str, msg: Message, data: str, delivery: str, conflict: Failed
) -> Receipt:
    if tx.policy.retry_after_promotion == "admission_record":
        if msg.receipt is None:  # a fork's copy has no admission here
            raise conflict
        return _judge(tx, msg.receipt, data, delivery, conflict)
    # Later G4 / G5: rebuild the receipt from the message; delivery is copied
    # from the request, so only the payload can conflict.
    seq = msg.receipt.admitted_seq if msg.receipt else msg.seq
    if tx.policy.retry_identity == "strict" and msg.data != data:
        raise conflict
    return Receipt(msg.id, session, msg.type, msg.data, delivery, seq, msg.time)  # type: ignore[arg-type]


def compact(tx: Tx, op: Compact) -> Receipt:
    """Admit the session's one coalesced compaction barrier (spec 3.8)."""
    log = tx.session(op.session)
    if op.input is not None:
        owner = tx.store.owner(op.input)
        if owner is not None and (owner.session != op.session or owner.type != "compaction"):
            raise Failed(
                "compaction_conflict",
                f"input {op.input!r} belongs to {owner.type} input of session {owner.session!r}",
            )
    barrier = log.barrier()
    if barrier is not None:
        return barrier  # requests coalesce; the caller's ID is not used
    input_id = op.input if op.input is not None else tx.fresh_id("cmp-")
    tx.append(log.id, "compaction_admitted", input_id)
    tx.reach("after_admit")
    return tx.log(log.id).pending[-1]


def fork(tx: Tx, op: Fork) -> None:
    """Copy the parent's visible history up to the boundary; never its
    pending input (spec 3.9, invariants 32 and 33).

    Two open points of spec section 5 are decided here. A9 (the cutoff of a
    whole-history fork, unwritten in G4 and G5): the parent's latest seq,
    as the G3 test implies, so the child reserves the parent's whole
    sequence and its own events come after every parent event. A8 (fork and
    the parent's pending input): nothing pending is copied, and the cutoff
    is not lowered to exclude pending admissions, so a whole-history fork
    reserves seqs of admitted events whose rows stay in the parent only
    (``tests/test_model_open_points.py``)."""
    parent = tx.session(op.session)
    if op.child in tx.store.sessions:
        raise Failed("invalid_request", f"fork target {op.child!r} already exists")
    if not parent.transcript and tx.policy.fork_empty == "reject":
        raise Failed("invalid_request", f"session {op.session!r} has no message to fork (G5)")
    if op.before is None:
        # A9: the whole reserved sequence; a fresh fork's copies lie past its last event.
        cutoff = parent.next_seq - 1
    else:
        boundary = parent.message(op.before)
        if boundary is None:
            raise Failed(
                "message_not_found", f"message {op.before!r} is not visible in {op.session!r}"
            )
        cutoff = boundary.seq - 1
    copies = [
        {
            "id": tx.fresh_id("copy-"),
            "type": m.type,
            "seq": m.seq,
            "time": m.time,
            "data": parse_json(m.data),
            "copied_from": m.copied_from or m.id,
        }
        for m in parent.transcript
        if m.seq <= cutoff
    ]
    tx.store = tx.store.with_session(SessionLog(op.child))
    body = {"parent": op.session, "parent_seq": cutoff, "from": op.before, "messages": copies}
    tx.append(op.child, "forked", None, body)


def revert_stage(tx: Tx, session: str, message: str) -> None:
    log = tx.session(session)
    if log.message(message) is None:
        raise Failed("message_not_found", f"message {message!r} is not visible in {session!r}")
    tx.append(session, "revert_staged", None, {"message": message})


def revert_clear(tx: Tx, session: str) -> None:
    if tx.session(session).revert is not None:
        tx.append(session, "revert_cleared")


def revert_commit(tx: Tx, session: str) -> None:
    log = tx.session(session)
    if log.revert is not None:
        tx.append(session, "revert_committed", None, {"to": log.revert})
