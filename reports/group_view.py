"""A concurrent group as the trace viewer shows it (pure): each member's
request and reply side by side, one lane per member with its invoke and
complete times, then the order the group took effect and, for a group no
order explains, the linearizability search's explanation.

Two sources give a :class:`GroupPanel`:

- a group judged by the group driver (:func:`check_panel`, a
  :class:`~inboxsim.search.groups.GroupCheck`: ``inboxsim run FILE`` of a
  scenario with a ``group`` step): the members in the group's own order
  (``r0``, ``r1``, ...), the adapter's invoke and complete times, the order
  the search found (requests and runner transitions), or the explanation;
- a recorded trace (:func:`trace_panels`: ``sweep``/``replay``/``conformance
  --concurrency N``): a group's members are consecutive steps along the order
  found, each labelled with the group's first step (``trace/record.py``); the
  trace keeps no times, so the lanes are in the order found and say so, and
  the order lists each member with the runner's work the order put after it
  (the events its step appended);
- a replayed seed on the model (``replay --html``), run through a
  :class:`GroupRecorder`: the trace's groups as the model served them, each
  request a lane in the group's own order with the model's clock (decisions)
  and the order of every decision, the runner's transitions included.

:func:`groups_html` renders the panels; ``viewer.py`` places them on the page.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from html import escape
from typing import NamedTuple

from ..model import Op, Policy
from ..search.compare import said
from ..search.groups import GroupCheck
from ..search.linearize import Illegal, Legal, describe, shown_words
from ..sim.show import event_text, reply_text, request_text
from ..targets.group import GroupReply, GroupSteps
from ..targets.target import ModelTarget
from ..trace.record import Step, group_of

LEGAL, ILLEGAL, UNDECIDED = "legal", "not linearizable", "undecided"


@dataclass(frozen=True, slots=True)
class Lane:
    """One member of a group: its request and reply, and when the adapter
    issued it and saw its outcome (None: not known; ``completed`` None with
    ``invoked`` set: no outcome came back)."""

    name: str  # "r0" (the group's own order) or "#12" (the trace step)
    request: str
    reply: str
    invoked: float | None = None
    completed: float | None = None
    step: int | None = None  # the trace step that records it
    note: str = ""


@dataclass(frozen=True, slots=True)
class Move:
    """One transition of the order found: a member's request (``lane``) or
    the runner's work (``lane`` None); ``then``: the events it appended."""

    text: str
    lane: str | None = None
    step: int | None = None
    then: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class GroupPanel:
    """What the viewer shows of one group (see the module docstring)."""

    key: str  # the HTML anchor
    title: str
    lanes: tuple[Lane, ...]
    order: tuple[Move, ...]  # empty: no order was found
    verdict: str  # LEGAL, ILLEGAL, UNDECIDED, or "" (a recorded run: judged by the checkers)
    explanation: str = ""
    after: tuple[tuple[str, str], ...] = ()  # (session, what the target showed after the group)
    violations: tuple[str, ...] = ()  # the checkers' findings at its steps

    @property
    def failed(self) -> bool:
        return self.verdict in (ILLEGAL, UNDECIDED) or bool(self.violations)

    @property
    def steps(self) -> tuple[int, ...]:
        return tuple(lane.step for lane in self.lanes if lane.step is not None)


# --- from the group driver ------------------------------------------------------------


def check_panel(check: GroupCheck, number: int) -> GroupPanel:
    """Step ``number`` of a scenario, as judged by the group driver."""
    group, verdict = check.group, check.verdict
    points = dict(enumerate(check.crash_at))
    lanes = tuple(
        Lane(
            f"r{i}",
            describe(r.op),
            said(r.returned),
            r.invoked,
            r.completed,
            note=f"asked to crash at {points[i]}" if points.get(i) else "",
        )
        for i, r in enumerate(group.requests)
    )
    order: tuple[Move, ...] = ()
    words = UNDECIDED
    if isinstance(verdict, Legal):
        words = LEGAL
        order = tuple(
            Move(m.describe(group), None if m.request is None else f"r{m.request}")
            for m in verdict.order
        )
    elif isinstance(verdict, Illegal):
        words = ILLEGAL
    n = len(group.requests)
    what = f"a group of {n} requests issued together" if n > 1 else "one request"
    kill = ", the target killed in it" if group.killed else ""
    return GroupPanel(
        f"group-step-{number}",
        f"Step {number}: {what}{kill}",
        lanes,
        order,
        words,
        "" if words == LEGAL else check.explain(),
        tuple((sid, shown_words(group.after[sid])) for sid in sorted(group.after)),
    )


