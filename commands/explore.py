"""``inboxsim explore``: every interleaving of a small world, and the shortest
counterexample written as a scenario file."""

from __future__ import annotations

from ..errors import ExitCode, HarnessError
from ..invariants import REGISTRY
from ..policy_file import load_policy
from ..reports import explore as explored
from ..search import explore as ex
from ..search.world import parse_alphabet
from ..sim import checkers
from ..sim.console import ExploreProgress
from .output import echo, emit_json, write_file


def explore(
    *,
    sessions: int,
    depth: int,
    policy: str,
    step_limit: int,
    alphabet: str,
    out: str | None,
    invariant: str | None,
    jobs: int,
    pool: int,
    as_json: bool,
) -> int:
    try:
        families = parse_alphabet(alphabet)
    except ValueError as exc:
        raise HarnessError(f"--alphabet: {exc}") from None
    the_policy = load_policy(policy)
    monitor, _ = checkers.load()
    if invariant is not None and invariant not in REGISTRY:
        raise HarnessError(
            f"--invariant: unknown invariant {invariant!r} (see `inboxsim invariants`)"
        )
    with ExploreProgress(depth) as shown:
        result = ex.explore(
            the_policy,
            monitor,
            sessions,
            depth,
            step_limit,
            families,
            shown.level,
            invariant,
            jobs=jobs,
            pool=pool,
            tick=shown.tick,
        )
    written = None
    if result.violations:
        text, fmt = explored.render_counterexample(result, the_policy)
        written = out or f"explore-{the_policy.name}.{fmt}"
        write_file(written, text, f"cannot write {written}")
    if as_json:
        emit_json(explored.result_document(result, written))
    else:
        for line in explored.summary_lines(result, written):
            echo(line)
    return int(ExitCode.TARGET_FAILED if result.violations else ExitCode.OK)
