"""``inboxsim report``: the store as an HTML report with plots, a Markdown and a
JSON summary, JUnit XML, and each problem shrunk to a minimal scenario."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .. import __version__
from ..errors import HarnessError
from ..procs.interrupt import Interrupted
from ..reports import counterexamples as cx
from ..reports.html import html_page
from ..reports.junit import junit_xml
from ..reports.pages import report_pages
from ..reports.plots import load_plot_data, pick_run, render_all
from ..reports.summary import load_facts, markdown, summarize
from ..store.policies import load_fields, stored_policy
from ..store.schema import SCHEMA_VERSION
from ..store.shrink_cache import load_shrunk, write_shrunk
from ..store.store import Store, open_store
from ..store.traces import stored_trace
from .output import echo, emit_json, progress, write_file


def report(*, db: str, out: str, shrink: int, shrink_seconds: float, as_json: bool) -> int:
    try:
        document, written = run_report(db, out, shrink_seconds, shrink)
    except Interrupted as stop:  # each shrink is cached as soon as it is made
        stop.kept = f"every shrunk example it finished is cached in {db}; rerun it to go on"
        raise
    if as_json:
        emit_json(document)
    else:
        problems = len(document["problems"])
        echo(
            f"{document['runs']} runs, {len(document['failing'])} failing in {problems} "
            f"problem{'s' if problems != 1 else ''}; wrote:"
        )
        for path in written:
            echo(f"  {path}")
    return int(document["exit_code"])


def run_report(
    db: str,
    out: str,
    shrink_seconds: float | None = None,
    shrink_problems: int | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """Write report.html, summary.md, summary.json, junit.xml and the PNGs into
    ``out``, and for each problem its shrunk counterexample (``problems/ID.toml``,
    a viewer page ``problems/ID.html``) and a viewer page of its first failing
    run (``runs/run-N.html``). Counterexamples come from the store's cache, or
    are shrunk now (the first ``shrink_problems``, ``shrink_seconds`` each) and
    cached there, each as soon as it is made; a store that cannot take them
    (locked, read-only) is said on stderr and the report is written all the same."""

    with open_store(db) as store:
        facts = load_facts(store.con, db, SCHEMA_VERSION)
        picked = pick_run(store.con)
        data = load_plot_data(store.con, picked)
        doc = summarize(facts)
        cached = load_shrunk(store.con, __version__)
        fields = load_fields(store.con)
        wanted = {p["first"]["run_id"] for p in doc["problems"]} | (
            {picked} if picked is not None else set()
        )
        stored = {run_id: stored_trace(store.con, run_id) for run_id in sorted(wanted)}
    refused: list[str] = []

    def keep(key: Any, outcome: str, example: dict[str, Any]) -> None:
        """Cache one result at once (one short write): an interrupted report
        keeps every shrink it finished. A store that refuses is said once."""
        if refused:
            return
        try:
            with Store(db, must_exist=True) as writer:
                write_shrunk(writer, __version__, [(key, outcome, example)])
        except HarnessError as exc:
            refused.append(str(exc))
            progress(f"report: the shrunk examples are not cached: {exc}")

    found = cx.examples_for(
        doc["problems"],
        cached,
        lambda key: stored_policy(key.policy, key.policy_hash, fields),
        cx.DEFAULT_SECONDS if shrink_seconds is None else shrink_seconds,
        cx.DEFAULT_PROBLEMS if shrink_problems is None else shrink_problems,
        progress,
        keep,
    )

    pages = report_pages(doc, stored, picked, found)
    figures = render_all(data)
    files = {
        "report.html": html_page(doc, figures, pages.timeline, pages.tables),
        "summary.md": markdown(doc),
        "summary.json": json.dumps(doc, indent=2, sort_keys=True) + "\n",
        "junit.xml": junit_xml(doc),
        **pages.files,
    }
    folder = Path(out)
    written = []
    failure = f"cannot write the report into {out}"
    outputs: dict[str, str | bytes] = {**files, **figures}
    for name, content in outputs.items():
        try:
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise HarnessError(f"{failure}: {exc.strerror or exc}") from None
        write_file(folder / name, content, failure)
        written.append(str(folder / name))
    doc["files"] = written
    return doc, written
