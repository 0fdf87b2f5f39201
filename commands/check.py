"""``inboxsim check``: every stored trace judged again by the current checkers."""

from __future__ import annotations

import os
from typing import Any

from ..reports.check import check_document, check_lines, check_store
from ..store.store import open_store
from .output import echo, emit_json, runs_progress

CHECKERS_ENV = "INBOXSIM_CHECKERS"  # the checker package to judge with, if not the installed one


def check(*, db: str, as_json: bool) -> int:
    document = run_check(db, os.environ.get(CHECKERS_ENV) or None)
    if as_json:
        emit_json(document)
    else:
        for line in check_lines(document):
            echo(line)
    return int(document["exit_code"])


def run_check(db: str, checkers_module: str | None = None) -> dict[str, Any]:
    """The ``check`` document of the store ``db``."""
    with open_store(db) as store:
        judged, skipped = check_store(store.con, checkers_module, runs_progress("check"))
    return check_document(judged, skipped, db)
