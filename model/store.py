"""The durable part of the inbox: per-session event logs and their projection.

Theory of operation. Everything durable is a fold of the session's event log:
:func:`project` applies one event to a :class:`SessionLog`, and the model
changes durable state only by :func:`append`, which assigns the next aggregate
``seq`` and projects the event. Replay (:func:`replay`) is therefore the same
fold over a log read back, and rebuilds the pending inbox and transcript
exactly, waking nothing, by construction rather than by a second code path.

Rules kept here (spec section 2 and invariants 1-6, 9, 32-34):
- ``seq`` starts at 0 and grows by one per event; the only gap is the one a
  fork reserves after its ``forked`` event (the child continues after the
  parent cutoff).
- a pending row exists only while its input is pending (G4 ``session_pending``);
  promotion removes it and appends the message in one event.
- a committed revert drops messages with ``seq >= boundary.seq`` and user and
  synthetic pending rows with ``admitted_seq >= boundary.seq`` (``> ``, keeping
  the boundary, under the policy's ``revert_boundary = "kept"``); a compaction
  barrier stays.

Besides the per-session logs the store keeps ``owners``: which session and
kind every input ID ever admitted or copied belongs to, for good (an ID keeps
its owner after its lifecycle ends: adapter protocol, "IDs are one
namespace"), unless the policy's ``ended_ids = "freed_by_revert"`` frees the
IDs a committed revert truncates (OpenCode 1.18.33): their entry stays,
marked ``freed``, so that generated IDs still skip them, and the next
admission of such an ID, in any session and as any kind, owns it. It is
derived data, kept so that the one-namespace rule costs a dictionary lookup.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .frozen import fast_init
from .policy import Policy
from .values import Event, InputType, Message, Receipt, encode_json, parse_json


@fast_init
@dataclass(frozen=True, slots=True)
class Owner:
    """Who an input ID belongs to, for good: its session, its kind, and
    whether it is a fork's copy (copies have no admission in their session).
    ``freed``: a committed revert truncated its admission and the policy's
    ``ended_ids`` frees such IDs, so it belongs to no one until admitted again."""

    session: str
    type: InputType
    copied: bool = False
    freed: bool = False


@fast_init
@dataclass(frozen=True, slots=True)
class SessionLog:
    """One session's durable state: its event log and what it projects to."""

    id: str
    events: tuple[Event, ...] = ()
    next_seq: int = 0
    pending: tuple[Receipt, ...] = ()  # admission order
    transcript: tuple[Message, ...] = ()  # seq order
    revert: str | None = None  # the staged boundary message, if any
    fork_seq: int | None = None  # the parent cutoff of a forked session

    def pending_row(self, input_id: str) -> Receipt | None:
        for row in self.pending:
            if row.input == input_id:
                return row
        return None

    def message(self, message_id: str) -> Message | None:
        for msg in self.transcript:
            if msg.id == message_id:
                return msg
        return None

    def barrier(self) -> Receipt | None:
        for row in self.pending:
            if row.type == "compaction":
                return row
        return None


@fast_init
@dataclass(frozen=True, slots=True)
class Store:
    """Every session's durable state, and the ID index derived from it."""

    sessions: Mapping[str, SessionLog]
    owners: Mapping[str, Owner]

    def with_session(self, log: SessionLog) -> Store:
        return Store({**self.sessions, log.id: log}, self.owners)

    def owner(self, input_id: str) -> Owner | None:
        """Whom a reuse of ``input_id`` is judged against: ``None`` if the ID
        was never used or is freed (generated IDs consult ``owners`` itself:
        they skip freed IDs too)."""
        owner = self.owners.get(input_id)
        return None if owner is None or owner.freed else owner


EMPTY_STORE = Store({}, {})


def project(log: SessionLog, event: Event, policy: Policy) -> SessionLog:
    """Apply one durable event to a session's projection (pure)."""
    handler = _PROJECTORS.get(event.type)
    if handler is None:
        pending, transcript, revert, fork_seq = (
            log.pending,
            log.transcript,
            log.revert,
            log.fork_seq,
        )
    else:
        pending, transcript, revert, fork_seq = handler(log, event, policy)
    next_seq = event.seq + 1
    if event.type == "forked" and fork_seq is not None:
        next_seq = max(next_seq, fork_seq + 1)  # the child continues after the cutoff
    # Built positionally: this is the model's hottest line.
    return SessionLog(
        log.id, log.events + (event,), next_seq, pending, transcript, revert, fork_seq
    )


def replay(session_id: str, events: tuple[Event, ...], policy: Policy) -> SessionLog:
    """Fold a session's durable events into an empty log; wakes nothing."""
    log = SessionLog(session_id)
    for event in events:
        log = project(log, event, policy)
    return log


def append(
    store: Store,
    session_id: str,
    type_: str,
    time: int,
    input_id: str | None,
    data: object,
    policy: Policy,
) -> tuple[Store, Event]:
    """Append one event to a session's log, projecting it and the ID index.

    ``data`` is a JSON value, or its canonical text already (the hot paths
    build that text directly)."""
    log = store.sessions[session_id]
    text = data if isinstance(data, str) else encode_json(data)
    event = Event(session_id, log.next_seq, type_, time, input_id, text)
    new_log = project(log, event, policy)
    owners = store.owners
    if type_ in _REINDEXED:  # most events own no ID: the index is kept as it is
        owners = _reindex(owners, log, new_log, event, policy)
    return Store({**store.sessions, session_id: new_log}, owners), event


