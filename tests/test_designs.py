"""The design-exploration report (``inboxsim designs``, issue 10)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from inboxsim import cli
from inboxsim.designs import sentences as st
from inboxsim.designs import study as ds
from inboxsim.designs import verdicts as vd
from inboxsim.designs.difference import observable_difference
from inboxsim.designs.report import explorer_depth
from inboxsim.invariants.base import Violation
from inboxsim.invariants.monitor import Monitor
from inboxsim.invariants.registry import REGISTRY
from inboxsim.model import PRESETS, Policy
from inboxsim.scenarios.load import load_text
from inboxsim.scenarios.runner import run_scenario
from inboxsim.sim.run import RunOptions, run_seed
from inboxsim.trace.record import Step, step_wire
from tests.reports_helpers import Monitor as Quiet


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("designs")
    code = cli.main(
        [
            "designs",
            "--policies",
            "g4,c,c-merged",
            "--seeds",
            "6",
            "--ops",
            "40",
            "--depth",
            "2",
            "--jobs",
            "1",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    return out, json.loads((out / "designs.json").read_text())


def test_writes_three_files(report: tuple[Path, dict]) -> None:
    out, doc = report
    for name in ("designs.html", "designs.md", "designs.json"):
        assert (out / name).stat().st_size > 0
    page = (out / "designs.html").read_text()
    assert "data:image/png;base64," in page and "<img" in page
    assert {q["key"] for q in doc["questions"]} >= {"q1-variant", "q6-retry", "a1-time", "parallel"}


def test_c_counterexample_and_c_merged_none(report: tuple[Path, dict]) -> None:
    _, doc = report
    by = {p["name"]: p for p in doc["policies"]}
    first = by["c"]["explore"][0]
    assert first["violations"][0]["invariant"] == "shared-admission-order"
    assert "[[step]]" in first["scenario"]
    assert all(not e["violations"] for e in by["c-merged"]["explore"])
    assert "shared-admission-order" not in by["c-merged"]["violations"]
    assert doc["identical_to_g4"]["c-merged"] == [6, 6]
    assert (
        "shared-admission-order"
        in next(q for q in doc["questions"] if q["key"] == "parallel")["verdict"]
    )


def test_indistinguishable_presets_have_identical_traces() -> None:
    tasks = {
        n: ds.study_policy(ds.PolicyTask(n, PRESETS[n], 5, 40, 1, 0))
        for n in ("g4", "g3", "a", "c-merged")
    }
    for n in ("g3", "a", "c-merged"):
        assert tasks[n]["hashes"] == tasks["g4"]["hashes"], n
    differing = ds.study_policy(ds.PolicyTask("g2", PRESETS["g2"], 5, 40, 1, 0))
    assert differing["hashes"] != tasks["g4"]["hashes"]


def test_custom_policy_file_accepted(tmp_path: Path) -> None:
    policy = tmp_path / "mine.toml"
    policy.write_text('base = "g4"\nvisible_time = "admission"\n')
    out = tmp_path / "out"
    code = cli.main(
        [
            "designs",
            str(policy),
            "--policies",
            "g4",
            "--seeds",
            "4",
            "--ops",
            "30",
            "--depth",
            "3",
            "--jobs",
            "1",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    doc = json.loads((out / "designs.json").read_text())
    names = [p["name"] for p in doc["policies"]]
    assert names == ["g4", "mine"]
    mine = doc["policies"][1]
    assert any(
        v["invariant"] == "monotonic-visible-time" for e in mine["explore"] for v in e["violations"]
    )


def test_bad_usage_exits_2(tmp_path: Path) -> None:
    assert cli.main(["designs", "--policies", "nope", "--out", str(tmp_path)]) == 2
    assert cli.main(["designs", "--seeds", "0", "--out", str(tmp_path)]) == 2


def test_every_counterexample_is_a_shrunk_scenario(report: tuple[Path, dict]) -> None:
    """No raw seed stands as a counterexample: each broken invariant has a
    shrunk scenario (that expects the violation and reproduces it), a
    timeline plot, and the explorer's depth."""
    from inboxsim.scenarios.load import load_text
    from inboxsim.scenarios.runner import run_scenario

    out, doc = report
    seen = 0
    for p in doc["policies"]:
        for inv in p["violations"]:
            if inv == "liveness.settles":
                continue
            sh = p["shrunk"][inv]
            assert sh["shrunk"] and sh["verified"], (p["name"], inv)
            assert sh["operations"] <= 6
            loaded = load_text(sh["scenario"])
            assert loaded.scenario.expect_violation == inv
            assert run_scenario(loaded).passed
            assert (out / sh["figure"]).stat().st_size > 0
            assert explorer_depth(p, inv) is not None
            seen += 1
    assert seen >= 1
    md = (out / "designs.md").read_text()
    assert "## Per design" in md and "explorer: depth" in md
    assert "c-merged: breaks no invariant" in md


