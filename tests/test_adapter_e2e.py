"""The model behind the protocol equals the model in process.

The same scripted requests (retries, a conflict, failpoint crashes, a kill and
restart, forks, reverts, stale answers) go to ``ModelTarget`` and, through
``AdapterTarget``, to ``python -m inboxsim.targets.model_adapter``; replies and
observations must be equal step for step once the IDs the implementation
generated are mapped by order of appearance (``docs/cli.md``,
lockstep). Both sides are the model, so anything else is a harness bug: in
the protocol code, the observation diffing, or the adapter's journal.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from inboxsim.model import (
    G4,
    PRESETS,
    Answer,
    Calls,
    Compact,
    Create,
    Fork,
    Hello,
    Interrupt,
    Log,
    Messages,
    Op,
    Pending,
    Prompt,
    Resume,
    RevertClear,
    RevertStage,
    Synthetic,
)
from inboxsim.targets.adapter import AdapterTarget
from inboxsim.targets.target import ModelTarget, Target
from inboxsim.trace.record import observed_wire, reply_wire
from inboxsim.trace.view import View

STEP_LIMIT = 3
GENERATED = re.compile(r"^(in|cmp|copy|call)-\d+$")  # the model's generated IDs

Step = tuple[Op, str | None] | Callable[[View], tuple[Op, str | None]] | str


def model_adapter(tmp_path: Path, policy: str = "g4") -> AdapterTarget:
    command = [sys.executable, "-m", "inboxsim.targets.model_adapter", "--policy", policy]
    return AdapterTarget(command, tmp_path / "data", STEP_LIMIT, timeout=20.0)


def answer(finish: str) -> Callable[[View], tuple[Op, str | None]]:
    def step(view: View) -> tuple[Op, str | None]:
        if not view.calls:
            return Calls(0), None
        return Answer(0, call=view.calls[0].call, finish=finish), None

    return step


SCRIPT: list[Step] = [
    (Hello(0, step_limit=STEP_LIMIT), None),
    (Create(1, session="s1"), None),
    (Create(2, session="s2"), None),
    (Create(3, session="s1"), None),  # adopted: nothing changes
    (Prompt(4, session="s1", input="a1", text="hello", metadata={"k": 1.0}), None),
    (Prompt(5, session="s1", input="a1", text="hello", metadata={"k": 1}), None),  # exact retry
    (Prompt(6, session="s1", input="a1", text="other"), None),  # prompt_conflict
    (Prompt(7, session="s1", text="later", delivery="queue"), None),  # generated ID
    answer("tool"),
    (Prompt(9, session="s2", text="lost?"), "after_admit"),
    (Hello(10, step_limit=STEP_LIMIT), None),
    (Prompt(11, session="s2", input="b1", text="two"), "mid_promotion"),
    (Hello(12, step_limit=STEP_LIMIT), None),
    (Prompt(13, session="s2", input="b1", text="two"), None),  # retry after the unknown outcome
    (Compact(14, session="s1"), None),
    (Fork(15, session="s1", child="c1"), None),
    (Fork(16, session="s1", child="c1"), None),  # invalid_request: exists
    "kill",
    (Hello(17, step_limit=STEP_LIMIT), None),
    (Prompt(18, session="s1", text="after the kill"), None),  # generated ID must not collide
    (Resume(19, session="s1"), None),
    answer("stop"),
    answer("stop"),
    answer("error"),
    answer("stop"),
    (Synthetic(24, session="s2", input="n1", text="note", delivery="queue"), None),
    (Interrupt(25, session="s2"), None),
    (Interrupt(26, session="c1"), None),
    (Prompt(27, session="c1", input="c-in", text="child"), "after_promotion"),
    (Hello(28, step_limit=STEP_LIMIT), None),
    (RevertStage(29, session="s1", message="a1"), None),
    (Prompt(30, session="s1", input="a2", text="instead"), None),  # commits the revert
    (RevertClear(31, session="s2"), None),
    answer("stop"),
    answer("stop"),
    answer("stop"),
    (Answer(35, call="call-0", finish="stop"), None),  # not open: invalid_request
    (Prompt(36, session="nope", text="x"), None),  # session_not_found
    (Log(37, session="s1", after=3), None),
    (Messages(38, session="c1"), None),
    (Pending(39, session="s2"), None),
    (Calls(40), None),
    "kill",
    (Hello(41, step_limit=STEP_LIMIT), None),
]


def drive(target: Target, script: list[Step]) -> list[dict[str, Any]]:
    """Each step's reply and observation in trace (canonical) form."""
    view = View()
    out = []
    for step in script:
        if step == "kill":
            observed, reply, sent = target.kill(), None, "kill"
        else:
            op, crash_at = step(view) if callable(step) else step  # type: ignore[misc]
            reply, observed = target.request(op, crash_at)
            sent = op.to_wire()
        view.absorb(observed)
        out.append({"sent": sent, "reply": reply_wire(reply), "observed": observed_wire(observed)})
    target.close()
    return out


