"""A concurrent group's results as the lockstep target records them, member
by member, along the order the linearizability search found: each member's
reply (:func:`group_reply`) and the reply as the nondeterminism check compares
it (:func:`member_said`), the target's events placed on the members
(:func:`place_events`), whether those show the runner where the model's order
has it as of a member (:func:`abreast`), and the target's own pending rows and
messages as of a member (:func:`rows_and_messages`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..model import Crashed, Event, Reply
from ..targets.group import member_reply
from ..trace.record import UNSEEN, MessageView, PendingView
from . import compare
from .side import Side


def group_reply(outcome: dict[str, Any] | None) -> Reply:
    if outcome is None or outcome.get("unknown"):
        return Crashed(UNSEEN)  # took effect or not: the order found says (trace.record)
    return member_reply(outcome)


def member_said(outcome: dict[str, Any] | None, labels: dict[str, str]) -> str:
    """A group member's reply for the nondeterminism check: generated IDs by
    their lockstep label, error messages left out (free text)."""
    if outcome is None or outcome.get("unknown"):
        return json.dumps({"unknown": "group"})
    said = {k: outcome[k] for k in ("ok", "result", "error") if k in outcome}
    if isinstance(said.get("error"), dict):
        said["error"] = said["error"].get("code")
    result = said.get("result")
    if isinstance(result, dict) and isinstance(result.get("input"), str):
        said["result"] = {**result, "input": labels.get(result["input"], result["input"])}
    return json.dumps(said, sort_keys=True, default=str)


def place_events(theirs: Iterable[Event], ours: Sequence[Iterable[Event]]) -> list[list[Event]]:
    """The target's events of a group, placed on its members: the search
    matched the folded events one for one, in order per session (and the
    runner's too, where the target logs them alike: ``linearize``), so each
    goes to the member the model's order gives its match; every other event
    goes with the matched event before it (before any, with the first member
    the order gives events there), which keeps each session's seqs in order
    along the members."""
    mine: dict[str, list[tuple[int, Event]]] = {}  # session -> (member, event), in order
    for k, events in enumerate(ours):
        for e in events:
            mine.setdefault(e.session, []).append((k, e))
    placed: list[list[Event]] = [[] for _ in ours]
    for sid, events in _events_by_session(theirs).items():
        ordered = mine.get(sid, [])
        matched = _matched(events, [e for _, e in ordered])
        owners = [k for k, e in ordered if matched(e)]
        # Before the first matched event: the first member the order gives
        # anything there (a drain started before the group's admissions).
        owner = ordered[0][0] if ordered else (owners[0] if owners else len(placed) - 1)
        n = 0
        for e in events:
            if matched(e) and n < len(owners):
                owner = owners[n]
                n += 1
            placed[owner].append(e)
    return placed


def abreast(theirs: Iterable[Event], ours: Iterable[Event]) -> bool:
    """Do the target's events placed on a group's members up to one show, per
    session and in order, the event types the model's order gives them up to
    the same member? Then the target's trace is where the model's order is
    after that member, and its runner is busy there exactly when the model's
    is. Where not, the target's runner lags (or leads) the order found (an
    execution's end it logged after a later admission, an event type it does
    not emit, a kill that took what it had not yet written): the member is
    not a quiescent observation."""
    return _shape(theirs) == _shape(ours)


def _shape(events: Iterable[Event]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for e in events:
        out.setdefault(e.session, []).append(e.type)
    return out


def _matched(theirs: Sequence[Event], ours: Sequence[Event]) -> Callable[[Event], bool]:
    """Which events the search matched in a session: with the runner's, when
    both sides show the same sequence of them."""

    def both(e: Event) -> bool:
        return compare.folded(e) or e.type in compare.RUNNER

    if [e.type for e in theirs if both(e)] == [e.type for e in ours if both(e)]:
        return both
    return compare.folded


def _data(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def rows_and_messages(
    pending: dict[str, tuple[PendingView, ...]],
    transcript: dict[str, tuple[MessageView, ...]],
    side: Side,
    events: Iterable[Event],
) -> tuple[dict[str, PendingView], dict[str, MessageView]]:
    """The target's own pending rows and messages by ID as of a group's
    member: its views before the group, the admissions ``events`` (the
    target's events placed on the members up to this one) show (a row
    admitted and promoted within the group shows only in its event), and
    its views after the group where they hold the same lifecycle. An ID
    admitted again within the group (a committed revert ended its earlier
    lifecycle) is its old row before the member that re-admitted it and its
    new row from there on; likewise an ID promoted again is, up to its
    second promotion, the message its first promotion made (its seq and
    time, the type its row had)."""
    rows: dict[str, PendingView] = {}
    msgs: dict[str, MessageView] = {}
    rows.update((r.input, r) for view in pending.values() for r in view)
    promoted: dict[str, MessageView] = {}  # ID -> the message its last promotion so far made
    for e in events:
        if e.type in ("admitted", "compaction_admitted") and e.input:
            data = _data(e.data)
            kind = "compaction" if e.type == "compaction_admitted" else data.get("type", "user")
            rows[e.input] = PendingView(e.input, kind, data.get("delivery"), e.seq, e.time)
        elif e.type == "promoted" and e.input:
            row = rows.get(e.input)
            promoted[e.input] = MessageView(e.input, row.type if row else "user", e.seq, e.time)
    for rows_after in side.pending.values():
        for r in rows_after:
            old = rows.get(r.input)
            if old is None or old.admitted_seq == r.admitted_seq:
                rows[r.input] = r
    msgs.update((m.id, m) for msgs_before in transcript.values() for m in msgs_before)
    msgs.update(promoted)
    for msgs_after in side.transcript.values():
        for m in msgs_after:
            made = promoted.get(m.id)
            if made is None and m.id not in msgs or made is not None and made.seq == m.seq:
                msgs[m.id] = m  # the same lifecycle: the target's own message
    return rows, msgs


def _events_by_session(events: Iterable[Any]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for e in events:
        out.setdefault(e.session, []).append(e)
    return out
