"""The trace viewer: one run as a self-contained HTML page (pure).

A :class:`Page` (a run's steps, what it violated, a few facts about it, its
timeline as inline SVG) in, one HTML document out: inline CSS, no script, no
external resource, so the file opens offline and can be attached to a CI run.
Which run, and where its steps come from (a replay, the store, a shrunk
counterexample), is the caller's business: this module reads nothing.

The page shows, in order:

- what the run violated: each invariant's id, statement and message, with
  links to the steps it cites;
- the timeline (:func:`inboxsim.reports.plots.swimlane_svg`): every mark says
  what it is on hover and links to its step;
- the concurrent groups, when the run has any (below);
- the steps: each one's requests and replies, the events it appended, and
  the views after it (each session's pending rows and transcript, the open
  calls), the sessions it changed first and the others folded away. A crash
  (a kill, or a request that died at a failpoint) and the restart after it
  are shaded; the step that revealed a violation is outlined in red with the
  invariant's statement and message, and the earlier steps it cites are
  marked too;
- the scenario file, when the run is one (a shrunk counterexample).

A concurrent group (``--concurrency N``, or a scenario's ``group`` step)
gets a panel of its own (:mod:`.group_view`): its members side by side, one
lane each with its invoke and complete times where known, the order the group
took effect, and for a group no order explains, the search's explanation.
Each member's step links to its group's panel. A page without groups is
exactly what it was before groups existed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from html import escape

from ..model import Crashed
from ..sim.show import call_text, event_text, message_text, pending_text, reply_text, request_text
from ..trace.record import Step
from ..trace.view import View
from .group_view import STYLE as GROUP_STYLE
from .group_view import GroupPanel, groups_html, step_groups


@dataclass(frozen=True, slots=True)
class Finding:
    """One violation: the invariant, the steps it cites, its message, and the
    invariant's statement."""

    invariant: str
    steps: tuple[int, ...]
    message: str
    statement: str = ""

    @property
    def at(self) -> int | None:
        """The step that revealed it: the last one it cites."""
        return max(self.steps) if self.steps else None


@dataclass(frozen=True, slots=True)
class Page:
    """What a viewer page shows."""

    title: str
    steps: tuple[Step, ...]
    findings: tuple[Finding, ...] = ()
    facts: tuple[tuple[str, str], ...] = ()  # (label, value), shown as a list under the title
    timeline_svg: str = ""  # inline <svg> (plots.swimlane_svg), links to #step-N
    scenario: str | None = None  # the scenario file the steps came from
    links: tuple[tuple[str, str], ...] = ()  # (label, href)
    intro: str = ""
    groups: tuple[GroupPanel, ...] = ()  # the run's concurrent groups (.group_view)


@dataclass(frozen=True, slots=True)
class Request:
    """One request of a step, and its reply."""

    text: str
    reply: str
    crashed: bool  # the target died in it, at a failpoint


@dataclass(frozen=True, slots=True)
class StepView:
    """A step as the page shows it: what was sent, what came back, what it
    appended, and every view after it."""

    index: int
    phase: str
    decision: str
    requests: tuple[Request, ...]  # none for a kill between requests
    events: tuple[str, ...]
    pending: tuple[tuple[str, tuple[str, ...]], ...]  # every session, first seen first
    transcript: tuple[tuple[str, tuple[str, ...]], ...]
    calls: tuple[str, ...]
    changed: frozenset[str]  # the sessions whose pending rows or transcript this step changed
    calls_changed: bool
    state: str  # "crash", "restart" or ""

    @property
    def kill(self) -> bool:
        return not self.requests


def step_views(steps: Iterable[Step]) -> list[StepView]:
    """Each step with the views after it (the trace records only changes:
    fold them, as the harness's own :class:`~inboxsim.trace.view.View` does)."""
    view = View()
    out = []
    for step in steps:
        view.absorb(step.observed)
        changed = frozenset(s for s, _ in step.observed.pending) | frozenset(
            s for s, _ in step.observed.transcript
        )
        requests: tuple[Request, ...] = ()
        if step.request is not None:
            requests = (
                Request(request_text(step), reply_text(step), isinstance(step.reply, Crashed)),
            )
        crashed = step.kind == "crash" or isinstance(step.reply, Crashed)
        out.append(
            StepView(
                step.index,
                step.phase,
                step.decision,
                requests,
                tuple(event_text(e) for e in step.observed.events),
                tuple(
                    (s, tuple(pending_text(r) for r in view.pending.get(s, ())))
                    for s in view.sessions
                ),
                tuple(
                    (s, tuple(message_text(m) for m in view.transcript.get(s, ())))
                    for s in view.sessions
                ),
                tuple(call_text(c) for c in view.calls),
                changed,
                step.observed.calls is not None,
                "crash" if crashed else ("restart" if step.decision == "restart" else ""),
            )
        )
    return out


