"""Reuse of an input ID: exact retries, conflicts, the one ID namespace, and
errors that change nothing (spec 4.21, 4.31, 4.38; the seed; the adapter
protocol's "Rules the protocol pins down" and "Errors")."""

from __future__ import annotations

from typing import Any

from ..model.ops import Compact, Fork, Prompt, Synthetic
from ..model.values import Err, Event, Reply, canonical_json
from . import words
from .base import Checker
from .tracker import CONFLICT, Life, Owner, SessionShadow, StepCtx, request_kind, same_json

SILENT = "retry-silent"
SAME = "retry-same-receipt"
REJECTED = "conflict-rejected"
NAMESPACE = "id-namespace"
ERR_NOTHING = "error-changes-nothing"
CONCURRENT = "concurrent-retry"
# The events only a request appends; the runner appends the others
# (``model/runner.py``), and in a concurrent group it may do so within the
# step of a request that failed.
REQUEST_EVENTS = frozenset(
    {
        "admitted",
        "compaction_admitted",
        "forked",
        "revert_staged",
        "revert_cleared",
        "revert_committed",
    }
)


def _code(ctx: StepCtx) -> str:
    reply = ctx.reply
    code = getattr(reply, "code", None)
    if code is not None:
        return f"failed with {code}"
    if ctx.crashed:
        return "crashed"
    if ctx.unseen:
        return "took effect (killed in flight, its reply unseen)"
    return "succeeded"


