"""``inboxsim shrink``: a failing seed, or a failing scenario file, shrunk to a
minimal scenario that fails the same way, written as a scenario file.

The two inputs shrink through two engines with two result types
(:class:`~inboxsim.search.shrink.ShrinkResult`,
:class:`~inboxsim.search.shrink.ScenarioShrink`); each is turned here into
one of two outcomes, :class:`Shrunk` (a file to write) or :class:`Nothing`
(nothing to shrink), which the command prints the same way whatever the input.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ExitCode, HarnessError
from ..policy_file import load_policy
from ..search import shrink as sh
from .options import model_only, sim_inputs
from .output import echo, emit_json, progress, write_file

SIZES = ("operations", "faults", "steps", "decisions", "scenario_steps")


@dataclass(frozen=True)
class Shrunk:
    """A minimal scenario: its ``text``, the default file name, and the
    ``--json`` document without the fields the command adds."""

    text: str
    default_out: str
    document: dict[str, Any]


@dataclass(frozen=True)
class Nothing:
    """The input violates no invariant: the ``--json`` document, the summary line."""

    document: dict[str, Any]
    line: str
    exit_code: int


def shrink(
    *,
    what: str,
    policy: str | None,
    ops: int,
    out: str | None,
    max_runs: int,
    time_limit: float,
    target: str,
    only_expected: bool,
    expect: bool,
    as_json: bool,
) -> int:
    seed = parse_seed(what)
    if seed is not None:
        outcome = shrink_seed(
            seed, policy or "g4", ops, target, only_expected, max_runs, time_limit, expect
        )
    else:
        model_only(target)
        outcome = shrink_file(what, policy, max_runs, time_limit, expect)
    if isinstance(outcome, Nothing):
        if as_json:
            emit_json(outcome.document)
        else:
            echo(outcome.line)
        return outcome.exit_code
    written = out or outcome.default_out
    write_file(written, outcome.text, f"cannot write {written}")
    document = {**outcome.document, "written": written, "expect_violation": expect}
    if as_json:
        emit_json(document)
    else:
        for line in summary_lines(document, written, expect):
            echo(line)
    return int(ExitCode.TARGET_FAILED)


def parse_seed(what: str) -> int | None:
    """The seed ``what`` names, or None when it names a scenario file."""
    try:
        seed = int(what)
    except ValueError:
        if not Path(what).is_file():
            raise HarnessError(
                f"{what!r} is neither a seed (an integer) nor a scenario file"
            ) from None
        return None
    if seed < 0:
        raise HarnessError(f"the seed must be a non-negative integer, not {seed}")
    return seed


def shrink_seed(
    seed: int,
    policy: str,
    ops: int,
    target: str,
    only_expected: bool,
    max_runs: int,
    time_limit: float,
    expect: bool,
) -> Shrunk | Nothing:
    the_policy, options = sim_inputs(policy, ops, target, only_expected)
    progress(f"shrink: running seed {seed} under {the_policy.name}")
    result = sh.shrink_seed(
        seed, the_policy, options, max_runs=max_runs, time_limit=time_limit, expect=expect
    )
    name = the_policy.name
    if result is None:
        return Nothing(
            {"seed": seed, "policy": name, "violated": False, "written": None},
            f"seed {seed} violates no invariant under {name}: nothing to shrink",
            int(ExitCode.OK),
        )
    return Shrunk(
        result.text,
        f"shrink-{name}-{seed}.toml",
        {"seed": seed, "policy": name, "violated": True, **result.document()},
    )


def shrink_file(
    path: str, policy: str | None, max_runs: int, time_limit: float, expect: bool
) -> Shrunk | Nothing:
    the_policy = load_policy(policy) if policy is not None else None
    progress(f"shrink: running scenario {path}")
    result = sh.shrink_scenario_file(
        path, the_policy, max_runs=max_runs, time_limit=time_limit, expect=expect
    )
    if result.invariant is None:
        state = (
            "passes"
            if result.passed
            else "fails only on expectations, which shrink does not reduce"
        )
        return Nothing(
            {"file": path, "violated": False, "passed": result.passed, "written": None},
            f"{path} violates no invariant ({state}): nothing to shrink",
            int(ExitCode.OK if result.passed else ExitCode.TARGET_FAILED),
        )
    return Shrunk(
        result.text or "",
        str(Path(path).with_suffix("")) + "-min.toml",
        {"file": path, "violated": True, **result.document()},
    )


def summary_lines(document: dict[str, Any], written: str, expect: bool) -> list[str]:
    """The human summary of a shrink that wrote ``written``."""

    def sizes(size: dict[str, Any]) -> str:
        return ", ".join(f"{size[k]} {k}" for k in SIZES if k in size)

    lines = [
        f"invariant: {document['invariant']}",
        f"original:  {sizes(document['original'])}",
        f"shrunk:    {sizes(document['final'])}",
        f"time:      {document['seconds']} s, {document['runs']} candidate runs",
    ]
    if document.get("also_violated"):
        lines.append(f"note: the last step also violates {', '.join(document['also_violated'])}")
    if document.get("verified") is False:
        lines.append("warning: the written scenario did not reproduce the violation when run")
    if expect:
        lines.append(
            f"wrote {written}: expects the violation (inboxsim run {written} passes "
            "while it is there)"
        )
    else:
        lines.append(
            f"wrote {written}: a regression test (inboxsim run {written} fails while the "
            f"bug is present; add --expect to write it as an expected violation)"
        )
    return lines