def kill_panel(number: int) -> GroupPanel:
    """A scenario's ``kill = true`` step: the target crashed between steps."""
    return GroupPanel(
        f"group-step-{number}", f"Step {number}: kill (the target restarted)", (), (), ""
    )


# --- from a recorded trace -------------------------------------------------------------


def trace_panels(
    steps: Sequence[Step],
    findings: Iterable[tuple[str, int | None, str]] = (),
    served: Sequence[Served] = (),
) -> tuple[GroupPanel, ...]:
    """Every concurrent group of a trace; ``findings``: (invariant, the step
    that revealed it, message), each shown on the group that holds the step;
    ``served``: the groups as the model served them, in the run's order
    (:class:`GroupRecorder`), which gives each its lanes' times."""
    members: dict[int, list[Step]] = {}
    for step in steps:
        mark = group_of(step.decision)
        if mark is not None:
            members.setdefault(mark.first, []).append(step)
    found = list(findings)
    panels = []
    timed = len(served) == len(members)  # else (not this run's): the trace alone
    for n, (first, group) in enumerate(members.items()):
        indexes = {s.index for s in group}
        race = group[0].decision.partition(": ")[2]
        lanes, order = _lanes_and_order(group) if not timed else _served(group, served[n])
        panels.append(
            GroupPanel(
                f"group-{first}",
                f"Steps {group[0].index}-{group[-1].index}: a group of {len(lanes)} requests "
                f"issued together" + (f" ({race})" if race else ""),
                lanes,
                order,
                "",
                violations=tuple(
                    f"{inv} (revealed at step {at}): {message}"
                    for inv, at, message in found
                    if at in indexes
                ),
            )
        )
    return tuple(panels)


def _lanes_and_order(group: Sequence[Step]) -> tuple[tuple[Lane, ...], tuple[Move, ...]]:
    """A group from its steps alone: a lane per member in the order found,
    and that order, each member with the events its step appended."""
    lanes = tuple(
        Lane(
            f"#{s.index}",
            request_text(s),
            reply_text(s),
            step=s.index,
            note="the runner still had work after it" if _busy(s) else "",
        )
        for s in group
    )
    order = tuple(
        Move(
            request_text(s),
            f"#{s.index}",
            s.index,
            tuple(event_text(e) for e in s.observed.events),
        )
        for s in group
    )
    return lanes, order


def _served(group: Sequence[Step], served: Served) -> tuple[tuple[Lane, ...], tuple[Move, ...]]:
    """A group as the model served it: a lane per request in the group's own
    order (``r0``, ...), its step, reply and times (the model's clock counts
    its decisions: every request invoked at 0, completed at the decision that
    placed it), and the order of every decision, the runner's included."""
    step = {p: s for p, s in zip(served.positions, group, strict=False)}  # a run may stop mid-group
    lanes = []
    for k, (op, outcome) in enumerate(zip(served.ops, served.reply.outcomes, strict=True)):
        s = step.get(k)
        completed = None if outcome is None else outcome.get("completed")
        lanes.append(
            Lane(
                f"r{k}",
                request_text(s) if s is not None else describe(op),
                reply_text(s) if s is not None else "(not recorded: the run stopped before it)",
                None if outcome is None else float(outcome["invoked"]),
                None if completed is None else float(completed),
                None if s is None else s.index,
            )
        )
    order = []
    for pause in served.reply.pauses:
        i = pause.get("request")
        if not isinstance(i, int):  # a runner transition
            order.append(Move(str(pause.get("point"))))
            continue
        member = step.get(i)
        what = request_text(member) if member is not None else describe(served.ops[i])
        order.append(Move(f"r{i} {what}", f"r{i}", None if member is None else member.index))
    return tuple(lanes), tuple(order)


class Served(NamedTuple):
    """A group as the model served it: its requests in the group's order,
    the member positions along the order the trace records, and the model's
    answer (wire outcomes with times, and every decision taken)."""

    ops: tuple[Op, ...]
    positions: tuple[int, ...]
    reply: GroupReply


