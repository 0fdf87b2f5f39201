"""The design study's report as pages: designs.md and designs.html (the
questions and their verdicts, one line per design, the invariants broken,
the counterexamples with their timelines, the measured behaviour), the bar
chart of each metric across policies, and designs.json beside them. It reads
the document :func:`.study.build` returns and computes nothing new."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from html import escape
from typing import Any

from ..invariants.registry import REGISTRY
from ..reports.plots import PALETTE, new_figure, png_bytes
from .sentences import plural


def explorer_depth(p: dict[str, Any], inv: str) -> int | None:
    """The depth at which the explorer found ``inv`` (None: not within its bound)."""
    for e in p["explore"]:
        for v in e["violations"]:
            if v["invariant"] == inv:
                return int(e["depth_found"])
    return None


def _lengths(p: dict[str, Any], inv: str) -> str:
    """'shortest counterexample N operations (shrunk: ...; explorer: depth D)'."""
    sh = p.get("shrunk", {}).get(inv)
    depth = explorer_depth(p, inv)
    lengths, parts = [], []
    if sh and sh.get("shrunk"):
        lengths.append(sh["operations"])
        faults = f" + {plural(sh['faults'], 'fault')}" if sh["faults"] else ""
        parts.append(f"shrunk: {plural(sh['operations'], 'operation')}{faults}")
    if depth is not None:
        lengths.append(depth)
        parts.append(f"explorer: depth {depth}")
    elif inv != "liveness.settles":
        parts.append(f"explorer: not within depth {p.get('explore_depth')}")
    if not lengths:
        return "; ".join(parts)
    return f"shortest counterexample {plural(min(lengths), 'operation')} ({'; '.join(parts)})"


METRICS: tuple[tuple[str, str, Callable[[dict[str, Any]], float | None]], ...] = (
    (
        "latency-steer-steps",
        "mean admission-to-promotion latency, steer (steps)",
        lambda m: m["latency_steps"].get("steer", {}).get("mean"),
    ),
    (
        "latency-queue-steps",
        "mean admission-to-promotion latency, queue (steps)",
        lambda m: m["latency_steps"].get("queue", {}).get("mean"),
    ),
    (
        "latency-steer-now",
        "mean admission-to-promotion latency, steer (now units)",
        lambda m: m["latency_now"].get("steer", {}).get("mean"),
    ),
    (
        "latency-queue-now",
        "mean admission-to-promotion latency, queue (now units)",
        lambda m: m["latency_now"].get("queue", {}).get("mean"),
    ),
    ("calls-per-input", "model calls per admitted input", lambda m: m["model_calls_per_admitted"]),
    ("executions-per-wake", "executions per wake request", lambda m: m["executions_per_wake"]),
    ("depth-mean", "inbox depth, mean pending per session", lambda m: m["depth_mean"]),
    ("depth-max", "inbox depth, max pending", lambda m: m["depth_max"]),
    ("steps-per-prompt", "agent steps per promoted input", lambda m: m["agent_steps_per_promoted"]),
)


def metric_figures(results: list[dict[str, Any]]) -> dict[str, bytes]:
    """One bar chart per metric across policies (steer/queue grouped for latency)."""

    figures: dict[str, bytes] = {}
    names = [r["name"] for r in results]
    groups = (
        ("latency-steps", "admission-to-promotion latency (steps)", "latency_steps"),
        ("latency-now", "admission-to-promotion latency (now units)", "latency_now"),
    )
    for key, title, field in groups:
        fig, ax = new_figure(8, 3)
        width = 0.4
        for k, d in enumerate(("steer", "queue")):
            ys = [r["metrics"][field].get(d, {}).get("mean") or 0 for r in results]
            ax.bar(
                [i + (k - 0.5) * width for i in range(len(names))],
                ys,
                width,
                label=d,
                color=PALETTE[d],
            )
        ax.set_xticks(range(len(names)), names)
        ax.set_ylabel("mean")
        ax.set_title(title)
        ax.legend(fontsize=8)
        fig.tight_layout()
        figures[f"{key}.png"] = png_bytes(fig)
    for key, title, get in METRICS[4:]:
        fig, ax = new_figure(8, 2.8)
        ys = [get(r["metrics"]) or 0 for r in results]
        ax.bar(range(len(names)), ys, color="#1f77b4")
        ax.set_xticks(range(len(names)), names)
        ax.set_title(title)
        fig.tight_layout()
        figures[f"{key}.png"] = png_bytes(fig)
    return figures


def _metric_rows(doc: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    head = [
        "policy",
        "admitted",
        "promoted",
        *(t for _, t, _ in METRICS),
        "max steers/boundary",
        "identical to g4",
    ]
    rows = []
    for r in doc["policies"]:
        m = r["metrics"]
        same = doc["identical_to_g4"].get(r["name"])
        rows.append(
            [
                r["name"],
                str(m["admitted"]),
                str(m["promoted"]),
                *("-" if get(m) is None else str(get(m)) for _, _, get in METRICS),
                str(m["max_steers_per_boundary"]),
                "-" if same is None else f"{same[0]}/{same[1]}",
            ]
        )
    return head, rows


VIOLATION_HEAD = [
    "policy",
    "invariant",
    "seeds",
    "shrunk counterexample",
    "explorer depth (shortest)",
    "message",
]


def _violation_rows(doc: dict[str, Any]) -> list[list[str]]:
    rows = []
    for r in doc["policies"]:
        if not r["violations"]:
            rows.append([r["name"], "(none)", "0", "-", "-", "-"])
        for inv, v in r["violations"].items():
            sh = r.get("shrunk", {}).get(inv)
            if sh and sh.get("shrunk"):
                faults = f" + {plural(sh['faults'], 'fault')}" if sh["faults"] else ""
                shortest = f"{plural(sh['operations'], 'op')}{faults} (seed {sh['seed']})"
                message = sh["message"]
            else:
                shortest, message = f"- (seed {v['seed']})", v["message"]
            depth = explorer_depth(r, inv)
            found = (
                str(depth)
                if depth is not None
                else (
                    "not judged (liveness)"
                    if inv == "liveness.settles"
                    else f"> {r.get('explore_depth')}"
                )
            )
            rows.append([r["name"], inv, f"{v['seeds']}/{r['seeds']}", shortest, found, message])
    return rows


def design_lines(doc: dict[str, Any]) -> list[str]:
    """One line per design: what it breaks, how short, where the explorer found it."""
    lines = []
    for r in doc["policies"]:
        broken = [i for i in r["violations"] if i != "liveness.settles"]
        if not broken:
            claim = r["explore"][0]["claim"] if r["explore"] else "not explored"
            lines.append(
                f"{r['name']}: breaks no invariant ({r['seeds']} seeds; {claim}, "
                f"{r['explore'][0]['states'] if r['explore'] else 0} states)"
            )
            continue
        lines.append(f"{r['name']}: breaks " + "; ".join(_broken_note(r, i) for i in broken))
    return lines


def _broken_note(r: dict[str, Any], inv: str) -> str:
    """An invariant a design breaks, with its lengths; where the registry does
    not expect the design to keep it, says that the evidence is circular."""
    if r["expected"].get(inv, True):
        return f"{inv} ({_lengths(r, inv)})"
    when = REGISTRY[inv].holds_under
    return f"{inv} ({_lengths(r, inv)}; by design: stated for {when}, a difference, not a defect)"


def markdown(doc: dict[str, Any]) -> str:
    o = doc["options"]
    out = [
        "# inboxsim design exploration",
        "",
        f"Seeds 0..{o['seeds'] - 1} per policy ({o['ops']} workload ops each, every invariant "
        f"judged, runs not stopped at a violation); exploration: {o['sessions']} session(s), "
        f"depth {o['depth']}. Total {doc['seconds']} s.",
        "",
        "## Questions",
        "",
    ]
    for q in doc["questions"]:
        out += [
            f"### {q['title']}",
            "",
            f"*{q['source']}; policies compared: {', '.join(q['policies']) or '-'}"
            + (f"; not run: {', '.join(q['missing'])}" if q["missing"] else "")
            + "*",
            "",
            f"**Verdict.** {q['verdict']}",
            "",
        ]
    out += ["## Per design", ""]
    out += [f"- {line}" for line in design_lines(doc)]
    out += [
        "",
        "## Invariants broken",
        "",
        "| " + " | ".join(VIOLATION_HEAD) + " |",
        "|" + " --- |" * len(VIOLATION_HEAD),
    ]
    out += [
        "| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in _violation_rows(doc)
    ]
    out += [
        "",
        "## Counterexamples",
        "",
        "Each is the first failing seed of the sweep, rerun judging that invariant alone and "
        "shrunk; the file expects the violation (`inboxsim run FILE` passes while it is there), "
        "and the explorer's shortest path to the same invariant follows it.",
    ]
    for r in doc["policies"]:
        for inv, sh in r.get("shrunk", {}).items():
            if not sh.get("shrunk"):
                continue
            out += [
                "",
                f"### {r['name']}: {inv} ({_lengths(r, inv)})",
                "",
                sh["message"],
                "",
                "```toml",
                sh["scenario"].rstrip(),
                "```",
            ]
            if sh.get("figure"):
                out += ["", f"![timeline {r['name']} {inv}]({sh['figure']})"]
            e = next(
                (e for e in r["explore"] for w in e["violations"] if w["invariant"] == inv), None
            )
            if e is not None:
                out += ["", f"Explorer, depth {e['depth_found']} ({e['claim']}):", "", "```"]
                out += [*e["steps"], "```"]
                if e.get("figure"):
                    out += ["", f"![explorer timeline {r['name']} {inv}]({e['figure']})"]
        for e in r["explore"]:
            if not e["violations"] and e["invariant_filter"] is None:
                out += ["", f"- **{r['name']}**: no violation; {e['claim']} ({e['states']} states)"]
        for inv, v in r["violations"].items():
            if inv == "liveness.settles" or not r.get("shrunk", {}).get(inv, {}).get("shrunk"):
                out += [
                    f"- **{r['name']}** {inv}: first failing seed {v['seed']} "
                    f"(`{v['replay']}`): {v['message']}"
                ]
    head, rows = _metric_rows(doc)
    out += [
        "",
        "## Measured behaviour",
        "",
        "| " + " | ".join(head) + " |",
        "|" + " --- |" * len(head),
    ]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    out += [
        "",
        "Definitions: latency from the step (and `now`) of an input's `admitted` event to its "
        "`promoted` event; model calls are `step_started` + `compaction_started`; a wake request "
        "is a successful admission with resume or a `resume`; agent steps are `step_started`; "
        "inbox depth is sampled per known session after every step. Identical to g4: traces "
        "equal seed for seed after normalizing the policy name.",
        "",
    ]
    return "\n".join(out)


_STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:2em auto;
max-width:1300px;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:.85em}
th,td{border:1px solid #ddd;padding:.3em .6em;text-align:left}
th{background:#f4f4f4} code,pre{background:#f4f4f4;padding:0 .2em} pre{padding:.5em;overflow-x:auto}
img{max-width:100%;border:1px solid #eee;margin:.5em 0}
.verdict{background:#eef4fb;padding:.5em .8em;border-radius:6px}
"""


