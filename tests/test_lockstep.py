"""Lockstep conformance (``search/lockstep.py``): the model against itself through
the protocol, the SQLite implementation against the model, and hand-made
divergences reported side by side."""

from __future__ import annotations

import itertools
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from inboxsim.conformance.catalogue import mutant_command
from inboxsim.model import G4, Create, Fork, Hello, Ok, Op, Prompt, Reply, Resume
from inboxsim.scenarios.load import load_library, resolve_policy
from inboxsim.search.divergence import Divergence
from inboxsim.search.lockstep import LockstepTarget, NotTestable, needs
from inboxsim.search.lockstep_scenarios import run_scenarios_lockstep
from inboxsim.sim.run import RunOptions, RunResult, run_seed
from inboxsim.targets.adapter import AdapterTarget
from inboxsim.targets.target import ModelTarget
from inboxsim.trace.record import Observed

MODEL_ADAPTER = [sys.executable, "-m", "inboxsim.targets.model_adapter"]


def adapter_factory(tmp_path: Path, command: list[str], with_policy: bool = False) -> Any:
    """``with_policy``: the adapter takes ``--policy NAME`` (the model adapter)."""
    counter = itertools.count()

    def make(policy: Any, step_limit: int) -> AdapterTarget:
        argv = [*command, "--policy", policy.name] if with_policy else command
        return AdapterTarget(argv, tmp_path / f"d{next(counter)}", step_limit, timeout=20.0)

    return make


def sqlite_command() -> list[str]:
    return mutant_command(None)[0]


def assert_no_divergence(results: list[Any]) -> None:
    bad = [r for r in results if not r.passed]
    assert not bad, "\n\n".join(
        r.divergence.render() if r.divergence else f"{r.name}: {r.failures}" for r in bad
    )


# --- whole-library conformance ------------------------------------------------------


def test_model_adapter_conforms_over_the_library(tmp_path: Path) -> None:
    # Each scenario under its own policy: the model adapter is started with it.
    counter = itertools.count()

    def make(policy: Any, step_limit: int) -> AdapterTarget:
        origin = policies[policy.name]
        argv = [*MODEL_ADAPTER, "--policy", origin]
        return AdapterTarget(argv, tmp_path / f"d{next(counter)}", step_limit, timeout=20.0)

    library = load_library()
    policies = {resolve_policy(s.scenario.policy, s.origin).name: _policy_arg(s) for s in library}
    results = run_scenarios_lockstep(library, ModelTarget, make)
    assert len(results) == len(library)
    assert_no_divergence(results)


def _policy_arg(loaded: Any) -> str:
    """A scenario's policy as the model adapter's --policy: a preset, or its file."""
    name = loaded.scenario.policy
    return str(Path(loaded.origin).parent / name) if name.endswith(".toml") else name


def test_sqlite_inbox_conforms_over_the_library(tmp_path: Path) -> None:
    """The SQLite inbox implements g4: every scenario whose expectations hold
    under g4, run under g4."""
    under_g4 = [s for s in load_library() if "g4" not in s.scenario.breaks_under]
    assert len(under_g4) < len(load_library())  # revert-keeps-boundary-g2 is g2's only
    results = run_scenarios_lockstep(
        under_g4, ModelTarget, adapter_factory(tmp_path, sqlite_command()), policy=G4
    )
    assert_no_divergence(results)


def _seeded(
    seed: int, command: list[str], data: Path, ops: int, timeout: float = 10.0
) -> RunResult:
    """One seed of the sweep's workload through a lockstep target (the
    sweep's own run loop, with its liveness phase and checkers)."""

    def lockstep(policy: Any, limit: int) -> LockstepTarget:
        adapter = AdapterTarget(command, data, limit, timeout=timeout)
        return LockstepTarget(ModelTarget(policy, limit), adapter)

    return run_seed(seed, G4, RunOptions(ops=ops), target=lockstep)


@pytest.mark.parametrize("seed", range(4))
def test_model_adapter_conforms_on_seeded_runs(tmp_path: Path, seed: int) -> None:
    result = _seeded(seed, MODEL_ADAPTER, tmp_path / "d", ops=50, timeout=20.0)
    assert len(result.trace.steps) > 50


def test_sqlite_inbox_conforms_on_seeded_runs(tmp_path: Path) -> None:
    for seed in range(12):
        result = _seeded(seed, sqlite_command(), tmp_path / f"d{seed}", ops=60)
        assert not result.violations, (seed, result.violations[:3])


# --- hand-made divergences --------------------------------------------------------


class FlipDelivery(ModelTarget):
    """The model, except that queued rows show as steers in ``pending``."""

    def request(self, op: Op, crash_at: str | None = None) -> tuple[Reply, Observed]:
        reply, obs = super().request(op, crash_at)
        pending = tuple(
            (sid, tuple(replace(r, delivery="steer") for r in rows)) for sid, rows in obs.pending
        )
        return reply, replace(obs, pending=pending)


def start(lock: LockstepTarget) -> None:
    lock.request(Hello(0, step_limit=4))
    lock.request(Create(1, session="s1"))


