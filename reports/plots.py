"""The report's figures, drawn with matplotlib's Agg backend into PNG bytes.

:func:`load_plot_data` is the one function that queries; each ``*_png``
function draws from plain values. PNGs are byte-stable for the same data:
fixed sizes and dpi, no wall-clock metadata (python-ecosystem.md, section 5).
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

Row = tuple[Any, ...]
DPI = 100
PALETTE = {"steer": "#1f77b4", "queue": "#ff7f0e", None: "#7f7f7f"}


@dataclass(frozen=True, slots=True)
class RunDetail:
    """One run, for the swimlane and the inbox-depth plot."""

    run_id: int
    seed: int | None
    policy: str
    verdict: str
    steps: int
    events: list[Row]  # step, session, type, input, delivery
    crashes: list[int]  # crash steps: a kill, or a request that died at a failpoint
    restarts: list[int]  # restart steps (hello after a crash)
    violating: list[tuple[str, list[int]]]  # invariant, steps
    depth: list[Row]  # step, session, depth
    sessions: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class PlotData:
    run: RunDetail | None
    latency: list[Row]  # policy, delivery, n, mean, p5, p25, p50, p75, p95, max
    violations: list[Row]  # invariant, policy, runs_violated
    probes: list[Row]  # policy, probe, runs_hit, runs


def pick_run(con: Any) -> int | None:
    """The first failing run, else a representative one: the run whose step
    count is the median (so neither a trivial nor an outlier run)."""
    row = con.execute("SELECT min(run_id) FROM runs WHERE verdict = 'violated'").fetchone()
    if row and row[0] is not None:
        return int(row[0])
    row = con.execute(
        "SELECT run_id FROM runs ORDER BY ops, run_id LIMIT 1 OFFSET (SELECT count(*) // 2 FROM runs)"
    ).fetchone()
    return None if row is None else int(row[0])


def run_detail(
    steps: Sequence[Any],
    violations: Sequence[tuple[str, Sequence[int]]],
    policy: str,
    seed: int | None = None,
    run_id: int = 0,
) -> RunDetail:
    """A run's :class:`RunDetail` from its trace's steps (pure): the events
    each step appended (admissions and promotions with their delivery), the
    crashes (a kill, or a request that died at a failpoint), the restarts,
    the violating steps, and each session's pending depth where it changed."""
    from ..model import Crashed

    events, depth, crashes, restarts = [], [], [], []
    delivery: dict[tuple[str, str | None], str | None] = {}
    for s in steps:
        for e in s.observed.events:
            d = None
            if e.type == "admitted":
                d = json.loads(e.data).get("delivery")
                delivery[(e.session, e.input)] = d
            elif e.type == "promoted":
                d = delivery.get((e.session, e.input))
            events.append((s.index, e.session, e.type, e.input, d))
        for session, rows in s.observed.pending:
            depth.append((s.index, session, len(rows)))
        if s.kind == "crash" or isinstance(s.reply, Crashed):
            crashes.append(s.index)
        if s.decision == "restart":
            restarts.append(s.index)
    return RunDetail(
        run_id,
        seed,
        policy,
        "violated" if violations else "held",
        len(steps),
        events,
        crashes,
        restarts,
        [(invariant, list(cited)) for invariant, cited in violations],
        depth,
        sorted({e[1] for e in events} | {d[1] for d in depth}),
    )


def load_plot_data(con: Any, run_id: int | None) -> PlotData:
    detail = None
    if run_id is not None:
        from .traces import stored_trace

        found = stored_trace(con, run_id)
        if found is not None:
            run, trace = found
            cited = [(v[0], v[1]) for v in run.violations]
            detail = run_detail(trace.steps, cited, run.policy, run.seed, run.run_id)
    return PlotData(
        detail,
        con.execute(
            "SELECT policy, delivery, count(*), avg(latency), quantile_cont(latency, 0.05), "
            "quantile_cont(latency, 0.25), quantile_cont(latency, 0.5), quantile_cont(latency, 0.75), "
            "quantile_cont(latency, 0.95), max(latency) FROM promotion_latency "
            "GROUP BY ALL ORDER BY policy, delivery"
        ).fetchall(),
        con.execute(
            "SELECT invariant, policy, runs_violated FROM violations_by_invariant ORDER BY invariant, policy"
        ).fetchall(),
        con.execute(
            "SELECT policy, probe, runs_hit, runs FROM probe_coverage ORDER BY probe, policy"
        ).fetchall(),
    )


# --- drawing -------------------------------------------------------------------


def _figure(width: float, height: float) -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure  # no pyplot: no global state, no GUI

    fig = Figure(figsize=(width, height), dpi=DPI)
    return fig, fig.add_subplot(1, 1, 1)


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    # No "Software" key: the bytes then do not change with matplotlib's version.
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    return buf.getvalue()


def _empty(ax: Any, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="#666")
    ax.set_xticks([])
    ax.set_yticks([])


