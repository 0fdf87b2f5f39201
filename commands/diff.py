"""``inboxsim diff``: the regression report between two stores, or between a
store and the current code (``--rerun``)."""

from __future__ import annotations

from typing import Any

from ..errors import HarnessError
from ..reports.diff import (
    diff_lines,
    diff_stores,
    rerun_document,
    rerun_lines,
    rerun_store,
    store_facts,
)
from ..store.store import open_store
from .output import echo, emit_json, runs_progress


def diff(*, base: str, new: str | None, rerun: bool, as_json: bool) -> int:
    if rerun == (new is not None):
        raise HarnessError("give BASE and NEW, or --rerun BASE")
    document = run_diff(base, new)
    if as_json:
        emit_json(document)
    else:
        for line in rerun_lines(document) if rerun else diff_lines(document):
            echo(line)
    return int(document["exit_code"])


def run_diff(base: str, new: str | None) -> dict[str, Any]:
    """The ``diff`` document: ``base`` against ``new``, or (None) replayed."""
    if new is None:
        with open_store(base) as store:
            replayed, changes, skipped = rerun_store(store.con, runs_progress("rerun"))
        return rerun_document(base, replayed, changes, skipped)
    with open_store(base) as a:
        fa = store_facts(a.con, base)
    with open_store(new) as b:
        fb = store_facts(b.con, new)
    return diff_stores(fa, fb)
