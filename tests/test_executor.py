"""The one loop every caller runs its work through (``sim.executor.run_tasks``):
results in task order when asked, a stop that ends submission, a dead
worker said in one line. Built-in functions stand in for batches, so that
the worker processes need nothing of the tests."""

from __future__ import annotations

import os

import pytest

from inboxsim.errors import HarnessError
from inboxsim.sim.executor import run_tasks


def test_one_job_runs_here_in_task_order_and_stops_when_asked() -> None:
    seen: list[int] = []

    def square(n: int) -> int:
        seen.append(n)
        return n * n

    out = list(run_tasks(square, lambda slots: [1, 2, 3, 4], stop=lambda: len(seen) >= 2))
    assert out == [(1, 1), (2, 4)]


def test_a_pool_gives_every_result_once_and_in_task_order_when_asked() -> None:
    tasks = [-5, 3, -1, 8, -2, 7, 0]
    slots_seen: list[int] = []

    def cut(slots: int) -> list[int]:
        slots_seen.append(slots)
        return tasks

    ordered = list(run_tasks(abs, cut, jobs=2, in_order=True))
    assert ordered == [(t, abs(t)) for t in tasks] and slots_seen == [2]
    unordered = list(run_tasks(abs, lambda slots: tasks, jobs=2))
    assert sorted(unordered) == sorted(ordered)


def test_a_worker_that_dies_ends_the_run_with_one_line() -> None:
    with pytest.raises(HarnessError, match="task 3: a local worker process died"):
        list(run_tasks(os._exit, lambda slots: [3], jobs=2, what=lambda t: f"task {t}"))
