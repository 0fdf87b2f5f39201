"""The conformance section of ``inboxsim report``: the latest
``inboxsim conformance --db`` batch of each target, read from the store's
``conformance`` table (:func:`load_conformance`, the only query) and
summarized (:func:`summarize_conformance`, pure) for the JSON, Markdown and
HTML outputs.

Failing scenarios and seeds are grouped into problems by their failure key
(:mod:`.problems`): the operation and the compared part that differed
(``diverged:prompt:pending``), the invariant violated, or a protocol error.
Each problem shows its minimal repro side by side (:func:`sides`): at the
first differing step, what the model answered and what the target answered,
and the views of both after it; a concurrent group no order explains shows
its requests side by side and the search's explanation (:func:`group_panel`).
"""

from __future__ import annotations

import json
from html import escape
from typing import Any

from ..sim.show import call_text, message_text, pending_text
from ..store.schema import FAILING, VERDICTS
from ..trace.decode import observed_from_wire
from .group_view import ILLEGAL, GroupPanel, Lane, group_html
from .problems import group

Row = tuple[Any, ...]
COLUMNS = (
    "conformance_id",
    "target",
    "policy",
    "kind",
    "item",
    "verdict",
    "detail",
    "repro",
    "seconds",
    "steps",
    "failure",
)


def load_conformance(con: Any) -> list[Row]:
    """The rows of the latest batch of each target (none if the table is absent)."""
    tables = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'conformance'"
    ).fetchone()
    if not tables or not tables[0]:
        return []
    columns = {
        r[0]
        for r in con.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'conformance'"
        ).fetchall()
    }
    steps = "steps" if "steps" in columns else "0 AS steps"
    failure = "failure" if "failure" in columns else "NULL AS failure"
    return list(
        con.execute(
            f"SELECT conformance_id, target, policy, kind, item, verdict, detail, repro, seconds, "
            f"{steps}, {failure} FROM conformance WHERE conformance_id IN "
            "(SELECT max(conformance_id) FROM conformance GROUP BY target) "
            "ORDER BY conformance_id, rowid"
        ).fetchall()
    )


def summarize_conformance(rows: list[Row]) -> list[dict[str, Any]]:
    """One document per batch: verdict lists by kind, failures in full, figures."""
    batches: dict[int, list[dict[str, Any]]] = {}
    for row in rows:
        batches.setdefault(int(row[0]), []).append(dict(zip(COLUMNS, row, strict=True)))
    out = []
    for batch, items in batches.items():
        lists: dict[str, dict[str, list[str]]] = {}
        for i in items:
            lists.setdefault(i["kind"], {}).setdefault(i["verdict"], []).append(i["item"])
        seeds = [i for i in items if i["kind"] == "seed"]
        runs = [i for i in items if i["kind"] in ("scenario", "seed")]
        seconds = sum(float(i["seconds"] or 0) for i in runs)
        seed_seconds = sum(float(i["seconds"] or 0) for i in seeds)
        seed_steps = sum(int(i["steps"] or 0) for i in seeds)
        out.append(
            {
                "batch": batch,
                "target": items[0]["target"],
                "policy": items[0]["policy"],
                "verdicts": {
                    kind: {v: by_verdict[v] for v in VERDICTS if v in by_verdict}
                    for kind, by_verdict in lists.items()
                },
                "failures": [
                    {k: i[k] for k in ("kind", "item", "verdict", "detail", "repro")}
                    for i in items
                    if i["verdict"] in FAILING
                ],
                "not_testable": {
                    f"{i['kind']} {i['item']}": (i["detail"] or "").split("\n")[0]
                    for i in items
                    if i["verdict"] == "not testable"
                },
                "scenarios": sum(1 for i in items if i["kind"] == "scenario"),
                "seeds": len(seeds),
                "seconds": round(seconds, 1),
                "seed_steps": seed_steps,
                "seed_steps_per_second": round(seed_steps / seed_seconds, 2)
                if seed_seconds > 0
                else None,
                "failed": any(i["verdict"] in FAILING for i in items),
                "problems": conformance_problems(items),
            }
        )
    return out


def failure_key(item: dict[str, Any]) -> str:
    """An item's failure key: as stored, or for a row stored before keys
    were (no ``failure``), its verdict."""
    failure = item.get("failure")
    if isinstance(failure, dict) and failure.get("key"):
        return str(failure["key"])
    return str(item["verdict"])