@pytest.mark.parametrize(
    ("policy", "invariant", "depth"),
    [("b", "receipt-reflects-request", 1), ("c", "queue-fifo", 2)],
)
def test_counterexamples_once_only_raw_seeds_are_shrunk_and_explored(
    policy: str, invariant: str, depth: int
) -> None:
    """b's receipt-reflects-request and c's queue-fifo (which c's sweep sees
    after shared-admission-order): shrunk alone, and found by the explorer."""
    from inboxsim.sim.run import RunOptions, run_seed

    seed = next(
        s
        for s in range(300)
        if invariant
        in {v.invariant for v in run_seed(s, PRESETS[policy], RunOptions(ops=60)).violations}
        or _violates_alone(policy, invariant, s)
    )
    task = ds.PolicyTask(policy, PRESETS[policy], 1, 60, 1, depth)
    sh = ds.shrink_one(task, invariant, seed)
    assert sh["shrunk"] and sh["verified"] and sh["operations"] <= 3
    explored = ds.explore_one(PRESETS[policy], 1, depth, invariant)
    assert explored["violations"][0]["invariant"] == invariant
    assert explored["depth_found"] <= depth


def _violates_alone(policy: str, invariant: str, seed: int) -> bool:
    from inboxsim.invariants.monitor import Monitor
    from inboxsim.sim.run import RunOptions, run_seed

    def alone(p: object, hello: dict) -> Monitor:
        return Monitor(p, hello, invariants=(invariant,))  # type: ignore[arg-type]

    return bool(run_seed(seed, PRESETS[policy], RunOptions(ops=60), monitor=alone).violations)


def test_shrunk_counterexample_is_deterministic() -> None:
    """The shrink budget is in runs, so two reports give the same scenario."""
    task = ds.PolicyTask("g2", PRESETS["g2"], 1, 60, 1, 0)
    seed = next(s for s in range(300) if _violates_alone("g2", "monotonic-visible-time", s))
    one = ds.shrink_one(task, "monotonic-visible-time", seed)
    two = ds.shrink_one(task, "monotonic-visible-time", seed)
    assert one["scenario"] == two["scenario"] and one["operations"] <= 6


# --- the verdicts state only what was measured ------------------------------------------
#
# ``inboxsim designs`` runs at two budgets; every figure of the report is then
# recomputed from an independent sweep of the same seeds and policies (whole
# runs under a monitor that judges nothing, each trace judged afterwards,
# compared with g4's step by step), the shrunk and explored counterexamples
# are rerun as scenarios, and every verdict sentence is rendered again from
# the recomputed figures: a number in the prose that differs from them fails.

ALLOWED_IN_TEMPLATES = re.compile(r"\b(?:[gG][2-5]|q[1-6]|A\d)\b")
"""Digits a template may hold: preset and question names, not numbers."""


def _client(step: Step, log: bool) -> dict:
    """What a step answered, as the observable difference compares it."""
    wire = step_wire(step)
    reply = wire["reply"]
    if step.request is not None and step.request.OP == "hello" and reply is not None:
        reply = {k: v for k, v in reply.items() if k != "result"}
    seen = {"reply": reply, "observed": wire["observed"]}
    if log:
        return seen
    seen["observed"] = {k: v for k, v in seen["observed"].items() if k != "events"}
    return _unsequenced(seen)


def _answered(step: Step, policy: str) -> str:
    """A step's request, reply and observation, the policy's name in hello's
    implementation string left out (the report compares traces so)."""
    wire = step_wire(step)
    text = json.dumps([wire["request"], wire["reply"], wire["observed"]], sort_keys=True)
    return text.replace(f"({policy})", "")


