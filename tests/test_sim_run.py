"""One run: determinism, replay from decisions, verdicts, the trace it keeps."""

from __future__ import annotations

import dataclasses
import json
import os
import random
import subprocess
import sys
from typing import Any, ClassVar

import pytest

from inboxsim.model import (
    G4,
    OPS,
    PRESETS,
    Compact,
    Crashed,
    Create,
    Err,
    Fork,
    Hello,
    Interrupt,
    Log,
    Ok,
    Op,
    Prompt,
    Synthetic,
    apply,
    initial_state,
)
from inboxsim.sim.run import RunOptions, RunResult, run_decisions, run_seed
from inboxsim.trace.encode import step_text, trace_hash_of
from inboxsim.trace.probes import ProbeFold
from inboxsim.trace.record import NOTHING, Observed, Step, canonical, step_wire, trace_hash
from tests.sim_helpers import StubMonitor, StubViolation, checkers

OPTIONS = RunOptions(ops=100)


def _run(seed: int, policy: str = "g4", options: RunOptions = OPTIONS, **kw: Any) -> RunResult:
    return run_seed(seed, PRESETS[policy], options, **{**checkers(), **kw})


def _monotonic(result: RunResult) -> bool:
    return any("monoton" in v.invariant for v in result.violations)


def test_a_seed_gives_the_same_trace_twice() -> None:
    first = [_run(seed).trace_hash for seed in range(200)]
    assert [_run(seed).trace_hash for seed in range(200)] == first
    assert len(set(first)) == len(first)


HASH_SCRIPT = """
import json, sys
from inboxsim.model import G4
from inboxsim.sim.run import RunOptions, run_seed
from tests.sim_helpers import checkers
print(json.dumps([run_seed(s, G4, RunOptions(ops=60), **checkers()).trace_hash for s in range(40)]))
"""


