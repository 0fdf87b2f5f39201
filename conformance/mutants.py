"""The kill check: does the scenario library, then seeded lockstep runs, catch
a planted bug (:mod:`.catalogue`)?

:func:`check_mutant` (once per mutant) runs the scenario library in lockstep
(``LockstepTarget(ModelTarget(g4), AdapterTarget(sqlite with the mutant))``)
and, for what that leaves alive, seeded lockstep runs judged by the
invariant checkers. A mutant counts as **killed** only by a divergence from
the model, an invariant violation, or a failed scenario expectation; a
protocol error or a harness crash is reported as such and does not count
(the mutant should fail by behaving wrongly, not by breaking the protocol).
The first detection may then be shrunk through the same adapter
(:func:`shrunk_length`). :mod:`.matrix` renders the results.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..model import G4, Create, Hello, Policy
from ..procs import scratch
from ..scenarios.load import load_library
from ..scenarios.runner import default_monitor, run_scenario
from ..search.divergence import Divergence
from ..search.lockstep import LockstepTarget
from ..search.repro import shrink_conformance, shrink_conformance_scenario
from ..sim.run import RunOptions, run_seed
from ..targets.adapter import AdapterTarget
from ..targets.protocol import ProtocolError
from ..targets.target import ModelTarget
from .catalogue import MUTANTS, mutant_command


class CountingTarget:
    """A target that counts what was sent through it, as
    :func:`.shrink.size_of` counts a trace: every step, the operations
    (requests other than hello and create) and the faults (kills, and
    requests with a failpoint). A request that raises (a divergence) is
    counted: it is the step the detection happened at."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.steps = self.operations = self.faults = 0

    def request(self, op: Any, crash_at: str | None = None) -> Any:

        self.steps += 1
        if not isinstance(op, (Hello, Create)):
            self.operations += 1
        if crash_at is not None:
            self.faults += 1
        return self.inner.request(op, crash_at)

    def kill(self) -> Any:
        self.steps += 1
        self.faults += 1
        return self.inner.kill()

    def close(self) -> None:
        self.inner.close()


@dataclass
class Kill:
    """One detection: by what, where, after how long."""

    by: str  # "divergence", "invariant", "expectation", "protocol error", "harness crash"
    where: str  # "scenario NAME" or "seed N"
    detail: str
    seconds: float  # from the start of the mutant's check to this detection
    # Length of the detecting run up to the detection, as shrink.size_of counts
    # (requests other than hello and create); None when not measured.
    operations: int | None = None

    @property
    def counts(self) -> bool:
        return self.by in ("divergence", "invariant", "expectation")


@dataclass
class KillResult:
    mutant: str | None
    kills: list[Kill] = field(default_factory=list)
    scenarios_run: int = 0
    seeds_run: int = 0
    seconds: float = 0.0
    shrunk_ops: int | None = None  # the first detection, shrunk (when a shrinker ran)
    shrink_seconds: float | None = None  # how long shrinking took (None: not shrunk)

    @property
    def runs(self) -> int:
        """Scenarios and seeds run (with ``first_only``: up to the first detection)."""
        return self.scenarios_run + self.seeds_run

    @property
    def first(self) -> Kill | None:
        counted = [k for k in self.kills if k.counts]
        return counted[0] if counted else None

    @property
    def killed(self) -> bool:
        return self.first is not None

    @property
    def bad(self) -> list[Kill]:
        """Detections that do not count (protocol errors, harness crashes)."""
        return [k for k in self.kills if not k.counts]

    def to_dict(self) -> dict[str, Any]:
        """The result's stable JSON shape (:data:`RESULT_FIELDS` first)."""
        first = self.first
        where = first.where if first else None
        mutant = MUTANTS.get(self.mutant or "")
        return {
            "mutant": self.mutant,
            "bug_class": mutant.bug_class if mutant else None,
            "killed_by": first.by if first else "none",
            "detail": first.detail if first else None,
            "scenario": where.removeprefix("scenario ")
            if where and where.startswith("scenario ")
            else None,
            "seed": int(where.removeprefix("seed "))
            if where and where.startswith("seed ")
            else None,
            "seconds_to_detect": round(first.seconds, 3) if first else None,
            "runs": self.runs,
            "operations": first.operations if first else None,
            "shrunk_ops": self.shrunk_ops,
            "shrink_seconds": (
                round(self.shrink_seconds, 3) if self.shrink_seconds is not None else None
            ),
            "not_counted": [f"{k.by}: {k.where}: {k.detail}" for k in self.bad],
            # the earlier shape, kept for readers of `inboxsim mutants --json`
            "killed": self.killed,
            "by": first.by if first else None,
            "where": where,
            "killers": [f"{k.by}: {k.where}" for k in self.kills],
            "scenarios_run": self.scenarios_run,
            "seeds_run": self.seeds_run,
            "seconds": round(self.seconds, 3),
        }


