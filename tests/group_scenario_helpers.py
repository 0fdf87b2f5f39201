"""Shared by the group tests: a target that lies about a group, and a
scenario of two racing retries with a schedule that makes them race on the
SQLite inbox.
"""

from __future__ import annotations

from typing import Any

from inboxsim.targets.group import GroupReply
from inboxsim.targets.target import ModelTarget

RACE = "race-retry-check-then-insert"
# A schedule under which the SQLite inbox's scheduler lets both retries pass
# the check before either inserts (found once from a seed; it replays exactly).
RACING = [79, 32, 94, 45, 88]

RETRIES = """
name = "racing-retries"
source = "test"

[[step]]
op = "create"
session = "s1"

[[step]]
op = "group"
schedule = SCHEDULE
requests = [
  { op = "prompt", session = "s1", input = "a", text = "t", resume = false },
  { op = "prompt", session = "s1", input = "a", text = "t", resume = false },
]
"""


def retries(schedule: list[int]) -> str:
    return RETRIES.replace("SCHEDULE", str(schedule))


class SwappedReceipts(ModelTarget):
    """A target that answers a group's first two receipts the wrong way round."""

    def group(self, ops: list[Any], schedule: list[int]) -> tuple[GroupReply, Any]:
        reply, observed = super().group(ops, schedule)
        a, b = reply.outcomes[0], reply.outcomes[1]
        assert a is not None and b is not None
        if "result" in a and "result" in b:
            a["result"], b["result"] = b["result"], a["result"]
        return reply, observed
