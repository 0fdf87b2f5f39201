"""The I/O edges of ``check``, ``report`` and ``diff``: open stores, run the
pure cores, write files. ``cli.py`` calls these and prints what they return."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from ..errors import HarnessError
from .store import SCHEMA_VERSION, open_store


def _progress(label: str) -> Any:
    def show(n: int, total: int) -> None:
        if n == total or n % 500 == 0:
            print(f"{label}: {n}/{total} runs", file=sys.stderr)

    return show


def run_check(db: str, checkers_module: str | None = None) -> dict[str, Any]:
    from .check import check_document, check_store

    with open_store(db) as store:
        judged, skipped = check_store(store.con, checkers_module, _progress("check"))
    return check_document(judged, skipped, db)


def run_report(db: str, out: str) -> tuple[dict[str, Any], list[str]]:
    """Write report.html, summary.md, summary.json, junit.xml and the PNGs into ``out``."""
    from .html import html_page
    from .junit import junit_xml
    from .plots import load_plot_data, pick_run, render_all
    from .summary import load_facts, markdown, summarize

    with open_store(db) as store:
        facts = load_facts(store.con, db, SCHEMA_VERSION)
        data = load_plot_data(store.con, pick_run(store.con))
    doc = summarize(facts)
    figures = render_all(data)
    files = {
        "report.html": html_page(doc, figures),
        "summary.md": markdown(doc),
        "summary.json": json.dumps(doc, indent=2, sort_keys=True) + "\n",
        "junit.xml": junit_xml(doc),
    }
    folder = Path(out)
    written = []
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (folder / name).write_text(text, encoding="utf-8")
            written.append(str(folder / name))
        for name, png in figures.items():
            (folder / name).write_bytes(png)
            written.append(str(folder / name))
    except OSError as exc:
        raise HarnessError(f"cannot write the report into {out}: {exc.strerror or exc}") from None
    doc["files"] = written
    return doc, written


def run_diff(base: str, new: str | None) -> dict[str, Any]:
    from .diff import diff_stores, rerun_document, rerun_store, store_facts

    if new is None:
        with open_store(base) as store:
            replayed, changes, skipped = rerun_store(store.con, _progress("rerun"))
        return rerun_document(base, replayed, changes, skipped)
    with open_store(base) as a:
        fa = store_facts(a.con, base)
    with open_store(new) as b:
        fb = store_facts(b.con, new)
    return diff_stores(fa, fb)
