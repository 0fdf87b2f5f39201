"""Symbolic names for the IDs a target generates (see :mod:`.schema`).

A scenario cannot write a generated ID down: another implementation (or the
same one after a change) picks another. The lockstep rule (``docs/cli.md``,
"Lockstep") maps them instead: a generated input ID by order of
appearance (``gen:1``, ``gen:2``, ...), a fork's copied message by the message
it copies (``copy:<original>``, per session). :class:`Names` folds a run's
observations into that mapping, both ways; the runner uses it to resolve a
file's references and to state what it saw, the renderer to write a trace back
as a file.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..model import Ok, Reply
from ..sim.trace import Observed

GEN = "gen:"
COPY = "copy:"


class Names:
    """Generated and copied IDs seen so far in one run."""

    def __init__(self, named: Iterable[str] = ()) -> None:
        # IDs the harness itself chose: never "generated", whatever they look like.
        self.named = set(named)
        self.generated: list[str] = []
        self._gen_index: dict[str, int] = {}
        # (session, copied message ID) <-> (session, original ID)
        self._copy_of: dict[tuple[str, str], str] = {}
        self._copy_id: dict[tuple[str, str], str] = {}

    def name(self, value: str | None) -> None:
        """Note an ID the harness chose (before sending it)."""
        if value is not None and not value.startswith((GEN, COPY)):
            self.named.add(value)

    def _saw(self, input_id: str | None) -> None:
        if input_id is None or input_id in self.named or input_id in self._gen_index:
            return
        self._gen_index[input_id] = len(self.generated) + 1
        self.generated.append(input_id)

    def absorb(self, reply: Reply | None, observed: Observed) -> None:
        """Learn the IDs one step revealed, in a fixed order: events (an
        admission's event comes first on every implementation that logs it),
        then the receipt, then pending rows; copies from transcripts."""
        for event in observed.events:
            self._saw(event.input)
        if isinstance(reply, Ok) and isinstance(reply.result.get("input"), str):
            self._saw(reply.result["input"])
        for _, rows in observed.pending:
            for row in rows:
                self._saw(row.input)
        for session, messages in observed.transcript:
            for m in messages:
                if m.copied_from is not None:
                    self._copy_of[(session, m.id)] = m.copied_from
                    self._copy_id[(session, m.copied_from)] = m.id
                else:
                    self._saw(m.id)

    # --- both directions ------------------------------------------------------

    def symbol(self, session: str | None, value: str) -> str:
        """The portable name of an ID seen in ``session``."""
        if session is not None and (session, value) in self._copy_of:
            # The original may itself be generated: copy:gen:N.
            return COPY + self.symbol(None, self._copy_of[(session, value)])
        if value in self._gen_index:
            return f"{GEN}{self._gen_index[value]}"
        return value

    def resolve(self, session: str | None, value: str) -> str | None:
        """The concrete ID a portable name stands for, or None if it names
        nothing this run has seen."""
        if value.startswith(GEN):
            number = value[len(GEN) :]
            if number.isdigit() and 1 <= int(number) <= len(self.generated):
                return self.generated[int(number) - 1]
            return None
        if value.startswith(COPY):
            if session is None:
                return None
            original = self.resolve(None, value[len(COPY) :])
            return None if original is None else self._copy_id.get((session, original))
        return value
