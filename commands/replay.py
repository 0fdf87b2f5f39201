"""``inboxsim replay``: one seed again, as its trace or a viewer page."""

from __future__ import annotations

from ..model import Policy
from ..reports.group_view import GroupRecorder
from ..reports.pages import result_page, verdict_words
from ..reports.summary import replay_command
from ..sim.run import run_seed
from ..sim.show import result_document, trace_lines
from .options import sim_inputs
from .output import echo, emit_json, write_file


def replay(
    *,
    seed: int,
    policy: str,
    ops: int,
    target: str,
    only_expected: bool,
    html: str | None,
    as_json: bool,
    concurrency: int = 1,
) -> int:
    the_policy, options = sim_inputs(policy, ops, target, only_expected, concurrency)
    watched: list[GroupRecorder] = []  # the page shows each group as the model served it

    def model(policy: Policy, step_limit: int) -> GroupRecorder:
        watched.append(GroupRecorder(policy, step_limit))
        return watched[-1]

    result = run_seed(seed, the_policy, options, target=model if html is not None else None)
    if html is not None:
        served = watched[0].served if watched else []
        page = result_page(result, replay_command(seed, policy, options.to_dict()) or "", served)
        write_file(html, page, f"cannot write {html}")
        violations = [(v.invariant, v.steps, v.message) for v in result.violations]
        echo(f"seed {seed} ({result.policy}): {verdict_words(violations)}; wrote {html}")
    elif as_json:
        emit_json(result_document(result))
    else:
        for line in trace_lines(result):
            echo(line)
    return 1 if result.violations else 0
