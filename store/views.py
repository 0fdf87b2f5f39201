"""SQL views for the questions users ask of a store (``docs/queries.md``).

They live in the database file, so anyone with the DuckDB CLI can query them;
they are (re)created with the schema and by every migration, so a view's
definition always matches the schema version that the file records. Since
v4 every view that counts runs counts ``distinct_runs``: a run stored twice
is one run, and one piece of evidence.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # duckdb itself is imported only where a store is opened
    from duckdb import DuckDBPyConnection

RUN_KEY = "seed, scenario, policy, policy_hash, options, version, target"
"""What makes two stored runs the same run: a seed (or a scenario) run
again under the same policy, options, inboxsim version and target gives the
same trace (harness-contract.md, "The trace and its hash"), so it is no new
evidence. A sweep re-run after a kill stores such repeats."""

VIEWS: dict[str, str] = {
    # Each run once: the latest stored run of each RUN_KEY (for a scenario
    # file edited between runs, the latest is the one that says what it does
    # now). The counting views below count these, not rows of runs.
    "distinct_runs": f"""
        SELECT * FROM runs WHERE run_id IN (SELECT max(run_id) FROM runs GROUP BY {RUN_KEY})""",
    # Violations counted by invariant and policy: how many runs broke it, of how many.
    "violations_by_invariant": """
        SELECT v.invariant, r.policy,
               count(DISTINCT v.run_id) AS runs_violated,
               count(*) AS violations,
               min(r.seed) AS first_seed
        FROM violations v JOIN distinct_runs r USING (run_id)
        GROUP BY v.invariant, r.policy""",
    # Per promoted input: when it was admitted and promoted, and with which
    # delivery. An ASOF join pairs each promotion with the latest admission of
    # the same input in the same session before it (an ID retried later is
    # the same admission; a fork's copy has no promotion of its own).
    "promotion_latency": """
        SELECT p.run_id, r.policy, p.session, p.input, a.delivery,
               a.step AS admitted_step, p.step AS promoted_step,
               a.time AS admitted_time, p.time AS promoted_time,
               p.time - a.time AS latency, p.step - a.step AS latency_steps
        FROM (SELECT * FROM events WHERE type = 'promoted') p
        ASOF JOIN (SELECT * FROM events WHERE type = 'admitted') a
          ON p.run_id = a.run_id AND p.session = a.session AND p.input = a.input
         AND p.seq >= a.seq
        JOIN distinct_runs r ON r.run_id = p.run_id""",
    # Pending inbox depth of each session at every step where it changed (the
    # trace records a session's whole pending inbox whenever it changes).
    "inbox_depth": """
        SELECT s.run_id, s.idx AS step, k.session,
               json_array_length(json_extract(s.observed, '$.pending."' || k.session || '"'))
                   AS depth
        FROM steps s, unnest(json_keys(s.observed, '$.pending')) AS k(session)
        WHERE s.observed LIKE '%"pending"%'""",
    # Probe coverage by policy: runs that hit each probe, of all runs.
    "probe_coverage": """
        SELECT r.policy, p.probe,
               count(DISTINCT p.run_id) AS runs_hit,
               sum(p.hits) AS hits,
               any_value(t.runs) AS runs
        FROM probes p JOIN distinct_runs r USING (run_id)
        JOIN (SELECT policy, count(*) AS runs FROM distinct_runs GROUP BY policy) t USING (policy)
        GROUP BY r.policy, p.probe""",
    # How many runs exercised each invariant (reached a step where it could
    # fail) and how many violated it, by policy: the basis of "quantified green".
    "invariant_exercise": """
        WITH ex AS (
            SELECT r.run_id, r.policy, unnest(r.exercised) AS invariant FROM distinct_runs r
        )
        SELECT ex.invariant, ex.policy, count(*) AS runs_exercised,
               count(*) FILTER (WHERE v.run_id IS NOT NULL) AS runs_violated
        FROM ex LEFT JOIN (SELECT DISTINCT run_id, invariant FROM violations) v
          ON v.run_id = ex.run_id AND v.invariant = ex.invariant
        GROUP BY ex.invariant, ex.policy""",
}


def create_views(con: DuckDBPyConnection) -> None:
    """Create or replace every view (inside the caller's transaction)."""
    for name, body in VIEWS.items():
        con.execute(f"CREATE OR REPLACE VIEW {name} AS {body}")