# --- HTML ---------------------------------------------------------------------

STYLE = """
:root{--bad:#b3261e;--badbg:#fdecea;--crash:#fbe3e3;--restart:#fff3d6;--line:#ddd;--muted:#666}
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:1.5em auto;max-width:1400px;
 padding:0 1em;color:#1d1d1d;line-height:1.4}
h1{font-size:1.5em;margin:.2em 0} h2{font-size:1.2em;margin:1.2em 0 .4em}
code,pre,.mono{font-family:ui-monospace,"SFMono-Regular",Menlo,Consolas,monospace;font-size:.86em}
pre{background:#f6f6f6;padding:.6em .8em;border-radius:4px;overflow-x:auto}
a{color:#0b57d0}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:.15em 1em;margin:.6em 0}
dl.facts dt{color:var(--muted)} dl.facts dd{margin:0}
nav.links a{margin-right:1.2em}
.finding{border:2px solid var(--bad);background:var(--badbg);border-radius:6px;padding:.5em .9em;
 margin:.6em 0}
.finding h2{margin:.1em 0;color:var(--bad);font-size:1.1em}
.statement{font-style:italic}
.held{background:#e6f4ea;color:#14532d;padding:.4em .8em;border-radius:6px;display:inline-block}
.timeline svg{max-width:100%;height:auto;border:1px solid #eee}
.timeline a.mark:hover{opacity:.6}
.key span{display:inline-block;padding:0 .5em;margin-right:.6em;border:1px solid var(--line);
 border-radius:3px}
.step{display:grid;grid-template-columns:7.5em minmax(16em,1.3fr) minmax(12em,1fr)
 minmax(16em,1.4fr);gap:.3em 1em;border-top:1px solid var(--line);padding:.45em .4em;
 scroll-margin-top:1em}
.step.crash,.key .crash{background:var(--crash)}
.step.restart,.key .restart{background:var(--restart)}
.step.cited,.key .cited{box-shadow:inset 4px 0 0 var(--bad)}
.step.violating,.key .violating{outline:3px solid var(--bad);outline-offset:-3px;
 background:var(--badbg)}
.step:target{box-shadow:inset 0 0 0 3px #0b57d0}
.idx a{font-weight:600;text-decoration:none}
.idx .sub{display:block;color:var(--muted);font-size:.8em}
.requests{display:flex;gap:.6em;flex-wrap:wrap;min-width:0} .request{flex:1 1 14em;min-width:0}
.request code,.request .reply{overflow-wrap:anywhere} .step>div{min-width:0}
.request .reply{color:#174ea6} .request.crashed .reply{color:var(--bad);font-weight:600}
.kill{color:var(--bad);font-weight:600}
ul.events{margin:0;padding-left:1.1em} ul.events li{word-break:break-all}
.views .session{margin-bottom:.25em} .views .label{color:var(--muted)}
.views .changed .name{font-weight:700;color:#0b57d0}
.chip{display:inline-block;border:1px solid #ccc;border-radius:3px;padding:0 .3em;margin:1px;
 background:#fafafa}
.empty{color:#999}
.violation-note{grid-column:1/-1;color:var(--bad);padding:.2em 0}
details.others summary{color:var(--muted);cursor:pointer;font-size:.85em}
table.steps{border-collapse:collapse;font-size:.85em;margin:.5em 0;table-layout:fixed;width:100%}
table.steps col.n{width:9em} table.steps td{overflow-wrap:anywhere}
table.steps td,table.steps th{border:1px solid var(--line);padding:.2em .45em;text-align:left;
 vertical-align:top}
table.steps tr.violating td{background:var(--badbg);font-weight:600}
table.steps tr.crash td{background:var(--crash)}
table.steps tr.restart td{background:var(--restart)}
"""


def _chips(items: Sequence[str], empty: str) -> str:
    if not items:
        return f'<span class="empty">{escape(empty)}</span>'
    return "".join(f'<span class="chip mono">{escape(i)}</span>' for i in items)


