"""The bounded-exhaustive explorer (``inboxsim.search.explore``, ``inboxsim explore``).

The central check: breadth-first search with state hashing and session
symmetry reaches exactly as many distinct states as a plain brute force that
enumerates every sequence of the alphabet (no hashing, no symmetry), collects
the name-preserving keys of what it reaches and then counts their orbits under
session renaming. A stub monitor stands in for the invariant checkers where
the test is about the search; the checkers' own ids are used where they exist.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from inboxsim import cli
from inboxsim.model import (
    FAILPOINTS,
    PRESETS,
    Answer,
    Compact,
    Crashed,
    Interrupt,
    Policy,
    Prompt,
    State,
)
from inboxsim.search import coarse_keys, world
from inboxsim.search import explore as ex
from inboxsim.trace.record import Step
from tests.explore_helpers import BROKEN, every_path
from tests.mutant_helpers import ids_freed_for_everyone

# --- a stub monitor: two invariants, judged from observations only -------------


class StubViolation:
    def __init__(self, invariant: str, steps: tuple[int, ...], message: str) -> None:
        self.invariant, self.steps, self.message = invariant, steps, message


class StubMonitor:
    """Monotonic visible time per transcript, and one admission order within
    each boundary's promotions (the two properties g2 and c break)."""

    def __init__(self, policy: Policy, hello: dict[str, Any]) -> None:
        self.admitted: dict[str, int] = {}  # input -> admission seq

    def feed(self, step: Step) -> list[StubViolation]:
        found = []
        promoted: dict[str, list[int]] = {}
        for e in step.observed.events:
            if e.type == "admitted":
                self.admitted[e.input] = e.seq
            elif e.type == "promoted":
                promoted.setdefault(e.session, []).append(self.admitted[e.input])
        for sid, seqs in promoted.items():
            if seqs != sorted(seqs):
                found.append(StubViolation("stub.admission_order", (step.index,), f"{sid}: {seqs}"))
        for sid, msgs in step.observed.transcript:
            times = [m.time for m in msgs]
            if times != sorted(times):
                found.append(StubViolation("stub.visible_time", (step.index,), f"{sid}: {times}"))
        return found

    def finish(self, liveness: bool) -> list[StubViolation]:
        return []


def stub(policy: Policy, hello: dict[str, Any]) -> StubMonitor:
    return StubMonitor(policy, hello)


# --- brute force: every sequence, no hashing, no symmetry --------------------------


def brute_force_keys(policy: Policy, sessions: int, depth: int) -> set[tuple[Any, ...]]:
    """The name-preserving keys of every state reached by some sequence of at
    most ``depth`` operations (every sequence is walked; nothing is pruned)."""
    names = world.session_names(sessions)
    state, prefix, hello = world.start(policy, names, world.DEFAULT_STEP_LIMIT)
    enabled = world.enabled_families(world.FULL, hello["features"])
    keys: set[tuple[Any, ...]] = set()

    def walk(s: State, now: int) -> None:
        keys.add(coarse_keys.state_key(s, symmetric=False))
        if now > depth:
            return
        for t in world.transitions(s, names, now, world.DEFAULT_STEP_LIMIT, enabled, 0):
            walk(t.state, now + 1)

    walk(state, 1)
    return keys


def _rename(value: Any, mapping: dict[str, str]) -> Any:
    """Rename sessions in a name-preserving key: session IDs, and pool input
    IDs (``s1.i2``), which carry their session's name."""
    if isinstance(value, tuple):
        return tuple(_rename(v, mapping) for v in value)
    if isinstance(value, str):
        if value in mapping:
            return mapping[value]
        head, dot, tail = value.partition(".")
        if dot and head in mapping:
            return f"{mapping[head]}.{tail}"
    return value


