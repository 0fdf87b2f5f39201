"""The target's rows and messages as of a group's member (lockstep shows
each member the target's own views as they stood there,
``placement.rows_and_messages``)."""

from __future__ import annotations

from inboxsim.model import Event
from inboxsim.search.placement import rows_and_messages
from inboxsim.search.side import Side
from inboxsim.trace.record import MessageView

ADMIT = (
    '{"data":{"agents":[],"files":[],"metadata":{},"text":"a"},"delivery":"steer","type":"user"}'
)


def test_a_message_promoted_again_later_in_the_group_is_its_first_promotion_until_then() -> None:
    """Seed 425 of ``conformance --target sqlite --concurrency 4 --free-running``:
    a group's answer reached a boundary that promoted u2 (seq 10); a later
    member's prompt committed a revert that truncated u2 and admitted it
    again, promoted at seq 17. The answer's step showed the target's final
    message, u2 at seq 17, beside its own promotion at seq 10
    (``promotion-atomic`` and ``replay-matches-views`` on a correct inbox)."""
    after = Side(set())
    after.transcript = {"f2": (MessageView("u2", "user", 17, 110),)}
    admitted = Event("f2", 5, "admitted", 75, "u2", ADMIT)
    first = Event("f2", 10, "promoted", 110, "u2", "{}")
    again = [
        Event("f2", 15, "admitted", 110, "u2", ADMIT),
        Event("f2", 17, "promoted", 110, "u2", "{}"),
    ]
    _, msgs = rows_and_messages({}, {}, after, [admitted, first])
    assert msgs["u2"] == MessageView("u2", "user", 10, 110)
    _, msgs = rows_and_messages({}, {}, after, [admitted, first, *again])
    assert msgs["u2"] == MessageView("u2", "user", 17, 110)  # the target's own, from there on
