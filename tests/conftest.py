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

import signal
import sys
import warnings
from collections.abc import Iterator

import pytest

from tests.signal_helpers import WATCHED, ignored_by_the_kernel

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


def pytest_configure(config: pytest.Config) -> None:
    """The suite runs as a foreground job would. A CI runner or a script that
    starts it in the background (``cmd &`` without job control) hands it SIGINT
    ignored, every process it starts inherits that, and the harness rightly
    stays deaf to a SIGINT it inherited as ignored (as every program of a
    background job does: test_harness_processes.py shows it). The tests of
    Ctrl-C are about a run started in the foreground, so they get one."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


# --- the worker's signal state, as each test found it ----------------------------------
#
# The tests of Ctrl-C and SIGTERM (test_harness_processes.py, test_harness_kills.py)
# signal this process, or start a command line that inherits its signal state:
# an ignored disposition and the blocked mask both survive fork and exec, and
# the harness rightly stays deaf to a SIGINT it inherited as ignored (a
# background job). A test that leaves SIGINT ignored or blocked in the worker
# would make those fail later, on whichever worker they land, for a reason
# they cannot see. So every test ends with the state it found: what it
# changed is put back, and named in a warning (the summary lists it).


@pytest.fixture(autouse=True)
def signals_left_as_found(request: pytest.FixtureRequest) -> Iterator[None]:
    if sys.platform == "win32":
        yield
        return
    handlers = {s: signal.getsignal(s) for s in WATCHED}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    ignored = ignored_by_the_kernel()
    yield
    changed = [
        f"{signal.Signals(s).name} handler"
        for s in WATCHED
        if signal.getsignal(s) != handlers[s] or (s in ignored_by_the_kernel()) != (s in ignored)
    ]
    now = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    if now != mask:
        changed.append(f"blocked signals {sorted(s.name for s in now)}")
    if changed:
        for s, handler in handlers.items():
            if handler is not None:
                signal.signal(s, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        warnings.warn(
            f"{request.node.nodeid} changed this process's {', '.join(changed)}; put back",
            pytest.PytestWarning,
            stacklevel=1,
        )