def check_mutant(
    name: str | None,
    scenarios: Sequence[Any] | None = None,
    seeds: Iterable[int] = (),
    *,
    ops: int = 60,
    policy: Policy = G4,
    first_only: bool = False,
    workdir: Path | None = None,
    timeout: float = 10.0,
    monitor: Any = True,
    shrink: bool = False,
    shrink_seconds: float = 60.0,
    shrink_runs: int = 300,
) -> KillResult:
    """Run the library (then ``seeds``) in lockstep against the mutant.
    ``first_only`` stops at the first detection that counts. Seeds are run
    only when the library did not kill it (or always, with no scenarios).
    ``shrink`` then shrinks the first detection through the same adapter
    (:mod:`.repro`: at most ``shrink_seconds`` and ``shrink_runs`` runs) and
    records the minimal repro's length as ``shrunk_ops``. Adapter folders go
    in ``workdir`` (kept), else in a temporary folder (removed)."""
    head = (name, scenarios, seeds, ops, policy, first_only)
    tail = (timeout, monitor, (shrink, shrink_seconds, shrink_runs))
    if workdir is not None:
        return _check_mutant(*head, Path(workdir), *tail)
    with scratch.folder("mutant") as tmp:
        return _check_mutant(*head, Path(tmp), *tail)


def _check_mutant(
    name: str | None,
    scenarios: Sequence[Any] | None,
    seeds: Iterable[int],
    ops: int,
    policy: Policy,
    first_only: bool,
    base: Path,
    timeout: float,
    monitor: Any,
    shrinking: tuple[bool, float, int],
) -> KillResult:

    if scenarios is None:
        scenarios = load_library()
    factory = default_monitor() if monitor is True else (monitor or None)
    argv, _ = mutant_command(name)
    counter = itertools.count()
    result = KillResult(name)
    started = time.perf_counter()

    def new_lock(step_limit: int) -> CountingTarget:
        folder = base / f"{name or 'none'}-{next(counter)}"
        return CountingTarget(
            LockstepTarget(
                ModelTarget(policy, step_limit),
                AdapterTarget(argv, folder, step_limit, timeout, name=f"sqlite[{name or 'none'}]"),
            )
        )

    current: list[CountingTarget] = []  # the targets of the run being checked

    def found(by: str, where: str, detail: str) -> None:
        operations = sum(t.operations for t in current) if current else None
        result.kills.append(Kill(by, where, detail, time.perf_counter() - started, operations))

    for loaded in scenarios:
        if policy.name in loaded.scenario.breaks_under:
            continue  # its expectations are another policy's (as conformance skips it)
        where = f"scenario {loaded.scenario.name}"
        result.scenarios_run += 1
        holder: list[CountingTarget] = []
        current[:] = []

        def target_factory(
            _policy: Policy, step_limit: int, holder: list[CountingTarget] = holder
        ) -> CountingTarget:
            holder.append(new_lock(step_limit))
            current.append(holder[-1])
            return holder[-1]

        try:
            outcome = run_scenario(
                loaded, policy=policy, target_factory=target_factory, monitor=factory
            )
        except Divergence as div:
            found("divergence", where, div.summary)
        except ProtocolError as exc:
            found("protocol error", where, str(exc).splitlines()[0])
        except Exception as exc:  # noqa: BLE001 - reported: a mutant must not crash the harness
            found("harness crash", where, f"{type(exc).__name__}: {exc}")
        else:
            if outcome.failures:  # an invariant violation is named before an expectation
                violated = [f for f in outcome.failures if f.invariant is not None]
                f = (violated or list(outcome.failures))[0]
                found("invariant" if violated else "expectation", where, str(f))
        finally:
            for lock in holder:
                lock.close()
        if first_only and result.killed:
            break
    if not result.killed:
        run_kw: dict[str, Any] = {}
        if factory is None:  # no checkers: divergences only
            run_kw = {"monitor": _NoMonitor, "violation": _no_violation}
        for seed in seeds:
            result.seeds_run += 1
            made: list[CountingTarget] = []
            current[:] = []

            def seed_factory(
                _policy: Policy, step_limit: int, made: list[CountingTarget] = made
            ) -> CountingTarget:
                made.append(new_lock(step_limit))
                current.append(made[-1])
                return made[-1]

            try:
                run_result = run_seed(
                    seed, policy, RunOptions(ops=ops), target=seed_factory, **run_kw
                )
                if run_result.violations:
                    v = run_result.violations[0]
                    found("invariant", f"seed {seed}", f"{v.invariant}: {v.message}")
            except Divergence as div:
                found("divergence", f"seed {seed}", div.summary)
            except ProtocolError as exc:
                found("protocol error", f"seed {seed}", str(exc).splitlines()[0])
            except Exception as exc:  # noqa: BLE001
                found("harness crash", f"seed {seed}", f"{type(exc).__name__}: {exc}")
            finally:
                for lock in made:
                    lock.close()
            if result.killed:
                break
    result.seconds = time.perf_counter() - started
    shrink, shrink_seconds, shrink_runs = shrinking
    if shrink and result.first is not None:
        began = time.perf_counter()
        by_name = {s.scenario.name: s for s in scenarios}
        result.shrunk_ops = shrunk_length(
            result.first.where,
            by_name,
            argv,
            policy,
            ops,
            timeout,
            shrink_seconds,
            shrink_runs,
            base,
        )
        result.shrink_seconds = time.perf_counter() - began
    return result