class ReuseChecker(Checker):
    """Judges every request that names an input ID already used (live, or
    whose lifecycle ended), and every ID a target generates."""

    ids = (SILENT, SAME, REJECTED, NAMESPACE)
    step_scoped = ("owner", "first", "life", "state", "judged")
    ops = (Prompt, Synthetic, Compact, Fork)
    events = ("admitted", "compaction_admitted")

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.owner: Owner | None = None
        self.first: Owner | None = None
        self.life: Life | None = None
        self.state = ""
        self.judged = False

    def begin(self, ctx: StepCtx) -> None:
        op = ctx.op
        self.owner = self.first = self.life = None
        self.judged = False
        if isinstance(op, Fork):
            return
        sid = ctx.session
        if sid not in self.t.sessions:
            return  # session_not_found comes first
        if isinstance(op, Synthetic) and "synthetic" not in self.t.features:
            return  # no synthetic route: never sent by a harness
        x = op.input  # type: ignore[union-attr]
        if x is None:
            return
        self.judged = True
        if x not in self.t.namespace and x not in self.t.owners:
            return  # never used: no owner, live or first (most requests)
        self.owner, self.first = self.t.owned_by(x, op)  # type: ignore[arg-type]
        if self.owner is not None and not self.owner.copied:
            self.life = self.t.lives.get(x)
            self.state = self.life.state if self.life else ""

    def event(self, ctx: StepCtx, ev: Event, sh: SessionShadow) -> None:
        """An ID the target generated (the request named none) is new."""
        op = ctx.op
        if not isinstance(op, (Prompt, Synthetic, Compact)) or op.input is not None:
            return
        if op.session != sh.id:
            return
        self.env.hit(NAMESPACE)
        x = ev.input or ""
        used = self.t.namespace.get(x)
        if used is not None:
            self.env.fail(
                NAMESPACE,
                (ctx.index, used.step),
                f"{op.OP} without an ID at step {ctx.index} was admitted under the generated ID "
                f"{x}, which is {words.held(used)} of session {used.session} (step {used.step}): "
                "generated IDs never collide with an ID ever admitted or copied",
            )

    def end(self, ctx: StepCtx) -> None:
        op = ctx.op
        if isinstance(op, Fork):
            self._copies(ctx)
            return
        if ctx.ok:
            life = self.t.lives.get(ctx.result.get("input") or "")
            if life is not None and life.receipt is not None:  # a receipt seen before
                self._same_receipt(ctx, life)
        if not self.judged or (self.owner is None and self.first is None):
            return  # nothing to judge, or an ID never used
        kind = request_kind(op)
        x = getattr(op, "input", None)
        if kind is None or op is None or not isinstance(x, str):
            return
        o = self.owner
        if o is None:
            if self.first is not None:
                self._ended(ctx, x, kind, self.first)
            return
        env = self.env
        code = CONFLICT[kind]
        if o.session != ctx.session or o.type != kind:
            env.hit(NAMESPACE)
            if getattr(ctx.reply, "code", None) != code:
                steps = (ctx.index,) + ((self.t.lives[x].row.step,) if x in self.t.lives else ())
                env.fail(
                    NAMESPACE,
                    steps,
                    f"{op.OP} {x} into session {ctx.session} at step {ctx.index} {_code(ctx)}, but "
                    f"{x} is {words.held(o)} of session {o.session}: reuse in another session or "
                    f"as another kind must fail with {code}",
                )
            return
        life = self.life
        env.hit(SILENT)
        if x in ctx.admitted:
            where = f"{words.row(life.row)}, step {life.row.step}" if life else "a fork's copy"
            env.fail(
                SILENT,
                (ctx.index,) + ((life.row.step,) if life else ()),
                f"{op.OP} {x} at step {ctx.index} admitted it again although it is still "
                f"{self.state or 'visible'} ({where}): a retry must append no admission",
            )
        new_payload = self.t.payload(op)
        new_delivery = self.t.delivery(op)
        exact = life is not None and life.payload == new_payload and life.delivery == new_delivery
        if exact and ctx.err and life is not None:
            env.fail(
                SILENT,
                (ctx.index, life.row.step),
                f"the exact retry of {words.row(life.row)} at step {ctx.index} {_code(ctx)}: the "
                "same payload and delivery must reconcile to the original receipt",
            )
        # conflict-rejected states the strict rule whatever the policy; its
        # registry entry says under which policies it is expected to hold.
        if o.copied:
            if self.policy.retry_after_promotion != "admission_record":
                return  # later G4 / G5 rebuild a receipt from the copied message
            reason = "it is a fork's copied message, which has no admission record here"
        elif life is None or life.payload is None:
            return  # the original payload was never observed
        else:
            diffs = []
            if new_payload != life.payload:
                diffs.append(f"payload {new_payload} differs from {life.payload}")
            judge_delivery = (
                self.state == "pending" or self.policy.retry_after_promotion == "admission_record"
            )
            if judge_delivery and new_delivery != life.delivery:
                diffs.append(f"delivery {new_delivery} differs from {life.delivery}")
            if not diffs:
                return
            reason = " and ".join(diffs)
        env.hit(REJECTED)
        if getattr(ctx.reply, "code", None) != code:
            steps = (ctx.index,) + ((life.row.step,) if life else ())
            env.fail(
                REJECTED,
                steps,
                f"{op.OP} {x} at step {ctx.index} {_code(ctx)} although {reason}: a conflicting "
                f"reuse must fail with {code} and change nothing",
            )

    def _ended(self, ctx: StepCtx, x: str, kind: str, first: Owner) -> None:
        """A reuse of an ID whose lifecycle ended (or that a prompt's staged
        revert ends first): a conflict anywhere but in its own session and
        kind, where it is a new input, not a retry. A freed ID (the policy's
        ``ended_ids``) is a new input wherever it is reused."""
        env = self.env
        op = ctx.op
        code = CONFLICT[kind]
        got = getattr(ctx.reply, "code", None)
        env.hit(NAMESPACE)
        steps = (ctx.index, first.step)
        if not first.freed and (first.copied or first.session != ctx.session or first.type != kind):
            if got != code:
                env.fail(
                    NAMESPACE,
                    steps,
                    f"{op.OP} {x} into session {ctx.session} at step {ctx.index} {_code(ctx)}, "  # type: ignore[union-attr]
                    f"but {x} is {words.held(first)} of session {first.session} (step "
                    f"{first.step}), whose lifecycle ended: reuse in another session or as another "
                    f"kind must fail with {code}, also after the lifecycle ended",
                )
            return
        returned_old = ctx.ok and ctx.result.get("input") == x and x not in ctx.admitted
        if got == code or returned_old:
            where = (
                "a committed revert freed it (ended_ids = freed_by_revert)"
                if first.freed
                else f"the lifecycle of {x} in its own session and kind had ended"
            )
            env.fail(
                NAMESPACE,
                steps,
                f"{op.OP} {x} into session {ctx.session} at step {ctx.index} "  # type: ignore[union-attr]
                f"{'returned a receipt without admitting it' if returned_old else _code(ctx)}, "
                f"but {where}: it is admitted again as a new input, not judged as a retry",
            )

    def _same_receipt(self, ctx: StepCtx, life: Life) -> None:
        """An answered retry returns its original receipt (``life``'s, the
        lifecycle of the input it acknowledged)."""
        if life.receipt is None or life.row.session != ctx.session:
            return
        if life.row.step >= ctx.index or life.state not in ("pending", "visible"):
            return
        self.env.hit(SAME)
        got, want = ctx.result, life.receipt
        if same_json(got, want):
            return  # the same canonical text: field for field the same (most retries)
        keys = sorted(set(got) | set(want))
        diffs = [
            f"{k} {got.get(k)!r} instead of {want.get(k)!r}"
            for k in keys
            if not same_json(got.get(k), want.get(k))
        ]
        if diffs:
            self.env.fail(
                SAME,
                (ctx.index, life.receipt_step or life.row.step),
                f"{ctx.op.OP} at step {ctx.index} returned a receipt for {words.row(life.row)} "  # type: ignore[union-attr]
                f"(now {life.state}) with {'; '.join(diffs)}: an exact retry returns the original "
                f"receipt (step {life.receipt_step}), field for field",
            )

    def _copies(self, ctx: StepCtx) -> None:
        if not ctx.ok:
            return
        self.env.hit(NAMESPACE)
        for mid, held in ctx.collisions:
            self.env.fail(
                NAMESPACE,
                (ctx.index,),
                f"the fork at step {ctx.index} gave a copied message the ID {mid}, which session "
                f"{held} already used: generated IDs never collide with an ID ever admitted or "
                "copied",
            )