def orbit_count(keys: set[tuple[Any, ...]], sessions: int) -> int:
    """How many classes the keys fall into under every renaming of sessions."""
    names = world.session_names(sessions)
    canon = set()
    for key in keys:
        variants = []
        for perm in itertools.permutations(names):
            renamed = _rename(key, dict(zip(names, perm, strict=True)))
            variants.append(repr(tuple(sorted(renamed, key=lambda form: form[0]))))
        canon.add(min(variants))
    return len(canon)


@pytest.mark.parametrize(("sessions", "depth"), [(1, 3), (2, 2), (2, 3)])
def test_distinct_states_match_brute_force(sessions: int, depth: int) -> None:
    policy = PRESETS["g4"]
    result = ex.explore(policy, stub, sessions=sessions, depth=depth, merge="log")
    assert not result.violations
    assert result.states == orbit_count(brute_force_keys(policy, sessions, depth), sessions)


@pytest.mark.parametrize(("sessions", "depth"), [(1, 3), (2, 2)])
def test_sound_search_reaches_every_key_of_the_brute_force(sessions: int, depth: int) -> None:
    # The default search expands one path per key; the brute force walks
    # every path. The same keys, counted the same: the search prunes only
    # paths that lead to a key it already has.
    import pickle

    from inboxsim.invariants import Monitor
    from inboxsim.search.canon import merge_key

    result = ex.explore(PRESETS["g4"], Monitor, sessions=sessions, depth=depth)
    assert not result.violations
    keys = {merge_key(s, pickle.loads(blob)) for s, blob, _ in every_path("g4", sessions, depth)}
    assert result.states == len(keys)


def test_symmetry_collapses_worlds_that_differ_by_session_names() -> None:
    policy = PRESETS["g4"]
    names = world.session_names(2)
    state, _, _ = world.start(policy, names, 2)
    one = world.take(
        state, world.Action("p1", Prompt(1, session="s1", input="s1.i1", text="p")), 1, 2, 0
    ).state
    two = world.take(
        state, world.Action("p2", Prompt(1, session="s2", input="s2.i1", text="p")), 1, 2, 0
    ).state
    assert coarse_keys.state_key(one) == coarse_keys.state_key(two)
    assert coarse_keys.state_key(one, symmetric=False) != coarse_keys.state_key(
        two, symmetric=False
    )
    queued = world.take(
        state,
        world.Action("q", Prompt(1, session="s1", input="s1.i1", text="p", delivery="queue")),
        1,
        2,
        0,
    ).state
    assert coarse_keys.state_key(queued) != coarse_keys.state_key(one)


def test_alphabet_covers_the_brief() -> None:
    """Every family the explorer promises shows up as labels from some state."""
    policy = PRESETS["g4"]
    names = world.session_names(1)
    state, _, hello = world.start(policy, names, 2)
    enabled = world.enabled_families(world.FULL, hello["features"])
    labels: set[str] = set()
    frontier = [state]
    for now in range(1, 4):
        nxt = []
        for s in frontier:
            for t in world.transitions(s, names, now, 2, enabled, 0):
                labels.add(t.action.label)
                nxt.append(t.state)
        frontier = nxt[:200]
    for expected in (
        "prompt(s1,s1.i1,steer)",
        "prompt(s1,s1.i1,queue)",
        "synthetic(s1,s1.i1,steer)",
        "synthetic(s1,s1.i1,queue)",
        "retry(s1,s1.i1)",
        "conflict(s1,s1.i1)",
        "conflict(s1,s1.i1,queue)",
        "compact(s1)",
        "interrupt(s1)",
        "resume(s1)",
        "answer(s1,stop)",
        "answer(s1,tool)",
        "answer(s1,error)",
        "crash",
        "prompt(s1,s1.i1,steer)@after_admit",
        "prompt(s1,s1.i1,steer)@mid_promotion",
        "prompt(s1,s1.i1,steer)@after_promotion",
        "answer(s1,stop)@after_promotion",
    ):
        assert expected in labels


