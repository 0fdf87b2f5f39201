"""Shrinking: a failure cut down to a minimal one that still fails the same
way, written as a scenario file a person can read.

One engine, thin drivers:

- :mod:`.engine`: the engine (a candidate is a tuple, a test says whether it
  still fails the same way, a :class:`~.engine.Shrinker` keeps the best and
  the budget, passes edit, :func:`~.engine.minimize` runs them); its header
  says how to write a new driver;
- the candidates: :mod:`.decisions` (a seed's decision list), :mod:`.steps`
  (a scenario's steps); :mod:`.size` (how long a trace is);
- the drivers: :mod:`.seeds` (a failing run on the model,
  ``inboxsim shrink SEED``, the report's counterexamples, the design study),
  :mod:`.scenarios` (a scenario file, ``inboxsim shrink FILE``),
  :mod:`.through` (a seed through an adapter in lockstep);
  :mod:`inboxsim.search.repro` drives it for ``inboxsim conformance``'s repros.
"""

from .scenarios import ScenarioShrink, shrink_scenario_file, verify_scenario
from .seeds import ShrinkResult, judging_only, shrink_alone, shrink_run, shrink_seed
from .size import Size, first_violation, size_of, upto_violation
from .through import TargetFailure, ThroughShrink, failure_key, run_through, shrink_through

__all__ = [
    "ScenarioShrink",
    "ShrinkResult",
    "Size",
    "TargetFailure",
    "ThroughShrink",
    "failure_key",
    "first_violation",
    "judging_only",
    "run_through",
    "shrink_alone",
    "shrink_run",
    "shrink_scenario_file",
    "shrink_seed",
    "shrink_through",
    "size_of",
    "upto_violation",
    "verify_scenario",
]
