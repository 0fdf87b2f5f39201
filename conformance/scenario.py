"""One library scenario in lockstep against the model: :func:`scenario_item`,
its matrix row and the hello features it found not testable."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..model import Policy
from ..scenarios.runner import run_scenario
from ..search.divergence import Divergence
from ..search.lockstep import NotTestable
from ..targets.protocol import ProtocolError
from .command_lines import repro_command
from .lockstep_targets import LockstepTargets, only_expected_monitor, protocol_detail
from .report import Item, divergence_failure, violation_failure


def scenario_item(
    loaded: Any,
    command: Sequence[str],
    policy: Policy,
    policy_arg: str,
    timeout: float,
    base: Path,
    name: str = "target",
) -> tuple[Item, dict[str, str]]:
    """Run one library scenario in lockstep; its matrix row and what was not testable."""

    scenario = loaded.scenario
    repro = repro_command(command, policy_arg, scenario=scenario.name, timeout=timeout)
    if policy.name in scenario.breaks_under:
        return (
            Item(
                "scenario",
                scenario.name,
                "not testable",
                f"its expectations are {Path(scenario.policy).stem}'s and break under "
                f"{policy.name}",
                repro,
            ),
            {},
        )
    started = time.perf_counter()
    lockstep = LockstepTargets(command, timeout, base, name)
    item: Item
    error: ProtocolError | None = None
    try:
        result = run_scenario(
            loaded, policy=policy, target_factory=lockstep, monitor=only_expected_monitor()
        )
    except Divergence as div:
        item = Item("scenario", scenario.name, "diverged", div.render(), repro)
        item.failure = divergence_failure(div)
    except NotTestable as exc:
        item = Item("scenario", scenario.name, "not testable", str(exc), repro)
    except ProtocolError as exc:
        error = exc
        item = Item(
            "scenario", scenario.name, "protocol error", protocol_detail(exc, lockstep), repro
        )
        item.failure = {"key": "protocol error"}
    else:
        if result.failures:
            broken = [f for f in result.failures if f.invariant is not None]
            verdict = "violated"
            detail = "\n".join(str(f) for f in (broken or list(result.failures)))
            item = Item("scenario", scenario.name, verdict, detail, repro)
            item.failure = (
                violation_failure(
                    [(f.invariant, f.message) for f in broken if f.invariant is not None]
                )
                if broken
                else {"key": "expectation", "message": str(result.failures[0])}
            )
        else:
            item = Item("scenario", scenario.name, "held", "", repro)
    finally:
        not_testable = lockstep.not_testable()
        lockstep.close()
    lockstep.readiness(item, error)
    item.seconds = time.perf_counter() - started
    return item, not_testable
