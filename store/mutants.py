"""Planted-bug results (``inboxsim mutants``) as ``mutants`` rows: the kill
matrix the report shows. :func:`kill_rows` reads the documents of
``inboxsim mutants --json`` (``KillResult.to_dict``), so rows can come from a
live campaign or from a saved JSON file alike; :func:`mutant_row` checks one
before :meth:`.store.Store.write_mutants` writes it."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from ..errors import HarnessError

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


KILL_KINDS = ("invariant", "divergence", "expectation", "none")
"""How a planted bug was caught: an invariant violation, a divergence from the
model in lockstep, a failed scenario expectation, or not at all (survived)."""


def mutant_row(n: int, row: dict[str, Any]) -> tuple[Any, ...]:
    """One ``mutants`` row as a tuple, or a one-line error naming what is wrong."""
    where = f"mutant row {n}"
    try:
        mutant, kind, runs = row["mutant"], row["killed_by_kind"], row["runs"]
    except KeyError as exc:
        raise HarnessError(f"{where} has no {exc.args[0]!r}") from None
    except TypeError:
        raise HarnessError(f"{where} is not a mapping: {row!r}") from None
    if not isinstance(mutant, str) or not mutant:
        raise HarnessError(f"{where}: mutant must be a non-empty name, not {mutant!r}")
    if kind not in KILL_KINDS:
        raise HarnessError(
            f"{where} ({mutant}): killed_by_kind {kind!r} is not one of {', '.join(KILL_KINDS)}"
        )
    killed_by = row.get("killed_by")
    if (kind == "none") != (killed_by is None):
        raise HarnessError(
            f"{where} ({mutant}): killed_by must be given exactly when killed_by_kind is not 'none'"
        )
    seed, seconds, shrunk = row.get("seed"), row.get("seconds_to_detect"), row.get("shrunk_ops")
    for key, value in (("seed", seed), ("shrunk_ops", shrunk), ("runs", runs)):
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 0
        ):
            raise HarnessError(
                f"{where} ({mutant}): {key} must be a non-negative integer, not {value!r}"
            )
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, int | float)):
        raise HarnessError(
            f"{where} ({mutant}): seconds_to_detect must be a number, not {seconds!r}"
        )
    return (mutant, kind, killed_by, seed, seconds, runs, shrunk)
