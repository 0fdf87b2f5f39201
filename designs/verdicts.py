"""The design report's verdicts, decided from the figures of one run.

The functional core of ``inboxsim designs`` (issue 16): :mod:`.designs`
measures (sweeps, explores, shrinks) and reduces what it measured to a flat
table of *figures*; this module turns figures into sentences
(:mod:`.sentences`) and does nothing else. A sentence carries no number of its
own: every count, seed, length, depth and message is a figure of the run, named
by its key in the sentence, so a test can recompute each one from an
independent sweep and compare (``tests/test_designs.py``).

Figures (keys are ``/``-separated; ``P`` a policy, ``I`` an invariant id,
``F`` a policy field, ``M`` a metric):

- ``options/seeds``, ``options/ops``, ``options/depth``, ``options/sessions``:
  the run's budget;
- ``seeds/P``: seeds swept (``0 .. N-1``); present only for policies run;
- ``identical/P``, ``compared/P``: seeds whose trace equals g4's (after
  normalizing the policy name), of the seeds compared; ``differing/P``: the
  first (at most five) that differ;
- ``broken/P``: the invariants P violated on at least one seed, sorted;
- ``violated/P/I``: seeds on which P violated I (every registry invariant and
  ``liveness.settles``, 0 included); ``first/P/I``: the first of them (where
  there is one); ``exercised/P/I``: seeds on which I reached a step where it
  could have failed;
- ``expected/P/I``: whether the registry expects I to hold under P;
  ``holds_under/I``: the policy-field values I is stated for
  (``{field: [values]}``, ``{}``: every policy);
- ``field/P/F``: P's value of F (and ``field/g4/F``, the baseline, always);
  ``fields_differ/P``: the fields where P differs from g4;
- ``shrunk/P/I``: ``{operations, faults, seed, message}`` of the first
  failing seed shrunk judging I alone (absent when it did not shrink);
- ``depth/P/I``: the explorer depth of I's shortest counterexample, or None
  when none lies within ``options/depth``; ``explore_found/P``: the
  invariants the explorer found under P;
- ``difference/P/I``: that shrunk counterexample run under g4 and under P:
  ``{base, policy, step, request, parts, more}`` at its first step whose
  reply or observation differs (``parts``: the differing values by path),
  or None when every step is the same;
- ``metric/P/M``: ``synthetic_requested``, ``synthetic_queue_requested``,
  ``synthetic_admitted_queue``, ``synthetic_rejected_unsupported``,
  ``max_steers_per_boundary``; ``max_batch``: the last over every policy run.

Each sentence states its basis: ``measured`` (built from figures: it names
at least one), ``by construction`` (a structural claim that holds for every
run; the sentence says so and names no figure) or ``not run``.

Circular evidence. An invariant whose ``holds_under`` excludes a policy's
field value restates the rule of the design that policy departs from (the
decided design, g4): its violation is what the policy's choice means, so it
shows a difference, not a defect. Such a verdict says so and gives the
observable difference instead: the shrunk counterexample run under both
designs, and the first step where they answer differently.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .sentences import (
    CONSTRUCTION,
    NOT_RUN,
    Fig,
    Figures,
    Sentence,
    key,
    render,
    say,
)

BASE = "g4"
"""The decided design every other policy is compared with."""
LIVENESS = "liveness.settles"


# --- phrases shared by the questions ---------------------------------------------------


def ran(figures: Figures, policy: str) -> bool:
    return key("seeds", policy) in figures


def _fields(figures: Figures, p: str) -> Sentence:
    differ = figures[key("fields_differ", p)]
    if not differ:
        return say(
            "{p} has g4's value in every policy field (fields that differ: {none}), so the model "
            "runs the same rules for both.",
            p=p,
            none=Fig(key("fields_differ", p)),
        )
    slots: dict[str, Any] = {"p": p}
    parts = []
    for i, f in enumerate(differ):
        parts.append(f"{{f{i}}} = {{v{i}}} (g4: {{w{i}}})")
        slots |= {f"f{i}": f, f"v{i}": Fig(key("field", p, f)), f"w{i}": Fig(key("field", BASE, f))}
    return say(
        "{p} differs from g4 in " + ", ".join(parts) + ".",
        grounds=[key("fields_differ", p)],
        **slots,
    )


def identical(figures: Figures, p: str) -> Sentence:
    """How many seeds gave the same trace under ``p`` and g4."""
    if key("identical", p) not in figures:
        return say("{p} was not compared with g4 (g4 was not run).", NOT_RUN, p=p)
    same, n = figures[key("identical", p)], figures[key("compared", p)]
    slots: dict[str, Any] = {
        "p": p,
        "k": Fig(key("identical", p)),
        "n": Fig(key("compared", p), noun="seed"),
    }
    if same == n:
        return say(
            "{p} and g4 gave identical traces on {k} of {n}: indistinguishable by observation "
            "in this run.",
            **slots,
        )
    return say(
        "{p} and g4 gave identical traces on {k} of {n}, so they are distinguishable by "
        "observation (first differing seeds: {d}).",
        d=Fig(key("differing", p)),
        **slots,
    )


def _unmet(figures: Figures, p: str, inv: str) -> tuple[str, dict[str, Any]]:
    """'field = value' for each field of ``inv``'s holds_under that ``p`` sets otherwise."""
    parts: list[str] = []
    slots: dict[str, Any] = {}
    for i, f in enumerate(sorted(figures[key("holds_under", inv)])):
        if figures[key("field", p, f)] not in figures[key("holds_under", inv)][f]:
            parts.append(f"{{uf{i}}} = {{uv{i}}}")
            slots |= {f"uf{i}": f, f"uv{i}": Fig(key("field", p, f))}
    return " and ".join(parts), slots