# The events after which _reindex may change the ID index (it says why).
_REINDEXED = frozenset({"admitted", "compaction_admitted", "forked", "revert_committed"})


def _reindex(
    owners: Mapping[str, Owner],
    before: SessionLog,
    after: SessionLog,
    event: Event,
    policy: Policy,
) -> Mapping[str, Owner]:
    """The ID index after ``event``: IDs the session gained (an admission
    owns a freed ID anew). None is ever lost: an ID whose lifecycle ended (a
    committed revert removed it, its barrier was consumed) still belongs to
    its session and kind, unless ``ended_ids = "freed_by_revert"`` frees the
    admissions a committed revert truncated (not copies, not barriers)."""
    if event.type in ("admitted", "compaction_admitted"):
        row = after.pending[-1]
        return {**owners, row.input: Owner(row.session, row.type)}
    if event.type == "forked":
        copies = {m.id: Owner(after.id, m.type, copied=True) for m in after.transcript}
        return {**owners, **copies}
    if event.type == "revert_committed" and policy.ended_ids == "freed_by_revert":
        kept = {m.id for m in after.transcript} | {r.input for r in after.pending}
        cut = [m.id for m in before.transcript if m.receipt is not None]
        cut += [r.input for r in before.pending if r.type != "compaction"]
        freed = {x: Owner(before.id, owners[x].type, freed=True) for x in cut if x not in kept}
        return {**owners, **freed} if freed else owners
    return owners


# --- projectors: each returns (pending, transcript, revert, fork_seq) --------

Projection = tuple[tuple[Receipt, ...], tuple[Message, ...], "str | None", "int | None"]


def _admitted(log: SessionLog, event: Event, policy: Policy) -> Projection:
    # The data is canonical text of {"data": payload, "delivery": d, "type": t}:
    # sorted keys put the payload first, so its canonical text is a slice (the
    # last ',"delivery":' is the real one: d and t are fixed tokens).
    assert event.input is not None
    cut = event.data.rindex(',"delivery":')
    tail = parse_json("{" + event.data[cut + 1 :])
    row = Receipt(
        event.input,
        log.id,
        tail["type"],
        event.data[8:cut],
        tail["delivery"],
        event.seq,
        event.time,
    )
    return log.pending + (row,), log.transcript, log.revert, log.fork_seq


def _compaction_admitted(log: SessionLog, event: Event, policy: Policy) -> Projection:
    assert event.input is not None
    row = Receipt(event.input, log.id, "compaction", "{}", None, event.seq, event.time)
    return log.pending + (row,), log.transcript, log.revert, log.fork_seq


def _promoted(log: SessionLog, event: Event, policy: Policy) -> Projection:
    row = log.pending_row(event.input or "")
    assert row is not None and row.type != "compaction", (
        f"promotion of {event.input} without a pending row"
    )
    time = event.time if policy.visible_time == "promotion" else row.time
    msg = Message(row.input, row.type, event.seq, time, row.data, None, row)
    pending = tuple(r for r in log.pending if r is not row)
    return pending, log.transcript + (msg,), log.revert, log.fork_seq


def _barrier_settled(log: SessionLog, event: Event, policy: Policy) -> Projection:
    pending = tuple(r for r in log.pending if r.input != event.input)
    return pending, log.transcript, log.revert, log.fork_seq


def _revert_staged(log: SessionLog, event: Event, policy: Policy) -> Projection:
    return log.pending, log.transcript, parse_json(event.data)["message"], log.fork_seq


def _revert_cleared(log: SessionLog, event: Event, policy: Policy) -> Projection:
    return log.pending, log.transcript, None, log.fork_seq


def _revert_committed(log: SessionLog, event: Event, policy: Policy) -> Projection:
    boundary = log.message(parse_json(event.data)["to"])
    assert boundary is not None, "revert committed to a message that is not visible"
    cut = policy.revert_cut(boundary.seq)
    transcript = tuple(m for m in log.transcript if m.seq < cut)
    pending = tuple(r for r in log.pending if r.type == "compaction" or r.admitted_seq < cut)
    return pending, transcript, None, log.fork_seq


def _forked(log: SessionLog, event: Event, policy: Policy) -> Projection:
    body = parse_json(event.data)
    copies = tuple(
        Message(m["id"], m["type"], m["seq"], m["time"], encode_json(m["data"]), m["copied_from"])
        for m in body["messages"]
    )
    return log.pending, copies, log.revert, body["parent_seq"]


_PROJECTORS: dict[str, Callable[[SessionLog, Event, Policy], Projection]] = {
    "admitted": _admitted,
    "compaction_admitted": _compaction_admitted,
    "promoted": _promoted,
    "compaction_ended": _barrier_settled,
    "compaction_failed": _barrier_settled,
    "revert_staged": _revert_staged,
    "revert_cleared": _revert_cleared,
    "revert_committed": _revert_committed,
    "forked": _forked,
}
