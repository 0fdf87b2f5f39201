"""The harness killed at random moments (issue 17): SIGKILL, SIGTERM and
SIGINT sent to a sweep (a local pool, one process, a Dask cluster), to
conformance (the SQLite inbox on two workers, an adapter that hangs after
starting a helper in its own session and a daemon) and to ``run --db``; each
kill point drawn from a fixed seed (tests/harness_faults.py says how, and
what is judged after each: the exit and its line, no process of the run
left, the store whole and passing ``check``, no temporary folder left).

A CI-sized set: two trials of each kind. The long version is
``benchmarks/harness_kills.py`` (docs/harness-faults.md has its figures).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness_faults import KINDS, Trial, plan, run_trial

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc (Linux)")

SEED = 17
TRIALS = plan(SEED, 2 * len(KINDS))


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A trial's folder with a short path, so that the run's temporary
    folder (supervise.ROOT_MAX) holds the pool's socket, as under /tmp."""
    with tempfile.TemporaryDirectory(prefix="ibx", dir="/tmp") as folder:
        yield Path(folder)


@pytest.mark.parametrize("trial", TRIALS, ids=Trial.describe)
def test_a_killed_run_leaves_no_process_no_folder_and_a_whole_store(
    trial: Trial, short_tmp: Path
) -> None:
    if trial.kind == "sweep-dask":
        pytest.importorskip("distributed")
    outcome = run_trial(trial, short_tmp)
    assert outcome.problems == [], f"{trial.describe()}: exit {outcome.exit_code}, {outcome.line!r}"