def broken(figures: Figures, p: str, inv: str) -> list[Sentence]:
    """What breaking ``inv`` under ``p`` shows: a defect, or (circular) a difference."""
    seen: dict[str, Any] = {
        "p": p,
        "i": inv,
        "k": Fig(key("violated", p, inv)),
        "n": Fig(key("seeds", p), noun="seed"),
        "s": Fig(key("first", p, inv)),
    }
    if inv == LIVENESS:
        return [
            say(
                "{p} did not settle on {k} of {n} (first: seed {s}): its liveness phase hit its "
                "bound with work left.",
                **seen,
            )
        ]
    out = []
    if figures[key("expected", p, inv)]:
        out.append(
            say(
                "{p} breaks {i} on {k} of {n} (first: seed {s}), although the registry expects "
                "{i} to hold under {p} (it is stated for {w}): a defect, of the design or of the "
                "model.",
                w=Fig(key("holds_under", inv), form="when"),
                grounds=[key("expected", p, inv)],
                **seen,
            )
        )
    else:
        unmet, slots = _unmet(figures, p, inv)
        out.append(
            say(
                "{p} breaks {i} on {k} of {n} (first: seed {s}), but {i} is stated for {w} and "
                f"{{p}} has {unmet}: the invariant was written from the decided design, so the "
                "evidence is circular and shows a difference from g4, not a defect.",
                w=Fig(key("holds_under", inv), form="when"),
                grounds=[key("expected", p, inv)],
                **seen,
                **slots,
            )
        )
    out += counterexample(figures, p, inv)
    return out


