"""The explorer's chunks run with the cyclic collector paused (sim/collector.py)."""

from __future__ import annotations

import gc

import pytest

from inboxsim.sim.collector import paused


def _state() -> bool:
    return gc.isenabled()


def test_paused_work_runs_without_the_collector_and_restores_it() -> None:
    assert gc.isenabled()
    assert paused(_state)() is False
    assert gc.isenabled()


def test_a_caller_with_the_collector_off_keeps_it_off() -> None:
    gc.disable()
    try:
        assert paused(_state)() is False
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_collector_is_restored_when_the_work_raises() -> None:
    def fails() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        paused(fails)()
    assert gc.isenabled()


SEEN: list[bool] = []  # module-level: the explorer copies monitors by pickle


class _Spy:
    """A monitor that records whether the collector ran as it fed each step."""

    def __init__(self, policy: object, hello: object) -> None:
        pass

    def feed(self, step: object) -> list[object]:
        SEEN.append(gc.isenabled())
        return []

    def finish(self, liveness: bool) -> list[object]:
        return []


def test_the_explorer_judges_its_chunks_with_the_collector_paused() -> None:
    from inboxsim.model import PRESETS
    from inboxsim.search.explore import explore

    SEEN.clear()
    result = explore(PRESETS["g4"], _Spy, sessions=1, depth=2)
    assert result.transitions > 0 and not result.violations
    prefix = 2  # hello and the create, fed before the search, outside any chunk
    assert SEEN[:prefix] == [True, True]
    assert len(SEEN) > prefix and not any(SEEN[prefix:])
    assert gc.isenabled()