def _unsequenced(value: object) -> object:
    if isinstance(value, dict):
        return {k: _unsequenced(v) for k, v in value.items() if k not in ("seq", "admitted_seq")}
    return [_unsequenced(v) for v in value] if isinstance(value, list) else value


def _scenario_trace(text: str, policy: Policy, invariant: str | None) -> tuple:
    monitor = (lambda p, h: Monitor(p, h, invariants=(invariant,))) if invariant else None
    result = run_scenario(load_text(text), policy=policy, monitor=monitor)
    return result.trace.steps, result.violations


def _operations(steps: tuple) -> tuple[int, int]:
    """(requests other than hello and create, kills and failpoint crashes)."""
    ops = sum(1 for s in steps if s.request is not None and s.request.OP not in ("hello", "create"))
    faults = sum(1 for s in steps if s.kind == "crash" or s.crash_at)
    return ops, faults


def _check_difference(value: dict | None, text: str, base: Policy, policy: Policy) -> None:
    a, _ = _scenario_trace(text, base, None)
    b, _ = _scenario_trace(text, policy, None)
    tiers = {
        log: next(
            (
                i
                for i, (x, y) in enumerate(zip(a, b, strict=False))
                if _client(x, log) != _client(y, log)
            ),
            None,
        )
        for log in (False, True)
    }
    if value is None:
        assert len(a) == len(b) and tiers[True] is None
        return
    at = tiers[value["seen"] == "log"]
    assert at is not None and (value["seen"] == "log") == (tiers[False] is None)
    assert a[at].decision == f"scenario step {value['step']}"
    request = step_wire(a[at])["request"]
    request.pop("now")
    assert request == value["request"]
    assert value["parts"] and {p["base"] != p["policy"] for p in value["parts"]} == {True}