def _img(png: bytes, alt: str) -> str:
    return f'<img alt="{escape(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode()}">'


def _table(head: list[str], rows: list[list[str]]) -> str:
    parts = ["<table><tr>" + "".join(f"<th>{escape(h)}</th>" for h in head) + "</tr>"]
    parts += ["<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in rows]
    return "".join(parts) + "</table>"


def html(doc: dict[str, Any], images: dict[str, bytes]) -> str:
    o = doc["options"]
    p = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8"><title>inboxsim designs</title>',
        f"<style>{_STYLE}</style></head><body><h1>inboxsim design exploration</h1>",
        f"<p>Seeds 0..{o['seeds'] - 1} per policy ({o['ops']} ops), exploration "
        f"{o['sessions']} session(s), depth {o['depth']}; {doc['seconds']} s.</p>",
        "<h2>Questions</h2>",
    ]
    for q in doc["questions"]:
        p.append(
            f"<h3>{escape(q['title'])}</h3><p><i>{escape(q['source'])}; policies: "
            f"{escape(', '.join(q['policies']))}</i></p><p class=verdict>{escape(q['verdict'])}</p>"
        )
    p.append("<h2>Per design</h2><ul>")
    p += [f"<li>{escape(line)}</li>" for line in design_lines(doc)]
    p.append("</ul><h2>Invariants broken</h2>")
    p.append(_table(VIOLATION_HEAD, _violation_rows(doc)))
    p.append(
        "<h2>Counterexamples</h2><p>Each is the first failing seed, rerun judging that invariant "
        "alone and shrunk; then the explorer's shortest path to the same invariant.</p>"
    )
    for r in doc["policies"]:
        for inv, sh in r.get("shrunk", {}).items():
            if not sh.get("shrunk"):
                continue
            p.append(
                f"<h3>{escape(r['name'])}: {escape(inv)} ({escape(_lengths(r, inv))})</h3>"
                f"<p>{escape(sh['message'])}</p><pre>{escape(sh['scenario'])}</pre>"
            )
            if sh.get("figure") in images:
                p.append(_img(images[sh["figure"]], f"timeline {r['name']} {inv}"))
            e = next(
                (e for e in r["explore"] for w in e["violations"] if w["invariant"] == inv), None
            )
            if e is not None:
                p.append(
                    f"<p>Explorer, depth {e['depth_found']} ({escape(e['claim'])}):</p>"
                    f"<pre>{escape(chr(10).join(e['steps']))}</pre>"
                )
                if e.get("figure") in images:
                    p.append(_img(images[e["figure"]], f"explorer {r['name']} {inv}"))
    head, rows = _metric_rows(doc)
    p.append("<h2>Measured behaviour</h2>" + _table(head, rows))
    for name in sorted(images):
        if not name.startswith(("timeline-", "shrunk-")):
            p.append(_img(images[name], name))
    p.append("</body></html>\n")
    return "\n".join(p)


def report_files(doc: dict[str, Any], images: dict[str, bytes]) -> dict[str, str | bytes]:
    """The report's files by name: designs.html, .md and .json first (the
    files a caller names), then the figures designs.md links to."""
    files: dict[str, str | bytes] = {
        "designs.html": html(doc, images),
        "designs.md": markdown(doc),
        "designs.json": json.dumps(doc, indent=2, sort_keys=True, default=list) + "\n",
    }
    files.update(sorted(images.items()))
    return files
