"""Held model calls as the protocol's calls (``{call, session, kind, step,
final, context}``).

A call's view is fixed the first time it is asked for (at the settle after
it opened), so that a revert committed during the step does not change what
the model was sent: its context is the user messages the request carries,
aligned in order with the session's promoted ones (by text; positional, so
duplicates are fine), and its step is 1 when it carries a message promoted
after everything its session's previous call carried (a later
``session_message`` seq), else the previous step + 1. By seq, not by text:
after a committed revert a new message can repeat a truncated one's text
(seed 116 of the concurrent run took such a promotion for a next step).
"""

from __future__ import annotations

import json
from typing import Any

from database import Database
from fake_provider import HeldCall
from idmap import Ids


class CallViews:
    def __init__(self, ids: Ids, db: Database) -> None:
        self.ids = ids
        self.db = db
        self.contexts: dict[str, tuple[list[str], int]] = {}  # call -> (context, step)
        # OpenCode session -> (the last user message seq its previous call
        # carried, that call's step): a call carrying a later one follows a
        # promotion, so it is step 1.
        self.runs: dict[str, tuple[int, int]] = {}

    def clear(self) -> None:
        """The server died: its calls and runs are gone."""
        self.contexts.clear()
        self.runs.clear()

    def idle(self, oc: str) -> None:
        """The session went idle: its next call starts a run."""
        self.runs.pop(oc, None)

    def keep_only(self, held: list[HeldCall]) -> None:
        self.contexts = {c.call: self.contexts[c.call] for c in held if c.call in self.contexts}

    def entry(self, held: HeldCall) -> dict[str, Any]:
        known = self.contexts.get(held.call)
        if known is None:
            transcript = [
                (self.ids.input_of.get(i, i), json.loads(d).get("text", ""), seq)
                for i, d, seq, _t in self.db.user_messages(held.oc_session)
            ]
            context, i, last = [], 0, -1
            for text in held.user_texts:
                j = i
                while j < len(transcript) and transcript[j][1] != text:
                    j += 1
                if j < len(transcript):
                    context.append(transcript[j][0])
                    last = max(last, transcript[j][2])
                    i = j + 1
                else:
                    context.append(f"unmapped:{text}")
            previous = self.runs.get(held.oc_session)
            step = 1 if previous is None or last > previous[0] else previous[1] + 1
            self.runs[held.oc_session] = (max(last, previous[0] if previous else -1), step)
            known = self.contexts[held.call] = (context, step)
        context, step = known
        return {
            "call": held.call,
            "session": self.ids.session_of.get(held.oc_session, held.oc_session),
            "kind": "step",
            "step": step,
            "final": step >= self.ids.step_limit,
            "context": context,
        }