def _recompute(doc: dict) -> dict[str, object]:
    """Every figure of ``doc``, from an independent sweep and reruns."""
    from inboxsim.search.explore import explore

    o = doc["options"]
    k = st.key
    f: dict[str, object] = {k("options", n): o[n] for n in ("seeds", "ops", "depth", "sessions")}
    base = PRESETS["g4"]
    f |= {k("field", "g4", n): v for n, v in base.fields().items()}
    f |= {
        k("holds_under", i.id): {n: list(v) for n, v in i.holds_under.fields}
        for i in REGISTRY.values()
    }
    traces: dict[str, list] = {}
    for p in doc["policies"]:
        name = p["name"]
        policy = PRESETS[name]
        f[k("seeds", name)] = o["seeds"]
        f |= {k("field", name, n): v for n, v in policy.fields().items()}
        f[k("fields_differ", name)] = sorted(
            n for n, v in policy.fields().items() if base.fields()[n] != v
        )
        violated: dict[str, list[int]] = {}
        exercised: dict[str, int] = {}
        metric = dict.fromkeys(ds.METRIC_FIGURES + ("synthetic_admitted_queue",), 0)
        traces[name] = []
        for seed in range(o["seeds"]):
            run = run_seed(
                seed, policy, RunOptions(ops=o["ops"]), monitor=Quiet, violation=Violation
            )
            judge = Monitor(policy, run.trace.header.hello)
            found = {v.invariant for s in run.trace.steps for v in judge.feed(s)}
            ended = judge.finish(True)
            found |= {v.invariant for v in ended}
            if run.liveness == "unsettled" and not ended:
                found.add(vd.LIVENESS)
            for inv in found:
                violated.setdefault(inv, []).append(seed)
            for inv in judge.exercised:
                exercised[inv] = exercised.get(inv, 0) + 1
            traces[name].append([_answered(s, name) for s in run.trace.steps])
            for s in run.trace.steps:
                wire = step_wire(s)
                if wire["request"] and wire["request"]["op"] == "synthetic":
                    metric["synthetic_requested"] += 1
                    metric["synthetic_queue_requested"] += (
                        wire["request"].get("delivery") == "queue"
                    )
                    metric["synthetic_rejected_unsupported"] += (wire["reply"] or {}).get(
                        "error"
                    ) == "unsupported"
                promoted: dict[str, int] = {}
                for e in wire["observed"].get("events", []):
                    data = e["data"] if isinstance(e["data"], dict) else json.loads(e["data"])
                    if e["type"] == "admitted" and data.get("type") == "synthetic":
                        metric["synthetic_admitted_queue"] += data.get("delivery") == "queue"
                    if e["type"] == "promoted":
                        promoted[e["session"]] = promoted.get(e["session"], 0) + 1
                metric["max_steers_per_boundary"] = max(
                    metric["max_steers_per_boundary"], *promoted.values(), 0
                )
        f[k("broken", name)] = sorted(violated)
        for inv in (*REGISTRY, vd.LIVENESS):
            f[k("violated", name, inv)] = len(violated.get(inv, []))
            if inv in violated:
                f[k("first", name, inv)] = violated[inv][0]
        for inv in REGISTRY:
            f[k("exercised", name, inv)] = exercised.get(inv, 0)
            f[k("expected", name, inv)] = REGISTRY[inv].expected(policy)
        f |= {k("metric", name, n): v for n, v in metric.items()}
        # the counterexamples, rerun as scenarios judging their invariant alone
        for inv, sh in p["shrunk"].items():
            steps, found = _scenario_trace(sh["scenario"], policy, inv)
            assert found and found[0].invariant == inv, (name, inv)
            if sh.get("shrunk"):
                ops, faults = _operations(steps)
                f[k("shrunk", name, inv)] = {
                    "operations": ops,
                    "faults": faults,
                    "seed": violated[inv][0],
                    "message": found[0].message,
                }
            if name != "g4" and sh.get("shrunk"):
                d = doc["figures"][k("difference", name, inv)]
                _check_difference(d, sh["scenario"], base, policy)
                f[k("difference", name, inv)] = d
        found_by_explorer: set[str] = set()
        for inv in p["shrunk"]:
            explored = next(
                (e for e in p["explore"] for v in e["violations"] if v["invariant"] == inv), None
            )
            if explored is None:  # not within the bound: the narrowed search finds nothing
                factory = lambda pol, hello, inv=inv: Monitor(pol, hello, invariants=(inv,))  # noqa: E731
                assert not explore(policy, factory, o["sessions"], o["depth"]).violations
                f[k("depth", name, inv)] = None
                continue
            steps, found = _scenario_trace(explored["scenario"], policy, inv)
            assert found and found[0].invariant == inv
            f[k("depth", name, inv)] = _operations(steps)[0] + sum(s.kind == "crash" for s in steps)
            found_by_explorer.add(inv)
        if not p["explore"][0]["violations"]:  # the unfiltered search found nothing
            assert not explore(
                policy, lambda pol, hello: Monitor(pol, hello), o["sessions"], o["depth"]
            ).violations
        f[k("explore_found", name)] = sorted(
            {v["invariant"] for e in p["explore"] for v in e["violations"]}
        )
    if "g4" in traces:
        for name, runs in traces.items():
            if name == "g4":
                continue
            differ = [i for i, (x, y) in enumerate(zip(traces["g4"], runs, strict=True)) if x != y]
            f[k("identical", name)] = len(runs) - len(differ)
            f[k("compared", name)] = len(runs)
            f[k("differing", name)] = differ[: ds.DIFFERING_SHOWN]
    f["max_batch"] = max(
        f[k("metric", p["name"], "max_steers_per_boundary")] for p in doc["policies"]
    )
    return f


def _digits(value: object) -> set[str]:
    return set(re.findall(r"\d+", json.dumps(value, sort_keys=True)))