def _session(name: str, pending: Sequence[str], transcript: Sequence[str], changed: bool) -> str:
    cls = "session changed" if changed else "session"
    return (
        f'<div class="{cls}"><span class="name">{escape(name)}</span> '
        f'<span class="label">pending</span> {_chips(pending, "(none)")} '
        f'<span class="label">transcript</span> {_chips(transcript, "(empty)")}</div>'
    )


def _views(v: StepView, expand: bool) -> str:
    """Every session's views; those the step did not change folded away,
    unless ``expand`` (a step a violation names: the reader wants them all)."""
    transcript = dict(v.transcript)
    shown: list[str] = []
    folded: list[str] = []
    for name, rows in v.pending:
        html = _session(name, rows, transcript.get(name, ()), name in v.changed)
        (shown if expand or name in v.changed or len(v.pending) == 1 else folded).append(html)
    if folded:
        shown.append(
            f'<details class="others"><summary>{len(folded)} other session'
            f"{'s' if len(folded) != 1 else ''} (unchanged)</summary>{''.join(folded)}</details>"
        )
    calls_cls = "session changed" if v.calls_changed else "session"
    shown.append(
        f'<div class="{calls_cls}"><span class="name">open calls</span> '
        f"{_chips(v.calls, '(none)')}</div>"
    )
    return "".join(shown)


def _requests(v: StepView) -> str:
    if v.kill:
        return '<div class="requests"><span class="kill">KILL (crash between requests)</span></div>'
    parts = []
    for r in v.requests:
        cls = "request crashed" if r.crashed else "request"
        reply = f'<div class="reply mono">&rarr; {escape(r.reply)}</div>' if r.reply else ""
        parts.append(f'<div class="{cls}"><code>{escape(r.text)}</code>{reply}</div>')
    return f'<div class="requests">{"".join(parts)}</div>'


def _marks(
    findings: Sequence[Finding],
) -> tuple[dict[int, list[Finding]], dict[int, list[Finding]]]:
    """The steps that revealed a violation, and the earlier steps a violation cites."""
    at: dict[int, list[Finding]] = {}
    cited: dict[int, list[Finding]] = {}
    for f in findings:
        if f.at is None:
            continue
        at.setdefault(f.at, []).append(f)
        for s in f.steps:
            if s != f.at:
                cited.setdefault(s, []).append(f)
    return at, cited


def _step(
    v: StepView, at: list[Finding], cited: list[Finding], group: GroupPanel | None = None
) -> str:
    classes = ["step", v.state] + (["violating"] if at else []) + (["cited"] if cited else [])
    notes = []
    for f in at:
        notes.append(
            f'<div class="violation-note"><b>violates <code>{escape(f.invariant)}</code></b>'
            f"{': ' + escape(f.statement) if f.statement else ''}<br>{escape(f.message)}</div>"
        )
    for f in cited:
        notes.append(
            f'<div class="violation-note">cited by <code>{escape(f.invariant)}</code> '
            f'(revealed at <a href="#step-{f.at}">step {f.at}</a>)</div>'
        )
    state = {"crash": " · crash", "restart": " · restart"}.get(v.state, "")
    member = (
        f'<span class="sub"><a class="group-link" href="#{escape(group.key)}">in a group: '
        f"side by side</a></span>"
        if group is not None
        else ""
    )
    events = (
        '<ul class="events mono">' + "".join(f"<li>{escape(e)}</li>" for e in v.events) + "</ul>"
        if v.events
        else '<span class="empty">no events</span>'
    )
    return (
        f'<article class="{" ".join(c for c in classes if c)}" id="step-{v.index}">'
        f'<div class="idx"><a href="#step-{v.index}">#{v.index}</a>'
        f'<span class="sub">{escape(v.phase)}{state}</span>'
        f'<span class="sub">{escape(v.decision)}</span>{member}</div>'
        f'{_requests(v)}<div>{events}</div><div class="views">{_views(v, bool(at or cited))}</div>'
        f"{''.join(notes)}</article>"
    )


