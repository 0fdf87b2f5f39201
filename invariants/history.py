"""Fork and revert: a fork copies settled history up to its cutoff and no
pending input; a committed revert truncates exactly at its boundary; a
prompt commits a staged revert first (spec 4.32-4.35; the seed)."""

from __future__ import annotations

from typing import Any

from ..model.ops import Fork, Prompt, Synthetic
from ..model.values import Event
from ..trace.record import MessageView, PendingView
from . import words
from .base import Checker
from .tracker import SessionShadow, StepCtx, parse

NO_PENDING = "fork-no-pending"
CUTOFF = "fork-cutoff"
TRUNCATES = "revert-truncates"
COMMITS_FIRST = "prompt-commits-revert"


class ForkChecker(Checker):
    ids = (NO_PENDING, CUTOFF)
    step_scoped = ("parent_pending", "parent_rows", "parent_view", "forked")
    ops = (Fork,)
    answered = True
    events = None

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.parent_pending: tuple[PendingView, ...] = ()
        self.parent_rows: list[str] = []
        self.parent_view: tuple[MessageView, ...] = ()
        self.floors: dict[str, tuple[int, int]] = {}  # child -> (floor, fork step)
        self.forked: Event | None = None

    def begin(self, ctx: StepCtx) -> None:
        sh = self.t.sessions.get(ctx.session or "")
        self.parent_pending = sh.view_pending if sh else ()
        self.parent_rows = list(sh.pending) if sh else []
        self.parent_view = sh.view_transcript if sh else ()
        self.forked = None

    def event(self, ctx: StepCtx, ev: Event, sh: SessionShadow) -> None:
        if ev.type == "forked" and isinstance(ctx.op, Fork):
            self.forked = ev
            return
        floor = self.floors.pop(sh.id, None) if self.floors else None
        if floor is None:
            return
        # spec 4.33: the child's own events come after every copied message.
        self.env.hit(CUTOFF)
        if ev.seq <= floor[0]:
            self.env.fail(
                CUTOFF,
                (floor[1], ctx.index),
                f"the first own event of fork {sh.id} ({ev.type} at step {ctx.index}) has seq "
                f"{ev.seq}, not after its copied history (up to seq {floor[0]})",
            )

    def end(self, ctx: StepCtx) -> None:
        op = ctx.op
        if not isinstance(op, Fork) or not ctx.ok:
            return
        env = self.env
        child = self.t.sessions.get(op.child)
        parent = self.t.sessions.get(op.session)
        if child is None or parent is None:
            return
        # fork-no-pending
        env.hit(NO_PENDING)
        if child.view_pending or child.pending:
            shown = [v.input for v in child.view_pending] or list(child.pending)
            env.fail(
                NO_PENDING,
                (ctx.index,),
                f"fork {op.child} of {op.session} at step {ctx.index} starts with pending input "
                f"{words.ids(shown)}: a fork never carries pending input",
            )
        if parent.view_pending != self.parent_pending or list(parent.pending) != self.parent_rows:
            env.fail(
                NO_PENDING,
                (ctx.index,),
                f"forking {op.session} at step {ctx.index} changed its pending inbox from "
                f"{words.ids([v.input for v in self.parent_pending])} to "
                f"{words.ids([v.input for v in parent.view_pending])}: the parent's inbox is "
                "untouched",
            )
        # A copy names its root message; an ID may be reused once its first
        # lifecycle ended, so only a root that is no visible message of the
        # parent and is pending there was carried over from the inbox.
        pending_ids = {v.input for v in self.parent_pending} | set(self.parent_rows)
        roots = {m.copied_from or m.id for m in self.parent_view}
        carried = [
            m.id
            for m in child.view_transcript
            if (m.copied_from or m.id) in pending_ids and (m.copied_from or m.id) not in roots
        ]
        if carried:
            env.fail(
                NO_PENDING,
                (ctx.index,),
                f"fork {op.child} at step {ctx.index} shows {words.ids(carried)} copied from input "
                f"that was pending in {op.session}: pending input is never copied",
            )
        self._cutoff(ctx, op, child)

    def _cutoff(self, ctx: StepCtx, op: Fork, child: SessionShadow) -> None:
        env = self.env
        env.hit(CUTOFF)
        originals = list(self.parent_view)
        cut = None
        if op.before is not None:
            boundary = next((m for m in originals if m.id == op.before), None)
            if boundary is None:
                return
            cut = boundary.seq
            originals = [m for m in originals if m.seq < cut]
        copies = list(child.view_transcript)
        problems = []
        if len(copies) != len(originals):
            problems.append(
                f"it copied {words.ids([c.copied_from or c.id for c in copies])} where the history "
                f"before the cutoff is {words.ids([m.id for m in originals])}"
            )
        else:
            for c, m in zip(copies, originals, strict=True):
                root = m.copied_from or m.id
                if c.seq != m.seq or c.type != m.type or c.copied_from != root or c.id == m.id:
                    problems.append(
                        f"copy {c.id} (seq {c.seq}, copied_from {c.copied_from}) does not copy "
                        f"{m.id} (seq {m.seq}, {words.kind_word(m.type)}, root {root}) with a new "
                        "ID"
                    )
                    break
        data = parse(self.forked.data) if self.forked is not None else {}
        parent_seq = data.get("parent_seq", data.get("parentSeq"))
        if cut is not None and isinstance(parent_seq, int) and parent_seq != cut - 1:
            problems.append(
                f"its parent_seq is {parent_seq}, not the boundary's seq {cut} minus one"
            )
        if problems:
            env.fail(
                CUTOFF,
                (ctx.index,),
                f"fork {op.child} of {op.session} at step "
                f"{ctx.index}{' before ' + op.before if op.before else ''}: {'; '.join(problems)}",
            )
        floor = max(
            [c.seq for c in copies] + ([parent_seq] if isinstance(parent_seq, int) else []),
            default=-1,
        )
        self.floors[op.child] = (floor, ctx.index)


