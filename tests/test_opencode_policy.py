"""What running against the released OpenCode needed from the harness, tested
without OpenCode: the workload gated on a hello like OpenCode's (only
``interrupt`` and ``revert``, and the ``no_metadata`` restriction), the
liveness phase's wake by exact retry when there is no ``resume``, the g2
policy's ``on_response`` step events, and the conformance section of
``inboxsim report``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from inboxsim.cli import main
from inboxsim.conformance.report import ConformanceReport, Item
from inboxsim.conformance.rows import store_results
from inboxsim.model import G4, PRESETS, Answer, Create, Hello, Interrupt, Ok, Op, Prompt, apply
from inboxsim.model.apply import initial_state
from inboxsim.search.lockstep import LockstepTarget, NotTestable
from inboxsim.sim.run import RunOptions, run_seed
from inboxsim.targets.target import ModelTarget
from inboxsim.trace.record import Observed

OPENCODE_FEATURES = ["interrupt", "revert", "no_metadata"]
NEEDS_A_FEATURE = ("synthetic", "compact", "fork", "resume", "crash")


class OpenCodeLike(ModelTarget):
    """The model, with OpenCode 1.18.33's hello: it refuses what that lacks."""

    def __init__(self, policy: Any, step_limit: int) -> None:
        super().__init__(policy, step_limit)
        self.sent: list[Op] = []

    def request(self, op: Op, crash_at: str | None = None) -> tuple[Any, Observed]:
        assert crash_at is None, "a crash_at sent to a target without failpoints"
        assert op.OP not in NEEDS_A_FEATURE, f"{op.OP} sent to a target that lacks it"
        assert not getattr(op, "metadata", None), f"metadata sent despite no_metadata: {op}"
        self.sent.append(op)
        reply, observed = super().request(op, crash_at)
        if isinstance(op, Hello) and isinstance(reply, Ok):
            reply = Ok({**reply.result, "features": OPENCODE_FEATURES})
        return reply, observed


def test_the_workload_sends_only_what_an_opencode_hello_allows() -> None:
    made: list[OpenCodeLike] = []

    def factory(policy: Any, step_limit: int) -> OpenCodeLike:
        made.append(OpenCodeLike(policy, step_limit))
        return made[-1]

    labels: set[str] = set()
    for seed in range(40):
        result = run_seed(
            seed, PRESETS["g2"], RunOptions(ops=60, only_expected=True), target=factory
        )
        assert result.violations == (), (seed, result.violations)
        assert result.liveness == "settled", seed
        labels |= {s.decision for s in result.trace.steps}
    # What is left is still exercised: retries, conflicts (but not by metadata
    # or kind), interrupts, kills, and liveness wakes by exact retry.
    assert {"retry", "interrupt", "kill", "liveness.retry"} <= labels, labels
    assert {"revert.stage", "revert.commit", "revert.clear"} <= labels, labels
    assert {"conflict.text", "conflict.session"} & labels
    assert not {"conflict.metadata", "conflict.kind", "liveness.resume"} & labels
    assert any(isinstance(op, Prompt) for t in made for op in t.sent)


def test_lockstep_makes_metadata_not_testable_for_a_no_metadata_target() -> None:
    lock = LockstepTarget(ModelTarget(G4, 3), OpenCodeLike(G4, 3))
    reply, _ = lock.request(Hello(0, step_limit=3))
    assert isinstance(reply, Ok) and reply.result["features"] == OPENCODE_FEATURES
    lock.request(Create(1, session="s"))
    with pytest.raises(NotTestable, match="metadata"):
        lock.request(Prompt(2, session="s", input="i", text="t", metadata={"k": 1}))
    assert "metadata" in lock.not_testable and "no_metadata" not in lock.not_testable
    lock.request(Prompt(3, session="s", input="i", text="t"))  # without metadata: fine


def _events(policy_name: str, ops: list[Op]) -> list[list[str]]:
    state = initial_state(PRESETS[policy_name], 3)
    out = []
    for op in ops:
        outcome = apply(state, op)
        state = outcome.state
        out.append([e.type for e in outcome.events])
    return out


def test_g2_writes_step_events_on_response_and_no_execution_events() -> None:
    ops: list[Op] = [
        Create(1, session="s"),
        Prompt(2, session="s", input="a", text="x"),
        Answer(3, call="call-1", finish="tool"),
        Answer(4, call="call-2", finish="error"),
        Prompt(5, session="s", input="b", text="y"),
        Interrupt(6, session="s"),
    ]
    assert _events("g2", ops) == [
        [],
        ["admitted", "promoted"],  # the call opens; no step_started yet
        ["step_started", "step_ended"],  # the response, then the next call
        ["step_started", "step_failed"],
        ["admitted", "promoted"],
        [],  # the step never started in the log: no step event at all
    ]
    assert _events("g4", ops) == [
        [],
        ["admitted", "execution_started", "promoted", "step_started"],
        ["step_ended", "step_started"],
        ["step_failed", "execution_failed"],
        ["admitted", "execution_started", "promoted", "step_started"],
        ["step_failed", "execution_interrupted"],
    ]


def test_the_report_renders_the_latest_conformance_batch(tmp_path: Path) -> None:
    db = str(tmp_path / "store.duckdb")
    report = ConformanceReport("opencode", ["adapter"], "g2")
    report.items = [
        Item("scenario", "seed-send", "held", seconds=2.0),
        Item("scenario", "forced-resume", "not testable", "resume: resume not in the target's"),
        Item("seed", "0", "held", "30 steps", seconds=10.0, steps=30),
        Item(
            "seed",
            "1",
            "diverged",
            "step 4: replies differ\nmodel: ok",
            "inboxsim x",
            seconds=5.0,
            steps=10,
        ),
        Item("feature", "fork", "not testable", "fork not in the target's hello features"),
    ]
    store_results(db, report)
    out = tmp_path / "report"
    assert main(["report", "--db", db, "--out", str(out)]) == 1  # a seed diverged
    md = (out / "summary.md").read_text()
    assert "Conformance of opencode against the model (policy g2, batch 1)" in md
    assert "seeds diverged (1): 1" in md and "scenarios held (1): seed-send" in md
    assert "features not testable (1): fork" in md
    assert "40 requests at 2.67 requests/s" in md
    assert "step 4: replies differ" in md and "inboxsim x" in md
    assert "Conformance of opencode" in (out / "report.html").read_text()
    # A later, clean batch of the same target replaces it.
    report.items = [Item("seed", "0", "held", "30 steps", seconds=10.0, steps=30)]
    store_results(db, report)
    assert main(["report", "--db", db, "--out", str(out)]) == 0
    assert "batch 2" in (out / "summary.md").read_text()