def normalize(value: Any, names: dict[str, str]) -> Any:
    """Generated IDs renamed by order of appearance (lockstep's rule)."""
    if isinstance(value, str) and GENERATED.match(value):
        kind = value.split("-")[0]
        return names.setdefault(value, f"<{kind}#{len(names)}>")
    if isinstance(value, dict):
        return {k: normalize(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [normalize(v, names) for v in value]
    return value


def test_model_adapter_matches_the_model_step_for_step(tmp_path: Path) -> None:
    expected = normalize(drive(ModelTarget(G4, STEP_LIMIT), SCRIPT), {})
    got = normalize(drive(model_adapter(tmp_path), SCRIPT), {})
    for index, (want, have) in enumerate(zip(expected, got, strict=True)):
        assert have == want, f"step {index}: {want['sent']}"
    # The script did what it is for.
    replies = [step["reply"] for step in expected]
    assert {"unknown": "after_admit"} in replies and {"unknown": "mid_promotion"} in replies
    assert {"unknown": "after_promotion"} in replies
    errors = {r["error"] for r in replies if r and r.get("ok") is False}
    assert errors == {"prompt_conflict", "invalid_request", "session_not_found"}
    assert replies[5] == replies[4]  # the exact retry's receipt is the original
    kills = [step for step in expected if step["sent"] == "kill"]
    assert kills[0]["observed"] == {"calls": []}  # the kill dropped the open calls
    log = (tmp_path / "data.stderr.log").read_text()
    assert log.count("--- inboxsim: start") == 6  # first, 3 failpoints, 2 kills
    assert "crashed at failpoint mid_promotion" in log


def test_generated_ids_do_not_collide_after_a_restart(tmp_path: Path) -> None:
    with model_adapter(tmp_path) as target:
        target.request(Hello(0, step_limit=STEP_LIMIT))
        target.request(Create(1, session="s"))
        first, _ = target.request(Prompt(2, session="s", text="one", resume=False))
        target.kill()
        target.request(Hello(3, step_limit=STEP_LIMIT))
        second, _ = target.request(Prompt(4, session="s", text="two", resume=False))
        calls_before = target.request(Resume(5, session="s"))[1].calls
        target.kill()
        target.request(Hello(6, step_limit=STEP_LIMIT))
        third, observed = target.request(Resume(7, session="s"))
    ids = [first.result["input"], second.result["input"]]  # type: ignore[union-attr]
    assert len(set(ids)) == 2
    assert calls_before and observed.calls
    assert calls_before[0].call != observed.calls[0].call  # a new call after the restart


@pytest.mark.parametrize("policy", ["g2", "g5", "c"])
def test_other_policies_match_too(tmp_path: Path, policy: str) -> None:
    script = [
        step for step in SCRIPT if not (isinstance(step, tuple) and isinstance(step[0], Synthetic))
    ]
    expected = normalize(drive(ModelTarget(PRESETS[policy], STEP_LIMIT), script), {})
    got = normalize(drive(model_adapter(tmp_path, policy), script), {})
    assert got == expected


@pytest.mark.parametrize("seed", [1, 3])  # seeds whose runs crash and restart
def test_a_seeded_run_through_the_adapter_hashes_like_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    """The simulator's own run loop, with the adapter swapped in for the model:
    the trace hash (requests, replies, observations) must not change."""
    from inboxsim.sim import run as run_module
    from inboxsim.sim.run import RunOptions, run_seed
    from tests.sim_helpers import checkers

    options = RunOptions(ops=40)
    baseline = run_seed(seed, G4, options, **checkers())
    made: list[AdapterTarget] = []

    def adapter_target(policy: Any, step_limit: int) -> AdapterTarget:
        made.append(model_adapter(tmp_path / f"run{len(made)}", policy.name))
        return made[-1]

    monkeypatch.setattr(run_module, "ModelTarget", adapter_target)
    through = run_seed(seed, G4, options, **checkers())
    assert made and made[0]._proc is None  # the run closed it
    assert through.trace_hash == baseline.trace_hash
