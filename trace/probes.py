"""Coverage probes: "sometimes" assertions computed from a trace.

A green sweep means something only if the rare situations the invariants are
about actually happened in it (FoundationDB's code probes, Antithesis'
"sometimes" assertions). Each probe names one such situation and counts the
steps where it occurred. A probe is judged from the trace alone (requests,
replies and observations), so it means the same for the model and for an
adapter, and a stored trace can be re-probed later.

``required`` probes must be hit at least once by a sweep, or the sweep exits 1:
the default workload mix is tuned so that each is hit within a few hundred
seeds. The others are reported for information.

:func:`probe_hits` is the pure function over steps; :class:`ProbeFold` is the
same computation fed one step at a time, which the run loop uses.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from ..model import Answer, Compact, Crashed, Fork, Interrupt, Ok, Prompt, Synthetic
from .record import NOTHING, Step
from .view import View


@dataclass(frozen=True, slots=True)
class Probe:
    name: str
    required: bool
    description: str
    needs: tuple[str, ...] = ()  # hello features without which it cannot happen

    def possible(self, features: Collection[str]) -> bool:
        return all(f in features for f in self.needs)


PROBES: tuple[Probe, ...] = (
    Probe(
        "crash.after_admit",
        True,
        "a crash between admission and wake (after_admit failpoint hit)",
        ("failpoints",),
    ),
    Probe(
        "crash.mid_promotion_batch",
        True,
        "a crash after the first input of a batch of several promoted",
        ("failpoints",),
    ),
    Probe(
        "crash.after_promotion",
        False,
        "a crash after a boundary's promotions, before its call opened",
        ("failpoints",),
    ),
    Probe("crash.kill", False, "the target killed between requests"),
    Probe("steer.during_call", True, "a steer admitted while its session had an open model call"),
    Probe("retry.after_promotion", True, "an exact retry of an input that is already visible"),
    Probe(
        "retry.after_unknown",
        True,
        "an exact retry of a request whose outcome was unknown (it crashed)",
    ),
    Probe(
        "barrier.steers_waiting",
        True,
        "a compaction barrier with steers admitted after it still pending",
        ("compaction",),
    ),
    Probe("fork.parent_pending", True, "a fork of a session that had pending input", ("fork",)),
    Probe(
        "revert.discards_synthetic",
        True,
        "a committed revert that discarded a pending synthetic input",
        ("revert", "synthetic"),
    ),
    Probe("revert.prompt_commits", False, "a prompt that committed a staged revert", ("revert",)),
    Probe(
        "wake.during_followup",
        True,
        "a wake while the session works on input an earlier wake brought in",
    ),
    Probe(
        "queue.after_tool", True, "a queued input promoted after a tool continuation in its session"
    ),
    Probe(
        "interrupt.with_pending",
        True,
        "an interrupt of an active session with pending input",
        ("interrupt",),
    ),
    Probe(
        "compaction.coalesced",
        False,
        "a compaction request that joined the existing barrier",
        ("compaction",),
    ),
    Probe("conflict.refused", False, "a reused input ID refused with a conflict error"),
    Probe("answer.error", False, "a model call answered with an error"),
)
REQUIRED = tuple(p.name for p in PROBES if p.required)
BY_NAME = {p.name: p for p in PROBES}
NAMES = tuple(p.name for p in PROBES)
_CONFLICTS = ("prompt_conflict", "synthetic_conflict", "compaction_conflict")


class ProbeFold:
    """Counts probe hits step by step (see the module docstring)."""

    __slots__ = ("hits", "view", "crashed", "woken", "followup", "saw_tool")

    def __init__(self) -> None:
        self.hits: dict[str, int] = {}
        self.view = View()
        # Wire form (without `now`) of every request that crashed, by input ID.
        self.crashed: dict[str, list[tuple[tuple[str, str], ...]]] = {}
        # Inputs admitted, with a wake, while their session had an open call.
        self.woken: dict[str, str] = {}  # input -> session
        # Sessions whose current execution promoted woken input.
        self.followup: dict[str, bool] = {}
        # Pending queued inputs that saw a tool continuation in their session.
        self.saw_tool: dict[str, bool] = {}

    def _hit(self, name: str) -> None:
        self.hits[name] = self.hits.get(name, 0) + 1

    def feed(self, step: Step) -> None:
        view, op, reply, events = self.view, step.request, step.reply, step.observed.events
        if step.kind == "crash":
            self._hit("crash.kill")
        elif isinstance(reply, Crashed):
            self._crash(step)
        elif isinstance(reply, Ok):
            if isinstance(op, (Prompt, Synthetic)):
                self._admission(op, step)
            elif isinstance(op, Compact):
                if op.input is not None and self._was_crashed(op):
                    self._hit("retry.after_unknown")
                if not events:
                    self._hit("compaction.coalesced")
            elif isinstance(op, Fork):
                if view.pending.get(op.session):
                    self._hit("fork.parent_pending")
            elif isinstance(op, Interrupt):
                if reply.result.get("interrupted") and view.pending.get(op.session):
                    self._hit("interrupt.with_pending")
            elif isinstance(op, Answer) and op.finish == "error":
                self._hit("answer.error")
        elif reply is not None and reply.code in _CONFLICTS:
            self._hit("conflict.refused")
        if step.observed is not NOTHING:  # most reads and refusals change nothing
            self._events(step)
            view.absorb(step.observed)
            for _, rows in step.observed.pending:
                if _steer_behind_barrier(rows):
                    self._hit("barrier.steers_waiting")
        if step.kind == "crash" or isinstance(reply, Crashed):
            self.followup.clear()  # volatile: the execution died

    # --- the situations ----------------------------------------------------------

    def _crash(self, step: Step) -> None:
        op, point = step.request, step.reply.point  # type: ignore[union-attr]
        if isinstance(op, (Prompt, Synthetic, Compact)) and op.input is not None:
            self.crashed.setdefault(op.input, []).append(_identity(op))
        if point == "after_admit":
            if any(e.type in ("admitted", "compaction_admitted") for e in step.observed.events):
                self._hit("crash.after_admit")
        elif point == "mid_promotion":
            promoted = [e for e in step.observed.events if e.type == "promoted"]
            if promoted:
                session = promoted[0].session
                before = {
                    r.input for r in self.view.pending.get(session, ()) if r.delivery == "steer"
                }
                after = dict(step.observed.pending).get(session, ())
                if any(r.input in before for r in after):
                    self._hit("crash.mid_promotion_batch")
        elif point == "after_promotion":
            self._hit("crash.after_promotion")

    def _admission(self, op: Prompt | Synthetic, step: Step) -> None:
        view = self.view
        admitted = None
        committed = False
        for e in step.observed.events:
            if e.type == "admitted":
                admitted = e
            elif e.type == "revert_committed":
                committed = True
        if committed and isinstance(op, Prompt):
            self._hit("revert.prompt_commits")
        if admitted is None:
            if op.input is not None:
                if any(m.id == op.input for m in view.transcript.get(op.session, ())):
                    self._hit("retry.after_promotion")
                if self._was_crashed(op):
                    self._hit("retry.after_unknown")
            return
        busy = view.busy(op.session)
        if busy and '"delivery":"steer"' in admitted.data:
            self._hit("steer.during_call")
        if busy and op.resume is not False:
            if self.followup.get(op.session):
                self._hit("wake.during_followup")
            if admitted.input is not None:
                self.woken[admitted.input] = op.session

    def _was_crashed(self, op: Prompt | Synthetic | Compact) -> bool:
        tried = self.crashed.get(op.input or "", ())
        return _identity(op) in tried

    def _events(self, step: Step) -> None:
        view = self.view
        for e in step.observed.events:
            kind = e.type
            if kind == "promoted":
                if e.input in self.woken:
                    self.followup[e.session] = True
                    del self.woken[e.input]
                if self.saw_tool.pop(e.input or "", False):
                    self._hit("queue.after_tool")
            elif kind == "step_ended":
                if '"finish":"tool"' in e.data:
                    for row in view.pending.get(e.session, ()):
                        if row.delivery == "queue":
                            self.saw_tool[row.input] = True
            elif kind in ("execution_succeeded", "execution_failed", "execution_interrupted"):
                self.followup.pop(e.session, None)
            elif kind == "revert_committed":
                gone = _discarded_synthetics(view, e.session, step)
                if gone:
                    self._hit("revert.discards_synthetic")


def _identity(op: Prompt | Synthetic | Compact) -> tuple[tuple[str, str], ...]:
    """A request without its `now`: what an exact retry repeats."""
    wire = op.to_wire()
    del wire["now"]
    return tuple(sorted((k, repr(v)) for k, v in wire.items()))


def _steer_behind_barrier(rows: Iterable[object]) -> bool:
    barrier = None
    for row in rows:
        if row.type == "compaction":  # type: ignore[attr-defined]
            barrier = row.admitted_seq  # type: ignore[attr-defined]
        elif barrier is not None and row.delivery == "steer":  # type: ignore[attr-defined]
            return True
    return False


def _discarded_synthetics(view: View, session: str, step: Step) -> bool:
    before = [r.input for r in view.pending.get(session, ()) if r.type == "synthetic"]
    changed = dict(step.observed.pending)
    if not before or session not in changed:
        return False
    after = {r.input for r in changed[session]}
    promoted = {e.input for e in step.observed.events if e.type == "promoted"}
    return any(i not in after and i not in promoted for i in before)


def probe_hits(steps: Iterable[Step]) -> dict[str, int]:
    """Hit count of every probe hit at least once in ``steps``."""
    fold = ProbeFold()
    for step in steps:
        fold.feed(step)
    return dict(fold.hits)
