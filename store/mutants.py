"""Planted-bug results (``inboxsim mutants``) as ``mutants`` rows: the kill
matrix the report shows. :func:`kill_rows` reads the documents of
``inboxsim mutants --json`` (``KillResult.to_dict``), so rows can come from a
live campaign or from a saved JSON file alike."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

_VIOLATED = re.compile(r"invariant (\S+) violated")
_SEED = re.compile(r"seed (\d+)$")


def kill_row(doc: dict[str, Any]) -> dict[str, Any]:
    """One mutant's result document as a row for :meth:`Store.write_mutants`.

    ``killed_by`` is the invariant's id for an invariant kill, else where and
    what the detection was (a divergence's or expectation's description)."""
    killed = bool(doc.get("killed"))
    where, detail = doc.get("where") or "", doc.get("detail") or ""
    killed_by = None
    if killed:
        killed_by = f"{where}: {detail}" if where else detail
        if doc.get("by") == "invariant":
            # A seed's kill reads "id: message"; a scenario's "step N: invariant id violated: ...".
            named = _VIOLATED.search(detail)
            killed_by = named.group(1) if named else detail.split(":", 1)[0]
    seed = _SEED.search(where)
    return {
        "mutant": doc.get("mutant") or "baseline",  # None: the unmutated implementation
        "killed_by_kind": doc.get("by") if killed else "none",
        "killed_by": killed_by,
        "seed": int(seed.group(1)) if seed else None,
        "seconds_to_detect": doc.get("seconds_to_detect") if killed else None,
        "runs": int(doc.get("scenarios_run", 0)) + int(doc.get("seeds_run", 0)),
        "shrunk_ops": doc.get("shrunk_ops"),
    }


def kill_rows(docs: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [kill_row(d) for d in docs]