def counterexample(figures: Figures, p: str, inv: str) -> list[Sentence]:
    """The shrunk counterexample, the explorer's depth, and the observable difference."""
    sh, depth = key("shrunk", p, inv), key("depth", p, inv)
    slots: dict[str, Any]
    if figures.get(depth) is not None:
        found, slots = "the explorer found it at depth {d}", {"d": Fig(depth)}
    else:
        found, slots = "the explorer did not reach it within depth {d}", {"d": Fig("options/depth")}
    if sh not in figures:
        return [
            say(
                "Its first failing seed, {s}, did not fail judging {i} alone, so no shrunk "
                "counterexample; " + found + ".",
                grounds=[depth],
                s=Fig(key("first", p, inv)),
                i=inv,
                **slots,
            )
        ]
    faults = " + {f}" if figures[sh]["faults"] else ""
    if faults:
        slots["f"] = Fig(sh, part="faults", noun="fault")
    out = [
        say(
            "Shortest counterexample, seed {s} shrunk: {o}" + faults + "; " + found + ": {m}.",
            grounds=[depth],
            s=Fig(sh, part="seed"),
            o=Fig(sh, part="operations", noun="operation"),
            m=Fig(sh, part="message"),
            **slots,
        )
    ]
    diff = key("difference", p, inv)
    if diff not in figures:
        return out
    if figures[diff] is None:
        out.append(
            say(
                "Run under g4 and under {p}, that counterexample gives the same reply and "
                "observation at every step: the designs answer alike there.",
                grounds=[diff],
                p=p,
            )
        )
    else:
        out.append(
            say(
                "The observable difference: run under g4 and under {p}, that counterexample first "
                "differs in {d}.",
                p=p,
                d=Fig(diff, form="difference"),
            )
        )
    return out


def kept(figures: Figures, p: str, invariants: Sequence[str]) -> list[Sentence]:
    """``p`` kept each of ``invariants`` on every seed (and how often each was judged)."""
    if not invariants:
        return []
    slots: dict[str, Any] = {"p": p, "n": Fig(key("seeds", p))}
    parts = []
    for j, inv in enumerate(invariants):
        parts.append(f"{{i{j}}} (judged on {{e{j}}} of {{n}} seeds)")
        slots |= {f"i{j}": inv, f"e{j}": Fig(key("exercised", p, inv))}
    return [
        say(
            "{p} broke none of " + ", ".join(parts) + ".",
            grounds=[key("violated", p, inv) for inv in invariants],
            **slots,
        )
    ]


def judged(figures: Figures, p: str, invariants: Sequence[str] | None) -> list[Sentence]:
    """What ``p`` broke and kept among ``invariants`` (None: all of them)."""
    broke = figures[key("broken", p)]
    if invariants is None:
        if not broke:
            return [
                say(
                    "{p} broke no invariant on any of its {n} (every invariant judged, runs not "
                    "stopped at a violation), and the explorer found none within depth {d} "
                    "({ss}).",
                    grounds=[key("broken", p), key("explore_found", p)],
                    p=p,
                    n=Fig(key("seeds", p), noun="seed"),
                    d=Fig("options/depth"),
                    ss=Fig("options/sessions", noun="session"),
                )
            ]
        return [s for inv in broke for s in broken(figures, p, inv)]
    out = [s for inv in invariants if inv in broke for s in broken(figures, p, inv)]
    out += kept(figures, p, [inv for inv in invariants if inv not in broke])
    others = [inv for inv in broke if inv not in invariants]
    if others:
        slots: dict[str, Any] = {f"o{j}": inv for j, inv in enumerate(others)}
        out.append(
            say(
                "{p} also breaks "
                + ", ".join(f"{{o{j}}}" for j in range(len(others)))
                + ", outside this question (see Per design).",
                grounds=[key("broken", p)],
                p=p,
                **slots,
            )
        )
    return out


# --- the questions ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Question:
    """A question of the seed or an open point of the spec, the policies
    that bear on it, the invariants it is judged by (None: all), what holds
    by construction, and any measured sentences of its own."""

    key: str
    title: str
    source: str
    policies: tuple[str, ...]
    invariants: tuple[str, ...] | None
    construction: tuple[str, ...] = ()
    extra: Callable[[Figures], list[Sentence]] | None = None


def verdict(q: Question, figures: Figures) -> list[Sentence]:
    """Every sentence of the question's verdict, from the run's figures."""
    out = [say(text, CONSTRUCTION) for text in q.construction]
    missing = [p for p in q.policies if not ran(figures, p)]
    for p in q.policies:
        if not ran(figures, p):
            continue
        if p != BASE:
            out += [_fields(figures, p), identical(figures, p)]
        if q.invariants != ():
            out += judged(figures, p, q.invariants)
    if q.extra is not None:
        out += q.extra(figures)
    if missing:
        slots: dict[str, Any] = {f"m{j}": p for j, p in enumerate(missing)}
        out.append(
            say(
                "Not run here: " + ", ".join(f"{{m{j}}}" for j in range(len(missing))) + ".",
                NOT_RUN,
                **slots,
            )
        )
    return out


