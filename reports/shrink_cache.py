"""The store's cache of shrunk counterexamples (table ``shrunk``, schema v5).

``inboxsim report`` shrinks one failing seed per problem; shrinking costs
hundreds of runs, the result is a few kilobytes, and the same store gives the
same result every time. So the result is kept in the store, keyed by what
makes it the same result:

- the run shrunk: its seed, policy (name and content hash), options and the
  inboxsim version that ran it (the columns of ``distinct_runs``' key that a
  seeded run of the model has);
- the invariant it was shrunk for (a run may violate several);
- the inboxsim version that shrank it: another version may shrink
  differently, so its report shrinks again rather than show a stale result.

``outcome`` is ``shrunk`` (``example``: the counterexample document) or
``not reproduced`` (the seed no longer violates the invariant when run again;
``example`` says what it did instead), so that a report does not retry a
seed that cannot be shrunk either.

Store access only: what a counterexample document holds is the business of
the code that makes and renders it (:mod:`.counterexamples`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, NamedTuple

OUTCOMES = ("shrunk", "not reproduced")


class ShrinkKey(NamedTuple):
    """What a cached shrink is the shrink of."""

    seed: int
    policy: str
    policy_hash: str | None
    options: str  # the run's options as stored (``options_key``)
    run_version: str  # the inboxsim version that ran it
    invariant: str


def load_shrunk(con: Any, version: str) -> dict[ShrinkKey, tuple[str, dict[str, Any]]]:
    """Every cached shrink made by inboxsim ``version``: key -> (outcome, example)."""
    rows = con.execute(
        "SELECT seed, policy, policy_hash, options, run_version, invariant, outcome, example "
        "FROM shrunk WHERE version = ? ORDER BY recorded_at, rowid",
        [version],
    ).fetchall()
    return {
        ShrinkKey(int(r[0]), r[1], r[2], r[3], r[4], r[5]): (r[6], json.loads(r[7])) for r in rows
    }


def write_shrunk(
    store: Any, version: str, rows: Iterable[tuple[ShrinkKey, str, dict[str, Any]]]
) -> int:
    """Cache shrinks made by inboxsim ``version`` (``store``: a writable
    :class:`~.store.Store`), in one transaction. Returns how many were
    written. Rows are only ever added (a report shrinks only what is not
    cached); should a key be written twice, :func:`load_shrunk` reads the
    later one. (No deletes: DuckDB may shorten a file whose last blocks a
    delete frees, which the store's open-time size check would misread.)"""
    rows = list(rows)
    for _key, outcome, _doc in rows:
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome {outcome!r} is not one of {', '.join(OUTCOMES)}")
    with store.transaction() as con:
        for key, outcome, doc in rows:
            con.execute(
                "INSERT INTO shrunk (seed, policy, policy_hash, options, run_version, invariant, "
                "version, outcome, example) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [*key, version, outcome, json.dumps(doc, sort_keys=True, separators=(",", ":"))],
            )
    return len(rows)
