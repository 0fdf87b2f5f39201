"""The lockstep targets of one conformance run (a scenario or a seed):
:class:`LockstepTargets` makes each ``LockstepTarget(ModelTarget,
AdapterTarget)`` with its adapter in a fresh folder, remembers them for what
they found (features not testable, whether an adapter answered hello) and
closes them; :func:`only_expected_monitor` judges the invariants the policy
holds to; :func:`protocol_detail` is a protocol error with the adapters'
stderr."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..invariants import Monitor
from ..model import Policy
from ..search.lockstep import LockstepTarget
from ..targets.adapter import AdapterTarget, never_ready
from ..targets.protocol import ProtocolError
from ..targets.target import ModelTarget
from .report import Item


class LockstepTargets:
    """Makes lockstep targets, each adapter in a fresh folder, and closes them."""

    def __init__(
        self,
        command: Sequence[str],
        timeout: float,
        base: Path,
        name: str,
        free: bool = False,
        kills: bool = False,
    ) -> None:
        self.command = list(command)
        self.free = free
        self.kills = kills
        self.timeout = timeout
        self.base = base
        self.name = name
        self.made: list[LockstepTarget] = []
        self.counter = 0

    def __call__(self, policy: Policy, step_limit: int) -> LockstepTarget:
        self.counter += 1
        folder = self.base / f"run-{self.counter}"
        lock = LockstepTarget(
            ModelTarget(policy, step_limit),
            AdapterTarget(self.command, folder, step_limit, self.timeout, name=self.name),
            free=self.free,
            kills=self.kills,
        )
        self.made.append(lock)
        return lock

    def adapters(self) -> list[AdapterTarget]:
        return [lock.target for lock in self.made if isinstance(lock.target, AdapterTarget)]

    def readiness(self, item: Item, error: BaseException | None) -> None:
        """Record on ``item`` whether an adapter of the run answered hello."""
        adapters = self.adapters()
        item.ready = any(a.hello is not None for a in adapters)
        if error is not None:
            item.never_ready = never_ready(adapters, error) or ""

    def not_testable(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for lock in self.made:
            for k, v in lock.not_testable.items():
                out.setdefault(k, v)
        return out

    def close(self) -> None:
        """Close every target (idempotent: closing a target twice does nothing);
        they stay listed, so that :meth:`readiness` can still be asked."""
        for lock in self.made:
            try:
                lock.close()
            except Exception:  # noqa: BLE001 - closing a broken adapter must not mask the verdict
                pass


def only_expected_monitor() -> Any:

    def make(policy: Policy, hello: dict[str, Any], *_: Any) -> Any:
        return Monitor(policy, hello, only_expected=True)

    return make


def protocol_detail(exc: ProtocolError, lockstep: LockstepTargets) -> str:
    text = str(exc)
    for lock in lockstep.made:
        target = lock.target
        if isinstance(target, AdapterTarget):
            tail = target.stderr_text(1500)
            if tail:
                text += "\nadapter stderr (last lines):\n" + tail
    return text