def test_features_limit_the_alphabet() -> None:
    """g2 has no synthetic route: the harness never sends synthetic there."""
    result = ex.explore(PRESETS["g2"], stub, sessions=1, depth=1)
    assert "synthetic" not in result.alphabet
    assert "synthetic" in ex.explore(PRESETS["g4"], stub, sessions=1, depth=1).alphabet


def test_parse_alphabet() -> None:
    assert world.parse_alphabet("full") == world.FULL
    assert world.parse_alphabet("full-failpoints,kill") == world.FULL - {"failpoints", "kill"}
    assert world.parse_alphabet("prompt_steer,answer_stop") == {"prompt_steer", "answer_stop"}
    with pytest.raises(ValueError, match="unknown alphabet family nope"):
        world.parse_alphabet("prompt_steer,nope")


# --- finding violations: the stub, then the real checkers ----------------------------


def _ops(result: ex.ExploreResult) -> list[str]:
    return [
        s.decision
        for s in result.trace
        if s.decision != "hello" and not s.decision.startswith("create(")
    ]


def test_stub_g2_visible_time_violation_is_shortest() -> None:
    result = ex.explore(PRESETS["g2"], stub, sessions=1, depth=6)
    assert [v.invariant for v in result.violations] == ["stub.visible_time"]
    assert result.depth_reached == result.operations
    # No shorter path exists: one level less finds nothing.
    shorter = ex.explore(PRESETS["g2"], stub, sessions=1, depth=result.depth_reached - 1)
    assert not shorter.violations


def test_stub_c_admission_order_violation() -> None:
    result = ex.explore(PRESETS["c"], stub, sessions=1, depth=5)
    assert [v.invariant for v in result.violations] == ["stub.admission_order"]
    assert any(op.startswith("synthetic(") for op in _ops(result))


def test_stub_g4_holds() -> None:
    result = ex.explore(PRESETS["g4"], stub, sessions=2, depth=3)
    assert not result.violations and result.depth_reached == 3


def _registry() -> tuple[Any, dict[str, Any]]:
    from inboxsim.invariants import REGISTRY, Monitor

    return Monitor, REGISTRY


def test_g2_breaks_monotonic_visible_time() -> None:
    monitor, registry = _registry()
    result = ex.explore(PRESETS["g2"], monitor, sessions=1, depth=6)
    assert result.violations
    assert result.violations[0].invariant == "monotonic-visible-time"


def test_c_breaks_shared_admission_order() -> None:
    monitor, registry = _registry()
    result = ex.explore(PRESETS["c"], monitor, sessions=1, depth=5)
    assert result.violations
    assert result.violations[0].invariant == "shared-admission-order"


def _shrunk_ops(policy: str, invariant: str) -> int:
    from inboxsim.search.shrink import shrink_run
    from inboxsim.sim.run import RunOptions, run_seed

    options = RunOptions(ops=100)
    for seed in range(400):
        run = run_seed(seed, PRESETS[policy], options)
        if invariant in {v.invariant for v in run.violations}:
            shrunk = shrink_run(run, PRESETS[policy], options, invariant=invariant, verify=False)
            return shrunk.final.operations
    raise AssertionError(f"no seed below 400 violates {invariant} under {policy}")


@pytest.mark.parametrize(("policy", "invariant"), BROKEN)
def test_explorer_finds_each_broken_invariant_no_deeper_than_shrink(
    policy: str, invariant: str
) -> None:
    monitor, _ = _registry()
    bound = _shrunk_ops(policy, invariant)
    result = ex.explore(PRESETS[policy], monitor, sessions=1, depth=bound, invariant=invariant)
    assert [v.invariant for v in result.violations][:1] == [invariant]
    assert result.depth_reached <= bound
    assert result.operations == result.depth_reached
    # The same policy's fix (g4) keeps it at that bound.
    held = ex.explore(PRESETS["g4"], monitor, sessions=1, depth=result.depth_reached)
    assert not held.violations


