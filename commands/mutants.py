"""``inboxsim mutants``: the kill matrix, conformance against each planted bug."""

from __future__ import annotations

import json
from typing import Any

from ..conformance.catalogue import MUTANTS, Mutant
from ..conformance.matrix import matrix_document, mutant_matrix, render_matrix, summary_line
from ..errors import HarnessError
from ..procs.scratch import write_atomic
from ..store.mutants import kill_rows
from ..store.store import Store, check_writable
from .output import check_out, echo, emit_json, progress


def mutants(
    *,
    names: str | None,
    seeds: int,
    ops: int,
    jobs: int,
    list_only: bool,
    db: str | None,
    out: str | None,
    no_shrink: bool,
    shrink_seconds: float,
    as_json: bool,
) -> int:
    if list_only:
        if as_json:
            emit_json({"mutants": [vars_of(m) for m in MUTANTS.values()]})
        else:
            for m in MUTANTS.values():
                echo(f"{m.name}  [{m.bug_class}]  {m.description}")
        return 0
    if out is not None:
        check_out(out)  # before the run, not after it
    chosen = [n.strip() for n in names.split(",") if n.strip()] if names else None
    if db is not None:  # a bad --db fails before the campaign, not after it
        check_writable(db)
    results = mutant_matrix(
        chosen,
        seeds,
        ops=ops,
        jobs=jobs,
        progress=progress,
        shrink_seconds=None if no_shrink else shrink_seconds,
    )
    document = matrix_document(results, seeds=seeds, ops=ops)
    survived = document["survived"]
    if out is not None:
        try:
            write_atomic(check_out(out), json.dumps(document, indent=2) + "\n")
        except OSError as exc:
            raise HarnessError(f"--out {out}: cannot write ({exc.strerror})") from None
    if db is not None:
        with Store(db) as store:
            store.write_mutants(kill_rows(r.to_dict() for r in results))
    if as_json:
        emit_json(document)
    else:
        echo(render_matrix(results))
        echo("")
        echo(
            summary_line(document)
            + (f"; survived: {', '.join(str(s) for s in survived)}" if survived else "")
        )
        if out is not None:
            echo(f"results written to {out}")
    return int(document["exit_code"])


def vars_of(mutant: Mutant) -> dict[str, Any]:
    """A mutant in ``mutants --list --json``."""
    return {"name": mutant.name, "class": mutant.bug_class, "description": mutant.description}
