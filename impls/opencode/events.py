"""OpenCode's durable event types as the adapter protocol names them.

One map, read by the adapter (``adapter.py``, which imports it as a sibling
file so that it stays a standalone program) and by ``inboxsim validate
--opencode-db`` (:mod:`inboxsim.conformance.opencode_db`), which reads the same
events from a real OpenCode database. A type not listed is reported as
``other:<type>``. Standard library only, no imports.
"""

EVENT_MAP = {
    "session.next.prompt.admitted": "admitted",
    "session.next.prompted": "promoted",
    "session.next.step.started": "step_started",
    "session.next.step.ended": "step_ended",
    "session.next.step.failed": "step_failed",
    "session.next.revert.staged": "revert_staged",
    "session.next.revert.cleared": "revert_cleared",
    "session.next.revert.committed": "revert_committed",
}
