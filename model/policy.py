"""Design choices of the inbox as one explicit value.

Every choice that ``opencode-v2-inbox.md`` section 5 leaves open, or that
changed between generations, is a field of :class:`Policy`. The model reads
these fields in exactly one place each; nothing else in the model branches on
a preset's name. The presets are the table of ``docs/cli.md``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..errors import HarnessError

RetryIdentity = Literal["strict", "first_wins"]
RetryAfterPromotion = Literal["admission_record", "message"]
VisibleTime = Literal["promotion", "admission"]
BarrierBlocks = Literal["all", "after"]
SyntheticDelivery = Literal["steer_or_queue", "always_steer", "none"]
Lifecycles = Literal["shared", "parallel", "parallel_merged"]
StepEvents = Literal["at_call", "on_response"]
InterruptUnknown = Literal["not_found", "no_op"]
EmptyCompaction = Literal["call", "fail"]
AbandonedCompaction = Literal["rerun", "settle"]
ForkEmpty = Literal["copy", "reject"]
PromotedEventTime = Literal["promotion", "admission"]
RevertBoundary = Literal["removed", "kept"]
StagedRevertPrompt = Literal["commits", "admits"]
EndedIds = Literal["kept", "freed_by_revert"]


class PolicyError(HarnessError, ValueError):
    """A policy name or file that cannot be used; the message says why (the
    command line reports it as one line and exits 2)."""


@dataclass(frozen=True, slots=True)
class Policy:
    """One design of the inbox: each field is a choice the spec leaves open."""

    name: str
    summary: str
    retry_identity: RetryIdentity = "strict"
    """Which reuse of an input ID is an exact retry. ``strict`` (G3/G4, spec
    3.1 step 5 and invariant 21): same session, type, delivery and canonical
    payload, metadata included. ``first_wins`` (G5, spec 3.1 "G5 deltas"): any
    reuse in the same session and of the same type returns the first
    admission; only another session or type fails."""
    retry_after_promotion: RetryAfterPromotion = "admission_record"
    """How a retry is judged once its input is visible. ``admission_record``
    (first G4 revision, spec 3.3; adapter protocol "Exact retry"): against the
    durable admission event, delivery included, returning the original
    receipt; a visible ID without an admission in this session (a fork copy)
    conflicts. ``message`` (later G4 and G5, spec 3.3, A3/A4): the receipt is
    rebuilt from the message, its delivery copied from the request, so a
    delivery change is never detected and fork copies reconcile."""
    visible_time: VisibleTime = "promotion"
    """The ``time`` a promoted message carries. ``promotion`` (the seed's
    decision, G5 projector, spec 3.14) or ``admission`` (G2: the projected
    message keeps its admission time), open point A1."""
    steer_batch_cap: int | None = None
    """At most this many steers promote at one boundary (the G2 source
    revision's cutoff cap of 100, spec 3.4 "G2 difference"); ``None``: every
    pending steer (G4, and the released OpenCode 1.18.33, whose
    ``promoteSteers`` takes every steer below its cutoff: 101 parked steers
    promote at one boundary on the real server, ``docs/opencode.md``, so the
    ``g2`` preset has no cap)."""
    barrier_blocks: BarrierBlocks = "all"
    """What a compaction barrier holds back. ``all`` (G4 code, spec 3.8 and
    invariant 10): every promotion while it exists. ``after`` (G5 ordered
    control items, spec 3.4 "G5 difference", open point A2): only input
    admitted after it; steers admitted before it promote first."""
    synthetic_delivery: SyntheticDelivery = "steer_or_queue"
    """Which deliveries synthetic input has. ``steer_or_queue`` (the seed's
    decision), ``always_steer`` (seed candidate B gives synthetic input no
    delivery), ``none`` (G2 has no synthetic route: ``unsupported``)."""
    lifecycles: Lifecycles = "shared"
    """How prompt and synthetic input are ordered. ``shared``: one admission
    order (the seed's decision). ``parallel`` (seed candidate C, first draft):
    at a boundary prompts promote before synthetics, each kind in its own
    order. ``parallel_merged`` (candidate C as decided): parallel records with
    one merged order, observably the same as ``shared``."""
    step_events: StepEvents = "at_call"
    """When the runner's lifecycle events are written. ``at_call`` (G4, spec
    3.5-3.7): ``execution_*`` events frame each busy period, ``step_started``
    is appended when the step's model call opens and an interrupted step
    gets ``step_failed``. ``on_response`` (G2, the released OpenCode 1.18.33,
    seen on the real server: ``docs/opencode.md``): no execution events at
    all; ``step_started`` is written when the provider's response begins, so
    it comes with the answer (an error answer gives ``step_started`` +
    ``step_failed``), and a step whose call is interrupted or lost before any
    response has no step event."""
    interrupt_unknown: InterruptUnknown = "not_found"
    """``interrupt`` of a session with no record. ``not_found`` (the G4
    contract, spec 3.7; adapter protocol: ``session_not_found`` in every
    operation) or ``no_op`` (the interrupt delegation of G2's code and of
    G3/G5, which checks nothing: ``{"interrupted": false}``), open point A10."""
    empty_compaction: EmptyCompaction = "call"
    """A manual compaction of a session with no visible message. ``call``
    (adapter protocol: the compaction call opens even with nothing to
    summarize) or ``fail`` (G5, spec 3.8: it fails at once, "Nothing to
    compact yet", opening no call; its barrier is consumed and the drain goes
    on)."""
    abandoned_compaction: AbandonedCompaction = "rerun"
    """A compaction that started and was cut short by a crash (its barrier
    still pending). ``rerun`` (the model's G4 reading: the next drain runs it
    again) or ``settle`` (G5 runner tests, spec 6.4: it is first settled as
    failed, "Compaction abandoned", when the session's next execution starts
    or when another compaction is requested, and that one is admitted)."""
    fork_empty: ForkEmpty = "copy"
    """A fork of a session with no visible message. ``copy`` (G4: an empty
    child) or ``reject`` (G5's ``ForkEmptyError``, spec 2.7 and A9: the
    fork fails with ``invalid_request`` and changes nothing)."""

    promoted_event_time: PromotedEventTime = "promotion"
    """The ``time`` of the durable ``promoted`` event. ``promotion`` (G4 and
    the seed: the ``now`` of the boundary that promoted it) or ``admission``
    (G2: the released OpenCode 1.18.33 stamps ``session.next.prompted`` with
    the input's admission time, its ``SessionInput.publish`` passing the row's
    ``time_created``; seen on the real server, ``docs/opencode.md``), so event
    times do not grow with seq. ``admission`` needs ``visible_time =
    "admission"``: under ``promotion`` a replay reads a message's time from
    its promoted event."""

    revert_boundary: RevertBoundary = "removed"
    """What a committed revert does to its boundary message. ``removed`` (G5
    projector, spec 3.10 and invariant 34; adapter protocol): the messages and
    user/synthetic pending rows at or after the boundary's seq go. ``kept``
    (G2: the released OpenCode 1.18.33's session projector deletes
    ``session_message`` rows with ``seq > boundary.seq`` and ``session_input``
    rows admitted or promoted after it; seen on the real server,
    ``docs/opencode.md``): only those after it go, and the boundary stays
    visible. Either way a compaction barrier stays."""
    staged_revert_prompt: StagedRevertPrompt = "commits"
    """What a prompt does while a revert is staged. ``commits`` (G3 and G5
    tests, spec 3.10 and invariant 35; adapter protocol): it is judged as if
    the revert were committed just before it, and the commit and the admission
    land together. ``admits`` (G2: OpenCode 1.18.33, seen on the real server,
    ``docs/opencode.md``): it is admitted, retried or refused as if nothing
    were staged, and wakes as usual; the revert stays staged, and a later
    commit discards the prompt with everything else after the boundary."""
    ended_ids: EndedIds = "kept"
    """Whom an input ID belongs to once its lifecycle ended. ``kept`` (spec
    invariants 2 and 38, OpenCode's own G3 test "rejects reuse of one globally
    unique message ID across sessions", spec 6.2; adapter protocol "IDs are
    one namespace"): to its session and kind, for good; it may be admitted
    again only there, as a new input. ``freed_by_revert`` (G2: the released
    OpenCode 1.18.33, seen on the real server, ``docs/opencode.md``): its
    uniqueness check is by ``session_input`` row and a committed revert
    deletes the rows it truncates, so q0 and p0, truncated from s1, were
    admitted in s2 with no 409. An ID whose admission a committed revert
    removed (pending, or promoted after the cut) is then free for any session
    and kind. Nothing else is freed: a consumed barrier's ID stays its
    session's (1.18.33 has no admission barrier, so there is no evidence
    against the protocol's rule; the g2 preset's barriers are the model's),
    and so does a fork copy's (no admission row; 1.18.33 serves no fork). A
    live ID in another session is a conflict either way (a 409 on the real
    server), and generated IDs still skip every ID ever used."""

    def __post_init__(self) -> None:
        if self.promoted_event_time == "admission" and self.visible_time != "admission":
            raise PolicyError(
                f"policy {self.name}: promoted_event_time = 'admission' needs visible_time = "
                "'admission' (a message's promotion time would be in no event)"
            )

    def revert_cut(self, boundary_seq: int) -> int:
        """The first seq a committed revert to a boundary at ``boundary_seq``
        removes (``revert_boundary``)."""
        return boundary_seq + 1 if self.revert_boundary == "kept" else boundary_seq

    def fields(self) -> dict[str, object]:
        """The choice fields only (no name or summary), for listings."""
        return {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.name not in ("name", "summary")
        }


G4 = Policy("g4", "V2 Session Contract (G4): session_pending, strict retry, promotion-time stamps")

PRESETS: dict[str, Policy] = {
    p.name: p
    for p in (
        G4,
        Policy("g3", "the seed's decided design: rows kept with promoted_seq (observably G4)"),
        Policy(
            "g2",
            "released OpenCode 1.18.33: admission-time stamps, no synthetic route, a revert keeps "
            "its boundary and frees the IDs it truncates",
            visible_time="admission",
            synthetic_delivery="none",
            step_events="on_response",
            promoted_event_time="admission",
            revert_boundary="kept",
            staged_revert_prompt="admits",
            ended_ids="freed_by_revert",
        ),
        Policy(
            "g5",
            "session_inbox (G5): first admission wins, retry from the message, ordered barrier",
            retry_identity="first_wins",
            retry_after_promotion="message",
            barrier_blocks="after",
        ),
        Policy("a", "seed candidate A: prompt content as a union (observably G4)"),
        Policy(
            "b",
            "seed candidate B: session input as the union; synthetic input always steers",
            synthetic_delivery="always_steer",
        ),
        Policy(
            "c",
            "seed candidate C, first draft: parallel lifecycles, prompts before synthetics",
            lifecycles="parallel",
        ),
        Policy(
            "c-merged",
            "seed candidate C as decided: parallel records, one merged order",
            lifecycles="parallel_merged",
        ),
    )
}

_CHOICES: dict[str, tuple[object, ...]] = {
    "retry_identity": ("strict", "first_wins"),
    "retry_after_promotion": ("admission_record", "message"),
    "visible_time": ("promotion", "admission"),
    "barrier_blocks": ("all", "after"),
    "synthetic_delivery": ("steer_or_queue", "always_steer", "none"),
    "lifecycles": ("shared", "parallel", "parallel_merged"),
    "step_events": ("at_call", "on_response"),
    "interrupt_unknown": ("not_found", "no_op"),
    "empty_compaction": ("call", "fail"),
    "abandoned_compaction": ("rerun", "settle"),
    "fork_empty": ("copy", "reject"),
    "promoted_event_time": ("promotion", "admission"),
    "revert_boundary": ("removed", "kept"),
    "staged_revert_prompt": ("commits", "admits"),
    "ended_ids": ("kept", "freed_by_revert"),
}


def policy_from_table(table: dict[str, object], origin: str) -> Policy:
    """Build a policy from parsed TOML, checking every field and value.
    (Reading the file is the shell's: ``inboxsim.policy_file.load_policy``.)"""
    fields = dict(table)
    base_name = fields.pop("base", "g4")
    if not isinstance(base_name, str) or base_name not in PRESETS:
        raise PolicyError(f"{origin}: base {base_name!r} is not a preset ({', '.join(PRESETS)})")
    base = PRESETS[str(base_name)]
    known = {f.name for f in dataclasses.fields(Policy)}
    for key, value in fields.items():
        if key not in known:
            raise PolicyError(
                f"{origin}: unknown policy field {key!r}; known: {', '.join(sorted(known))}"
            )
        if key in _CHOICES and value not in _CHOICES[key]:
            allowed = ", ".join(map(str, _CHOICES[key]))
            raise PolicyError(f"{origin}: {key} = {value!r} is not one of {allowed}")
        positive = isinstance(value, int) and not isinstance(value, bool) and value > 0
        if key == "steer_batch_cap" and not positive:
            raise PolicyError(f"{origin}: steer_batch_cap must be a positive integer")
        if key in ("name", "summary") and not isinstance(value, str):
            raise PolicyError(f"{origin}: {key} must be a string")
    fields.setdefault("name", Path(origin).stem)
    fields.setdefault("summary", f"custom policy from {origin} (based on {base.name})")
    try:
        return dataclasses.replace(base, **fields)  # type: ignore[arg-type]
    except PolicyError as exc:
        raise PolicyError(f"{origin}: {exc}") from None