class GroupRecorder(ModelTarget):
    """The reference model as a run drives it (``run(target=...)``), which
    also remembers each concurrent group as the model served it
    (:class:`Served`): the page of a replayed seed shows its times and every
    decision. The group is served twice, through the model's own ``group``
    (for the outcomes and the decisions) and then as the run takes it: from
    the same state and schedule, the same decisions (the state is a value),
    so the run, its trace and its hash are those of the plain model."""

    def __init__(self, policy: Policy, step_limit: int) -> None:
        super().__init__(policy, step_limit)
        self.served: list[Served] = []

    def group_steps(
        self, ops: list[Op], schedule: list[int], crash_at: Sequence[str | None] = ()
    ) -> GroupSteps:
        if any(crash_at):  # the model's own group op has no kill: the trace alone shows it
            return super().group_steps(ops, schedule, crash_at)
        before = self.state
        reply, _ = self.group(list(ops), list(schedule))
        self.state = before
        steps = super().group_steps(ops, schedule)
        self.served.append(Served(tuple(ops), tuple(m.position for m in steps.members), reply))
        return steps


def _busy(step: Step) -> bool:
    mark = group_of(step.decision)
    return mark is not None and mark.busy


def step_groups(panels: Iterable[GroupPanel]) -> dict[int, GroupPanel]:
    """The panel each trace step belongs to."""
    return {s: p for p in panels for s in p.steps}


# --- HTML ----------------------------------------------------------------------------

STYLE = """
.group{border:1px solid var(--line);border-radius:6px;padding:.5em .9em;margin:.7em 0;
 scroll-margin-top:1em}
.group.failed{border:2px solid var(--bad);background:var(--badbg)}
.group summary{cursor:pointer} .group h3{font-size:1.05em;margin:.2em 0 .4em;display:inline}
.group .verdict{font-weight:600} .group.failed .verdict{color:var(--bad)}
.lanes{display:grid;gap:.6em;margin:.4em 0}
.lane{border:1px solid var(--line);border-radius:4px;padding:.35em .5em;background:#fff;
 min-width:0}
.lane .name{font-weight:700} .lane code,.lane .reply{overflow-wrap:anywhere}
.lane .reply{color:#174ea6} .lane .times,.lane .note{color:var(--muted);font-size:.85em}
.lanes-svg svg{max-width:100%;height:auto}
ol.order{margin:.2em 0;padding-left:1.6em} ol.order li.runner{color:var(--muted)}
ol.order ul{margin:0;padding-left:1.1em;font-size:.85em;color:var(--muted)}
pre.explanation{white-space:pre-wrap;border-left:4px solid var(--bad)}
"""


def _time(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def _lane(key: str, lane: Lane) -> str:
    name = (
        f'<a class="name" href="#step-{lane.step}">{escape(lane.name)}</a>'
        if lane.step is not None
        else f'<span class="name">{escape(lane.name)}</span>'
    )
    times = ""
    if lane.invoked is not None:
        done = "never (no outcome came back)" if lane.completed is None else _time(lane.completed)
        times = (
            f'<div class="times">invoked <span class="invoked">{_time(lane.invoked)}</span>, '
            f'completed <span class="completed">{escape(done)}</span></div>'
        )
    note = f'<div class="note">{escape(lane.note)}</div>' if lane.note else ""
    reply = f'<div class="reply mono">&rarr; {escape(lane.reply)}</div>' if lane.reply else ""
    return (
        f'<div class="lane" id="{escape(key)}-{escape(lane.name.lstrip("#"))}">{name} '
        f"<code>{escape(lane.request)}</code>"
        f"{reply}{times}{note}</div>"
    )


def lanes_svg(lanes: Sequence[Lane], width: int = 640) -> str:
    """Each member's span from invoke to complete on one time axis (an open
    bar: no outcome came back), a title on each saying what it is."""
    timed = [lane for lane in lanes if lane.invoked is not None]
    if not timed:
        return ""
    ends = [t for lane in timed for t in (lane.invoked, lane.completed) if t is not None]
    low, high = min(ends), max(ends)
    span = (high - low) or 1.0
    left, right, row = 44, 16, 22
    scale = (width - left - right) / span
    height = row * len(timed) + 24
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="invoke and complete times">'
    ]
    for k, lane in enumerate(timed):
        assert lane.invoked is not None
        y = 6 + k * row
        x0 = left + (lane.invoked - low) * scale
        x1 = left + ((lane.completed if lane.completed is not None else high) - low) * scale
        done = "no outcome" if lane.completed is None else f"completed {_time(lane.completed)}"
        style = 'fill="#0b57d0"' if lane.completed is not None else 'fill="#fff" stroke="#b3261e"'
        parts.append(
            f'<text x="4" y="{y + 12}" font-size="12">{escape(lane.name)}</text>'
            f'<rect class="span" x="{x0:.1f}" y="{y}" width="{max(x1 - x0, 2):.1f}" height="14" '
            f"{style}><title>{escape(lane.name)} {escape(lane.request)}: invoked "
            f"{_time(lane.invoked)}, {done}</title></rect>"
        )
    axis = 6 + len(timed) * row
    parts.append(
        f'<line x1="{left}" y1="{axis}" x2="{width - right}" y2="{axis}" stroke="#999"/>'
        f'<text x="{left}" y="{axis + 14}" font-size="11">{_time(low)}</text>'
        f'<text x="{width - right}" y="{axis + 14}" font-size="11" text-anchor="end">'
        f"{_time(high)}</text></svg>"
    )
    return "".join(parts)