_MARKS = {
    # event type -> (label, marker, colour); admissions are coloured by delivery instead
    "promoted": ("promoted", "o", "#2ca02c"),
    "step_started": ("model call opened", "^", "#9467bd"),
    "compaction_started": ("model call opened", "^", "#9467bd"),
    "step_ended": ("model answered", "v", "#8c564b"),
    "compaction_ended": ("model answered", "v", "#8c564b"),
    "step_failed": ("model answered (error)", "x", "#d62728"),
    "compaction_failed": ("model answered (error)", "x", "#d62728"),
}


Mark = tuple[str, list[tuple[int, str]]]  # an artist's gid, and per point: (step, hover text)


def _mark_title(step: int, session: str, label: str, kind: str, input_id: str | None) -> str:
    who = f" {input_id}" if input_id else ""
    return f"step {step}, session {session}: {label}{who} (event {kind})"


def _draw_swimlane(run: RunDetail) -> tuple[Any, list[Mark]]:
    """The swimlane figure, and what each of its marks is (for the SVG's
    hover titles): one artist per legend label, its points in order."""
    lanes = {s: i for i, s in enumerate(run.sessions)}
    fig, ax = _figure(12, max(3.0, 1.2 + 0.6 * len(lanes)))
    marks: list[Mark] = []
    for n, crash in enumerate(run.crashes):
        end = next((r for r in run.restarts if r >= crash), crash)
        span = ax.axvspan(
            crash - 0.5, end + 0.5, color="#ffcccc", alpha=0.6, lw=0, label="crash until restart"
        )
        span.set_gid(f"crash-{n}")
        until = f" until the restart at step {end}" if end != crash else ""
        marks.append((f"crash-{n}", [(crash, f"step {crash}: crash{until}")]))
    for n, (invariant, steps) in enumerate(run.violating):
        for k, s in enumerate(steps):
            line = ax.axvline(s, color="#d62728", lw=1.5, ls="--", label=f"violation: {invariant}")
            line.set_gid(f"violation-{n}-{k}")
            marks.append((f"violation-{n}-{k}", [(s, f"step {s}: violation of {invariant}")]))
    points: dict[str, tuple[str, int, str, list[tuple[int, float, str]]]] = {}
    for step, session, kind, input_id, delivery in run.events:
        y = lanes.get(session)
        if y is None:
            continue
        if kind in ("admitted", "compaction_admitted"):
            d = delivery if kind == "admitted" else None
            label = f"admitted ({d})" if d else "compaction admitted"
            style = ("s", 18, PALETTE.get(d, "#7f7f7f"))
            offset = 0.2
        elif kind in _MARKS:
            label, marker, colour = _MARKS[kind]
            style = (marker, 22, colour)
            offset = 0.0 if kind == "promoted" else -0.2
        else:
            continue
        title = _mark_title(step, session, label, kind, input_id)
        points.setdefault(label, (*style, []))[3].append((step, y + offset, title))
    for n, (label, (marker, size, colour, where)) in enumerate(points.items()):
        dots = ax.scatter(
            [p[0] for p in where], [p[1] for p in where], marker=marker, s=size, color=colour,
            label=label,
        )
        dots.set_gid(f"marks-{n}")
        marks.append((f"marks-{n}", [(int(p[0]), p[2]) for p in where]))
    ax.set_yticks(range(len(lanes)), list(lanes))
    ax.set_ylim(-0.6, len(lanes) - 0.4)
    ax.set_xlim(-1, max(run.steps, 1))
    ax.set_xlabel("step")
    what = f"seed {run.seed}" if run.seed is not None else f"run {run.run_id}"
    ax.set_title(f"{what} ({run.policy}, {run.verdict}): per-session timeline")
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))  # one legend entry per label
    ax.legend(
        unique.values(), unique.keys(), loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8
    )
    fig.tight_layout()
    return fig, marks


def swimlane_png(run: RunDetail | None) -> bytes:
    """One lane per session; x is the step. Crash-to-restart spans shaded,
    violating steps marked with red lines."""
    if run is None:
        fig, ax = _figure(12, 2)
        _empty(ax, "no runs in the store")
        return _png(fig)
    return _png(_draw_swimlane(run)[0])


_SVG = "http://www.w3.org/2000/svg"


