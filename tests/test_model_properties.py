"""Properties of the model over random operation sequences (Hypothesis).

A sequence is a list of abstract actions against a few sessions and input IDs;
:class:`Driver` resolves each against the current state (which call to
answer, which message to fork before), applies it, and checks after every
step that:

- an error reply leaves the state object untouched and appends nothing;
- replaying each session's events rebuilds its ``SessionLog`` exactly;
- no admitted input is lost, crashes and failpoints included: every input
  that an event admitted is pending or visible unless a committed revert
  removed it or its barrier was consumed (tracked independently from the
  events each request reported);
- an exact retry of a live input appends no admission and, under the strict
  policies, returns the original receipt;
- the ID index (every ID ever admitted or copied, with its first owner, for
  good, or freed by a committed revert under ``ended_ids = "freed_by_revert"``),
  event seqs and open calls stay consistent.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from inboxsim.model import (
    PRESETS,
    Policy,
)
from tests.model_driver import Action, Driver, programs


def run_program(policy: Policy, step_limit: int, program: list[Action]) -> Driver:
    driver = Driver.start(policy, step_limit)
    for action in program:
        driver.run(action)
    driver.do_crash()
    return driver


@settings(max_examples=200, deadline=None)
@given(program=programs, step_limit=st.integers(min_value=1, max_value=3))
def test_g4_sequences_keep_every_property(program: list[Action], step_limit: int) -> None:
    run_program(PRESETS["g4"], step_limit, program)


@settings(max_examples=100, deadline=None)
@given(
    program=programs,
    step_limit=st.integers(min_value=1, max_value=3),
    policy=st.sampled_from(sorted(PRESETS)),
)
def test_every_preset_keeps_every_property(
    program: list[Action], step_limit: int, policy: str
) -> None:
    run_program(PRESETS[policy], step_limit, program)