class ErrorChecker(Checker):
    """Protocol "Errors" (and the observable half of spec 4.31): an error
    response leaves durable state and open calls exactly as they were. A
    concurrent group's member that began while the runner worked
    (``busy_before``) may show the runner's work in its step: there only
    the events a request appends are the error's."""

    ids = (ERR_NOTHING,)
    ops = None
    refused_only = True

    def end(self, ctx: StepCtx) -> None:
        if not ctx.err:
            return
        env = self.env
        env.hit(ERR_NOTHING)
        events = ctx.step.observed.events
        if ctx.busy_before:
            events = tuple(e for e in events if e.type in REQUEST_EVENTS)
        if events:
            listed = ", ".join(f"{e.type} (seq {e.seq} of {e.session})" for e in events)
            env.fail(
                ERR_NOTHING,
                (ctx.index,),
                f"{_refusal(ctx)} yet appended {listed}: an error changes nothing",
            )
        if ctx.busy_before:
            return  # the views and calls may show the runner's work
        for sid, which, old, new in ctx.view_changes:
            if old != new:
                env.fail(
                    ERR_NOTHING,
                    (ctx.index,),
                    f"{_refusal(ctx)} yet the {which} view of session {sid} changed: an error "
                    "changes nothing",
                )
        if ctx.new_calls or (ctx.calls_changed and set(ctx.calls_before) != set(self.t.open)):
            env.fail(ERR_NOTHING, (ctx.index,), f"{_refusal(ctx)} yet the open model calls changed")


def _refusal(ctx: StepCtx) -> str:
    """A refused request, in words (for a violation's message only: formatted
    when one is found; most refused requests change nothing)."""
    code = getattr(ctx.reply, "code", "?")
    return f"{ctx.op.OP} at step {ctx.index} failed with {code}"  # type: ignore[union-attr]


class ConcurrentRetryChecker(Checker):
    """Spec 4.22: exact retries of one ID sent together, in one concurrent
    group (``trace.record.group_of``), give one admission and identical
    receipts. Judged over the group's steps: every such twin answers as the
    first did (field for field; or each fails), and the group appends at
    most one admission event for an ID its requests name. The sequential
    form, one retry after another, is retry-silent's and retry-same-receipt's."""

    ids = (CONCURRENT,)
    ops = (Prompt, Synthetic, Compact)
    grouped_only = True
    events = ("admitted", "compaction_admitted")

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.group = -1  # the first step of the group being judged
        self.inputs: set[str] = set()  # the IDs the group's requests name
        self.replies: dict[str, tuple[int, Reply]] = {}  # request -> its first step, reply
        self.admitted: dict[str, int] = {}  # input -> admission events in the group

    def _enter(self, ctx: StepCtx) -> bool:
        mark = ctx.group
        if mark is None:
            return False
        if mark.first != self.group:
            self.group, self.inputs, self.replies, self.admitted = mark.first, set(), {}, {}
        return True

    def begin(self, ctx: StepCtx) -> None:
        ident = getattr(ctx.op, "input", None)
        if self._enter(ctx) and ident is not None:
            self.inputs.add(ident)

    def event(self, ctx: StepCtx, ev: Event, sh: SessionShadow) -> None:
        if not self._enter(ctx) or ev.input not in self.inputs:
            return
        n = self.admitted[ev.input] = self.admitted.get(ev.input, 0) + 1
        if n > 1:
            self.env.fail(
                CONCURRENT,
                (self.group, ctx.index),
                f"the group of steps {self.group}..{ctx.index} admitted {ev.input} {n} times "
                f"(seq {ev.seq} of {ev.session}): concurrent exact retries produce one admission",
            )

    def end(self, ctx: StepCtx) -> None:
        op, reply = ctx.op, ctx.reply
        if not self._enter(ctx) or op is None or reply is None or ctx.crashed or ctx.unseen:
            return
        if getattr(op, "input", None) is None:
            return
        wire = op.to_wire()
        wire.pop("now", None)
        key = canonical_json(wire)
        first = self.replies.get(key)
        if first is None:
            self.replies[key] = (ctx.index, reply)
            return
        self.env.hit(CONCURRENT)
        step, earlier = first
        if earlier == reply or (isinstance(earlier, Err) and ctx.err):
            return  # the same receipt; or both failed (a conflict with an older request)
        self.env.fail(
            CONCURRENT,
            (step, ctx.index),
            f"exact retries of {wire['input']} in one group (steps {step} and {ctx.index}) "
            f"answered {_said(earlier)} and {_said(reply)}: concurrent exact retries give "
            "identical receipts",
        )


def _said(reply: Reply) -> str:
    if isinstance(reply, Err):
        return f"error {reply.code}"
    return canonical_json(getattr(reply, "result", None))
