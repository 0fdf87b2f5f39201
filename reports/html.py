"""The self-contained HTML report (pure): the summary document and the PNG
figures in, one HTML page out, with the figures embedded as base64 data URIs
so the page can be attached to a CI run or mailed as one file."""

from __future__ import annotations

import base64
from html import escape
from typing import Any

from .conformance_view import html_parts
from .group_view import STYLE as GROUP_STYLE
from .problems import size_words
from .summary import headline, repeats_note
from .viewer import STYLE as VIEWER_STYLE

_STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:2em auto;max-width:1300px;
color:#222}
h1{margin-bottom:.2em}
.verdict{font-size:1.2em;padding:.4em .8em;border-radius:6px;display:inline-block}
.bad{background:#fde2e2;color:#8a1010} .good{background:#e3f5e3;color:#11621a}
table{border-collapse:collapse;margin:1em 0;font-size:.9em}
th,td{border:1px solid #ddd;padding:.3em .6em;text-align:left}
th{background:#f4f4f4} td.num{text-align:right}
tr.violated td{background:#fff0f0} tr.skip td{color:#888}
code{background:#f4f4f4;padding:0 .2em}
img{max-width:100%;border:1px solid #eee;margin:.5em 0}
section.problem{border:1px solid #e3b4b4;border-left:5px solid #b3261e;border-radius:6px;
 padding:.3em 1em .6em;margin:1em 0} section.problem h3{margin:.4em 0}
table.sides{table-layout:fixed;width:100%} table.sides pre{margin:0;white-space:pre-wrap;
 overflow-wrap:anywhere;background:none;padding:0} table.sides tr.differs td{background:#fff0f0}
table.sides th:first-child{width:12em}
h2.inline{display:inline} details.more{display:inline}
details.more summary{display:inline;cursor:pointer}
"""

_FIGURES = (
    ("timeline.png", "Timeline of one run"),
    ("inbox_depth.png", "Inbox depth over time"),
    ("latency.png", "Admission-to-promotion latency"),
    ("violations.png", "Violations by invariant and policy"),
    ("probes.png", "Probe coverage"),
)


def _img(png: bytes, alt: str) -> str:
    return f'<img alt="{escape(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode()}">'


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.2%}"


def _scenarios(doc: dict[str, Any]) -> list[str]:
    if not doc["scenarios"]:
        return []
    failed = sum(1 for s in doc["scenarios"] if s["failed"])
    out = [
        f"<h2>Scenarios ({len(doc['scenarios'])}, {failed} failing)</h2><table>",
        "<tr><th>scenario</th><th>policy</th><th>target</th><th>runs</th><th>failed</th>"
        "<th>expectations</th><th>expectations failed</th><th>first failure</th><th>file</th></tr>",
    ]
    for sc in sorted(doc["scenarios"], key=lambda x: (not x["failed"], x["name"])):
        cls = "violated" if sc["failed"] else ""
        out.append(
            f'<tr class="{cls}"><td><code>{escape(sc["name"])}</code></td>'
            f"<td>{escape(sc['policy'])}</td><td>{escape(sc['target'])}</td>"
            f"<td class=num>{sc['runs']}</td><td class=num>{sc['failed']}</td>"
            f"<td class=num>{sc['expectations']}</td><td class=num>{sc['expectations_failed']}</td>"
            f"<td>{escape(sc['first_failure'] or '')}</td>"
            f"<td><code>{escape(sc['file'])}</code></td></tr>"
        )
    out.append("</table>")
    return out


def _mutants(doc: dict[str, Any]) -> list[str]:
    m = doc["mutants"]
    if not m:
        return []
    out = [
        f"<h2>Mutant kill matrix (campaign {m['campaign_id']}, {escape(m['recorded_at'])}): "
        f"{m['killed']}/{len(m['rows'])} killed</h2><table>",
        "<tr><th>mutant</th><th>killed by</th><th>detail</th><th>seed</th>"
        "<th>seconds to detect</th><th>runs</th><th>shrunk ops</th></tr>",
    ]
    for r in m["rows"]:
        survived = r["killed_by_kind"] == "none"
        out.append(
            f'<tr class="{"violated" if survived else ""}">'
            f"<td><code>{escape(r['mutant'])}</code></td>"
            f"<td>{'survived' if survived else escape(r['killed_by_kind'])}</td>"
            f"<td>{escape(r['killed_by'] or '')}</td><td class=num>{_opt(r['seed'])}</td>"
            f"<td class=num>{_opt(r['seconds_to_detect'])}</td><td class=num>{r['runs']}</td>"
            f"<td class=num>{_opt(r['shrunk_ops'])}</td></tr>"
        )
    out.append("</table>")
    return out


def _run_label(f: dict[str, Any]) -> str:
    """A failing run by its seed, or for a scenario run by its scenario."""
    if f["seed"] is not None:
        return str(f["seed"])
    return f"scenario {escape(f['scenario'])}" if f.get("scenario") else f"run {f['run_id']}"


def _opt(value: Any) -> str:
    return "-" if value is None else escape(str(value))


def _seeds(seeds: list[int], shown: int = 30) -> str:
    head = ", ".join(str(s) for s in seeds[:shown])
    if len(seeds) <= shown:
        return escape(head)
    return (
        f"{escape(head)}, <details class=more><summary>and {len(seeds) - shown} more</summary>"
        f"{escape(', '.join(str(s) for s in seeds[shown:]))}</details>"
    )


def _problem(n: int, p: dict[str, Any], table: str) -> list[str]:
    first, example = p["first"], p.get("example") or {}
    what = f"seed {first['seed']}" if first["seed"] is not None else _run_label(first)
    page = f' <a href="{escape(first["page"])}">viewer page</a>' if first.get("page") else ""
    out = [
        f'<section class="problem" id="problem-{escape(p["id"])}">',
        f"<h3>{n}. <code>{escape(p['invariant'])}</code> ({escape(p['policy'])}): "
        f"{p['runs']} run{'s' if p['runs'] != 1 else ''}</h3>",
        f'<p class="statement">{escape(p["statement"])}</p>' if p["statement"] else "",
        f"<p>First: {escape(what)}: {escape(first['message'])}{page}"
        + (f"<br><code>{escape(first['replay'])}</code>" if first["replay"] else "")
        + "</p>",
    ]
    if p["seeds"]:
        out.append(f"<p>Seeds ({len(p['seeds'])}): {_seeds(p['seeds'])}</p>")
    if p["scenarios"]:
        out.append(f"<p>Scenarios: {escape(', '.join(p['scenarios']))}</p>")
    if p["also_violated"]:
        also = ", ".join(f"{k} ({v})" for k, v in p["also_violated"].items())
        out.append(f"<p>Runs of this problem that also violated: {escape(also)}.</p>")
    if example.get("outcome") == "shrunk":
        out.append(
            f"<h4>Shrunk counterexample: {size_words(example['final'])} (seed {example['seed']}: "
            f"{size_words(example['original'])})</h4>"
            f'<p><a class="viewer" href="{escape(example["page"])}">viewer page</a> · '
            f'<a href="{escape(example["file"])}">scenario file</a> · '
            f"<code>inboxsim run {escape(example['file'])}</code> fails while the bug is there"
            + ("; cut short by its budget" if example["cut_short"] else "")
            + ("; judged on this invariant alone" if example["judged_alone"] else "")
            + "</p>"
        )
        out.append(table)
        out.append(
            f"<details><summary>scenario file</summary><pre>{escape(example['scenario'])}"
            "</pre></details>"
        )
    else:
        why = {
            "not shrunk": "not shrunk (a scenario run, another target, or past the report's "
            "--shrink limit)",
        }.get(example.get("outcome", "not shrunk"), example.get("outcome", ""))
        detail = example.get("message", "")
        out.append(f"<p><i>No shrunk counterexample: {escape(why)}</i> {escape(detail)}</p>")
    out.append("</section>")
    return [x for x in out if x]


def html_page(
    doc: dict[str, Any],
    figures: dict[str, bytes],
    timeline: str = "",
    tables: dict[str, str] | None = None,
) -> str:
    """``timeline``: the timeline as inline SVG with hover titles (else the
    PNG); ``tables``: each problem's step table by problem id."""

    bad = bool(doc["exit_code"])
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8"><title>inboxsim report</title>',
        f"<style>{_STYLE}{VIEWER_STYLE}{GROUP_STYLE}</style></head><body>",
        "<h1>inboxsim report</h1>",
        f'<p class="verdict {"bad" if bad else "good"}">' + escape(headline(doc)) + "</p>",
        f"<p>{doc['runs']} runs{escape(repeats_note(doc))} "
        f"from <code>{escape(doc['db'])}</code>; policies "
        f"{escape(', '.join(doc['policies']) or '-')}; target "
        f"{escape(', '.join(doc['targets']) or '-')}; "
        f"inboxsim {escape(', '.join(doc['versions']) or '-')}; {doc['verdicts']['held']} held, "
        f"{doc['verdicts']['violated']} violated; {doc['throughput']['steps']} steps "
        f"({doc['throughput']['steps_per_second'] or '-'} steps/s of run time).</p>",
    ]
    problems = doc.get("problems", [])
    if problems:
        parts.append(
            f'<h2 id="problems">Problems ({len(problems)})</h2><p>The {len(doc["failing"])} '
            "failing runs grouped by the invariant they violated (a run that violated two counts "
            "in both), most runs first; each with its first seed and its smallest example, shrunk "
            "from that seed.</p>"
        )
        for n, p in enumerate(problems, start=1):
            parts += _problem(n, p, (tables or {}).get(p["id"], ""))
    title = dict(_FIGURES)
    parts.append(f"<h2>{title['timeline.png']}</h2>")
    parts.append(
        "<p>The first failing run (else the median-length run): one lane per session; squares are "
        "admissions (blue steer, orange queue), circles promotions, triangles model calls "
        "opened and "
        "answered; shaded spans run from a crash to its restart; dashed red lines are violating "
        "steps."
        + (
            " Hover a mark to see what it is; click it to open that step in the run's viewer page."
            if timeline
            else ""
        )
        + "</p>"
    )
    for name, caption in _FIGURES:
        if name != "timeline.png":
            parts.append(f"<h2>{escape(caption)}</h2>")
        if name == "timeline.png" and timeline:
            parts.append(f'<div class="timeline">{timeline}</div>')
        elif name in figures:
            parts.append(_img(figures[name], caption))
    parts.append("<h2>Invariants</h2>")
    parts.append(
        "<p>For an invariant that held, the last columns bound its per-run failure rate at 95% "
        "confidence from the runs that exercised it (exact: 1 − 0.05<sup>1/n</sup>; rule of three: "
        "3/n).</p>"
    )
    parts.append(
        "<table><tr><th>invariant</th><th>policy</th><th>status</th><th>exercised</th><th>violated</th>"
        "<th>bound (exact)</th><th>bound (3/n)</th><th>statement</th></tr>"
    )
    order = {"violated": 0, "held": 1, "not exercised": 2}
    for inv in sorted(doc["invariants"], key=lambda i: (order[i["status"]], i["id"], i["policy"])):
        cls = {"violated": "violated", "not exercised": "skip"}.get(inv["status"], "")
        parts.append(
            f'<tr class="{cls}"><td><code>{escape(inv["id"])}</code></td>'
            f"<td>{escape(inv['policy'])}</td><td>{escape(inv['status'])}</td>"
            f"<td class=num>{inv['runs_exercised']}</td><td class=num>{inv['runs_violated']}</td>"
            f"<td class=num>{_pct(inv['upper_bound_exact'])}</td>"
            f"<td class=num>{_pct(inv['upper_bound_rule_of_three'])}</td>"
            f"<td>{escape(inv['statement'])}</td></tr>"
        )
    parts.append("</table>")
    if doc["failing"]:
        parts.append(
            f"<details><summary><h2 class=inline>Failing runs ({len(doc['failing'])})</h2>"
            "</summary><table>"
        )
        parts.append(
            "<tr><th>seed or "
            "scenario</th><th>policy</th><th>invariants</th><th>message</th><th>replay</th></tr>"
        )
        for f in doc["failing"][:200]:
            parts.append(
                f"<tr><td class=num>{_run_label(f)}</td><td>{escape(f['policy'])}</td>"
                f"<td>{escape(', '.join(f['invariants']))}</td><td>{escape(f['message'])}</td>"
                f"<td><code>{escape(f['replay'] or '')}</code></td></tr>"
            )
        parts.append("</table></details>")
    parts += _scenarios(doc) + _mutants(doc)
    if doc["latency"]:
        parts.append(
            "<h2>Latency table</h2><table><tr><th>policy</th><th>delivery</th><th>promotions</th>"
            "<th>mean</th><th>p50</th><th>p95</th><th>max</th></tr>"
        )
        for r in doc["latency"]:
            parts.append(
                f"<tr><td>{escape(r['policy'])}</td><td>{escape(str(r['delivery']))}</td><td "
                f"class=num>{r['promotions']}</td>"
                f"<td class=num>{r['mean']}</td><td class=num>{r['p50']}</td><td "
                f"class=num>{r['p95']}</td>"
                f"<td class=num>{r['max']}</td></tr>"
            )
        parts.append("</table>")
    parts += html_parts(doc.get("conformance", []))
    parts.append("</body></html>\n")
    return "\n".join(parts)