def test_b_synthetic_queue_request_is_one_operation() -> None:
    """The alphabet's synthetic queue delivery: b admits it as a steer."""
    monitor, _ = _registry()
    result = ex.explore(PRESETS["b"], monitor, sessions=1, depth=1)
    assert [v.invariant for v in result.violations] == ["receipt-reflects-request"]
    assert _ops(result) == ["synthetic(s1,s1.i1,queue)"]
    without = ex.explore(
        PRESETS["b"], monitor, sessions=1, depth=2, alphabet=world.FULL - {"synthetic_queue"}
    )
    assert not without.violations


def test_invariant_filter_skips_other_violations() -> None:
    """Stopping only at one invariant goes on through the others."""
    monitor, _ = _registry()
    first = ex.explore(PRESETS["g5"], monitor, sessions=1, depth=3)
    assert first.violations and first.violations[0].invariant != "retry-same-receipt"
    target = ex.explore(PRESETS["g5"], monitor, sessions=1, depth=3, invariant="retry-same-receipt")
    assert [v.invariant for v in target.violations] == ["retry-same-receipt"]
    assert target.depth_reached >= first.depth_reached


@pytest.mark.parametrize(
    ("sessions", "alphabet"),
    [(1, "full"), (2, "compact_pool,answer_stop,reuse_ended")],
)
def test_the_alphabet_reuses_ended_ids(
    monkeypatch: pytest.MonkeyPatch, sessions: int, alphabet: str
) -> None:
    # A barrier under a pool ID, consumed, then its ID reused: as a prompt in
    # its session, or as another session's barrier. A model that frees an ID
    # when its lifecycle ends (the old rule) is caught at depth 3.
    monitor, _ = _registry()
    ids_freed_for_everyone(monkeypatch)
    result = ex.explore(
        PRESETS["g4"], monitor, sessions, 3, alphabet=world.parse_alphabet(alphabet)
    )
    assert result.violations and result.violations[0].invariant in (
        "id-namespace",
        "admission-fresh-id",
    )
    ops = _ops(result)
    assert result.depth_reached == 3 and ops[0].startswith("compact(") and "reuse(" in ops[-1]


def test_reuse_ended_sends_each_ended_id_everywhere_as_every_kind() -> None:
    names = world.session_names(2)
    state, _, hello = world.start(PRESETS["g4"], names, world.DEFAULT_STEP_LIMIT)
    enabled = world.enabled_families(world.FULL, hello["features"])
    labels = [a.label for a in world.requests(state, names, 1, enabled)]
    assert "compact(s1,s1.i1)" in labels and not [x for x in labels if x.startswith("reuse(")]
    state = world.take(
        state, world.Action("c", Compact(1, session="s1", input="s1.i1")), 1, 2, 0
    ).state
    (call,) = state.open_calls()
    state = world.take(
        state, world.Action("a", Answer(2, call=call.call, finish="stop")), 2, 2, 0
    ).state
    assert world.ended_ids(state) == ["s1.i1"]
    reuses = [
        x for x in (a.label for a in world.requests(state, names, 3, enabled)) if "reuse" in x
    ]
    assert reuses == [
        f"reuse({s},s1.i1,{kind})" for s in names for kind in ("prompt", "synthetic", "compact")
    ]
    # s1's next fresh pool ID is s1.i2: an ended ID is not fresh
    assert "compact(s1,s1.i2)" in [a.label for a in world.requests(state, names, 3, enabled)]


def test_g4_holds_at_the_default_bound() -> None:
    monitor, _ = _registry()
    result = ex.explore(PRESETS["g4"], monitor)
    assert not result.violations, result.violations[0].message


# --- the command -----------------------------------------------------------------


@pytest.fixture
def stub_checkers(monkeypatch: pytest.MonkeyPatch) -> None:
    from inboxsim.sim import checkers

    monkeypatch.setattr(checkers, "load", lambda: (stub, StubViolation))


def test_cli_no_violation(stub_checkers: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["explore", "--sessions", "1", "--depth", "2"]) == 0
    out = capsys.readouterr().out
    assert (
        "exhaustive: every sequence of at most 2 operations from this alphabet over 1 session"
        in out
    )
    assert "answer error" in out and "distinct states:" in out and "states/s" in out


