"""The conformance section of ``inboxsim report``: the latest
``inboxsim conformance --db`` batch of each target, read from the store's
``conformance`` table (:func:`load_conformance`, the only query) and
summarized (:func:`summarize_conformance`, pure) for the JSON, Markdown and
HTML outputs.
"""

from __future__ import annotations

from html import escape
from typing import Any

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
)
FAILING = ("violated", "diverged", "protocol error")
ORDER = ("held", "violated", "diverged", "protocol error", "not testable", "not exercised")


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
    return list(
        con.execute(
            f"SELECT conformance_id, target, policy, kind, item, verdict, detail, repro, seconds, "
            f"{steps} FROM conformance WHERE conformance_id IN "
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
                    kind: {v: by_verdict[v] for v in ORDER if v in by_verdict}
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
            }
        )
    return out


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
        for f in b["failures"]:
            if f["kind"] == "invariant":
                continue
            out += ["", f"#### {f['kind']} {f['item']}: {f['verdict']}", "", "```"]
            out += (f["detail"] or "").splitlines()[:40]
            out += ["```"]
            if f["repro"]:
                out.append(f"repro: `{f['repro']}`")
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
        for f in b["failures"]:
            if f["kind"] == "invariant":
                continue
            parts.append(
                f"<h3>{escape(f['kind'])} {escape(f['item'])}: {escape(f['verdict'])}</h3>"
                f"<pre>{escape(f['detail'] or '')}</pre><p><code>{escape(f['repro'] or '')}</code></p>"
            )
    return parts