def conformance_problems(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The batch's failing scenarios and seeds grouped by failure key; each
    problem with its members, first member, and the divergence to show: the
    minimal repro's when one was shrunk, else the first member's."""
    failing = [i for i in items if i["verdict"] in FAILING and i["kind"] in ("scenario", "seed")]
    for i in failing:
        if isinstance(i.get("failure"), str):
            i["failure"] = json.loads(i["failure"])
    out = []
    for key, members in group((failure_key(i), i) for i in failing):
        kind, _, rest = key.partition(":")
        operation, _, part = rest.partition(":")
        failures = [m.get("failure") or {} for m in members]
        repro = next((f["repro"] for f in failures if f.get("repro")), None)
        shown = (repro or {}).get("divergence") or failures[0].get("divergence")
        first = members[0]
        out.append(
            {
                "key": key,
                "kind": kind,
                "operation": operation if kind == "diverged" else None,
                "part": part if kind == "diverged" else None,
                "invariant": rest if kind == "violated" else None,
                "title": _title(kind, operation, part, rest),
                "count": len(members),
                "items": [f"{m['kind']} {m['item']}" for m in members],
                "first": f"{first['kind']} {first['item']}",
                "summary": (first["detail"] or "").split("\n")[0],
                "repro_command": first["repro"],
                "repro": None
                if repro is None
                else {k: v for k, v in repro.items() if k != "divergence"},
                "divergence": shown,
            }
        )
    return out


def _title(kind: str, operation: str, part: str, rest: str) -> str:
    if kind == "diverged":
        return f"{operation}: {part or 'something'} differs from the model"
    if kind == "violated":
        return f"invariant {rest} violated" if rest else "an invariant violated"
    return kind


def markdown_lines(batches: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    for b in batches:
        mark = "❌" if b["failed"] else "✅"
        out += [
            "",
            f"### {mark} Conformance of {b['target']} against the model (policy {b['policy']}, "
            f"batch {b['batch']})",
            "",
            f"{b['scenarios']} scenarios, {b['seeds']} seeds, {b['seconds']} s; seeds: "
            f"{b['seed_steps']} requests at {b['seed_steps_per_second'] or '-'} requests/s.",
            "",
        ]
        for kind, by_verdict in b["verdicts"].items():
            for verdict, names in by_verdict.items():
                out.append(f"- {kind}s {verdict} ({len(names)}): {', '.join(names)}")
        if b["not_testable"]:
            out += ["", "Not testable, and why:", ""]
            out += [f"- {k}: {why}" for k, why in b["not_testable"].items()]
        out += _problem_markdown(b["problems"])
    return out


def _problem_markdown(problems: list[dict[str, Any]]) -> list[str]:
    """Each problem: its members, its minimal repro, and the first differing step
    side by side (``!`` marks what differs: the compared part; the raw values
    differ also where each side names its own IDs and times)."""
    out = ["", f"#### Problems ({len(problems)})"] if problems else []
    for n, p in enumerate(problems, start=1):
        out += [
            "",
            f"##### {n}. {p['title']}: {p['count']} ({', '.join(p['items'][:20])}"
            + (" ..." if p["count"] > 20 else "")
            + ")",
            "",
            f"- first: {p['first']}: {p['summary']}",
            f"- rerun: `{p['repro_command']}`",
        ]
        if p["repro"]:
            r = p["repro"]
            out.append(
                f"- minimal repro: `{r['path']}` ({r['steps']} steps, from {r['original_steps']})"
            )
        if p["divergence"] and p["divergence"].get("explanation"):
            out += ["", "```", *p["divergence"]["explanation"].splitlines(), "```"]
        elif p["divergence"]:
            out += ["", "```"]
            for what, model, target in sides(p["divergence"]):
                mark = "!" if model != target else " "
                out.append(f"{what}:")
                for name, text in (("model ", model), ("target", target)):
                    lines = text.splitlines() or [""]
                    out.append(f"{mark} {name}  {lines[0]}")
                    out += [f"          {line}" for line in lines[1:]]
            out.append("```")
    return out


def html_parts(batches: list[dict[str, Any]]) -> list[str]:
    parts: list[str] = []
    for b in batches:
        parts.append(
            f"<h2>Conformance of {escape(b['target'])} (policy {escape(b['policy'])}, "
            f"batch {b['batch']})</h2>"
        )
        parts.append(
            f"<p>{b['scenarios']} scenarios, {b['seeds']} seeds, {b['seconds']} s; seeds: "
            f"{b['seed_steps']} requests at {b['seed_steps_per_second'] or '-'} requests/s.</p><ul>"
        )
        for kind, by_verdict in b["verdicts"].items():
            for verdict, names in by_verdict.items():
                parts.append(
                    f"<li>{escape(kind)}s <b>{escape(verdict)}</b> ({len(names)}): "
                    f"{escape(', '.join(names))}</li>"
                )
        parts.append("</ul>")
        if b["problems"]:
            parts.append(
                f"<h3>Problems ({len(b['problems'])})</h3><p>Failing scenarios and seeds grouped "
                "by the operation and the part that differed (or the invariant violated); each "
                "with its minimal repro at its first differing step, the model's answer beside "
                "the target's.</p>"
            )
        for n, p in enumerate(b["problems"], start=1):
            parts += _problem_html(n, p, b["target"])
    return parts


def _problem_html(n: int, p: dict[str, Any], target: str) -> list[str]:
    out = [
        f'<section class="problem conformance-problem" id="conformance-{escape(p["key"])}">',
        f"<h4>{n}. {escape(p['title'])}: {p['count']} "
        f"({escape(', '.join(p['items'][:30]))}{' …' if p['count'] > 30 else ''})</h4>",
        f"<p>First: {escape(p['first'])}: {escape(p['summary'])}<br>"
        f"<code>{escape(p['repro_command'] or '')}</code></p>",
    ]
    r = p["repro"]
    if r:
        out.append(
            f"<p>Minimal repro <code>{escape(r['path'] or '')}</code>: {r['steps']} steps (from "
            f"{r['original_steps']}); fails in lockstep: {'yes' if r['verified'] else 'NO'}, "
            f"alone: {'yes' if r['standalone'] else 'no'}; passes on the model: "
            f"{'yes' if r['model_passes'] else 'NO'}.</p>"
            "<details><summary>the repro scenario</summary>"
            f"<pre>{escape(r['text'])}</pre></details>"
        )
    div = p["divergence"]
    panel = group_panel(div) if div else None
    if panel is not None:  # a concurrent group: its requests side by side, the explanation
        out.append(group_html(panel))
    elif div:
        which = "the minimal repro's" if r and r.get("path") else "the first member's"
        out.append(
            f'<table class="sides"><caption>{escape(which)} first differing step</caption>'
            f"<tr><th></th><th>{escape(div.get('model_name', 'model'))}</th>"
            f"<th>{escape(target)}</th></tr>"
        )
        for k, (what, model, target) in enumerate(sides(div)):
            cls = ' class="differs"' if k == 1 else ""
            out.append(
                f"<tr{cls}><th>{escape(what)}</th><td><pre>{escape(model)}</pre></td>"
                f"<td><pre>{escape(target)}</pre></td></tr>"
            )
        out.append("</table>")
    if div and div.get("history"):
        out.append(
            "<details><summary>the steps that led there</summary><pre>"
            + escape("\n".join(div["history"]))
            + "</pre></details>"
        )
    out.append("</section>")
    return out


def _views_lines(views: dict[str, Any]) -> dict[str, str]:
    """A side's views (pending, transcript, open calls) as text, one line per session."""

    shown = observed_from_wire(
        {
            "pending": views.get("pending", {}),
            "transcript": views.get("transcript", {}),
            "calls": views.get("calls", []),
        },
        {},
    )
    return {
        "pending": "\n".join(
            f"{s}: {', '.join(pending_text(r) for r in rows) or '(none)'}"
            for s, rows in shown.pending
        )
        or "(no session)",
        "transcript": "\n".join(
            f"{s}: {', '.join(message_text(m) for m in msgs) or '(empty)'}"
            for s, msgs in shown.transcript
        )
        or "(no session)",
        "open calls": ", ".join(call_text(c) for c in shown.calls or ()) or "(none)",
    }


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def request_line(wire: dict[str, Any] | None) -> str:
    """A request's wire form in one line (``kill`` for none)."""
    request = dict(wire or {})
    op = request.pop("op", None)
    if op is None:
        return "kill"
    return " ".join([str(op)] + [f"{k}={_json(v)}" for k, v in request.items()])


def group_panel(div: dict[str, Any]) -> GroupPanel | None:
    """A concurrent group no order explains (a divergence with the search's
    ``explanation``): its requests side by side, the explanation (which
    holds their times and replies); None for any other divergence."""
    if not div.get("explanation"):
        return None
    requests = (div.get("request") or {}).get("requests") or []
    return GroupPanel(
        f"conformance-group-{div.get('step')}",
        f"Step {div.get('step')}: a group of {len(requests)} requests issued together",
        tuple(Lane(f"r{i}", request_line(r), "") for i, r in enumerate(requests)),
        (),
        ILLEGAL,
        str(div["explanation"]),
    )


def sides(div: dict[str, Any]) -> list[tuple[str, str, str]]:
    """A divergence side by side: (what, the model's, the target's) rows at
    the first differing step: the request (the same on both), the compared
    part as normalized, each side's reply, and each side's views after it
    (when the divergence recorded them)."""
    line = request_line(div.get("request"))
    rows = [
        (f"request (step {div.get('step')})", line, line),
        (
            f"{div.get('where', '')}: compared, normalized",
            _json(div.get("model")),
            _json(div.get("target")),
        ),
        (
            "reply",
            _json((div.get("model_raw") or {}).get("reply")),
            _json((div.get("target_raw") or {}).get("reply")),
        ),
    ]
    if div.get("model_views") or div.get("target_views"):
        m, t = (
            _views_lines(div.get("model_views") or {}),
            _views_lines(div.get("target_views") or {}),
        )
        rows += [
            (f"{part} after", m[part], t[part]) for part in ("pending", "transcript", "open calls")
        ]
    return rows
