"""The design report's verdicts from figures (designs/verdicts.py), on hand-built runs.

Each test builds the figures of an imagined run and checks that the words
follow the figures: "indistinguishable" only when every seed was identical,
a violation the registry does not expect called circular and shown as an
observable difference, one it expects called a defect, and so on.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from inboxsim.designs import sentences as st
from inboxsim.designs import verdicts as vd
from inboxsim.designs.sentences import key
from inboxsim.invariants.registry import REGISTRY
from inboxsim.model import PRESETS

DIFFERENCE = {
    "base": "g4",
    "policy": "b",
    "seen": "client",
    "step": 2,
    "request": {
        "op": "synthetic",
        "session": "s1",
        "input": "u1",
        "text": "a",
        "delivery": "queue",
    },
    "parts": [{"path": "reply.result.delivery", "base": '"queue"', "policy": '"steer"'}],
    "more": 0,
}


def run_of(seeds: int = 10, **policies: dict[str, Any]) -> dict[str, Any]:
    """The figures of a run of ``policies`` (name -> what it broke, how many
    seeds were identical to g4's, ...); everything else held."""
    f: dict[str, Any] = {
        "options/seeds": seeds,
        "options/ops": 40,
        "options/depth": 2,
        "options/sessions": 1,
    }
    base = PRESETS["g4"].fields()
    f |= {key("field", "g4", n): v for n, v in base.items()}
    f |= {
        key("holds_under", i.id): {n: list(v) for n, v in i.holds_under.fields}
        for i in REGISTRY.values()
    }
    batches = []
    for name, spec in policies.items():
        policy = PRESETS[name]
        broken: dict[str, int] = spec.get("broken", {})
        f[key("seeds", name)] = seeds
        f |= {key("field", name, n): v for n, v in policy.fields().items()}
        f[key("fields_differ", name)] = sorted(
            n for n, v in policy.fields().items() if base[n] != v
        )
        if name != "g4" and "g4" in policies:
            same = spec.get("identical", seeds)
            f[key("identical", name)], f[key("compared", name)] = same, seeds
            f[key("differing", name)] = list(range(seeds - same))[:5]
        f[key("broken", name)] = sorted(broken)
        for inv in (*REGISTRY, vd.LIVENESS):
            f[key("violated", name, inv)] = broken.get(inv, 0)
        for inv in REGISTRY:
            f[key("exercised", name, inv)] = seeds - 1
            f[key("expected", name, inv)] = REGISTRY[inv].expected(policy)
        for inv in broken:
            f[key("first", name, inv)] = 3
            f[key("depth", name, inv)] = spec.get("depth", 1)
            if not spec.get("unshrunk"):
                f[key("shrunk", name, inv)] = {
                    "operations": 2,
                    "faults": 1,
                    "seed": 3,
                    "message": "m",
                }
            if name != "g4" and not spec.get("unshrunk"):
                f[key("difference", name, inv)] = spec.get("difference", DIFFERENCE)
        f[key("explore_found", name)] = sorted(broken)
        for m in ("synthetic_requested", "synthetic_queue_requested", "synthetic_admitted_queue"):
            f[key("metric", name, m)] = 6
        f[key("metric", name, "synthetic_rejected_unsupported")] = 0
        batches.append(spec.get("batch", 3))
        f[key("metric", name, "max_steers_per_boundary")] = batches[-1]
    f["max_batch"] = max(batches)
    return f


def verdict_of(question: str, figures: dict[str, Any]) -> str:
    return next(q["verdict"] for q in vd.verdicts(figures) if q["key"] == question)


def test_identical_only_when_every_seed_was() -> None:
    differs = verdict_of("q2-delivery", run_of(g4={}, b={"identical": 7}))
    assert "identical traces on 7 of 10 seeds" in differs
    assert "distinguishable by observation (first differing seeds: 0, 1, 2)" in differs
    assert "indistinguishable" not in differs
    same = verdict_of("q4-discriminator", run_of(g4={}, a={}))
    assert "identical traces on 10 of 10 seeds: indistinguishable by observation" in same


def test_circular_violation_is_a_difference_shown_as_observed() -> None:
    text = verdict_of(
        "q2-delivery", run_of(g4={}, b={"broken": {"receipt-reflects-request": 4}, "identical": 6})
    )
    assert "b breaks receipt-reflects-request on 4 of 10 seeds (first: seed 3)" in text
    assert "stated for synthetic_delivery = steer_or_queue or none" in text
    assert "b has synthetic_delivery = always_steer" in text
    assert "circular" in text and "not a defect" in text and "a defect," not in text
    assert (
        "first differs in what a client sees at its step 2 (synthetic session=s1 delivery=queue "
        'input=u1 text=a): reply.result.delivery is "queue" under g4 and "steer" under b'
    ) in text
    assert "API capability, not safety" in text  # g4 broke nothing, b only by design


def test_expected_violation_is_a_defect() -> None:
    text = verdict_of("q2-delivery", run_of(g4={"broken": {"receipt-reflects-request": 2}}, b={}))
    assert "g4 breaks receipt-reflects-request on 2 of 10 seeds" in text
    assert "a defect, of the design or of the model" in text and "circular" not in text
    assert "g4 broke none of background-completion" in text
    assert "g4 broke none of receipt-reflects-request" not in text
    assert "API capability" not in text  # not concluded while g4 broke something


def test_counterexample_lengths_or_why_there_is_none() -> None:
    shrunk = verdict_of("a1-time", run_of(g4={}, g2={"broken": {"monotonic-visible-time": 1}}))
    assert "Shortest counterexample, seed 3 shrunk: 2 operations + 1 fault; the explorer" in shrunk
    figures = run_of(g4={}, g2={"broken": {"monotonic-visible-time": 1}, "unshrunk": True})
    text = verdict_of("a1-time", figures)
    assert "Its first failing seed, 3, did not fail judging monotonic-visible-time alone" in text
    assert "observable difference" not in text


def test_no_difference_says_the_designs_answer_alike() -> None:
    figures = run_of(g4={}, g5={"broken": {"conflict-rejected": 1}, "difference": None})
    assert "answer alike there" in verdict_of("q6-retry", figures)


def test_explorer_depth_or_its_bound() -> None:
    found = verdict_of("a1-time", run_of(g4={}, g2={"broken": {"monotonic-visible-time": 1}}))
    assert "the explorer found it at depth 1" in found
    missed = run_of(g4={}, g2={"broken": {"monotonic-visible-time": 1}, "depth": None})
    assert "the explorer did not reach it within depth 2" in verdict_of("a1-time", missed)


@pytest.mark.parametrize(
    ("batch", "cap", "words"),
    [(5, 100, "never bound"), (100, 100, "was reached"), (100, None, "never bound")],
)
def test_the_cap_bound_only_if_a_batch_reached_it(batch: int, cap: int | None, words: str) -> None:
    # g2 (OpenCode 1.18.33) has no cap; a g2-based policy file may set one.
    figures = run_of(g4={}, g2={"batch": batch})
    figures[key("field", "g2", "steer_batch_cap")] = cap
    text = verdict_of("a6-cap", figures)
    said = f"g2's cap is {cap or 'none'}, so the cap {words}"
    assert f"was {batch} (over every policy run); {said}" in text


def test_a_policy_not_run_is_named_and_not_judged() -> None:
    text = verdict_of("q2-delivery", run_of(g4={}))
    assert text.endswith("Not run here: b.") and "b breaks" not in text
    alone = verdict_of("q4-discriminator", run_of(a={}))
    assert "a was not compared with g4 (g4 was not run)" in alone


def test_every_number_of_every_sentence_is_a_figure_it_names() -> None:
    figures = run_of(
        g4={},
        g3={},
        g2={"broken": {"monotonic-visible-time": 2}, "identical": 0},
        g5={"broken": {"conflict-rejected": 9, "barrier-blocks-promotion": 3}, "identical": 1},
        a={},
        b={"broken": {"receipt-reflects-request": 4}, "identical": 6},
        c={"broken": {"shared-admission-order": 7}, "identical": 8},
        **{"c-merged": {}},
    )
    for q in vd.verdicts(figures):
        assert q["verdict"] == " ".join(s["text"] for s in q["sentences"])
        for doc in q["sentences"]:
            s = st.Sentence.load(doc)
            assert st.render(s, figures) == doc["text"]
            named = "".join(str(figures[k]) for k in s.figure_keys()) + "".join(
                dict(s.names).values()
            )
            for number in re.findall(r"\d+", re.sub(r"\b[gG][2-5]\b|\bq[1-6]\b", "", doc["text"])):
                assert number in named, (number, doc["text"])


def test_questions_name_real_invariants_and_say_what_holds_by_construction() -> None:
    for q in vd.QUESTIONS:
        assert set(q.invariants or ()) <= set(REGISTRY), q.key
        assert set(q.policies) <= set(PRESETS), q.key
        for text in q.construction:
            assert "by construction" in text
            assert not re.search(r"\d", re.sub(r"\b[gG][2-5]\b|\bq[1-6]\b", "", text)), text


def test_say_refuses_a_sentence_without_its_basis() -> None:
    with pytest.raises(ValueError, match="names no figure"):
        st.say("b broke nothing.")
    with pytest.raises(ValueError, match="must say so"):
        st.say("It is API shape.", st.CONSTRUCTION)
    with pytest.raises(ValueError, match="unmatched"):
        st.say("{p} broke {n}.", p="b")
    with pytest.raises(ValueError, match="no plain rendering"):
        st.render(st.say("{x}", x=st.Fig("expected/b/queue-fifo")), {"expected/b/queue-fifo": True})
