"""The conformance suite: one test per library scenario, one per seed of a
seeded lockstep sweep, one per invariant (judged over that sweep).

Each scenario and seed drives ``LockstepTarget(ModelTarget(policy),
AdapterTarget(COMMAND))`` and fails with the side-by-side divergence or the
violation, the ``inboxsim conformance`` command that reproduces it, and a
minimal repro scenario shrunk through the same adapter (its path and text;
``inboxsim run FILE --adapter COMMAND`` reruns it alone).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from inboxsim.conformance.check import conformance
from inboxsim.conformance.report import SHRINKABLE
from inboxsim.conformance.repro import attach_repro
from inboxsim.conformance.scenario import scenario_item
from inboxsim.invariants.registry import REGISTRY, expected
from inboxsim.policy_file import load_policy
from inboxsim.scenarios.load import load_library

LIBRARY = {loaded.scenario.name: loaded for loaded in load_library()}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "inboxsim_seed" in metafunc.fixturenames:
        n = metafunc.config.getoption("--inboxsim-seeds", 3) or 0
        metafunc.parametrize("inboxsim_seed", list(range(n)), ids=[f"seed{s}" for s in range(n)])
    if "inboxsim_invariant" in metafunc.fixturenames:
        keep = expected(load_policy(metafunc.config.getoption("--inboxsim-policy", "g4")))
        names = [i for i in REGISTRY if i in keep]
        metafunc.parametrize("inboxsim_invariant", names, ids=names)


def _repro_dir(cfg: Any, factory: Any) -> Path:
    return Path(cfg.repro_dir) if cfg.repro_dir else factory.mktemp("repros")


def _judge(item: Any) -> None:
    if item.verdict == "held":
        return
    if item.verdict in ("not testable", "not exercised"):
        pytest.skip(item.detail.splitlines()[0] if item.detail else item.verdict)
    text = f"{item.verdict}:\n{item.detail}\nrepro: {item.repro}"
    if item.repro_file:
        body = Path(item.repro_file).read_text(encoding="utf-8")
        text += f"\nminimal repro scenario {item.repro_file}:\n{body}"
    pytest.fail(text, pytrace=False)


@pytest.fixture(scope="session")
def inboxsim_sweep(inboxsim_config: Any, tmp_path_factory: Any) -> Any:
    """The seeded sweep, run once for the seed and invariant tests."""

    cfg = inboxsim_config
    return conformance(
        cfg.command,
        cfg.policy,
        cfg.seeds,
        ops=cfg.ops,
        timeout=cfg.timeout,
        library=False,
        workdir=tmp_path_factory.mktemp("sweep"),
        shrink=cfg.seeds if cfg.shrink_seconds > 0 else 0,
        shrink_seconds=cfg.shrink_seconds or 1.0,
        repro_dir=_repro_dir(cfg, tmp_path_factory),
    )


@pytest.mark.parametrize("scenario", sorted(LIBRARY))
def test_scenario(
    scenario: str, inboxsim_config: Any, tmp_path: Any, tmp_path_factory: Any
) -> None:

    cfg = inboxsim_config
    policy = load_policy(cfg.policy)
    item, _ = scenario_item(
        LIBRARY[scenario], cfg.command, policy, cfg.policy, cfg.timeout, tmp_path
    )
    if item.verdict in SHRINKABLE and cfg.shrink_seconds > 0:
        attach_repro(
            item,
            LIBRARY[scenario],
            cfg.command,
            policy,
            cfg.ops,
            cfg.timeout,
            tmp_path,
            "target",
            _repro_dir(cfg, tmp_path_factory),
            cfg.shrink_seconds,
            300,
        )
    _judge(item)


def test_seed(inboxsim_seed: int, inboxsim_sweep: Any) -> None:
    (item,) = [i for i in inboxsim_sweep.of("seed") if i.item == str(inboxsim_seed)]
    _judge(item)


def test_invariant(inboxsim_invariant: str, inboxsim_sweep: Any) -> None:
    if not inboxsim_sweep.of("seed"):
        pytest.skip("no seeds were run (--inboxsim-seeds 0)")
    (item,) = [i for i in inboxsim_sweep.of("invariant") if i.item == inboxsim_invariant]
    if item.failed:
        # the seed that broke it carries the minimal repro
        seed = item.detail.split(":")[0].removeprefix("seed ").strip()
        for s in inboxsim_sweep.of("seed"):
            if s.item == seed and s.repro_file:
                item.repro_file = s.repro_file
    _judge(item)
