"""Admission: fresh IDs, the row an admission projects, the receipt, omitted
IDs, and durability before the wake (spec 4.2-4.4, 4.23; the seed)."""

from __future__ import annotations

from typing import Any

from ..model.ops import Compact, Prompt, Synthetic
from ..model.values import Event, canonical_json
from . import words
from .base import Checker
from .tracker import EXEC_TYPES, SessionShadow, StepCtx, request_kind, same_json

FRESH = "admission-fresh-id"
PROJECTS = "admission-projects-row"
RECEIPT = "receipt-reflects-request"
OMITTED = "omitted-id-new-input"
BEFORE_WAKE = "admission-before-wake"

ADMISSIONS = ("admitted", "compaction_admitted")


class FreshIdChecker(Checker):
    """Spec 4.2 and 4.4: an ID is admitted only when no lifecycle holds it,
    and only in the session and as the kind it belongs to. The one exception
    to "one admission per ID" that the protocol allows: after its lifecycle
    ended (a committed revert removed it, its barrier was consumed) an ID is
    admitted again in its own session and as its own kind; under ``ended_ids =
    "freed_by_revert"`` an ID a committed revert truncated, in any session
    and as any kind (the tracker's index marks it freed)."""

    ids = (FRESH,)
    events = ADMISSIONS

    def event(self, ctx: StepCtx, ev: Event, sh: SessionShadow) -> None:
        x = ev.input or ""
        self.env.hit(FRESH)
        o = self.t.owners.get(x)
        if o is None:
            self._namespace(ctx, ev, sh, x)
            return
        other = self.t.sessions.get(o.session)
        if o.copied:
            state = f"visible as a fork's copied message in session {o.session}"
            steps: tuple[int, ...] = (
                ctx.index,
                other.visible[x].step if other and x in other.visible else -1,
            )
        else:
            life = self.t.lives.get(x)
            state = (
                f"{life.state} in session {o.session}" if life else f"live in session {o.session}"
            )
            steps = (ctx.index,) + ((life.row.step,) if life else ())
            if life is not None:
                state += f" ({words.row(life.row)}, step {life.row.step})"
        self.env.fail(
            FRESH,
            steps,
            f"input {x} was admitted again at seq {ev.seq} of session {sh.id} (step {ctx.index}) "
            f"while it is still {state}: one admission per lifecycle",
        )

    def _namespace(self, ctx: StepCtx, ev: Event, sh: SessionShadow, x: str) -> None:
        """An ID whose lifecycle ended is admitted again only where it belongs."""
        first = self.t.namespace.get(x)
        if first is None or first.freed:
            return
        kind = self.t.admission_kind(ctx, ev)
        if not first.copied and first.session == sh.id and first.type == kind:
            return  # the protocol's one exception: a new lifecycle in its session and kind
        self.env.fail(
            FRESH,
            (ctx.index, first.step),
            f"input {x} was admitted as {words.a_kind(kind)} at seq {ev.seq} of session "
            f"{sh.id} (step {ctx.index}), but it is {words.held(first)} of session "
            f"{first.session} (step {first.step}): after its lifecycle ended an ID is admitted "
            "again only in its own session and kind",
        )


class ProjectionChecker(Checker):
    """Spec 4.3: an admission at seq s projects one pending row with
    admitted_seq s and the event's time, and its receipt says the same."""

    ids = (PROJECTS,)
    moved_only = True
    ops = (Prompt, Synthetic, Compact)
    events = ADMISSIONS

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.fresh: list[tuple[Event, str]] = []

    def event(self, ctx: StepCtx, ev: Event, sh: SessionShadow) -> None:
        self.fresh.append((ev, sh.id))

    def end(self, ctx: StepCtx) -> None:
        if not self.fresh:
            return
        env = self.env
        for ev, sid in self.fresh:
            x = ev.input or ""
            env.hit(PROJECTS)
            sh = self.t.sessions[sid]
            row = sh.pending.get(x)
            if row is not None and row.seq == ev.seq:  # still pending at the end of the step
                # (loops, not comprehensions, in this checker: a comprehension is a
                # call of its own in Python 3.11, and it judges every admission)
                view = None
                for v in sh.view_pending:
                    if v.input == x:
                        view = v
                        break
                if view is None:
                    env.fail(
                        PROJECTS,
                        (ctx.index,),
                        f"{words.row(row)} was admitted at step {ctx.index} but the pending inbox "
                        f"of session {sid} does not show it",
                    )
                else:
                    wrong = []
                    for name, got, want in (
                        ("admitted_seq", view.admitted_seq, ev.seq),
                        ("time", view.time, ev.time),
                        ("type", view.type, row.type),
                        ("delivery", view.delivery, row.delivery),
                    ):
                        if got != want:
                            wrong.append(f"{name} {got!r} instead of {want!r}")
                    if wrong:
                        env.fail(
                            PROJECTS,
                            (ctx.index,),
                            f"the pending row of {words.row(row)} in session {sid} shows "
                            f"{', '.join(wrong)}: it must be the admission event's projection",
                        )
            result = ctx.result
            if result.get("input") == x and result.get("session", sid) == sid:
                life = self.t.lives.get(x)
                if life is None:
                    continue
                r = life.row
                wrong = []
                for name, want in (
                    ("admitted_seq", r.seq),
                    ("time", r.time),
                    ("type", r.type),
                    ("delivery", r.delivery),
                ):
                    if name in result and result.get(name) != want:
                        wrong.append(f"{name} {result.get(name)!r} instead of {want!r}")
                if wrong:
                    env.fail(
                        PROJECTS,
                        (ctx.index,),
                        f"the receipt of {words.row(r)} says {', '.join(wrong)}, unlike its "
                        f"admission event at seq {ev.seq}",
                    )
        self.fresh = []