def _circular_only(figures: Figures, p: str) -> bool:
    return all(
        inv != LIVENESS and not figures[key("expected", p, inv)]
        for inv in figures[key("broken", p)]
    )


def _delivery(figures: Figures) -> list[Sentence]:
    if not (ran(figures, "b") and ran(figures, BASE)):
        return []
    m: dict[str, Any] = {
        f"{p}{n}": Fig(key("metric", p, metric))
        for p in ("b", BASE)
        for n, metric in (("r", "synthetic_queue_requested"), ("q", "synthetic_admitted_queue"))
    }
    out = [
        say(
            "Synthetic requests asking for queue: {br} under b, of which {bq} were admitted as "
            "queue; {g4r} under g4, of which {g4q} were admitted as queue.",
            **m,
        )
    ]
    if not figures[key("broken", BASE)] and _circular_only(figures, "b"):
        out.append(
            say(
                "So in this run the choice showed up as API capability, not safety: g4 broke no "
                "invariant, and b broke only invariants written for the delivery choice it does "
                "not make.",
                grounds=[key("broken", BASE), key("broken", "b")],
            )
        )
    return out


def _alias(figures: Figures) -> list[Sentence]:
    if not ran(figures, "g2"):
        return []
    return [
        say(
            "g2 has no synthetic route (synthetic_delivery = {v}): the workload sent it {s} "
            "synthetic requests, {r} of them rejected as unsupported.",
            v=Fig(key("field", "g2", "synthetic_delivery")),
            r=Fig(key("metric", "g2", "synthetic_rejected_unsupported")),
            s=Fig(key("metric", "g2", "synthetic_requested")),
        )
    ]


def _cap(figures: Figures) -> list[Sentence]:
    if not ran(figures, "g2"):
        return []
    cap = figures[key("field", "g2", "steer_batch_cap")]
    top = figures["max_batch"]
    bound = "never bound" if cap is None or top < cap else "was reached"
    return [
        say(
            "The largest steer batch promoted at one boundary was {t} (over every policy run); "
            "g2's cap is {c}, so the cap " + bound + " in this run.",
            t=Fig("max_batch"),
            c=Fig(key("field", "g2", "steer_batch_cap")),
        )
    ]


def _parallel(figures: Figures) -> list[Sentence]:
    if not (ran(figures, "c") and ran(figures, "c-merged") and ran(figures, BASE)):
        return []
    merged_same = figures[key("identical", "c-merged")] == figures[key("compared", "c-merged")]
    if not (merged_same and figures[key("broken", "c")] and not figures[key("broken", "c-merged")]):
        return []
    return [
        say(
            "So in this run, parallel records cost nothing observable once they share one "
            "admission order (c-merged: identical to g4 on {k} of {n}), and drained kind by kind "
            "(c) they broke {b}.",
            grounds=[key("broken", "c-merged")],
            k=Fig(key("identical", "c-merged")),
            n=Fig(key("compared", "c-merged"), noun="seed"),
            b=Fig(key("broken", "c")),
        )
    ]


