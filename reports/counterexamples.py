"""Each problem's shrunk counterexample (``inboxsim report``).

A problem (:mod:`.problems`) names its first failing seed. Its counterexample
is that seed shrunk (:func:`inboxsim.search.shrink.shrink_run`) for the
problem's invariant: a scenario file and the minimal trace, which the report
shows as a step table and a viewer page. Shrinking costs hundreds of runs,
so the result is cached in the store (:mod:`.shrink_cache`) and a second
report reuses it.

The seed is judged as the sweep judged it. When its first violation is
another invariant (a run can break two), it is judged on the problem's
invariant alone, as ``inboxsim designs`` does, so that this invariant is the
one shrunk.

The budget is in candidate runs (:data:`MAX_RUNS`), so a counterexample does
not depend on the machine's load; the time limit per problem is a safety net
that a loaded machine may hit (the report says when the result was cut short).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from .. import __version__
from ..invariants import Monitor
from ..model import Ok
from ..model.policy import PolicyError
from ..search.shrink import judging_only, shrink_run
from ..sim.run import RunOptions, run_seed
from ..store.shrink_cache import ShrinkKey
from ..store.traces import step_from_row
from ..trace.record import Step, step_wire

MAX_RUNS = 2_000
DEFAULT_SECONDS = 30.0
DEFAULT_PROBLEMS = 10


def shrink_key(problem: dict[str, Any]) -> ShrinkKey | None:
    """What a problem's counterexample is cached under; None when its first
    run cannot be shrunk here (a scenario run, or a run of another target)."""
    first = problem["first"]
    model = first["target"].split(":")[0] == "model"  # the reference model, in process
    if first["seed"] is None or not model or problem["kind"] != "invariant":
        return None
    return ShrinkKey(
        first["seed"],
        problem["policy"],
        first.get("policy_hash"),
        first["options"],
        first["version"],
        problem["invariant"],
    )


def _options(text: str) -> Any:

    doc = json.loads(text)
    return RunOptions(
        ops=int(doc.get("ops", 100)),
        liveness_bound=doc.get("liveness_bound"),
        only_expected=bool(doc.get("only_expected", False)),
    )


def judge(
    steps: Sequence[Step], policy: Any, only_expected: bool, alone: str | None
) -> list[list[Any]]:
    """Every violation the checkers find in ``steps``, judged to the end (as
    a scenario run is): (invariant, steps cited, message)."""

    first = steps[0].reply if steps else None
    hello = first.result if isinstance(first, Ok) else {}
    monitor = Monitor(policy, hello, only_expected, invariants=None if alone is None else (alone,))
    found = [v for step in steps for v in monitor.feed(step)]
    return [[v.invariant, list(v.steps), v.message] for v in found]


def make_example(
    key: ShrinkKey, policy: Any, seconds: float, max_runs: int = MAX_RUNS
) -> tuple[str, dict[str, Any]]:
    """Run the seed and shrink it for the key's invariant: (outcome, example)
    as :mod:`.shrink_cache` keeps them."""

    options = _options(key.options)
    started = time.perf_counter()
    result = run_seed(key.seed, policy, options)
    if not any(v.invariant == key.invariant for v in result.violations):
        now = ", ".join(sorted({v.invariant for v in result.violations})) or "nothing"
        return "not reproduced", {
            "message": f"seed {key.seed} run again by inboxsim {__version__} violates {now}, "
            f"not {key.invariant}",
        }
    alone = None
    if result.violations[0].invariant != key.invariant:
        alone = key.invariant
        only = judging_only((key.invariant,), options.only_expected)
        result = run_seed(key.seed, policy, options, monitor=only)
    ops = options.ops
    shrunk = shrink_run(
        result,
        policy,
        options,
        invariant=key.invariant,
        only=None if alone is None else (alone,),
        max_runs=max_runs,
        time_limit=seconds,
        name=f"shrunk-{policy.name}-{key.invariant}-seed-{key.seed}",
        source=f"inboxsim report: seed {key.seed} (policy {policy.name}, --ops {ops}) shrunk "
        f"for {key.invariant}" + (", judged alone" if alone else ""),
    )
    elapsed = time.perf_counter() - started
    return "shrunk", {
        **shrunk.document(),
        "seed": key.seed,
        "judged_alone": alone is not None,
        "cut_short": shrunk.runs >= max_runs or elapsed >= seconds,
        "scenario": shrunk.text,
        "steps": [step_wire(s) for s in shrunk.steps],
        "violations": judge(shrunk.steps, policy, options.only_expected, alone),
    }


def example_steps(example: dict[str, Any]) -> tuple[Step, ...]:
    """The minimal trace's steps of a cached example."""

    opened: dict[str, int] = {}
    dump = json.dumps
    return tuple(
        step_from_row(
            w["index"],
            w["phase"],
            w["kind"],
            w["decision"],
            None if w["request"] is None else dump(w["request"]),
            None if w["reply"] is None else dump(w["reply"]),
            dump(w["observed"]),
            opened,
        )
        for w in example.get("steps", ())
    )


Say = Callable[[str], None]


def examples_for(
    problems: Sequence[dict[str, Any]],
    cached: dict[ShrinkKey, tuple[str, dict[str, Any]]],
    policies: Callable[[ShrinkKey], Any],
    seconds: float = DEFAULT_SECONDS,
    most: int = DEFAULT_PROBLEMS,
    say: Say | None = None,
    keep: Callable[[ShrinkKey, str, dict[str, Any]], None] | None = None,
) -> dict[str, tuple[str, dict[str, Any]]]:
    """Each problem's (outcome, example) by problem id: from ``cached``, else
    shrunk now (the first ``most`` problems not cached, ``seconds`` each),
    each new result handed to ``keep`` as soon as it is made (to cache it:
    an interrupted report keeps what it finished). ``policies(key)``: the
    policy the key's run ran under (a :class:`~inboxsim.model.policy.PolicyError`
    is said, not raised). A problem that cannot be shrunk is absent."""

    say = say or (lambda _line: None)
    found: dict[str, tuple[str, dict[str, Any]]] = {}
    left = most
    for n, problem in enumerate(problems, start=1):
        key = shrink_key(problem)
        if key is None:
            continue
        if key in cached:
            found[problem["id"]] = cached[key]
            continue
        if left <= 0 or seconds <= 0:
            continue
        left -= 1
        say(
            f"report: shrinking problem {n}/{len(problems)}: {problem['invariant']} "
            f"({problem['policy']}), seed {key.seed} of {problem['runs']} failing runs"
        )
        try:
            outcome, example = make_example(key, policies(key), seconds)
        except PolicyError as exc:
            say(f"report: cannot shrink seed {key.seed}: {exc}")
            continue
        found[problem["id"]] = (outcome, example)
        if keep is not None:
            keep(key, outcome, example)
        if outcome == "shrunk":
            final = example["final"]
            say(
                f"report: shrunk to {final['operations']} operations, {final['faults']} faults, "
                f"{final['steps']} steps ({example['runs']} runs, {example['seconds']} s)"
            )
        else:
            say(f"report: {example['message']}")
    return found