def test_cli_violation_json_and_file(
    stub_checkers: None, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    target = tmp_path / "cx.toml"
    code = cli.main(
        [
            "explore",
            "--sessions",
            "1",
            "--depth",
            "6",
            "--policy",
            "g2",
            "--out",
            str(target),
            "--json",
        ]
    )
    assert code == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["violations"][0]["invariant"] == "stub.visible_time"
    assert doc["claim"].startswith("exhaustive: every sequence of at most 6 operations")
    assert doc["counterexample_file"] == str(target)
    text = target.read_text()
    assert "[[step]]" in text or text.startswith("{")


@pytest.mark.parametrize(
    "args",
    [
        ["--sessions", "0"],
        ["--policy", "nope"],
        ["--alphabet", "bogus"],
        ["--depth", "x"],
        ["--jobs", "0"],
        ["--pool", "0"],
    ],
)
def test_cli_bad_usage(
    stub_checkers: None, args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["explore", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("inboxsim: error:") and err.count("\n") == 1


def test_cli_invariant_filter(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "cx.toml"
    args = ["explore", "--sessions", "1", "--depth", "3", "--policy", "g5", "--json"]
    code = cli.main([*args, "--invariant", "retry-same-receipt", "--out", str(target)])
    assert code == 1
    doc = json.loads(capsys.readouterr().out)
    assert [v["invariant"] for v in doc["violations"]] == ["retry-same-receipt"]
    assert doc["depth_reached"] == 2
    # The written file is a regression test: run fails on it while g5 is the policy.
    assert "expect_violation" not in target.read_text()
    assert cli.main(["run", str(target)]) == 1
    capsys.readouterr()
    assert cli.main([*args, "--invariant", "nope"]) == 2
    assert "unknown invariant 'nope'" in capsys.readouterr().err


# --- worker processes: the same search, whatever their number ----------------------


def _search_facts(result: ex.ExploreResult) -> tuple[Any, ...]:
    return (
        result.states,
        result.transitions,
        result.per_depth,
        result.depth_reached,
        [v.invariant for v in result.violations],
        [s.decision for s in result.trace],
    )


@pytest.mark.parametrize(
    ("name", "sessions", "depth", "invariant", "pool"),
    [
        ("g4", 1, 3, None, 2),
        ("g5", 2, 2, None, 2),
        ("c", 1, 3, "queue-fifo", 2),
        ("g2", 2, 3, None, 2),
        ("g4", 2, 3, None, 1),
    ],
)
def test_workers_give_the_same_search(
    name: str, sessions: int, depth: int, invariant: str | None, pool: int
) -> None:
    from inboxsim.invariants import Monitor

    one, two = (
        ex.explore(
            PRESETS[name], Monitor, sessions, depth, invariant=invariant, jobs=jobs, pool=pool
        )
        for jobs in (1, 2)
    )
    assert _search_facts(one) == _search_facts(two)
    assert one.states > 1


def test_the_pool_bounds_the_fresh_inputs(capsys: pytest.CaptureFixture[str]) -> None:
    # One fresh ID per session: no second input is ever admitted, and the
    # world is smaller than with two; the claim states the pool.
    assert cli.main(["explore", "--sessions", "1", "--depth", "3", "--pool", "1", "--json"]) == 0
    one = json.loads(capsys.readouterr().out)
    assert one["pool"] == 1 and one["claim"].endswith("1 session, 1 fresh input ID each")
    two = ex.explore(PRESETS["g4"], stub, 1, 3)
    assert one["states"] < two.states
    names = world.session_names(1)
    state, _, _ = world.start(PRESETS["g4"], names, world.DEFAULT_STEP_LIMIT)
    labels = {a.label for a in world.requests(state, names, 1, world.FULL, 1)}
    assert "prompt(s1,s1.i1,steer)" in labels
    after = world.take(
        state, world.Action("p", Prompt(1, session="s1", input="s1.i1", text="p")), 1, 2, 0
    )
    labels = {a.label for a in world.requests(after.state, names, 2, world.FULL, 1)}
    assert not any("s1.i2" in label for label in labels)
    assert any("s1.i2" in a.label for a in world.requests(after.state, names, 2, world.FULL, 2))


def test_cli_jobs_give_the_same_document(capsys: pytest.CaptureFixture[str]) -> None:
    docs = []
    for jobs in ("1", "2"):
        args = ["explore", "--sessions", "1", "--depth", "3", "--json", "--jobs", jobs]
        assert cli.main(args) == 0
        doc = json.loads(capsys.readouterr().out)
        doc.pop("seconds"), doc.pop("states_per_second")
        docs.append(doc)
    assert docs[0] == docs[1]


def test_workers_need_a_monitor_that_pickles_and_a_dead_worker_is_a_clear_error() -> None:
    from inboxsim.errors import HarnessError
    from tests.sim_helpers import DiesInWorkers, NoPickle

    with pytest.raises(HarnessError, match="does not pickle"):
        ex.explore(PRESETS["g4"], NoPickle, 1, 2, jobs=2)
    assert ex.explore(PRESETS["g4"], NoPickle, 1, 2).states > 1  # fine in process
    with pytest.raises(HarnessError, match="a worker process died"):
        ex.explore(PRESETS["g4"], DiesInWorkers, 1, 2, jobs=2)
    with pytest.raises(ValueError, match="jobs"):
        ex.explore(PRESETS["g4"], NoPickle, 1, 2, jobs=0)


# --- the model's fold: a measurement of how far state merging could go -------------


def _reached(policy: Policy, sessions: int, depth: int) -> list[State]:
    """Every state reached within ``depth`` operations (duplicates included)."""
    names = world.session_names(sessions)
    state, _, hello = world.start(policy, names, world.DEFAULT_STEP_LIMIT)
    enabled = world.enabled_families(world.FULL, hello["features"])
    out, frontier = [state], [state]
    for now in range(1, depth + 1):
        frontier = [
            t.state
            for s in frontier
            for t in world.transitions(s, names, now, world.DEFAULT_STEP_LIMIT, enabled, 0)
        ]
        out.extend(frontier)
    return out


@pytest.mark.parametrize(("sessions", "depth"), [(1, 3), (2, 2)])
def test_model_key_is_a_coarsening_of_the_search_key(sessions: int, depth: int) -> None:
    # Every state_key class lies inside one model_key class: the fold is a
    # function of the log, so counting folds bounds what merging can save.
    fold_of: dict[Any, Any] = {}
    for s in _reached(PRESETS["g4"], sessions, depth):
        assert fold_of.setdefault(
            coarse_keys.state_key(s), coarse_keys.model_key(s)
        ) == coarse_keys.model_key(s)
    full = coarse_keys.count_states(PRESETS["g4"], sessions, depth, coarse_keys.state_key)
    folds = coarse_keys.count_states(PRESETS["g4"], sessions, depth, coarse_keys.model_key)
    searched = ex.explore(PRESETS["g4"], stub, sessions, depth, merge="log").per_depth
    assert full == [1 + n for n in itertools.accumulate(searched)]
    assert all(f <= n for f, n in zip(folds, full, strict=True))
    assert folds[-1] < full[-1]
    assert folds[-1] == len(set(fold_of.values()))


def test_model_key_merges_histories_the_monitor_tells_apart() -> None:
    # A queued prompt that crashed mid-promotion, and one admitted and then
    # interrupted: one fold, two event logs, and only in the second did the
    # client get a receipt (what retry-same-receipt later compares against).
    # This is why model_key is a measurement and not a key for the search.
    from inboxsim.invariants import Monitor

    policy = PRESETS["g4"]
    names = world.session_names(1)
    start, prefix, hello = world.start(policy, names, 2)
    op = Prompt(1, session="s1", input="s1.i1", text="p", delivery="queue")
    crashed = world.take(start, world.Action("p", op, "mid_promotion"), 1, 2, len(prefix))
    admitted = world.take(start, world.Action("p", op), 1, 2, len(prefix))
    stopped = world.take(
        admitted.state, world.Action("i", Interrupt(2, session="s1")), 2, 2, len(prefix) + 1
    )
    assert coarse_keys.model_key(crashed.state) == coarse_keys.model_key(stopped.state)
    assert coarse_keys.state_key(crashed.state) != coarse_keys.state_key(stopped.state)
    receipts = []
    for steps in (crashed.steps, admitted.steps + stopped.steps):
        monitor = Monitor(policy, hello)
        for step in (*prefix, *steps):
            assert monitor.feed(step) == []
        receipts.append(monitor.tracker.lives["s1.i1"].receipt)
    assert receipts[0] is None and receipts[1] is not None


BROKEN_OR_NONE = [*BROKEN, ("g4", None)]


@pytest.mark.parametrize(("name", "invariant"), BROKEN_OR_NONE)
@pytest.mark.parametrize(("sessions", "depth"), [(1, 4), (2, 3)])
def test_coarser_merges_find_what_the_sound_merge_finds_on_small_bounds(
    name: str, invariant: str | None, sessions: int, depth: int
) -> None:
    # The sound merge (the default) is the reference; the log and fold
    # merges (benchmark measurements that leave the monitor out of the key)
    # find the same violations at the same shortest depths here: evidence,
    # not proof, that the benchmark's figures for them are comparable.
    from inboxsim.invariants import Monitor

    policy = PRESETS[name]
    if invariant is None:  # nothing to find: every search runs to its bound
        depth -= 1
    runs = [
        ex.explore(policy, Monitor, sessions, depth, invariant=invariant, merge=merge)
        for merge in ("sound", "log", "fold")
    ]
    sound, log, fold = ({v.invariant for v in r.violations} for r in runs)
    assert sound == log == fold
    assert bool(sound) == (invariant is not None)
    assert runs[0].depth_reached == runs[1].depth_reached == runs[2].depth_reached
    assert runs[2].states <= runs[0].states
    with pytest.raises(ValueError, match="unknown merge"):
        ex.explore(policy, Monitor, 1, 1, merge="other")


# --- progress within a level ---------------------------------------------------------


def test_ticks_follow_each_level_to_its_end() -> None:
    ticks: list[tuple[int, int, int, int, int]] = []
    result = ex.explore(PRESETS["g4"], stub, 2, 3, tick=lambda *t: ticks.append(t))
    by_level: dict[int, list[tuple[int, int, int, int, int]]] = {}
    for t in ticks:
        by_level.setdefault(t[0], []).append(t)
    assert sorted(by_level) == [1, 2, 3]
    for seen in by_level.values():
        done = [t[1] for t in seen]
        assert done == sorted(done) and done[-1] == seen[-1][2]  # to the whole frontier
        assert len(seen) == -(-seen[-1][2] // ex.CHUNK)  # one tick per chunk
    assert ticks[-1][3:] == (result.states, result.transitions)


def test_explore_progress_prints_plain_lines_off_a_terminal() -> None:
    import io

    from inboxsim.sim.console import ExploreProgress

    stream = io.StringIO()
    with ExploreProgress(3, stream, every=0.0) as shown:
        ex.explore(PRESETS["g4"], stub, 2, 3, progress=shown.level, tick=shown.tick)
    lines = stream.getvalue().splitlines()
    assert "explore: depth 3/3: " in lines[-1] and lines[-1].endswith("transitions")
    inside = [line for line in lines if "frontier states expanded" in line]
    assert inside and all(line.startswith("explore: depth 3/3: ") for line in inside)


def test_explore_progress_draws_a_bar_on_a_terminal() -> None:
    import io

    from inboxsim.sim.console import ExploreProgress

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Terminal()
    with ExploreProgress(3, stream) as shown:
        ex.explore(PRESETS["g4"], stub, 1, 3, progress=shown.level, tick=shown.tick)
    text = stream.getvalue()
    assert "explore: depth 3/3: " in text  # each level's line, printed above the bar
    assert "explore depth 3/3" in text and "states" in text and "transitions" in text


@pytest.mark.parametrize("preset", ["g4", "g2", "c", "b", "g5"])
def test_crash_variants_are_those_a_trial_apply_per_failpoint_finds(preset: str) -> None:
    """``transitions`` reads a request's crash variants off its plain apply
    (a probe as ``crash_at``, shown the transaction at each failpoint it
    passes): which failpoints it reaches, and the crashed state and events
    at each, with no apply of their own. Over every state of 2 sessions to
    depth 2, the same transitions, in order, as one trial apply per
    failpoint (with the plain request's events as the precondition, as
    before): the same steps (replies, observations), the same states."""
    names = world.session_names(2)
    state, prefix, _ = world.start(PRESETS[preset], names, world.DEFAULT_STEP_LIMIT)
    frontier = [(state, len(prefix))]
    compared = crashes = 0
    for now in (1, 2):
        following = []
        for s, base in frontier:
            got = list(world.transitions(s, names, now, 2, world.FULL, base))
            want = []
            for action in world.requests(s, names, now, world.FULL):
                plain = world.take(s, action, now, 2, base)
                want.append(plain)
                if not isinstance(action.op, world.CRASHABLE) or not plain.steps[0].observed.events:
                    continue
                for point in FAILPOINTS:
                    label = f"{action.label}@{point}"
                    variant = world.Action(
                        label, action.op, point, action.session, action.ident, "failpoints"
                    )
                    crashed = world.take(s, variant, now, 2, base)
                    if isinstance(crashed.steps[0].reply, Crashed):
                        want.append(crashed)
            assert [(t.action, t.steps, t.state) for t in got] == [
                (t.action, t.steps, t.state) for t in want
            ]
            compared += len(got)
            crashes += sum(1 for t in got if t.action.crash_at is not None)
            following += [(t.state, base + len(t.steps)) for t in got]
        frontier = following
    assert crashes > 0 and compared > crashes


def test_moves_hold_asleep_actions_aside_untaken() -> None:
    """``moves`` with a sleep predicate: in order, every transition of
    ``transitions``, except that each action the predicate holds (plain
    requests, crash variants, the kill) comes as its action alone, crash
    variants of an asleep request included (its plain apply still finds
    them); and the model applies nothing for an asleep request that has no
    crash variant."""
    names = world.session_names(2)
    state, prefix, _ = world.start(PRESETS["g4"], names, world.DEFAULT_STEP_LIMIT)
    base = len(prefix)
    first = next(iter(world.transitions(state, names, 1, 2, world.FULL, base)))
    state, base = first.state, base + len(first.steps)  # an input pending: retries, answers
    every = list(world.transitions(state, names, 2, 2, world.FULL, base))
    for asleep in (
        lambda a: a.session == "s1",
        lambda a: a.crash_at is not None,
        lambda a: a.crash_at is None,
        lambda a: True,
    ):
        got = list(world.moves(state, names, 2, 2, world.FULL, base, world.POOL, asleep))
        want = [t.action if asleep(t.action) else t for t in every]
        assert got == want
        assert any(isinstance(m, world.Action) for m in got)
    applied = []
    model_apply = world.apply

    def counted(*args: Any) -> Any:
        applied.append(args[1])
        return model_apply(*args)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(world, "apply", counted)
        moved = list(world.moves(state, names, 2, 2, world.FULL, base, world.POOL, lambda a: True))
    crashable = [a.op for a in moved if isinstance(a.op, world.CRASHABLE) and a.crash_at is None]
    assert all(isinstance(m, world.Action) for m in moved)
    assert applied == crashable  # one plain apply each, for the crash variants; nothing else
