"""The ``inboxsim`` pytest plugin (entry point ``pytest11``): the options of
the conformance tests in :mod:`inboxsim.conformance` and their fixture.
It adds options only; nothing is collected unless the package is named
(``pytest --pyargs inboxsim.conformance``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest


@dataclass(frozen=True)
class InboxsimConfig:
    command: list[str]
    policy: str
    seeds: int
    ops: int
    timeout: float
    shrink_seconds: float = 30.0
    repro_dir: str | None = None


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("inboxsim", "inboxsim adapter conformance")
    group.addoption(
        "--inboxsim-adapter",
        default=None,
        metavar="COMMAND",
        help="the adapter command to check against the model (split as a shell would)",
    )
    group.addoption(
        "--inboxsim-policy", default="g4", metavar="NAME", help="the model's policy (default g4)"
    )
    group.addoption(
        "--inboxsim-seeds",
        default=3,
        type=int,
        metavar="N",
        help="seeded lockstep runs (default 3)",
    )
    group.addoption(
        "--inboxsim-ops", default=40, type=int, metavar="N", help="operations per seeded run"
    )
    group.addoption(
        "--inboxsim-timeout",
        default=10.0,
        type=float,
        metavar="SECONDS",
        help="the longest wait for one adapter response",
    )
    group.addoption(
        "--inboxsim-shrink-seconds",
        default=30.0,
        type=float,
        metavar="SECONDS",
        help="time to shrink each failure to a minimal repro scenario (0: do not shrink)",
    )
    group.addoption(
        "--inboxsim-repro-dir",
        default=None,
        metavar="DIR",
        help="where the minimal repro scenarios are written (default: pytest's tmp folder)",
    )


@pytest.fixture(scope="session")
def inboxsim_config(request: pytest.FixtureRequest) -> InboxsimConfig:
    from inboxsim.targets.adapter import split_command

    opt: Any = request.config.getoption
    command = opt("--inboxsim-adapter")
    if not command:
        pytest.skip('no adapter given: run with --inboxsim-adapter "COMMAND"')
    return InboxsimConfig(
        split_command(command),
        opt("--inboxsim-policy"),
        opt("--inboxsim-seeds"),
        opt("--inboxsim-ops"),
        opt("--inboxsim-timeout"),
        opt("--inboxsim-shrink-seconds"),
        opt("--inboxsim-repro-dir"),
    )