@pytest.mark.parametrize(("seeds", "ops", "depth"), [(4, 30, 1), (10, 40, 2)])
def test_verdicts_state_only_recomputed_figures(
    tmp_path: Path, seeds: int, ops: int, depth: int
) -> None:
    out = tmp_path / "designs"
    argv = ["designs", "--seeds", str(seeds), "--ops", str(ops), "--depth", str(depth)]
    assert cli.main([*argv, "--jobs", "2", "--out", str(out)]) == 0
    doc = json.loads((out / "designs.json").read_text())
    figures = doc["figures"]
    recomputed = _recompute(doc)
    # the explorer found each invariant it is said to have found (and only those)
    for key, value in figures.items():
        if key.startswith("explore_found/"):
            assert all(figures[st.key("depth", key.split("/")[1], i)] is not None for i in value)
    assert {k: v for k, v in figures.items() if not k.startswith("explore_found/")} == {
        k: v for k, v in recomputed.items() if not k.startswith("explore_found/")
    }
    known = set(PRESETS) | set(REGISTRY) | {vd.LIVENESS} | set(PRESETS["g4"].fields())
    differences = 0
    for q in doc["questions"]:
        sentences = [st.Sentence.load(s) for s in q["sentences"]]
        assert q["verdict"] == " ".join(s["text"] for s in q["sentences"])
        assert sentences, q["key"]
        for s, stored in zip(sentences, q["sentences"], strict=True):
            # the prose is the template filled from the recomputed figures
            assert st.render(s, recomputed) == stored["text"], q["key"]
            fixed = st.SLOT.sub("", s.template)
            assert not re.search(r"\d", ALLOWED_IN_TEMPLATES.sub("", fixed)), s.template
            assert set(dict(s.names).values()) <= known  # identifiers, never numbers
            keys = s.figure_keys()
            assert all(key in recomputed for key in keys), keys
            if s.basis == st.MEASURED:
                assert keys, s.template
            elif s.basis == st.CONSTRUCTION:
                assert not s.refs and "by construction" in s.template
            # every number in the sentence is a digit of a figure it names
            names = {n for _, n in s.names}
            allowed = set().union(*(_digits(recomputed[key]) for key in keys), *map(_digits, names))
            numbers = set(re.findall(r"\d+", ALLOWED_IN_TEMPLATES.sub("", stored["text"])))
            assert numbers <= allowed, (stored["text"], numbers - allowed)
            differences += any(f.form == "difference" for _, f in s.refs)
            # "indistinguishable" only where every seed compared gave g4's trace
            for key in keys:
                if key.startswith("identical/") and "indistinguishable" in stored["text"]:
                    assert recomputed[key] == recomputed["compared/" + key.split("/")[1]]
    assert differences or seeds < 10  # circular evidence is shown as an observable difference


# --- the observable difference (designs/difference.py) ------------------------------------

SCENARIO_HEAD = """name = "difference"
source = "tests/test_designs.py"
policy = "g4"
step_limit = 4

[[step]]
op = "create"
session = "s1"
"""
SYNTHETIC_QUEUE = """
[[step]]
op = "synthetic"
session = "s1"
input = "u1"
text = "a"
delivery = "queue"
"""


def test_difference_names_the_step_and_the_values_a_client_sees() -> None:
    d = observable_difference(SCENARIO_HEAD + SYNTHETIC_QUEUE, PRESETS["g4"], PRESETS["b"])
    assert d is not None and (d["seen"], d["step"], d["more"]) == ("client", 2, 0)
    assert d["request"] == {
        "op": "synthetic",
        "session": "s1",
        "input": "u1",
        "text": "a",
        "delivery": "queue",
    }
    assert d["parts"] == [{"path": "reply.result.delivery", "base": '"queue"', "policy": '"steer"'}]
    rejected = observable_difference(SCENARIO_HEAD + SYNTHETIC_QUEUE, PRESETS["g4"], PRESETS["g2"])
    assert rejected is not None
    assert rejected["parts"][0] == {"path": "reply", "base": "ok", "policy": "error unsupported"}
    assert rejected["parts"][1]["path"] == "observed.transcript"
    assert rejected["parts"][1]["policy"] == "unchanged"


def test_difference_of_order_is_a_list_of_names_and_none_when_alike() -> None:
    text = SCENARIO_HEAD + SYNTHETIC_QUEUE.replace('"queue"', '"steer"\nresume = false')
    text += '\n[[step]]\nop = "prompt"\nsession = "s1"\ninput = "u2"\ntext = "a"\n'
    d = observable_difference(text, PRESETS["g4"], PRESETS["c"])
    assert d is not None and d["step"] == 3
    assert d["parts"][0] == {
        "path": "observed.transcript.s1",
        "base": '["u1","u2"]',
        "policy": '["u2","u1"]',
    }
    assert observable_difference(text, PRESETS["g4"], PRESETS["c-merged"]) is None
    assert observable_difference(text, PRESETS["g4"], PRESETS["a"]) is None


def test_difference_in_the_log_only_when_a_client_sees_none() -> None:
    text = SCENARIO_HEAD + '\n[[step]]\nop = "prompt"\nsession = "s1"\ninput = "u1"\ntext = "a"\n'
    d = observable_difference(text, PRESETS["g4"], PRESETS["g2"])  # g2 logs steps on response
    assert d is not None and (d["seen"], d["step"]) == ("log", 2)
    assert d["parts"][0]["path"].startswith("observed.events[")