def test_trace_hashes_do_not_depend_on_pythonhashseed() -> None:
    def hashes(hash_seed: str) -> list[str]:
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run(
            [sys.executable, "-c", HASH_SCRIPT],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        return json.loads(out.stdout)

    in_process = [_run(s, options=RunOptions(ops=60)).trace_hash for s in range(40)]
    assert hashes("1") == hashes("4242") == in_process


def test_replaying_the_decision_list_gives_the_same_trace() -> None:
    for seed in range(60):
        original = _run(seed)
        replayed = run_decisions(original.decisions, G4, OPTIONS, **checkers())
        assert replayed.trace.steps == original.trace.steps
        assert replayed.trace_hash == original.trace_hash
        assert replayed.decisions == original.decisions


def _edit(decisions: tuple[int, ...], rng: random.Random) -> list[int]:
    """What a shrinker does to a decision list: cut, delete stretches, change values."""
    edited = list(decisions)
    how = rng.randrange(4)
    if how == 0:
        del edited[rng.randrange(len(edited) + 1) :]
    elif how == 1:
        start = rng.randrange(len(edited))
        del edited[start : start + rng.randrange(1, 40)]
    elif how == 2:
        for _ in range(10):
            edited[rng.randrange(len(edited))] = rng.choice((0, 1, 5, 99, -4))
    else:
        edited = [v // 2 for v in edited]
    return edited


def test_an_edited_decision_list_still_gives_a_valid_run() -> None:
    rng = random.Random(5)
    for seed in range(40):
        original = _run(seed, options=RunOptions(ops=60))
        for _ in range(3):
            edited = _edit(original.decisions, rng)
            result = run_decisions(edited, G4, RunOptions(ops=60), **checkers())
            assert result.trace.steps[0].decision == "hello"
            assert result.verdict == "held", result.violations
            # What it actually drew is a canonical list: it replays exactly.
            again = run_decisions(result.decisions, G4, RunOptions(ops=60), **checkers())
            assert again.trace_hash == result.trace_hash


def test_an_empty_decision_list_is_the_simplest_run() -> None:
    result = run_decisions([], G4, RunOptions(ops=10), **checkers())
    assert result.verdict == "held" and result.liveness == "settled"
    assert set(result.decisions) == {0}


def test_the_hash_from_step_texts_is_the_trace_hash() -> None:
    for seed in range(25):
        result = _run(seed, "g2" if seed % 2 else "g4")
        assert result.trace_hash == trace_hash(result.trace)
        for step, text in zip(result.trace.steps, result.texts, strict=True):
            wire = step_wire(step)
            assert text == (
                canonical(wire["request"]),
                canonical(wire["reply"]),
                canonical(wire["observed"]),
            )
        assert trace_hash_of(
            result.trace.header, result.trace.steps, map(step_text, result.trace.steps)
        ) == (result.trace_hash)


def test_g4_holds_for_a_few_hundred_seeds() -> None:
    for seed in range(250):
        result = _run(seed)
        assert result.verdict == "held", (seed, result.violations)
        assert result.liveness == "settled"


def test_g2_breaks_monotonic_visible_times_early() -> None:
    first = next(seed for seed in range(300) if _monotonic(_run(seed, "g2")))
    assert first < 100


def test_a_run_stops_at_the_first_violation() -> None:
    failing = next(r for r in (_run(s, "g2") for s in range(300)) if r.violations)
    assert failing.liveness == "stopped"
    assert max(i for v in failing.violations for i in v.steps) <= failing.trace.steps[-1].index

    class StopAtTen:
        def __init__(self, policy: object, hello: dict[str, Any]) -> None:
            self.exercised = {"stub"}

        def feed(self, step: Any) -> list[StubViolation]:
            return [StubViolation("stub.ten", (step.index,), "ten")] if step.index == 10 else []

        def finish(self, liveness: bool) -> list[StubViolation]:
            raise AssertionError("a stopped run is not judged for liveness")

    result = run_seed(3, G4, OPTIONS, monitor=StopAtTen, violation=StubViolation)
    assert len(result.trace.steps) == 11 and [v.invariant for v in result.violations] == [
        "stub.ten"
    ]
    assert result.verdict == "violated"


def test_a_run_that_does_not_settle_fails() -> None:
    # No liveness steps at all: runs that end the safety phase with work left.
    options = RunOptions(ops=40, liveness_bound=0)
    unsettled = [
        r for r in (_run(s, options=options) for s in range(30)) if r.liveness == "unsettled"
    ]
    assert unsettled and all(r.verdict == "violated" for r in unsettled)
    # Checkers that say nothing at the end: the run reports what was stuck itself.
    for seed in range(30):
        result = run_seed(seed, G4, options, monitor=StubMonitor, violation=StubViolation)
        if result.liveness == "unsettled":
            (violation,) = result.violations
            assert violation.invariant == "liveness.settles"
            assert "did not settle" in violation.message
            assert "pending" in violation.message or "call" in violation.message


def test_the_harness_sends_no_operation_the_target_lacks() -> None:
    for seed in range(60):
        result = _run(seed, "g2")
        assert "synthetic" not in result.trace.header.hello["features"]
        assert not any(isinstance(s.request, Synthetic) for s in result.trace.steps)


def test_a_run_records_its_world_and_phases() -> None:
    result = _run(1)
    assert result.swarm["step_limit"] == result.trace.header.hello["step_limit"]
    phases = [s.phase for s in result.trace.steps]
    assert phases[0] == "safety" and phases == sorted(phases, key=("safety", "liveness").index)
    # Every crash is followed by a restart.
    steps = result.trace.steps
    for step, after in zip(steps, steps[1:], strict=False):
        if step.kind == "crash" or step.crash_at and type(step.reply).__name__ == "Crashed":
            assert (
                after.decision == "restart"
                and after.request is not None
                and after.request.OP == "hello"
            )
    times = [s.request.now for s in steps if s.request is not None]
    assert times == sorted(times)


@pytest.mark.parametrize("policy", sorted(PRESETS))
def test_every_preset_keeps_the_invariants_it_is_expected_to(policy: str) -> None:
    for seed in range(25):
        result = _run(seed, policy, RunOptions(ops=60, only_expected=True))
        assert result.verdict == "held", (seed, result.violations)
        assert result.ops > 60


@pytest.mark.parametrize("concurrency", [1, 4])
def test_a_run_leaves_no_reference_cycles(concurrency: int) -> None:
    """A finished run's objects are freed by reference counting: nothing it
    built is left for the cyclic collector (a cycle through a frame of the
    run would keep every step alive until a collection; a sweep paid for it
    in collections). The seeds include refused requests (the model raises and
    catches them) and crashes."""
    import gc

    _run(0)  # caches filled once
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        results = [
            _run(seed, options=RunOptions(ops=100, concurrency=concurrency)) for seed in range(4)
        ]
        refused = sum(isinstance(s.reply, Err) for r in results for s in r.trace.steps)
        crashed = sum(
            s.kind == "crash" or s.decision == "restart" for r in results for s in r.trace.steps
        )
        del results
        assert refused > 0 and crashed > 0  # the paths that raised are exercised
        assert gc.collect() == 0
    finally:
        if enabled:
            gc.enable()


def test_a_step_text_is_the_canonical_text_of_its_wire_form() -> None:
    """The hand-built texts of requests and replies, on values a seeded run
    seldom or never sends: tuples, metadata with floats and nesting, booleans,
    non-ASCII and escaped text, a failpoint, every reply kind."""
    ops = [
        Prompt(
            3,
            session="s\u00e91",
            input='u"1',
            text="h\u00e9llo\n\u2603",
            files=("f", {"b": 1.0, "a": [True, None]}),
            agents=(),
            metadata={"z": 1.5, "a": {"y": 2.0}},
            delivery="queue",
            resume=False,
        ),
        Synthetic(4, session="s1", text="", description=None, resume=True),
        Hello(0, step_limit=7),
        Log(5, session="s1", after=0),
        Fork(6, session="s1", child="f1", before=None),
    ]
    replies = [
        Ok({"b": [1, {"d": None, "c": "\u00e9"}], "a": True}),
        Ok({}),
        Err("busy", "free text"),
        Crashed("after_admit"),
        None,
    ]
    for op in ops:
        for crash_at in (None, "after_admit"):
            for reply in replies:
                step = Step(0, "safety", "request", "d", op, crash_at, reply, Observed())
                wire = step_wire(step)
                assert step_text(step) == (
                    canonical(wire["request"]),
                    canonical(wire["reply"]),
                    canonical(wire["observed"]),
                )


# Values a request field may hold, of every kind the writer tells apart:
# None (left out), strings (non-ASCII, escapes, empty), an int and a bool of
# the same value, a float, tuples (written as lists), a dict.
FIELD_VALUES: tuple[Any, ...] = (
    None,
    "",
    's\u00e91\n\u2603"',
    1,
    True,
    0,
    False,
    1.5,
    (),
    ("f", {"b": 1.0, "a": [True, None]}),
    {"z": 1.5, "a": {"y": 2.0}},
)


def test_every_request_writer_writes_the_canonical_text_of_its_wire_form() -> None:
    """The generated request writers (one per operation class, and one for a
    class OPS does not list, written when first met): every field of every
    class takes each kind of value in turn, the other fields holding their
    defaults, then all of them at once; the text is the encoder's of the wire form."""

    @dataclasses.dataclass(frozen=True, slots=True)
    class Odd(Op):  # keys on both sides of "now" and "op", and one between
        OP: ClassVar[str] = "odd"
        a: int = 0
        nz: str | None = None
        z: tuple[int, ...] | None = None

    checked = 0
    for cls in [*OPS.values(), Odd]:
        names = [f.name for f in dataclasses.fields(cls) if f.name != "now"]
        for value in FIELD_VALUES:
            clocks = [{"now": value}]  # None too: the wire form writes it (null)
            alone = [{"now": 7, name: value} for name in names]
            every = {"now": 7, **dict.fromkeys(names, value)}
            for kwargs in [*clocks, *alone, every]:
                op = cls(**kwargs)
                for crash_at in (None, "mid_promotion", "\u00e9"):
                    step = Step(0, "safety", "request", "d", op, crash_at, None, Observed())
                    assert step_text(step)[0] == canonical(step_wire(step)["request"]), (
                        op,
                        crash_at,
                    )
                    checked += 1
    assert checked > 1000


def test_the_models_reply_texts_are_the_canonical_text_of_their_results() -> None:
    """Receipts, logs, create and interrupt carry their result's text
    (``Ok.text``), written by hand; on the values a seeded run seldom sends
    it is still the encoder's."""
    state = initial_state(G4)
    session = "s\u00e91"
    ops = [
        Create(0, session=session),
        Prompt(
            1,
            session=session,
            input='u"1',
            text="h\u00e9llo\n\u2603",
            files=("f", {"b": 1.0, "a": [True, None]}),
            metadata={"z": 1.5, "a": {"y": 2.0}},
            delivery="queue",
            resume=False,
        ),
        Synthetic(2, session=session, text="", description="d\u00e9", resume=False),
        Synthetic(3, session=session, input="n\\1", text="t", delivery="steer", resume=False),
        Compact(4, session=session),
        Log(5, session=session),
        Log(6, session=session, after=1),
        Interrupt(7, session=session),
    ]
    written = 0
    for op in ops:
        state, reply, _ = apply(state, op)
        assert isinstance(reply, Ok), (op, reply)
        if reply.text is not None:
            written += 1
            assert reply.text == canonical(reply.result), op
            assert reply == Ok(reply.result)  # not compared: a function of the result
    assert written == 8


def test_the_probes_skipping_unchanged_steps_count_what_they_would_have() -> None:
    """ProbeFold skips the observation of a step that changed nothing (the
    shared NOTHING): fed the same steps each with an equal observation of its
    own (not skipped), it counts the same hits, sequential runs and grouped."""
    compared = 0
    for concurrency in (1, 2):
        for seed in range(40):
            result = _run(seed, options=RunOptions(ops=100, concurrency=concurrency))
            fold = ProbeFold()
            for step in result.trace.steps:
                if step.observed is NOTHING:
                    step = dataclasses.replace(step, observed=Observed())
                    compared += 1
                fold.feed(step)
            assert fold.hits == result.probes, seed
    assert compared > 1000