def swimlane_svg(run: RunDetail, link: Callable[[int], str] | None = None) -> str:
    """The swimlane as an inline ``<svg>`` element: every mark, crash span
    and violation line carries a ``<title>`` (shown on hover) saying what it
    is, and with ``link`` is a link to ``link(step)``. Byte-stable for the
    same run: matplotlib's SVG ids come from a fixed salt, no date."""
    import xml.etree.ElementTree as ET

    import matplotlib

    fig, marks = _draw_swimlane(run)
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": "inboxsim", "svg.fonttype": "none"}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    ET.register_namespace("", _SVG)
    ET.register_namespace("xlink", "http://www.w3.org/1999/xlink")
    root = ET.fromstring(buf.getvalue())
    for meta in root.findall(f"{{{_SVG}}}metadata"):
        root.remove(meta)  # the RDF block: nothing a reader sees
    groups = {g.get("id"): g for g in root.iter(f"{{{_SVG}}}g") if g.get("id")}
    parent_of = {child: parent for parent in root.iter() for child in parent}
    for gid, points in marks:
        g = groups.get(gid)
        if g is None:
            continue
        del g.attrib["id"]  # ours, not unique once several figures share a page
        shapes = [e for e in g.iter() if e.tag in (f"{{{_SVG}}}use", f"{{{_SVG}}}path")]
        shapes = [e for e in shapes if parent_of[e].tag != f"{{{_SVG}}}defs"]
        if len(shapes) != len(points):  # not one shape per point: one title for them all
            ET.SubElement(g, f"{{{_SVG}}}title").text = points[0][1]
            continue
        for shape, (step, title) in zip(shapes, points, strict=True):
            # <a href><title/><shape/></a>: a hover title and a link per mark
            parent = parent_of[shape]
            at = list(parent).index(shape)
            parent.remove(shape)
            tag = "a" if link is not None else "g"
            wrapper = ET.Element(f"{{{_SVG}}}{tag}", {"class": "mark"})
            if link is not None:
                wrapper.set("href", link(step))
            ET.SubElement(wrapper, f"{{{_SVG}}}title").text = title
            wrapper.append(shape)
            parent.insert(at, wrapper)
    return ET.tostring(root, encoding="unicode")


def depth_png(run: RunDetail | None) -> bytes:
    fig, ax = _figure(12, 3)
    if run is None or not run.depth:
        _empty(ax, "no pending inbox observed")
        return _png(fig)
    for session in run.sessions:
        points = [(d[0], d[2]) for d in run.depth if d[1] == session]
        if not points:
            continue
        xs = [p[0] for p in points] + [run.steps]
        ys = [p[1] for p in points] + [points[-1][1]]
        ax.step(xs, ys, where="post", label=session)
    ax.set_xlabel("step")
    ax.set_ylabel("pending inputs")
    ax.set_title("inbox depth over time (same run)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    fig.tight_layout()
    return _png(fig)


def latency_png(rows: list[Row]) -> bytes:
    """Admission-to-promotion latency (virtual time) by delivery and policy,
    as box plots from quantiles computed in SQL (any store size)."""
    fig, ax = _figure(8, 3.2)
    if not rows:
        _empty(ax, "no promotions")
        return _png(fig)
    stats = [
        {
            "label": f"{r[1] or '?'}\n{r[0]} (n={r[2]})",
            "whislo": r[4],
            "q1": r[5],
            "med": r[6],
            "q3": r[7],
            "whishi": r[8],
            "mean": r[3],
            "fliers": [],
        }
        for r in rows
    ]
    boxes = ax.bxp(stats, showmeans=True, patch_artist=True)
    for patch, r in zip(boxes["boxes"], rows, strict=True):
        patch.set_facecolor(PALETTE.get(r[1], "#7f7f7f"))
        patch.set_alpha(0.6)
    ax.set_ylabel("latency (virtual time units)")
    ax.set_title("admission to promotion, by delivery (whiskers: 5th and 95th percentiles)")
    fig.tight_layout()
    return _png(fig)


def violations_png(rows: list[Row]) -> bytes:
    fig, ax = _figure(8, 1.2 + 0.35 * max(1, len(rows)))
    if not rows:
        _empty(ax, "no violations")
        return _png(fig)
    labels = [f"{r[0]} ({r[1]})" for r in rows]
    ax.barh(range(len(rows)), [r[2] for r in rows], color="#d62728")
    ax.set_yticks(range(len(rows)), labels)
    ax.invert_yaxis()
    ax.set_xlabel("runs violating")
    ax.set_title("violations by invariant and policy")
    fig.tight_layout()
    return _png(fig)


def probes_png(rows: list[Row]) -> bytes:
    fig, ax = _figure(8, 1.2 + 0.3 * max(1, len(rows)))
    if not rows:
        _empty(ax, "no probe hits")
        return _png(fig)
    labels = [f"{r[1]} ({r[0]})" for r in rows]
    ax.barh(range(len(rows)), [100.0 * r[2] / r[3] for r in rows], color="#1f77b4")
    ax.set_yticks(range(len(rows)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("% of runs that hit the probe")
    ax.set_title("probe coverage")
    fig.tight_layout()
    return _png(fig)


def render_all(data: PlotData) -> dict[str, bytes]:
    """Every figure, by file name."""
    return {
        "timeline.png": swimlane_png(data.run),
        "inbox_depth.png": depth_png(data.run),
        "latency.png": latency_png(data.latency),
        "violations.png": violations_png(data.violations),
        "probes.png": probes_png(data.probes),
    }