QUESTIONS: tuple[Question, ...] = (
    Question(
        "q1-variant",
        "Is a synthetic message a prompt content variant or a distinct Session input kind?",
        "seed, Questions to decide 1 (candidates A, B, C)",
        ("g4", "a", "b", "c", "c-merged"),
        None,
        (
            "Content union (A) versus input union (B) is API shape: the adapter protocol carries "
            "the same admission either way, so simulation cannot decide it (by construction); "
            "what it can show is how each preset's policy fields behave.",
        ),
    ),
    Question(
        "q2-delivery",
        "Should API-submitted synthetic content support both steer and queue, while background "
        "completion always chooses steer?",
        "seed, Questions to decide 2",
        ("g4", "b"),
        ("receipt-reflects-request", "background-completion"),
        extra=_delivery,
    ),
    Question(
        "q3-events",
        "Generic input admission/promotion events or content-specific prompt/synthetic events?",
        "seed, Questions to decide 3",
        ("g4", "c", "c-merged"),
        (),
        (
            "Event naming is API shape: the adapter protocol has one admitted and one promoted "
            "event, with the input's type in their data, so no trace can favour either naming "
            "(by construction); the ordering of separate lifecycles is judged under q1 and the "
            "parallel-lifecycles question.",
        ),
    ),
    Question(
        "q4-discriminator",
        'Does a required type: "user" discriminator justify changing the prompt payload?',
        "seed, Questions to decide 4",
        ("g4", "a"),
        (),
        (
            "A required discriminator changes the payload's shape, not what is admitted, ordered "
            "or promoted, and the protocol's events carry the type either way: not decidable by "
            "simulation (by construction).",
        ),
    ),
    Question(
        "q5-alias",
        "Should the synthetic endpoint remain as a convenience alias?",
        "seed, Questions to decide 5",
        ("g4", "b", "g2"),
        (),
        (
            "An alias and the input endpoint send the same admission through the adapter "
            "protocol, so no trace can favour keeping the alias (by construction).",
        ),
        _alias,
    ),
    Question(
        "q6-retry",
        "What should exact retry compare?",
        "seed, Questions to decide 6; spec A3/A4",
        ("g4", "g5"),
        ("retry-silent", "retry-same-receipt", "conflict-rejected"),
    ),
    Question(
        "a1-time",
        "A1: promoted message timestamp (admission or promotion time)",
        "spec section 5 A1",
        ("g4", "g2"),
        ("monotonic-visible-time",),
    ),
    Question(
        "a2-barrier",
        "A2: barrier order (later input vs all input behind the barrier)",
        "spec section 5 A2",
        ("g4", "g5"),
        ("barrier-blocks-promotion", "barrier-holds-later-input"),
    ),
    Question(
        "a3-retry",
        "A3/A4: retry after promotion (admission record vs message)",
        "spec section 5 A3, A4",
        ("g4", "g5"),
        ("retry-silent", "retry-same-receipt"),
    ),
    Question(
        "a6-cap",
        "A6: steer batch cutoff and cap",
        "spec section 5 A6",
        ("g4", "g2"),
        ("steer-batch",),
        (
            "G2's captured cutoff cannot be observed through the protocol, where nothing is "
            "admitted during a boundary, and the model reads the boundary atomically, as the "
            "spec recommends (by construction).",
        ),
        _cap,
    ),
    Question(
        "parallel",
        "Parallel prompt/synthetic lifecycles: kind by kind (c) or one merged order (c-merged)",
        "seed candidate C and its decision",
        ("g4", "c", "c-merged"),
        ("shared-admission-order", "queue-fifo"),
        extra=_parallel,
    ),
    Question(
        "storage",
        "Storage: rows kept with promoted_seq (g3) vs removed (g4)",
        "docs/cli.md, policies",
        ("g4", "g3"),
        None,
        (
            "Keeping promoted rows with promoted_seq (g3) or deleting them (g4) is storage the "
            "adapter protocol does not expose, so simulation cannot decide it (by construction).",
        ),
    ),
)


def verdicts(figures: Figures) -> list[dict[str, Any]]:
    """Every question's verdict: its sentences, and their text joined."""
    out = []
    for q in QUESTIONS:
        sentences = verdict(q, figures)
        out.append(
            {
                "key": q.key,
                "title": q.title,
                "source": q.source,
                "policies": [p for p in q.policies if ran(figures, p)],
                "missing": [p for p in q.policies if not ran(figures, p)],
                "verdict": " ".join(render(s, figures) for s in sentences),
                "sentences": [s.document(figures) for s in sentences],
            }
        )
    return out


__all__ = [
    "QUESTIONS",
    "Fig",
    "Question",
    "Sentence",
    "key",
    "render",
    "say",
    "verdict",
    "verdicts",
]