class RevertChecker(Checker):
    """Spec 4.34 (committed revert truncation) and 4.35 (a prompt commits a
    staged revert before its admission; a synthetic input never does)."""

    ids = (TRUNCATES, COMMITS_FIRST)
    step_scoped = ("staged",)
    events = ("revert_committed", "admitted")
    still = (Prompt,)  # nothing committed: only a prompt under a staged revert
    refused = ()

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.cuts: list[tuple[str, int, list[tuple[str, int, str]], list[str], str | None]] = []
        self.committed: dict[str, int] = {}
        self.admitted_first: dict[str, int] = {}
        self.staged: str | None = None

    def begin(self, ctx: StepCtx) -> None:
        if not isinstance(ctx.op, (Prompt, Synthetic)):
            self.staged = None
            return
        sh = self.t.sessions.get(ctx.session or "")
        self.staged = sh.staged if sh is not None else None

    def event(self, ctx: StepCtx, ev: Event, sh: SessionShadow) -> None:
        if ev.type == "admitted":
            self.admitted_first.setdefault(sh.id, ev.seq)
            return
        self.committed.setdefault(sh.id, ev.seq)
        env = self.env
        env.hit(TRUNCATES)
        to = parse(ev.data).get("to") or sh.staged
        boundary = sh.visible.get(to or "")
        if boundary is None:
            env.fail(
                TRUNCATES,
                (sh.staged_step, ctx.index),
                f"revert committed at seq {ev.seq} of session {sh.id} (step {ctx.index}) to {to}, "
                "which is not a visible message",
            )
            return
        cut = env.policy.revert_cut(boundary.seq)
        removed = [(m.id, m.seq, "transcript") for m in sh.visible.values() if m.seq >= cut]
        removed += [
            (r.input, r.seq, "pending")
            for r in sh.pending.values()
            if r.type != "compaction" and r.seq >= cut
        ]
        kept = [m.id for m in sh.visible.values() if m.seq < cut]
        kept += [r.input for r in sh.pending.values() if r.type != "compaction" and r.seq < cut]
        barrier = sh.barrier.input if sh.barrier else None
        self.cuts.append((sh.id, cut, removed, kept, barrier))

    def end(self, ctx: StepCtx) -> None:
        if not self.committed and self.staged is None:
            # No revert committed in this step (so no cut) and none staged
            # under a prompt: the steps with nothing to judge, most of them.
            if self.admitted_first:
                self.admitted_first.clear()
            return
        for sid, cut, removed, kept, barrier in self.cuts:
            self._truncated(ctx, sid, cut, removed, kept, barrier)
        self.cuts = []
        op = ctx.op
        sid = ctx.session or ""
        if isinstance(op, Synthetic) and sid in self.committed:
            self.env.hit(COMMITS_FIRST)
            self.env.fail(
                COMMITS_FIRST,
                (ctx.index,),
                f"synthetic input at step {ctx.index} committed the staged revert of {sid}: a "
                "synthetic input never commits a staged revert",
            )
        elif isinstance(op, Prompt) and self.staged is not None and ctx.ok:
            self.env.hit(COMMITS_FIRST)
            x = ctx.result.get("input")
            commit = self.committed.get(sid)
            admit = self.admitted_first.get(sid)
            sh = self.t.sessions[sid]
            if self.env.policy.staged_revert_prompt == "admits":
                if commit is not None:
                    self.env.fail(
                        COMMITS_FIRST,
                        (sh.staged_step, ctx.index),
                        f"prompt {x} at step {ctx.index} committed the revert to {self.staged} "
                        f"(seq {commit}), but under staged_revert_prompt = admits a prompt leaves "
                        "a staged revert staged",
                    )
            elif commit is None:
                self.env.fail(
                    COMMITS_FIRST,
                    (sh.staged_step, ctx.index),
                    f"prompt {x} succeeded at step {ctx.index} while a revert to {self.staged} was "
                    "staged, but no revert_committed event came with it",
                )
            elif admit is not None and admit < commit:
                self.env.fail(
                    COMMITS_FIRST,
                    (sh.staged_step, ctx.index),
                    f"prompt {x} at step {ctx.index} was admitted at seq {admit}, before the "
                    f"staged revert was committed at seq {commit}",
                )
            elif x not in sh.pending and x not in sh.visible:
                self.env.fail(
                    COMMITS_FIRST,
                    (ctx.index,),
                    f"prompt {x} at step {ctx.index} did not survive the revert it committed",
                )
        self.committed.clear()
        self.admitted_first.clear()

    def _truncated(
        self,
        ctx: StepCtx,
        sid: str,
        cut: int,
        removed: list[tuple[str, int, str]],
        kept: list[str],
        barrier: str | None,
    ) -> None:
        env = self.env
        sh = self.t.sessions[sid]
        shown = {(v.input, v.admitted_seq) for v in sh.view_pending}
        shown |= {(m.id, m.seq) for m in sh.view_transcript}
        present = {x for x, _ in shown}
        survived = [f"{x} (seq {seq})" for x, seq, _ in removed if (x, seq) in shown]
        lost = [x for x in kept if x not in present]
        problems = []
        if survived:
            problems.append(f"{', '.join(survived)} survived it")
        if lost:
            problems.append(f"{words.ids(lost)}, before the cut, disappeared")
        if barrier is not None and barrier not in present:
            problems.append(f"it removed compaction barrier {barrier}")
        if problems:
            env.fail(
                TRUNCATES,
                (ctx.index,),
                f"the revert committed in {sid} at step {ctx.index} cuts at seq {cut}, but "
                f"{' and '.join(problems)}: a committed revert truncates exactly at its boundary",
            )