def _order(panel: GroupPanel) -> str:
    if not panel.order:
        return (
            '<p class="no-order"><b>No order found</b> that gives the target\'s replies and '
            "state.</p>"
        )
    items = []
    for m in panel.order:
        then = (
            "<ul>" + "".join(f"<li class=mono>{escape(e)}</li>" for e in m.then) + "</ul>"
            if m.then
            else ""
        )
        head = f'<a href="#step-{m.step}">#{m.step}</a> ' if m.step is not None else ""
        cls = "request" if m.lane is not None else "runner"
        items.append(f'<li class="{cls}">{head}<code>{escape(m.text)}</code>{then}</li>')
    if any(m.then for m in panel.order):  # a recorded trace: the members' steps
        what = (
            "The order the group took effect, each member with the events its step appended "
            "(the runner's work the order put after it):"
        )
    else:
        who = "the search found" if panel.verdict else "the group took effect"
        what = f"The order {who} (each request's own effect and the runner's transitions):"
    return f'<p>{what}</p><ol class="order">{"".join(items)}</ol>'


FOLD = 8  # more groups than this on a page: those that held are folded


def group_html(panel: GroupPanel, fold: bool = False) -> str:
    """One group: the lanes side by side, the time axis, the order, the
    explanation; ``fold``: folded unless it failed (a link to it opens it)."""
    cls = "group failed" if panel.failed else "group"
    verdict = panel.verdict or ("violated" if panel.violations else "")
    head = f' <span class="verdict">· {escape(verdict)}</span>' if verdict else ""
    shown = panel.failed or not fold
    parts = [
        f'<details class="{cls}" id="{escape(panel.key)}"{" open" if shown else ""}>'
        f"<summary><h3>{escape(panel.title)}{head}</h3></summary>"
    ]
    if panel.lanes:
        columns = f"repeat({len(panel.lanes)},minmax(12em,1fr))"
        lanes = "".join(_lane(panel.key, lane) for lane in panel.lanes)
        parts.append(f'<div class="lanes" style="grid-template-columns:{columns}">{lanes}</div>')
        svg = lanes_svg(panel.lanes)
        if svg:
            parts.append(f'<div class="lanes-svg">{svg}</div>')
        parts.append(_order(panel))
    if panel.after and not panel.explanation:  # the explanation says it too
        parts.append(
            '<p>What the target showed after it:</p><ul class="after mono">'
            + "".join(f"<li>{escape(s)}: {escape(w)}</li>" for s, w in panel.after)
            + "</ul>"
        )
    for v in panel.violations:
        parts.append(f'<p class="violation-note">violates {escape(v)}</p>')
    if panel.explanation:
        parts.append(f'<pre class="explanation">{escape(panel.explanation)}</pre>')
    parts.append("</details>")
    return "".join(parts)


def groups_html(panels: Sequence[GroupPanel]) -> str:
    failed = sum(1 for p in panels if p.failed)
    timed = any(lane.invoked is not None for p in panels for lane in p.lanes)
    fold = len(panels) > FOLD
    when = (
        "when it was invoked and completed (the adapter's clock; on the model, its decisions)"
        if timed
        else "its step (a trace records a group's members along the order found and keeps no "
        "times: the lanes are in that order)"
    )
    return (
        f'<section class="groups"><h2>Concurrent groups ({len(panels)}'
        + (f", {failed} failed" if failed else "")
        + f")</h2><p>Each member of a group is a lane: its request, its reply and {when}. Below "
        "the lanes, the order the group took effect; a group no order explains shows why."
        + (" Groups that held are folded: click one to open it." if fold else "")
        + "</p>"
        + "".join(group_html(p, fold) for p in panels)
        + "</section>"
    )