class ReceiptChecker(Checker):
    """Protocol "receipt": a receipt names the requested input and session,
    and a fresh admission records the submitted payload (defaults applied)
    and the requested delivery (steer by default)."""

    ids = (RECEIPT,)
    ops = (Prompt, Synthetic, Compact)
    answered = True

    def end(self, ctx: StepCtx) -> None:
        op = ctx.op
        if not ctx.ok or op is None:
            return
        res = ctx.result
        kind = request_kind(op)
        x = res.get("input")
        env = self.env
        env.hit(RECEIPT)
        wrong: list[str] = []
        if res.get("session") != ctx.session:
            wrong.append(f"session {res.get('session')!r} instead of {ctx.session!r}")
        if res.get("type") != kind:
            wrong.append(f"type {res.get('type')!r} instead of {kind!r}")
        if isinstance(op, (Prompt, Synthetic)):
            if op.input is not None and x != op.input:
                wrong.append(f"input {x!r} instead of the requested {op.input!r}")
            if x in ctx.admitted:
                payload = op.payload()
                if not same_json(res.get("data"), payload):
                    wrong.append(
                        f"data {canonical_json(res.get('data'))} instead of "
                        f"{canonical_json(payload)}"
                    )
                want = op.delivery or "steer"
                if res.get("delivery") != want:
                    wrong.append(
                        f"delivery {res.get('delivery')!r} instead of the requested {want!r}"
                    )
        elif res.get("delivery") is not None or res.get("data", {}) != {}:
            wrong.append("a compaction receipt must have delivery null and data {}")
        if wrong:
            env.fail(
                RECEIPT,
                (ctx.index,),
                f"the receipt of {op.OP} {x or '(no ID)'} at step {ctx.index} has "
                f"{'; '.join(wrong)}",
            )


class OmittedIdChecker(Checker):
    """Spec 4.23: an omitted ID always makes a new input."""

    ids = (OMITTED,)
    ops = (Prompt, Synthetic)
    answered = True

    def end(self, ctx: StepCtx) -> None:
        op = ctx.op
        if not ctx.ok or op is None or getattr(op, "input", "") is not None:
            return
        self.env.hit(OMITTED)
        x = ctx.result.get("input")
        if x in ctx.admitted:
            return
        life = self.t.lives.get(x or "")
        since = f" (it is {words.row(life.row)}, step {life.row.step})" if life else ""
        self.env.fail(
            OMITTED,
            (ctx.index,) + ((life.row.step,) if life else ()),
            f"{op.OP} without an ID at step {ctx.index} returned input {x} without admitting a new "
            f"input{since}: an omitted ID always makes a new one",
        )


class BeforeWakeChecker(Checker):
    """The seed: admission is durable before execution is woken. In the
    admitting request no execution activity of the session precedes the
    admission event, and a crash at ``after_admit`` leaves the admission
    durable with nothing woken."""

    ids = (BEFORE_WAKE,)
    moved_only = True
    step_scoped = ("early", "admission", "late")
    ops = (Prompt, Synthetic, Compact)
    events = tuple(sorted({*ADMISSIONS, *EXEC_TYPES}))  # the others it passes over

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.early: Event | None = None
        self.admission: Event | None = None
        self.late: Event | None = None

    def begin(self, ctx: StepCtx) -> None:
        self.early = self.admission = self.late = None

    def event(self, ctx: StepCtx, ev: Event, sh: SessionShadow) -> None:
        if ev.session != ctx.session or not isinstance(ctx.op, (Prompt, Synthetic, Compact)):
            return
        if ev.type in ADMISSIONS:
            if self.admission is None:
                self.admission = ev
            if self.early is not None:
                self.env.fail(
                    BEFORE_WAKE,
                    (ctx.index,),
                    f"the {self.early.type} event at seq {self.early.seq} of session {sh.id} "
                    f"preceded the admission of input {ev.input} at seq {ev.seq} (step "
                    f"{ctx.index}): admission must be durable before execution is woken",
                )
        elif ev.type in EXEC_TYPES:
            if self.admission is None and self.early is None:
                self.early = ev
            elif self.admission is not None and self.late is None:
                self.late = ev

    def end(self, ctx: StepCtx) -> None:
        if self.admission is not None or ctx.crash_point == "after_admit":
            self.env.hit(BEFORE_WAKE)
        if ctx.crash_point != "after_admit":
            return
        op = ctx.op
        if self.admission is None:
            self.env.fail(
                BEFORE_WAKE,
                (ctx.index,),
                f"{op.OP} at step {ctx.index} crashed at after_admit but no admission of session "  # type: ignore[union-attr]
                f"{ctx.session} is durable",
            )
        elif self.late is not None:
            self.env.fail(
                BEFORE_WAKE,
                (ctx.index,),
                f"{op.OP} at step {ctx.index} crashed at after_admit, yet the {self.late.type} "  # type: ignore[union-attr]
                f"event at seq {self.late.seq} shows execution was woken before that point",
            )