def shrunk_length(
    where: str,
    scenarios: dict[str, Any],
    argv: Sequence[str],
    policy: Policy,
    ops: int,
    timeout: float,
    seconds: float,
    runs: int,
    workdir: Path,
) -> int | None:
    """Shrink one detection (``where``: ``seed N`` or ``scenario NAME``) through
    the adapter to a minimal repro scenario (:mod:`.repro`); its operations
    (:func:`repro_operations`), or None when it could not be shrunk (a failure
    only by an expectation, or one that did not recur)."""

    common: dict[str, Any] = {
        "timeout": timeout,
        "max_runs": runs,
        "time_limit": seconds,
        "workdir": workdir,
    }
    if where.startswith("seed "):
        repro = shrink_conformance(
            int(where.removeprefix("seed ")), argv, policy, ops=ops, **common
        )
    else:
        loaded = scenarios.get(where.removeprefix("scenario "))
        if loaded is None:
            return None
        repro = shrink_conformance_scenario(loaded, argv, policy, **common)
    return None if repro is None else repro_operations(repro.text)


def repro_operations(text: str) -> int:
    """A scenario file's operations, counted as :func:`.shrink.size_of` counts a
    trace: steps with an ``op`` other than hello and create (kills are faults)."""
    import tomllib

    steps = tomllib.loads(text).get("step", [])
    return sum(1 for s in steps if s.get("op") not in (None, "hello", "create"))


class _NoMonitor:
    """Judges nothing (a kill check without checkers: divergences only)."""

    def __init__(self, *_: Any) -> None:
        self.exercised: set[str] = set()

    def feed(self, _step: Any) -> list[Any]:
        return []

    def finish(self, _liveness: bool) -> list[Any]:
        return []


def _no_violation(invariant: str, steps: tuple[int, ...], message: str) -> Any:
    from types import SimpleNamespace

    return SimpleNamespace(invariant=invariant, steps=steps, message=message)


# The leading keys of every mutant's entry in the results document, in order.
RESULT_FIELDS = (
    "mutant",
    "bug_class",
    "killed_by",  # divergence | invariant | expectation | none
    "detail",
    "scenario",  # the library scenario that killed it, or None
    "seed",  # the seed that killed it, or None
    "seconds_to_detect",
    "runs",  # scenarios + seeds run up to the first detection
    "operations",  # length of the detecting run up to the detection
    "shrunk_ops",  # that run shrunk, when a shrinker ran; else None
    "shrink_seconds",  # how long the shrink took; None when not shrunk
    "not_counted",  # protocol errors and harness crashes seen (they do not kill)
)


__all__ = [
    "RESULT_FIELDS",
    "CountingTarget",
    "Kill",
    "KillResult",
    "check_mutant",
    "repro_operations",
    "shrunk_length",
]