def test_a_changed_delivery_is_reported_side_by_side() -> None:
    lock = LockstepTarget(ModelTarget(G4, 4), FlipDelivery(G4, 4))
    start(lock)
    lock.request(Prompt(2, session="s1", input="m1", text="a", resume=False))
    with pytest.raises(Divergence) as caught:
        lock.request(Prompt(3, session="s1", input="q1", text="b", delivery="queue", resume=False))
    div = caught.value
    assert div.step == 3 and div.where == "pending s1"
    assert div.request is not None and div.request["input"] == "q1"
    assert div.model == [["m1", "user", "steer", 0], ["q1", "user", "queue", 1]]
    assert div.target == [["m1", "user", "steer", 0], ["q1", "user", "steer", 1]]
    text = div.render()
    assert "pending s1 differs" in text and "steps that led there" in text
    marked = [line for line in text.splitlines() if line.startswith("  ! ")]
    assert any('"queue"' in line and '"steer"' in line and "|" in line for line in marked), text
    assert "raw (reply and observation of this step)" in text
    assert div.to_dict()["where"] == "pending s1"


class ReceiptDrift(ModelTarget):
    """The model, except that every receipt's time is the request's ``now``."""

    def request(self, op: Op, crash_at: str | None = None) -> tuple[Reply, Observed]:
        reply, obs = super().request(op, crash_at)
        if isinstance(reply, Ok) and "admitted_seq" in reply.result:
            reply = Ok({**reply.result, "time": op.now})
        return reply, obs


def test_an_exact_retry_must_return_the_original_receipt_on_the_same_side() -> None:
    lock = LockstepTarget(ModelTarget(G4, 4), ReceiptDrift(G4, 4))
    start(lock)
    lock.request(Prompt(2, session="s1", input="m1", text="a", resume=False))
    with pytest.raises(Divergence) as caught:
        lock.request(Prompt(5, session="s1", input="m1", text="a", resume=False))
    assert caught.value.where.startswith("retry receipt")
    assert caught.value.target["retry"]["time"] == 5


def test_generated_ids_are_mapped_by_order_of_appearance(tmp_path: Path) -> None:
    """SQLite names its IDs sq_in_…/sq_call_…, the model in-…/call-…: the lockstep
    target maps them, and translates the target's IDs in requests for the model."""
    lock = LockstepTarget(ModelTarget(G4, 3), AdapterTarget(sqlite_command(), tmp_path / "d", 3))
    try:
        start(lock)
        reply, _ = lock.request(Prompt(2, session="s1", text="no id", resume=False))
        assert isinstance(reply, Ok) and reply.result["input"].startswith("sq_in_")
        lock.request(Resume(3, session="s1"))
        generated = reply.result["input"]
        _, obs = lock.request(Fork(4, session="s1", child="f1"))
        copy = obs.transcript[0][1][0]
        assert copy.copied_from == generated
        lock.request(Fork(5, session="f1", child="f2", before=copy.id))  # a target copy ID
        assert lock.m.label and lock.t.label
        assert lock.t.label[generated] == lock.m.label[lock.m.raw["gen:1"]] == "gen:1"
    finally:
        lock.close()


# --- features ---------------------------------------------------------------------------


class NoFork(ModelTarget):
    def request(self, op: Op, crash_at: str | None = None) -> tuple[Reply, Observed]:
        reply, obs = super().request(op, crash_at)
        if isinstance(op, Hello) and isinstance(reply, Ok):
            feats = [f for f in reply.result["features"] if f != "fork"]
            reply = Ok({**reply.result, "features": feats})
        return reply, obs


def test_a_missing_feature_is_skipped_on_both_sides_and_recorded() -> None:
    lock = LockstepTarget(ModelTarget(G4, 4), NoFork(G4, 4))
    assert lock.testable(Fork(0, session="s1", child="f1"))  # before hello: not yet known
    reply, _ = lock.request(Hello(0, step_limit=4))
    assert isinstance(reply, Ok) and "fork" not in reply.result["features"]
    assert "fork" not in lock.features() and "synthetic" in lock.features()
    op = Fork(1, session="s1", child="f1")
    assert needs(op) == ("fork",) and needs("prompt", "after_admit") == ("failpoints",)
    assert not lock.testable(op)
    with pytest.raises(NotTestable, match="fork not in the target's hello features"):
        lock.request(op)
    assert "fork" in lock.not_testable and lock.skipped
    assert lock.steps == 1  # nothing was sent


def test_a_target_s_groups_are_not_called_untestable() -> None:
    """The model's hello lists no ``group``: the search judges groups against
    the model in process. The report said "group: not testable" on runs whose
    groups were sent and judged; an unknown feature still is."""

    class Grouping(ModelTarget):
        def request(self, op: Op, crash_at: str | None = None) -> tuple[Reply, Observed]:
            reply, obs = super().request(op, crash_at)
            if isinstance(op, Hello) and isinstance(reply, Ok):
                feats = [*reply.result["features"], "group", "pause_points", "teleport"]
                reply = Ok({**reply.result, "features": feats})
            return reply, obs

    lock = LockstepTarget(ModelTarget(G4, 4), Grouping(G4, 4))
    lock.request(Hello(0, step_limit=4))
    assert "group" not in lock.not_testable and "pause_points" not in lock.not_testable
    assert lock.not_testable["teleport"] == "teleport not in the model's hello features"


def test_another_step_allowance_makes_allowance_rules_not_testable() -> None:
    class OtherLimit(ModelTarget):
        def request(self, op: Op, crash_at: str | None = None) -> tuple[Reply, Observed]:
            reply, obs = super().request(op, crash_at)
            if isinstance(op, Hello) and isinstance(reply, Ok):
                reply = Ok({**reply.result, "step_limit": 99})
            return reply, obs

    lock = LockstepTarget(ModelTarget(G4, 4), OtherLimit(G4, 4))
    lock.request(Hello(0, step_limit=4))
    assert "allowance" in lock.not_testable