def _findings(findings: Sequence[Finding], groups: Sequence[GroupPanel] = ()) -> str:
    failed = [g for g in groups if g.verdict and g.failed]  # judged by the search, and failed
    if failed:
        links = ", ".join(f'<a href="#{escape(g.key)}">{escape(g.title)}</a>' for g in failed)
        return (
            f'<div class="finding"><h2>{len(failed)} group{"s" if len(failed) > 1 else ""} '
            f"{escape(failed[0].verdict)}</h2><p>No order of the model gives the target's "
            f"replies and state: {links}.</p></div>" + (_findings(findings) if findings else "")
        )
    if not findings:
        return '<p class="held">No invariant was violated.</p>'
    out = []
    for f in findings:
        cites = ", ".join(f'<a href="#step-{s}">step {s}</a>' for s in f.steps)
        out.append(
            f'<div class="finding"><h2>Violation: <code>{escape(f.invariant)}</code></h2>'
            + (f'<p class="statement">{escape(f.statement)}</p>' if f.statement else "")
            + f'<p class="message">{escape(f.message)}</p>'
            + (
                f'<p>Revealed at <a href="#step-{f.at}">step {f.at}</a>; cites {cites}.</p>'
                if f.at is not None
                else ""
            )
            + "</div>"
        )
    return "".join(out)


def _steps(
    views: Sequence[StepView],
    at: dict[int, list[Finding]],
    cited: dict[int, list[Finding]],
    grouped: dict[int, GroupPanel],
) -> list[str]:
    return [
        f'<section class="steps"><h2>Steps ({len(views)})</h2>'
        '<p class="key">Key: <span class="crash">crash</span><span class="restart">restart'
        '</span><span class="violating">violating step</span><span class="cited">cited by a '
        "violation</span> Views are those after the step: the sessions it changed first, in blue."
        "</p>",
        *(
            _step(v, at.get(v.index, []), cited.get(v.index, []), grouped.get(v.index))
            for v in views
        ),
        "</section>",
    ]


def page_html(page: Page) -> str:
    """The viewer page: one self-contained HTML document."""
    views = step_views(page.steps)
    at, cited = _marks(page.findings)
    facts = "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in page.facts)
    links = "".join(f'<a href="{escape(href)}">{escape(label)}</a>' for label, href in page.links)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(page.title)}</title>"
        f"<style>{STYLE}{GROUP_STYLE if page.groups else ''}</style></head><body>",
        f"<header><h1>{escape(page.title)}</h1>",
        f'<p class="intro">{escape(page.intro)}</p>' if page.intro else "",
        f'<dl class="facts">{facts}</dl>' if facts else "",
        f'<nav class="links">{links}</nav>' if links else "",
        "</header>",
        f'<section class="findings">{_findings(page.findings, page.groups)}</section>',
    ]
    if page.timeline_svg:
        parts.append(
            '<section class="timeline"><h2>Timeline</h2><p>One lane per session. Hover a mark '
            "to see what it is; click it to go to its step. Shaded spans run from a crash to its "
            "restart; dashed red lines are the steps a violation cites.</p>"
            f"{page.timeline_svg}</section>"
        )
    if page.groups:
        parts.append(groups_html(page.groups))
    grouped = step_groups(page.groups)
    if views or not page.groups:  # a scenario of groups alone has its panels, no trace steps
        parts += _steps(views, at, cited, grouped)
    if page.scenario is not None:
        parts.append(
            '<section class="scenario"><h2>Scenario file</h2>'
            f"<pre>{escape(page.scenario)}</pre></section>"
        )
    parts.append("</body></html>\n")
    return "\n".join(p for p in parts if p)


def step_table(steps: Sequence[Step], findings: Sequence[Finding]) -> str:
    """A compact table of a short run's steps (the report shows one per
    problem): index, request, reply, events; the violating step highlighted."""
    at, cited = _marks(findings)
    rows = [
        '<table class="steps"><colgroup><col class="n"><col><col><col></colgroup>'
        "<tr><th>step</th><th>request</th><th>reply</th><th>events appended</th></tr>"
    ]
    for v in step_views(steps):
        cls = "violating" if v.index in at else v.state
        request = "KILL" if v.kill else "; ".join(r.text for r in v.requests)
        reply = "; ".join(r.reply for r in v.requests)
        note = "".join(f"<br>violates {escape(f.invariant)}" for f in at.get(v.index, []))
        note += "".join(f"<br>cited by {escape(f.invariant)}" for f in cited.get(v.index, []))
        events = "<br>".join(escape(e) for e in v.events)
        rows.append(
            f'<tr class="{cls}"><td>{v.index}{note}</td><td class="mono">{escape(request)}</td>'
            f'<td class="mono">{escape(reply)}</td><td class="mono">{events}</td></tr>'
        )
    rows.append("</table>")
    return "".join(rows)
