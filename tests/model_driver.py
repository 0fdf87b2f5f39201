"""Random operation sequences against the model, and the :class:`Driver` that
resolves each abstract action against the current state and checks every
step (shared by the model's property tests and its stepwise tests).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from inboxsim.model import (
    FAILPOINTS,
    Crashed,
    Err,
    Event,
    Ok,
    Outcome,
    Policy,
    Receipt,
    State,
    apply,
    initial_state,
    replay,
)
from inboxsim.model.store import Owner
from inboxsim.model.values import canonical_json
from tests.model_helpers import op_of

Action = tuple[Any, ...]

sessions = st.sampled_from(["s1", "s1", "s1", "s1", "s2", "f1", "f2"])
inputs = st.sampled_from(["m1", "m2", "m3", "c1", None, None, "@copy"])
crash_points = st.sampled_from([None] * 9 + list(FAILPOINTS))
deliveries = st.sampled_from([None, "steer", "queue"])
resumes = st.sampled_from([None, None, True, False])
texts = st.sampled_from(["a", "b"])
metadata = st.sampled_from([None, None, {"k": 1}, {"k": 1.0}, {"k": 2}])
indexes = st.integers(min_value=0, max_value=5)
finishes = st.sampled_from(["stop", "stop", "tool", "tool", "error"])

prompts = st.tuples(
    st.just("prompt"), sessions, inputs, texts, metadata, deliveries, resumes, crash_points
)
synthetics = st.tuples(
    st.just("synthetic"), sessions, inputs, texts, deliveries, resumes, crash_points
)
answers = st.tuples(st.just("answer"), indexes, finishes, crash_points)
compacts = st.tuples(
    st.just("compact"), sessions, st.sampled_from(["c1", "c2", "m1", None]), crash_points
)
forks = st.tuples(
    st.just("fork"), sessions, st.sampled_from(["f1", "f2", "f1", "f2", "s2"]), st.none() | indexes
)
retries = st.tuples(st.just("retry"), indexes)
OTHERS: list[st.SearchStrategy[Action]] = [
    compacts,
    forks,
    retries,
    st.tuples(st.just("resume"), sessions, crash_points),
    st.tuples(st.just("interrupt"), sessions),
    st.tuples(st.just("revert_stage"), sessions, indexes),
    st.tuples(st.just("revert_stage"), sessions, indexes),
    st.tuples(st.just("revert_clear"), sessions),
    st.tuples(st.just("revert_commit"), sessions),
    st.tuples(st.just("revert_commit"), sessions),
    st.tuples(st.just("crash")),
    st.tuples(st.just("create"), sessions),
]
# Repetition weights the choice: admissions and answers drive the runner.
WEIGHTED = [prompts] * 3 + [synthetics] * 2 + [answers] * 4 + [retries] + OTHERS
actions: st.SearchStrategy[Action] = st.one_of(*WEIGHTED)
programs = st.lists(actions, min_size=10, max_size=60)


@dataclass
class Lifecycle:
    """What the events said about one admitted input (or fork copy)."""

    type: str
    admitted_seq: int
    visible_seq: int | None = None
    copied: bool = False


@dataclass
class Tracker:
    """An independent fold of the events each request reported."""

    live: dict[str, dict[str, Lifecycle]] = field(default_factory=dict)
    revert_keeps_boundary: bool = False  # g2: a commit cuts after its boundary
    revert_frees_ids: bool = False  # g2: a commit frees the admissions it cuts
    # Every ID ever admitted or copied, with the session and kind of its first
    # admission or copy (for good, unless a revert freed it), in event order.
    owners: dict[str, Owner] = field(default_factory=dict)

    def observe(self, events: tuple[Event, ...]) -> None:
        for event in events:
            self._one(event)

    def _one(self, event: Event) -> None:
        rows = self.live.setdefault(event.session, {})
        if event.type == "admitted":
            assert event.input is not None
            rows[event.input] = Lifecycle(_data(event)["type"], event.seq)
            self._own(event.input, Owner(event.session, _data(event)["type"]))
        elif event.type == "compaction_admitted":
            assert event.input is not None
            rows[event.input] = Lifecycle("compaction", event.seq)
            self._own(event.input, Owner(event.session, "compaction"))
        elif event.type == "promoted":
            assert event.input is not None
            row = rows[event.input]
            assert row.visible_seq is None and row.type != "compaction", (
                f"second promotion of {event.input}"
            )
            row.visible_seq = event.seq
        elif event.type in ("compaction_ended", "compaction_failed"):
            assert event.input is not None
            del rows[event.input]
        elif event.type == "forked":
            for copy in _data(event)["messages"]:
                rows[copy["id"]] = Lifecycle(copy["type"], copy["seq"], copy["seq"], copied=True)
                assert copy["id"] not in self.owners, f"copy {copy['id']} reuses an ID"
                self.owners[copy["id"]] = Owner(event.session, copy["type"], copied=True)
        elif event.type == "revert_committed":
            cut = self._boundary_seq(event.session, _data(event)["to"])
            cut += 1 if self.revert_keeps_boundary else 0
            for input_id, row in list(rows.items()):
                seq = row.admitted_seq if row.visible_seq is None else row.visible_seq
                if row.type != "compaction" and seq >= cut:
                    del rows[input_id]
                    if self.revert_frees_ids and not row.copied:
                        owner = self.owners[input_id]
                        self.owners[input_id] = Owner(owner.session, owner.type, freed=True)

    def _own(self, input_id: str, owner: Owner) -> None:
        """An admission: of a new or freed ID, or again in its own session and kind."""
        first = self.owners.get(input_id)
        assert first is None or first.freed or first == owner, f"{input_id}: {first} -> {owner}"
        self.owners[input_id] = owner

    def _boundary_seq(self, session: str, message: str) -> int:
        row = self.live[session][message]
        assert row.visible_seq is not None, "revert committed to a message that is not visible"
        return row.visible_seq

    def pending(self, session: str) -> list[str]:
        rows = self.live.get(session, {})
        waiting = [(r.admitted_seq, i) for i, r in rows.items() if r.visible_seq is None]
        return [i for _, i in sorted(waiting)]

    def transcript(self, session: str) -> list[str]:
        rows = self.live.get(session, {})
        return [
            i
            for _, i in sorted(
                (r.visible_seq, i) for i, r in rows.items() if r.visible_seq is not None
            )
        ]


def _data(event: Event) -> dict[str, Any]:
    value = json.loads(event.data)
    assert isinstance(value, dict)
    return value


@dataclass
class Driver:
    """Resolves abstract actions against the state and checks every step."""

    state: State
    now: int = 0
    tracker: Tracker = field(default_factory=Tracker)
    admissions: list[tuple[str, dict[str, Any], Receipt]] = field(default_factory=list)

    @classmethod
    def start(cls, policy: Policy, step_limit: int) -> Driver:
        driver = cls(initial_state(policy, step_limit))
        driver.tracker.revert_keeps_boundary = policy.revert_boundary == "kept"
        driver.tracker.revert_frees_ids = policy.ended_ids == "freed_by_revert"
        for session in ("s1", "s2"):
            driver.send("create", None, {"session": session})
        return driver

    # --- applying -------------------------------------------------------------------

    def send(self, name: str, crash_at: str | None, fields: dict[str, Any]) -> Outcome:
        before = self.state
        self.now += 1
        outcome = apply(before, op_of(name, self.now, fields), crash_at)
        self.state = outcome.state
        self.check_step(before, outcome)
        self.tracker.observe(outcome.events)
        self.check_state()
        return outcome

    def run(self, action: Action) -> None:
        getattr(self, f"do_{action[0]}")(*action[1:])

    def do_prompt(
        self,
        session: str,
        input_id: str | None,
        text: str,
        meta: Any,
        delivery: Any,
        resume: Any,
        crash_at: str | None,
    ) -> None:
        fields = {
            "session": session,
            "input": self.resolve(input_id),
            "text": text,
            "metadata": meta,
            "delivery": delivery,
            "resume": resume,
        }
        self.admit("prompt", crash_at, fields)

    def do_synthetic(
        self,
        session: str,
        input_id: str | None,
        text: str,
        delivery: Any,
        resume: Any,
        crash_at: str | None,
    ) -> None:
        fields = {
            "session": session,
            "input": self.resolve(input_id),
            "text": text,
            "delivery": delivery,
            "resume": resume,
        }
        self.admit("synthetic", crash_at, fields)

    def do_compact(self, session: str, input_id: str | None, crash_at: str | None) -> None:
        self.admit("compact", crash_at, {"session": session, "input": input_id})

    def do_resume(self, session: str, crash_at: str | None) -> None:
        self.send("resume", crash_at, {"session": session})

    def do_interrupt(self, session: str) -> None:
        self.send("interrupt", None, {"session": session})

    def do_answer(self, index: int, finish: str, crash_at: str | None) -> None:
        calls = self.state.open_calls()
        call = calls[index % len(calls)].call if calls else "call-0"
        self.send("answer", crash_at, {"call": call, "finish": finish})

    def do_fork(self, parent: str, child: str, before: int | None) -> None:
        self.send(
            "fork",
            None,
            {"session": parent, "child": child, "before": self.message(parent, before)},
        )

    def do_revert_stage(self, session: str, index: int) -> None:
        self.send(
            "revert_stage", None, {"session": session, "message": self.message(session, index)}
        )

    def do_revert_clear(self, session: str) -> None:
        self.send("revert_clear", None, {"session": session})

    def do_revert_commit(self, session: str) -> None:
        self.send("revert_commit", None, {"session": session})

    def do_crash(self) -> None:
        self.send("crash", None, {})

    def do_create(self, session: str) -> None:
        self.send("create", None, {"session": session})

    def do_retry(self, index: int) -> None:
        if not self.admissions:
            return
        name, fields, receipt = self.admissions[index % len(self.admissions)]
        expected = self.retry_expectation(name, receipt)
        outcome = self.send(name, None, {**fields, "resume": False})
        types = [e.type for e in outcome.events]
        if expected is None:
            return
        assert "admitted" not in types and "compaction_admitted" not in types, types
        assert types in ([], ["revert_committed"]), types
        if self.state.policy.retry_identity == "strict" and (
            self.state.policy.retry_after_promotion == "admission_record"
        ):
            assert outcome.reply == Ok(receipt.to_wire())
        else:
            assert isinstance(outcome.reply, Ok)

    # --- resolving abstract choices ----------------------------------------------------

    def resolve(self, input_id: str | None) -> str | None:
        if input_id != "@copy":
            return input_id
        for log in self.state.store.sessions.values():
            for message in log.transcript:
                if message.copied_from is not None:
                    return message.id
        return None

    def message(self, session: str, index: int | None) -> str | None:
        if index is None:
            return None
        log = self.state.store.sessions.get(session)
        if log is None or not log.transcript:
            return "no-such-message"
        return log.transcript[index % len(log.transcript)].id

    def admit(self, name: str, crash_at: str | None, fields: dict[str, Any]) -> None:
        outcome = self.send(name, crash_at, fields)
        if isinstance(outcome.reply, Ok):
            receipt = outcome.reply.result
            rows = self.tracker.live.get(receipt["session"], {})
            assert receipt["input"] in rows, f"{receipt} is neither pending nor visible"
            if fields["input"] is not None and name != "compact":
                self.admissions.append((name, fields, _receipt(receipt)))

    def retry_expectation(self, name: str, receipt: Receipt) -> Receipt | None:
        """The receipt a retry must return, if the input is still live (and
        survives the staged revert a prompt would commit), else ``None``."""
        log = self.state.store.sessions[receipt.session]
        row = log.pending_row(receipt.input)
        message = log.message(receipt.input)
        if row != receipt and (message is None or message.receipt != receipt):
            return None
        policy = self.state.policy
        if name == "prompt" and log.revert is not None and policy.staged_revert_prompt == "commits":
            boundary = log.message(log.revert)
            assert boundary is not None
            seq = message.seq if message is not None else receipt.admitted_seq
            if seq >= boundary.seq + (1 if self.tracker.revert_keeps_boundary else 0):
                return None
        return receipt

    # --- the checks ----------------------------------------------------------------------

    def check_step(self, before: State, outcome: Outcome) -> None:
        if isinstance(outcome.reply, Err):
            assert outcome.state is before and outcome.events == ()
        if isinstance(outcome.reply, Crashed):
            assert not outcome.state.runs
        for event in outcome.events:
            log = outcome.state.store.sessions[event.session]
            assert event in log.events

    def check_state(self) -> None:
        store = self.state.store
        for session, log in store.sessions.items():
            assert replay(session, log.events, self.state.policy) == log
            assert [r.input for r in log.pending] == self.tracker.pending(session)
            assert [m.id for m in log.transcript] == self.tracker.transcript(session)
            assert sum(r.type == "compaction" for r in log.pending) <= 1
            check_seqs(log.events)
        assert dict(store.owners) == self.tracker.owners
        calls = self.state.open_calls()
        assert len({c.session for c in calls}) == len(calls)


def _receipt(wire: dict[str, Any]) -> Receipt:
    return Receipt(
        wire["input"],
        wire["session"],
        wire["type"],
        canonical_json(wire["data"]),
        wire["delivery"],
        wire["admitted_seq"],
        wire["time"],
    )


def check_seqs(events: tuple[Event, ...]) -> None:
    """0, 1, 2, ... with one gap allowed right after a ``forked`` event at 0."""
    for index, event in enumerate(events):
        if index == 0:
            assert event.seq == 0
        elif index == 1 and events[0].type == "forked":
            assert event.seq > 0
        else:
            assert event.seq == events[index - 1].seq + 1
