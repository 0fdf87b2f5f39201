"""The conformance suite: one test per library scenario, one per seed.

Each test drives ``LockstepTarget(ModelTarget(policy), AdapterTarget(COMMAND))``
and fails with the side-by-side divergence or the violation, and the
``inboxsim conformance`` command that reproduces it.
"""

from __future__ import annotations

from typing import Any

import pytest

from inboxsim.scenarios.load import load_library

LIBRARY = {loaded.scenario.name: loaded for loaded in load_library()}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "inboxsim_seed" in metafunc.fixturenames:
        n = metafunc.config.getoption("--inboxsim-seeds", 3) or 0
        metafunc.parametrize("inboxsim_seed", list(range(n)), ids=[f"seed{s}" for s in range(n)])


def _judge(item: Any) -> None:
    if item.verdict == "held":
        return
    if item.verdict == "not testable":
        pytest.skip(item.detail.splitlines()[0] if item.detail else "not testable")
    pytest.fail(f"{item.verdict}:\n{item.detail}\nrepro: {item.repro}", pytrace=False)


@pytest.mark.parametrize("scenario", sorted(LIBRARY))
def test_scenario(scenario: str, inboxsim_config: Any, tmp_path: Any) -> None:
    from inboxsim.model import load_policy
    from inboxsim.sim.conformance import scenario_item

    cfg = inboxsim_config
    item, _ = scenario_item(
        LIBRARY[scenario], cfg.command, load_policy(cfg.policy), cfg.policy, cfg.timeout, tmp_path
    )
    _judge(item)


def test_seed(inboxsim_seed: int, inboxsim_config: Any, tmp_path: Any) -> None:
    from inboxsim.model import load_policy
    from inboxsim.sim.conformance import seed_item

    cfg = inboxsim_config
    outcome = seed_item(
        inboxsim_seed,
        cfg.command,
        load_policy(cfg.policy),
        cfg.policy,
        cfg.ops,
        cfg.timeout,
        tmp_path,
    )
    _judge(outcome.item)
