"""Every invariant the checkers judge, as registered values, and the spec's
invariants that cannot be judged through the adapter protocol.

An :class:`Invariant` carries its id, a one-line statement, its source (a
section or invariant number of ``opencode-v2-inbox.md``, the adapter
protocol, or the seed), tags, the policies under which it is expected to
hold (a predicate on policy fields), and ``planted_bug``: the kind of
implementation bug that breaks it. Where no policy preset violates an
invariant through the real pipeline, that planted bug is the only way to
see it fire (the SQLite mutant catalogue).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..model.policy import Policy
from .base import When


@dataclass(frozen=True, slots=True)
class Invariant:
    id: str
    statement: str
    source: str
    tags: tuple[str, ...]
    holds_under: When
    planted_bug: str

    def expected(self, policy: Policy) -> bool:
        return self.holds_under(policy)


@dataclass(frozen=True, slots=True)
class Unobservable:
    """A spec invariant no checker can judge from protocol observations."""

    source: str
    statement: str
    reason: str


ALWAYS = When()

_ENTRIES: tuple[Invariant, ...] = (
    # --- the durable log ---------------------------------------------------
    Invariant(
        "seq-contiguous",
        "Within a session, event seqs start at 0 and grow by exactly one, except one gap right "
        "after a fork's forked event at seq 0, which ends at the fork's cutoff (where the forked "
        "event names parent_seq, the next seq is parent_seq + 1, and at least 1).",
        "spec §4.1",
        ("log",),
        ALWAYS,
        "an event store that allocates a seq before a projection that then rolls back, leaving a "
        "gap",
    ),
    Invariant(
        "replay-matches-views",
        "At every observation the pending inbox and transcript a target shows are the fold of its "
        "own durable log by the protocol's rules: IDs, order, seqs, types, deliveries, and times "
        "under the policy's visible_time (payloads are not folded: see the unobservable part).",
        "spec §4.30 (the part the protocol can observe); seed (replay of the durable log)",
        ("log", "durability"),
        ALWAYS,
        "a projection that writes a row the log does not explain (or forgets one), e.g. pending "
        "rows kept in memory only",
    ),
    Invariant(
        "replay-starts-nothing",
        "A restart replays the durable log and starts nothing: after a crash (a kill, a failpoint "
        "or the crash operation) no model call is open; a kill, the crash operation and every "
        "hello append no event and open no call; a failpoint's restart appends nothing to the "
        "sessions its request did not name.",
        "spec §4.30 (replay triggers no wake or model call), §3.6 (replay never wakes), §3.11 (a "
        "SIGKILL suspends nothing)",
        ("log", "crash", "wake"),
        ALWAYS,
        "a process that wakes every session with pending input when it starts: replay that wakes "
        "(restart-resumes-pending)",
    ),
    Invariant(
        "durability",
        "Every input whose admission was acknowledged or whose admission event exists is, at "
        "every observation and across crashes, exactly once pending or visible, unless a "
        "committed revert discarded it (a barrier: its compaction ended or failed).",
        "seed (durability)",
        ("durability", "crash"),
        ALWAYS,
        "acknowledging an admission before its transaction commits, or losing uncommitted rows on "
        "kill",
    ),
    Invariant(
        "error-changes-nothing",
        "An error reply appends no event and changes no pending inbox, transcript or open call.",
        "adapter protocol, Errors; spec §4.31 (its observable part), §4.21, §4.35",
        ("errors",),
        ALWAYS,
        "a conflict detected after the revert commit or a row write, without rolling back",
    ),
    # --- admission and retries -------------------------------------------------
    Invariant(
        "admission-fresh-id",
        "An admission event names an ID never admitted or copied before, in any session (one "
        "admission per ID), with the one exception the protocol allows: after its lifecycle "
        "ended (a committed revert removed it, its barrier was consumed) an ID is admitted "
        "again in its own session and as its own kind, a new lifecycle. A live ID (pending or "
        "visible) is never admitted again. Under ended_ids = freed_by_revert (OpenCode 1.18.33) "
        "an ID whose admission a committed revert truncated is free: any session admits it, as "
        "any kind.",
        "spec §4.2, §4.4; adapter protocol, IDs are one namespace (the exception: re-admission "
        "in the same session and kind after the lifecycle ended; the spec's cancellation "
        "exception has no protocol operation); the policy's ended_ids",
        ("admission", "ids"),
        ALWAYS,
        "admission without the ID lookup (no check against the transcript or other sessions), or "
        "an ID index that forgets an ID when its lifecycle ends",
    ),
    Invariant(
        "admission-projects-row",
        "An admission at seq s projects one pending row with admitted_seq s, the event's time, "
        "type and delivery, and its receipt says the same.",
        "spec §4.3",
        ("admission",),
        ALWAYS,
        "a pending row stamped with another clock or seq than its admission event",
    ),
    Invariant(
        "receipt-reflects-request",
        "A receipt names the requested input, session and kind; a fresh admission records the "
        "submitted payload (defaults applied) and the requested delivery (steer by default).",
        "adapter protocol, receipt; seed decision (prompt and synthetic both support steer and "
        "queue)",
        ("admission",),
        When.of(synthetic_delivery=("steer_or_queue", "none")),
        "dropping metadata or the requested delivery when writing the row",
    ),
    Invariant(
        "omitted-id-new-input",
        "A prompt or synthetic request without an ID always admits a new input under a fresh ID.",
        "spec §4.23; seed (an omitted ID always makes a new input)",
        ("admission", "ids"),
        ALWAYS,
        "generating IDs from a content hash, so resubmitting identical text returns the old input",
    ),
    Invariant(
        "admission-before-wake",
        "In an admitting request no execution activity (start, promotion, step or compaction) "
        "precedes the admission event, and a crash at after_admit leaves the admission durable "
        "with nothing woken.",
        "seed (admission is durable before execution is woken); adapter protocol, failpoints",
        ("admission", "crash"),
        ALWAYS,
        "waking the runner before the admission transaction commits",
    ),
    Invariant(
        "retry-silent",
        "Reusing a live input ID in its own session and kind never admits it again, and an exact "
        "retry (same payload and delivery) succeeds.",
        "spec §4.21; seed (exact retry reconciles: no event)",
        ("retry",),
        ALWAYS,
        "an upsert that re-inserts the pending row (a second admission event) on retry",
    ),
    Invariant(
        "retry-same-receipt",
        "A successful request that returns an already admitted input returns that lifecycle's "
        "original receipt, field for field (pending or promoted).",
        "spec §4.21 (the stored receipt); seed (exact retry: same receipt); adapter protocol, "
        "exact retry",
        ("retry",),
        When.of(retry_after_promotion=("admission_record",)),
        "rebuilding the receipt of a promoted input from the message (its promotion time) instead "
        "of the admission record",
    ),
    Invariant(
        "concurrent-retry",
        "Exact retries of one ID sent together (one concurrent group) produce one admission "
        "event and identical receipts: each answers as the first did, field for field, or each "
        "fails.",
        "spec §4.22 (under the stored receipt, as retry-same-receipt: where a retry after "
        "promotion is answered from the message, a twin that lands after the promotion differs)",
        ("retry", "concurrency"),
        When.of(retry_after_promotion=("admission_record",)),
        "a retry checked in one transaction and inserted in another (check-then-insert): two "
        "racing twins both find the ID unknown and both admit it "
        "(race-retry-check-then-insert)",
    ),
    Invariant(
        "conflict-rejected",
        "Reusing a live ID in its session and kind with another payload or delivery fails with "
        "the kind's conflict error (after promotion, delivery counts only where retries are "
        "judged against the admission record).",
        "spec §4.21; seed (conflicting reuse fails and changes nothing)",
        ("retry",),
        When.of(retry_identity=("strict",)),
        "comparing only the text of a retry, so another delivery or metadata is silently accepted",
    ),
    Invariant(
        "id-namespace",
        "An input ID belongs to one session and one kind from its first admission, for good: "
        "reusing it in another session or as another kind fails with the operation's conflict "
        "error, also after its lifecycle ended, and so does reusing a fork copy's ID. In its own "
        "session and kind, after its lifecycle ended (a prompt under a staged revert: as if the "
        "revert were committed first), a reuse admits a new input, not a retry. Generated IDs "
        "(inputs, barriers, fork copies) never collide with an ID ever admitted or copied. Under "
        "ended_ids = freed_by_revert (OpenCode 1.18.33) an ID whose admission a committed revert "
        "truncated belongs to no one: a reuse anywhere, as any kind, admits a new input.",
        "spec §4.38, §4.2; adapter protocol (IDs are one namespace; a prompt under a staged "
        "revert); the policy's ended_ids",
        ("ids",),
        ALWAYS,
        "a per-session primary key on input IDs instead of a global one, or an ID index that "
        "frees an ID for everyone when its lifecycle ends (ids-freed-for-everyone)",
    ),
    # --- promotion -------------------------------------------------------------
    Invariant(
        "promotion-after-admission",
        "A promoted event for x needs x pending in the same session from an earlier admission "
        "event.",
        "spec §4.8; seed (no promotion precedes its admission event)",
        ("promotion",),
        ALWAYS,
        "promoting by ID from a stale read, after a revert or in the wrong session",
    ),
    Invariant(
        "promoted-once",
        "An input is promoted at most once per lifecycle.",
        "spec §4.7; seed (at most once per input)",
        ("promotion",),
        ALWAYS,
        "a boundary re-reading pending rows that it promoted but did not delete (non-atomic "
        "promotion)",
    ),
    Invariant(
        "promotion-atomic",
        "After promoted{x} at seq s, x is gone from the pending inbox and visible in the "
        "transcript at seq s with its pending row's type; never one without the other.",
        "spec §4.6; seed (atomically)",
        ("promotion",),
        ALWAYS,
        "deleting the pending row and inserting the message in two transactions",
    ),
    Invariant(
        "promotion-at-boundary",
        "Promotion happens only at a Safe Step Boundary: never while the session's step call is "
        "open, and always right before a model call for that session opens.",
        "seed (promotion only at a Safe Step Boundary; never mid-step)",
        ("promotion", "boundary"),
        ALWAYS,
        "promoting on admission while a step is running (no boundary)",
    ),
    Invariant(
        "steer-batch",
        "A boundary with promotable steers promotes exactly those steers (up to the policy's "
        "steer_batch_cap) and no queued input.",
        "spec §4.13, §4.14; seed (steers promote together at the next boundary)",
        ("delivery", "boundary"),
        ALWAYS,
        "promoting one steer per boundary, or a boundary batch read before the last admissions",
    ),
    Invariant(
        "idle-boundary",
        "At an idle boundary (no tool continuation) with no promotable steer, exactly one queued "
        "input is promoted if any is promotable; never more than one per boundary.",
        "spec §4.14; seed (queued input promotes one at a time)",
        ("delivery", "boundary"),
        ALWAYS,
        "promoting all queued inputs at once when the session goes idle",
    ),
    Invariant(
        "queue-fifo",
        "A promoted queued input is the oldest promotable queued input.",
        "spec §4.15",
        ("delivery",),
        When.of(lifecycles=("shared", "parallel_merged")),
        "ordering the pending query by ID or time instead of admitted_seq",
    ),
    Invariant(
        "queue-waits-for-idle",
        "A queued input is never promoted at a boundary that continues a tool call, nor while a "
        "promotable steer is pending.",
        "spec §4.16; seed (queued input promotes only at an idle boundary)",
        ("delivery", "boundary"),
        ALWAYS,
        "treating queue like steer (promoting queued input at every boundary)",
    ),
    Invariant(
        "shared-admission-order",
        "Prompt and synthetic input share one admission order: a boundary promotes in ascending "
        "admission seq, and a queued input never promotes ahead of an older queued input of the "
        "other kind.",
        "seed (one admission order shared by prompt and synthetic input)",
        ("delivery", "order"),
        When.of(lifecycles=("shared", "parallel_merged")),
        "two pending tables (prompt and synthetic) drained one after the other",
    ),
    Invariant(
        "background-completion",
        "A synthetic steer admitted while a step is running (a background completion) reaches the "
        "transcript at that drain's next Safe Step Boundary.",
        "seed (background completion uses steering semantics at a safe boundary)",
        ("delivery", "synthetic"),
        ALWAYS,
        "routing synthetic input to the queue branch, or skipping synthetic rows at steer "
        "boundaries",
    ),
    Invariant(
        "step-allowance",
        "A step call opened by a boundary that promoted input is step 1, otherwise the previous "
        "step + 1 (1 for a new execution); final exactly on the allowance's last step; a "
        "compaction call is step 0.",
        "spec §4.18; adapter protocol, calls",
        ("boundary", "allowance"),
        ALWAYS,
        "not resetting the step counter when steering input promotes",
    ),
    # --- the transcript ------------------------------------------------------------
    Invariant(
        "pending-not-history",
        "No input ID is pending and visible at the same time, in any sessions.",
        "spec §4.5",
        ("transcript",),
        ALWAYS,
        "a transcript query that also reads the pending table",
    ),
    Invariant(
        "transcript-order",
        "The transcript is ordered by seq, and its promoted messages appear in promotion order.",
        "spec §4.17; seed (transcript order equals promotion order)",
        ("transcript", "order"),
        ALWAYS,
        "ordering the transcript by message ID or timestamp",
    ),
    Invariant(
        "monotonic-visible-time",
        "Visible timestamps never run backward along a session's transcript.",
        "seed (queued messages must not make visible timestamps run backward); spec §3.14, §5 A1",
        ("transcript", "time"),
        When.of(visible_time=("promotion",)),
        "stamping a promoted message with its admission time",
    ),
    Invariant(
        "call-context",
        "The context a model call carries is the visible transcript (user and synthetic messages, "
        "in order) at its boundary.",
        "seed (what the model actually saw); spec §4.17 (context lists are ordered by seq); "
        "adapter protocol, calls",
        ("transcript", "boundary"),
        ALWAYS,
        "building the request from a transcript read before the boundary's promotions",
    ),
    # --- the compaction barrier ----------------------------------------------------------
    Invariant(
        "single-barrier",
        "A session has at most one compaction barrier pending.",
        "spec §4.9",
        ("barrier",),
        ALWAYS,
        "no unique constraint on the session's compaction row",
    ),
    Invariant(
        "barrier-blocks-promotion",
        "No input is promoted while its session has a compaction barrier pending.",
        "spec §4.10; seed (the barrier blocks promotion until it ends or fails)",
        ("barrier",),
        When.of(barrier_blocks=("all",)),
        "a promote query that does not check for the barrier",
    ),
    Invariant(
        "barrier-holds-later-input",
        "No input admitted after a pending compaction barrier is promoted while that barrier is "
        "pending.",
        "spec §3.4 (G5 difference), §5 A2",
        ("barrier",),
        ALWAYS,
        "a promote query that does not check for the barrier",
    ),
    Invariant(
        "barrier-lifetime",
        "A compaction barrier appears only by its admission and leaves the pending inbox exactly "
        "when its manual compaction ends or fails (never by an automatic compaction or a revert).",
        "spec §4.11; seed (the barrier is consumed then)",
        ("barrier",),
        ALWAYS,
        "a committed revert that truncates the barrier with the other pending rows",
    ),
    Invariant(
        "barrier-coalesces",
        "compact while a barrier is pending returns that barrier and admits nothing (no "
        "compaction_admitted; like any compact it then wakes the session); under "
        "abandoned_compaction = settle, a barrier a crash cut short is settled first.",
        "spec §4.12, §3.8 (the operation then wakes execution)",
        ("barrier",),
        ALWAYS,
        "admitting a second barrier under the caller's new ID",
    ),
    # --- wakes, drains, executions ---------------------------------------------------------
    Invariant(
        "wake-on-admission",
        "A successful admission that wakes (resume not false; synthetic: no staged revert; "
        "compact: always) starts execution on an idle session with pending rows; one that does "
        "not wake starts nothing.",
        "spec §4.24",
        ("wake",),
        ALWAYS,
        "ignoring resume: false, or never waking after an admission",
    ),
    Invariant(
        "lazy-wake",
        "A wake of an idle session with nothing pending starts nothing; a resume of an idle "
        "session makes exactly one model call (a forced drain).",
        "spec §4.25; adapter protocol (forced drain)",
        ("wake",),
        ALWAYS,
        "starting an execution (and a model call) for every wake",
    ),
    Invariant(
        "single-execution",
        "A session has at most one open model call; a resume of a busy session joins it without "
        "new events.",
        "spec §4.26",
        ("execution",),
        ALWAYS,
        "resume starting a second drain instead of joining the active one",
    ),
    Invariant(
        "execution-lifecycle",
        "Each busy period has one execution_started and one terminal event, and its promotions "
        "and calls happen inside it (judged where the target emits execution events).",
        "spec §4.27",
        ("execution",),
        ALWAYS,
        "a terminal event per drain instead of per execution",
    ),
    Invariant(
        "wake-follow-up",
        "Wakes rung during an execution coalesce into at most one follow-up drain per drain, in "
        "that execution: when a step ends without error the execution goes on with one call if a "
        "continuation is due or input is pending (the drain, or its follow-up, takes it) and "
        "otherwise settles, never opening a call with nothing to promote nor a new execution; "
        "when a step fails, exactly one new execution starts if a wake was rung during it and "
        "input is pending, otherwise none.",
        "seed (an active continuation receives a coalesced follow-up wake); spec §4.26, §4.25 (a "
        "follow-up drain is unforced), §4.27 (one execution across coalesced drains), §3.6",
        ("wake", "execution"),
        ALWAYS,
        "dropping the doorbell when a step fails (doorbell-dropped-on-failure), or a follow-up "
        "drain run like a resume: a call that promotes and continues nothing "
        "(follow-up-drain-forced)",
    ),
    Invariant(
        "sessions-independent",
        "A request changes only the sessions it names (an answer: its call's session; a fork: the "
        "parent and the child): every other session's log, pending inbox, transcript and open "
        "call stay as they were.",
        "spec §4.26 (different sessions proceed independently), §3.6",
        ("execution",),
        ALWAYS,
        "a runner that drains every idle session with pending input whenever any session wakes",
    ),
    Invariant(
        "work-needs-a-wake",
        "An idle session starts work (an execution, a promotion or a model call) only in a "
        "request that may wake it: a prompt, synthetic or compact into it, or its resume; so no "
        "wake rung before an interrupt starts a successor later.",
        "spec §4.28 (no wake recorded before the interrupt starts a successor), §3.6; adapter "
        "protocol (no progress happens between requests)",
        ("wake", "interrupt"),
        ALWAYS,
        "a doorbell kept across an interrupt that starts a successor at the session's next "
        "request, e.g. a revert",
    ),
    Invariant(
        "compaction-error-continues",
        "An error answer to a compaction call consumes its barrier (compaction_failed) and the "
        "drain goes on in the same step: the execution neither fails nor is interrupted, a step "
        "call opens if input is promotable or a continuation is due, otherwise it succeeds.",
        "adapter protocol, Rules the protocol pins down; spec §3.8",
        ("barrier", "execution"),
        ALWAYS,
        "compaction-error-ends-drain: an error on a compaction call fails the execution instead "
        "of letting the drain go on",
    ),
    Invariant(
        "interrupt-keeps-input",
        "Interrupting a busy session answers interrupted: true, deletes no pending row (but the "
        "barrier of the compaction call it cancels), promotes nothing and starts no successor.",
        "spec §4.28 (its observable part), §3.8 (an interrupted compaction fails); seed (interrupt "
        "never deletes pending input)",
        ("interrupt",),
        ALWAYS,
        "clearing the session's pending rows on interrupt",
    ),
    Invariant(
        "idle-interrupt-noop",
        "Interrupting an idle session changes nothing and answers interrupted: false; an unknown "
        "session fails with session_not_found (under interrupt_unknown = no_op it is a no-op too).",
        "spec §4.29; seed (an idle interrupt changes nothing)",
        ("interrupt",),
        ALWAYS,
        "recording an interrupted event for an idle session",
    ),
    # --- fork and revert -------------------------------------------------------------------
    Invariant(
        "fork-no-pending",
        "A fork starts with no pending input, copies nothing that was pending, and leaves the "
        "parent's pending inbox untouched.",
        "spec §4.32; seed (fork copies no pending input)",
        ("fork",),
        ALWAYS,
        "copying the parent's pending rows into the child",
    ),
    Invariant(
        "fork-cutoff",
        "A fork copies exactly the parent's messages before its boundary (all, without one), "
        "keeping their seqs under new IDs; its own events come after every copied seq.",
        "spec §4.33",
        ("fork",),
        ALWAYS,
        "copying the boundary message itself (an off-by-one cutoff)",
    ),
    Invariant(
        "revert-truncates",
        "A committed revert removes exactly the messages and user/synthetic pending rows at or "
        "after its boundary's seq (after it, under revert_boundary = kept), and keeps everything "
        "below it and the barrier.",
        "spec §4.34; seed (committed revert truncates exactly at the boundary)",
        ("revert",),
        ALWAYS,
        "truncating from the message after the boundary, or only the transcript",
    ),
    Invariant(
        "prompt-commits-revert",
        "A prompt that succeeds under a staged revert commits it first, in the same step, and "
        "survives it (under staged_revert_prompt = admits it commits nothing: the revert stays "
        "staged); a synthetic input never commits a staged revert.",
        "spec §4.35; adapter protocol (revert rules); OpenCode 1.18.33 (admits)",
        ("revert",),
        ALWAYS,
        "admitting the prompt before committing the revert, which then discards it",
    ),
    # --- liveness ------------------------------------------------------------------------
    Invariant(
        "live-all-promoted",
        "At the end of a liveness phase every admitted input that no revert discarded was "
        "promoted exactly once.",
        "seed (liveness)",
        ("liveness",),
        ALWAYS,
        "a drain that stops while queued input remains",
    ),
    Invariant(
        "live-no-stranded-input",
        "At the end of a liveness phase no session holds pending input without an open call.",
        "seed (liveness)",
        ("liveness",),
        ALWAYS,
        "an execution that settles without checking for input admitted during its last step",
    ),
    Invariant(
        "live-barriers-consumed",
        "At the end of a liveness phase every compaction barrier has been consumed.",
        "seed (liveness)",
        ("liveness", "barrier"),
        ALWAYS,
        "a drain that never runs a barrier admitted while it was idle",
    ),
)

REGISTRY: dict[str, Invariant] = {inv.id: inv for inv in _ENTRIES}

UNOBSERVABLE: tuple[Unobservable, ...] = (
    Unobservable(
        "spec §4.3",
        "A pending row's data equals its admission's payload.",
        "the protocol's pending rows carry no data: a payload is seen only in receipts (judged by "
        "receipt-reflects-request and retry-same-receipt) and in free-form event data",
    ),
    Unobservable(
        "spec §4.18",
        "A retry or an overflow-compaction restart keeps the step index.",
        "the harness plays the provider and never retries a call or overflows a context (see "
        "§4.19), so no such attempt exists to observe",
    ),
    Unobservable(
        "spec §4.19",
        "No promotion on retry or rebuild (physical attempts after the first).",
        "the harness plays the provider: a call answered 'error' fails the step, so no retry, "
        "overflow rebuild or incomplete-stream continuation exists to observe",
    ),
    Unobservable(
        "spec §4.20",
        "Instructions before promotion.",
        "instruction events reach the harness only as opaque other:* events, and the protocol has "
        "no instruction baseline that could fail",
    ),
    Unobservable(
        "spec §4.27",
        "The lifecycle pair of a target that logs no execution events.",
        "a target without execution_* events (OpenCode 1.18.33; policy field step_events = "
        "on_response) shows no busy period's start or end: execution-lifecycle judges only targets "
        "that log them, and such a target's calls are judged by single-execution and "
        "wake-follow-up",
    ),
    Unobservable(
        "spec §4.28",
        "A wake recorded during interrupt cleanup starts a successor.",
        "an adapter answers interrupt only once its work has quiesced, and the protocol is one "
        "request at a time: cleanup is over before any wake can arrive, so none is ever recorded "
        "during it",
    ),
    Unobservable(
        "spec §4.30",
        "Replaying the durable log into an empty store reproduces the pending inbox and the "
        "transcript exactly, payloads included.",
        "the protocol cannot load a log into a fresh store, and event data is free-form (each "
        "adapter maps its native payloads), so a target's log cannot be fed to the model's "
        "projectors: replay-matches-views folds it by the protocol's rules at every observation, "
        "and replay-starts-nothing judges what a restart on the same data starts",
    ),
    Unobservable(
        "spec §4.31",
        "A projector's rejection stores no event and does not advance the seq.",
        "projector failures are internal; the observable consequence (an error changes nothing) "
        "is judged by error-changes-nothing",
    ),
    Unobservable(
        "spec §4.33",
        "parentSeq = boundary.seq - 1 where a forked event does not carry parent_seq.",
        "event data is free-form: where an adapter's forked event names no parent_seq, fork-cutoff "
        "judges the cut by the copied messages and the child's first own seq only",
    ),
    Unobservable(
        "spec §4.38 (call IDs)",
        "A prompt ID never equals the ID of a non-prompt creator event (a step's assistant "
        "message), and vice versa.",
        "call IDs are made up by the adapter, and the protocol keeps them apart from input IDs "
        "(a call is answered by its ID, never admitted or listed as a message; assistant "
        "messages have no ID the protocol reports), so a collision between a step and an input "
        "cannot be observed; the input side (prompt, synthetic and compaction IDs, and fork "
        "copies) is judged by id-namespace",
    ),
    Unobservable(
        "spec §4.36",
        "Suspension lifecycle of a managed restart (time_suspended).",
        "the protocol has no managed shutdown, no suspension field and no restart continuation",
    ),
    Unobservable(
        "spec §4.37",
        "Cancel, steer and queue mutations of pending input (late G4).",
        "the protocol has no cancel, steer or queue operation",
    ),
)


SPEC_TITLES: tuple[str, ...] = (
    "Contiguous sequence",
    "One admission per lifecycle",
    "Admission projects exactly one row",
    "Admission is rejected if the ID is already visible",
    "Pending is not history",
    "Promotion is atomic",
    "At most one promotion per input",
    "Promotion requires prior admission",
    "Barrier uniqueness",
    "Barrier blocks promotion",
    "Barrier lifetime",
    "Coalescing",
    "Steer batch content",
    "Idle boundary content",
    "Queue FIFO",
    "Queue waits for idle",
    "Transcript order equals promotion order",
    "Step allowance reset",
    "No promotion on retry or rebuild",
    "Instructions before promotion",
    "Exact retry is silent",
    "Concurrent exact retries",
    "Omitted ID",
    "Wake policy",
    "Wake-driven drain is lazy",
    "Single execution per session",
    "One lifecycle pair per busy period",
    "Interrupt preserves input",
    "Idle interrupt is a no-op",
    "Replay determinism",
    "Projection failure is atomic",
    "Fork never carries pending input",
    "Fork cutoff",
    "Committed revert truncation",
    "Prompt commits staged revert first",
    "Suspension lifecycle (G4 restart)",
    "Cancel/steer/queue (late G4)",
    "Global ID namespace",
)
"""The titles of ``opencode-v2-inbox.md`` section 4, invariant 1 first.
Every one of them is judged by the invariants whose source cites it
(``spec §4.N``), declared in :data:`UNOBSERVABLE` with the reason, or both
(the part a checker cannot see is declared, never silently left out)."""

_SPEC_REF = re.compile(r"§4\.(\d+)")


def spec_numbers(source: str) -> tuple[int, ...]:
    """The section 4 invariants a source cites (``spec §4.2, §4.4`` -> 2, 4)."""
    return tuple(int(n) for n in _SPEC_REF.findall(source))


def spec_coverage() -> list[dict[str, object]]:
    """Section 4 invariant by invariant: the ids that judge it and the parts
    of it that no checker can see, each with the reason."""
    return [
        {
            "number": n,
            "title": title,
            "checked_by": [inv.id for inv in _ENTRIES if n in spec_numbers(inv.source)],
            "not_observable": [
                {"statement": u.statement, "reason": u.reason}
                for u in UNOBSERVABLE
                if n in spec_numbers(u.source)
            ],
        }
        for n, title in enumerate(SPEC_TITLES, start=1)
    ]


def expected(policy: Policy) -> frozenset[str]:
    """The ids of the invariants expected to hold under ``policy``."""
    return frozenset(inv.id for inv in _ENTRIES if inv.holds_under(policy))


def listing() -> dict[str, list[dict[str, Any]]]:
    """The ``inboxsim invariants --json`` document."""
    return {
        "invariants": [
            {
                "id": inv.id,
                "statement": inv.statement,
                "source": inv.source,
                "tags": list(inv.tags),
                "holds_under": str(inv.holds_under),
                "planted_bug": inv.planted_bug,
            }
            for inv in _ENTRIES
        ],
        "not_observable": [
            {"source": u.source, "statement": u.statement, "reason": u.reason} for u in UNOBSERVABLE
        ],
        "spec": spec_coverage(),
    }
