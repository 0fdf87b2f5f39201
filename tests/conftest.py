"""Markers by intent, assigned here by module so that the split is one table.

- ``slow``: long-running: many seeds, real adapter processes and kills, a
  headless browser, a Dask cluster;
- ``quality``: the harness finds a planted bug and shrinks it (mutants,
  breakers, shrink, repro, the Hypothesis machine, races);
- everything else is the fast default set.

CI runs every test (README's ``python -m pytest -n 2``); the fast set alone is
``python -m pytest -n 2 -m "not slow and not quality"``.
"""

from __future__ import annotations

import pytest

INTENT: dict[str, str] = {
    "test_adapter_e2e": "slow",
    "test_conformance": "slow",
    "test_explore_reduction": "slow",
    "test_faults_store": "slow",
    "test_harness_kills": "slow",
    "test_harness_processes": "slow",
    "test_id_namespace_library": "slow",
    "test_lockstep": "slow",
    "test_opencode": "slow",
    "test_pinned_hashes": "slow",
    "test_report_problems": "slow",
    "test_sim_dask": "slow",
    "test_breakers": "quality",
    "test_invariants_mutants": "quality",
    "test_mutants": "quality",
    "test_repro": "quality",
    "test_shrink": "quality",
    "test_sqlite_races": "quality",
    "test_stateful": "quality",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        intent = INTENT.get(item.path.stem)
        if intent is not None:
            item.add_marker(intent)
