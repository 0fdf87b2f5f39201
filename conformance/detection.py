"""First detection of a planted bug under a wall-time budget, two ways side by
side (``benchmarks/bench_mutants.py``): inboxsim's seeded conformance
(:func:`seeded_detection`) and a Hypothesis stateful test driving the same
adapter in lockstep (:func:`hypothesis_detection`). Hypothesis is imported
only on its side."""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..model import G4, Policy
from ..procs import scratch
from ..search.divergence import Divergence
from ..search.lockstep import LockstepTarget
from ..sim.run import RunOptions, run_seed
from ..targets.adapter import AdapterTarget
from ..targets.protocol import ProtocolError
from ..targets.target import ModelTarget
from .catalogue import mutant_command
from .mutants import CountingTarget, shrunk_length


@dataclass
class Detection:
    """One side's first detection of one mutant within a budget.

    ``killed_by`` is ``divergence``, ``invariant``, ``error`` (a protocol error
    or a harness crash: found, but not a kill) or ``none``; ``runs`` counts
    seeds (seeded side) or examples (Hypothesis); ``operations`` is the length
    of the failing run up to the detection and ``shrunk_operations`` the length
    after shrinking (``None`` when not shrunk), which took ``shrink_seconds``."""

    side: str
    mutant: str
    killed_by: str = "none"
    detail: str = ""
    seed: int | None = None
    runs: int = 0
    seconds_to_detect: float | None = None
    seconds: float = 0.0
    operations: int | None = None
    faults: int | None = None
    shrunk_operations: int | None = None
    shrink_seconds: float | None = None

    @property
    def killed(self) -> bool:
        return self.killed_by in ("divergence", "invariant")

    def to_dict(self) -> dict[str, Any]:
        doc = {k: getattr(self, k) for k in self.__dataclass_fields__}
        for k in ("seconds_to_detect", "seconds", "shrink_seconds"):
            if doc[k] is not None:
                doc[k] = round(doc[k], 3)
        doc["killed"] = self.killed
        return doc


def seeded_detection(
    name: str,
    *,
    seconds: float = 60.0,
    ops: int = 40,
    seed_start: int = 0,
    policy: Policy = G4,
    timeout: float = 10.0,
    clock: Any = time.perf_counter,
    shrink_seconds: float | None = None,
) -> Detection:
    """inboxsim's seeded conformance against mutant ``name`` (no scenario
    library): seeds from ``seed_start`` in lockstep with the model, judged by
    the checkers (``only_expected``), until the first divergence or violation
    or until ``seconds`` have passed (a seed that started runs to its end).
    With ``shrink_seconds``, the failing seed is then shrunk through the
    adapter (:func:`shrunk_length`) for at most that long."""

    argv, _ = mutant_command(name)
    found = Detection("seeded", name)
    options = RunOptions(ops=ops, only_expected=True)
    started = clock()
    with scratch.folder("seeded") as tmp:
        seed = seed_start
        while clock() - started < seconds:
            made: list[CountingTarget] = []

            def factory(
                _policy: Policy,
                step_limit: int,
                made: list[CountingTarget] = made,
                seed: int = seed,
            ) -> CountingTarget:
                folder = Path(tmp) / f"seed-{seed}-{len(made)}"
                made.append(
                    CountingTarget(
                        LockstepTarget(
                            ModelTarget(policy, step_limit),
                            AdapterTarget(
                                argv, folder, step_limit, timeout, name=f"sqlite[{name}]"
                            ),
                        )
                    )
                )
                return made[-1]

            found.runs += 1
            kind = detail = ""
            try:
                outcome = run_seed(seed, policy, options, target=factory)
                if outcome.violations:
                    v = outcome.violations[0]
                    kind, detail = "invariant", f"{v.invariant}: {v.message}"
            except Divergence as div:
                kind, detail = "divergence", div.summary
            except ProtocolError as exc:
                kind, detail = "error", f"protocol error: {str(exc).splitlines()[0]}"
            except Exception as exc:  # noqa: BLE001 - a mutant must not crash the harness
                kind, detail = "error", f"harness crash: {type(exc).__name__}: {exc}"
            finally:
                for target in made:
                    try:
                        target.close()
                    except Exception:  # noqa: BLE001 - closing must not mask the verdict
                        pass
            if kind:
                found.killed_by, found.detail, found.seed = kind, detail[:300], seed
                found.seconds_to_detect = clock() - started
                found.operations = sum(t.operations for t in made)
                found.faults = sum(t.faults for t in made)
                break
            seed += 1
        if shrink_seconds is not None and found.seed is not None and found.killed:
            began = clock()
            found.shrunk_operations = shrunk_length(
                f"seed {found.seed}", {}, argv, policy, ops, timeout, shrink_seconds, 300, Path(tmp)
            )
            found.shrink_seconds = clock() - began
    found.seconds = clock() - started
    return found


def adapter_machine(
    argv: Sequence[str],
    base: Path,
    *,
    policy: Policy = G4,
    timeout: float = 10.0,
    label: str = "adapter",
) -> Any:
    """An :class:`.stateful.InboxMachine` subclass that drives ``argv`` in
    lockstep with the model under ``policy`` (each example in a fresh data
    folder under ``base``), judging only the invariants the policy keeps."""
    from ..search.stateful import InboxMachine

    counter = itertools.count()
    command = list(argv)

    class AdapterMachine(InboxMachine):
        POLICY = policy
        ONLY_EXPECTED = True

        def target(self, the_policy: Policy) -> Any:
            folder = base / f"example-{next(counter)}"
            self._folder = folder
            return LockstepTarget(
                ModelTarget(the_policy, self.STEP_LIMIT),
                AdapterTarget(command, folder, self.STEP_LIMIT, timeout, name=label),
            )

        def teardown(self) -> None:
            try:
                super().teardown()
            finally:
                import shutil

                folder = getattr(self, "_folder", None)
                if folder is not None:  # thousands of examples: keep the disk clean
                    shutil.rmtree(folder, ignore_errors=True)
                    folder.with_name(folder.name + ".stderr.log").unlink(missing_ok=True)

    return AdapterMachine


def hypothesis_detection(
    name: str,
    *,
    seconds: float = 60.0,
    shrink_seconds: float = 60.0,
    steps: int = 40,
    policy: Policy = G4,
    timeout: float = 10.0,
) -> Detection:
    """A Hypothesis stateful test (:func:`.stateful.hunt`) against mutant
    ``name``: the same lockstep comparison and checkers as the seeded side,
    at most ``steps`` rule steps per example, detection within ``seconds``,
    then Hypothesis' own shrinking for at most ``shrink_seconds``."""
    from ..search.stateful import hunt

    argv, _ = mutant_command(name)
    with scratch.folder("hypothesis") as tmp:
        machine = adapter_machine(
            argv, Path(tmp), policy=policy, timeout=timeout, label=f"sqlite[{name}]"
        )
        got = hunt(machine, detect_seconds=seconds, shrink_seconds=shrink_seconds, steps=steps)
    found = Detection("hypothesis", name, runs=got.examples, seconds=got.seconds)
    if got.first is not None:
        found.killed_by, found.detail = got.first.kind, got.first.detail
        found.seconds_to_detect = got.seconds_to_detect
        found.runs = got.examples_to_detect or got.examples
        found.operations, found.faults = got.first.operations, got.first.faults
        if got.shrunk is not None:
            found.shrunk_operations = got.shrunk.operations
        if got.seconds_to_detect is not None:
            found.shrink_seconds = got.seconds - got.seconds_to_detect
    return found
