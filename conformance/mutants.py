"""Planted bugs in the SQLite inbox (``impls/sqlite_inbox``) and the kill check.

Each mutant is a small, realistic diff in the SQLite implementation, switched
on by name with ``INBOXSIM_MUTANT=NAME`` (or ``--mutant NAME`` on the
adapter's command line; :func:`mutant_command` gives both). The catalogue
:data:`MUTANTS` names each one, says in one line what it gets wrong, and the
class of bug it stands for.

The kill check (:func:`check_mutant`, once per mutant) runs the scenario
library in lockstep (``LockstepTarget(ModelTarget(g4), AdapterTarget(sqlite
with the mutant))``) and, for what that leaves alive, seeded lockstep runs
judged by the invariant checkers. A mutant counts as **killed** only by a
divergence from the model, an invariant violation, or a failed scenario
expectation; a protocol error or a harness crash is reported as such and does
not count (the mutant should fail by behaving wrongly, not by breaking the
protocol).

Library scenarios whose ``breaker`` is a planted bug use these names: the
mutant with the same name is the bug the scenario was written to catch
(:func:`library_planted_bugs` lists them).
"""

from __future__ import annotations

import itertools
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..model import G4, Create, Hello, Policy
from ..procs import scratch
from ..scenarios.load import load_library
from ..scenarios.runner import default_monitor, run_scenario
from ..search.lockstep import Divergence, LockstepTarget
from ..search.repro import shrink_conformance, shrink_conformance_scenario
from ..sim.run import RunOptions, run_seed
from ..targets.adapter import AdapterTarget
from ..targets.protocol import ProtocolError
from ..targets.target import ModelTarget

ADAPTER = Path(__file__).resolve().parent.parent / "impls" / "sqlite_inbox" / "adapter.py"


@dataclass(frozen=True, slots=True)
class Mutant:
    name: str
    description: str
    bug_class: str


# The catalogue: "name | bug class", then the one-line description, indented.
# Bug classes: durability, admission, ids, retry, promotion, ordering, time,
# barrier, execution, wake, interrupt, revert, fork.
CATALOGUE = """
admit-after-wake | durability
    the after_admit point is reached before the admission commits: a crash there loses it
volatile-inbox | durability
    pending user/synthetic rows are dropped at every start: unpromoted input is lost on a
    crash
promotion-not-atomic | durability
    promotion deletes the pending row and inserts the message in two transactions: a crash
    between loses the input
promotion-listener-before-commit | durability
    the after-promotion notification (the after_promotion point) runs before the
    boundary's promotions commit: a crash there loses them
double-promotion-after-crash | durability
    a batch's pending rows are deleted only when the whole batch is done: a crash mid-batch
    promotes an input twice
promote-without-admission | admission
    admission takes a seq but never logs the durable admitted event
dedup-by-content | admission
    an input without an ID is merged into a pending row with the same payload
second-barrier | admission
    no one-barrier rule: a compaction with a new ID adds a second barrier
pending-unknown-session-empty | admission
    log, messages and pending of an unknown session answer an empty list instead of
    session_not_found
omitted-id-reuses-last | ids
    an omitted input ID reuses the last generated ID (counter read, not bumped)
per-session-ids | ids
    the ID namespace is per session: another session's ID is judged as a retry there
owner-ignores-kind | ids
    ID ownership is checked by session alone: a compaction may take the ID of the
    session's own prompt
ids-freed-for-everyone | ids
    an ID whose lifecycle ended (consumed barrier, committed revert) is free for any session
    and kind, and generated IDs may reuse it
retry-text-only | retry
    retry identity compares only the text (files, agents, metadata ignored)
retry-ignores-metadata | retry
    retry identity ignores metadata
retry-ignores-delivery | retry
    retry identity ignores delivery
retry-appends-admission | retry
    an exact retry of a pending input re-admits it (new admitted event, new seq and time)
retry-receipt-promotion-time | retry
    a retry after promotion returns the promotion time instead of the admission time
retry-no-wake | retry
    an exact retry returns the receipt but wakes nothing, whatever its resume
retry-skips-revert-commit | revert
    a prompt retry under a staged revert returns the receipt without committing the revert
revert-commit-before-validation | revert
    a prompt commits the staged revert before its fields are checked: an invalid prompt
    still truncates
one-steer-per-boundary | promotion
    a boundary promotes only the oldest pending steer
queue-batch | promotion
    an input boundary promotes every queued input at once
queue-promotes-mid-turn | promotion
    queued input promotes at continuation boundaries too, not only when the turn ends
queue-as-steer | promotion
    delivery is ignored when promoting: queued input promotes like a steer
admission-order-ignores-delivery | ordering
    an input boundary promotes every pending input in admission order, queued ones included
steer-waits-for-idle | promotion
    steers promote only when the turn ends, not at continuation boundaries
steer-promotes-mid-step | promotion
    a steer admitted during a step becomes visible at once, not at the next boundary
message-time-is-admission | time
    a promoted message is stamped with its admission time instead of the boundary's
transcript-by-admission-order | ordering
    messages are listed in admission order instead of promotion (seq) order
barrier-ignored | barrier
    a pending compaction barrier does not block promotion: a drain promotes and steps before
    compacting
compaction-only-at-drain-start | barrier
    a pending compaction runs only when a drain starts, not at the step boundary after
    each step
barrier-kept-on-error | barrier
    a failed compaction logs its failure but keeps its barrier
revert-removes-barrier | barrier
    a committed revert also removes a compaction barrier past the boundary
interrupt-keeps-barrier | barrier
    interrupting a compaction call neither settles it nor consumes its barrier
pending-hides-barrier | barrier
    the pending listing shows user and synthetic rows only, not the compaction barrier
compaction-error-ends-drain | execution
    an error on a compaction call fails the execution instead of letting the drain go on
no-step-reset | execution
    the step counter is not reset to 1 when a boundary promotes input
final-off-by-one | execution
    the final flag is set one step before the allowance's last step
tool-on-final-continues | execution
    a tool answer on the final step continues instead of counting as stop
error-as-stop | execution
    an error answer on a step is read as stop: the step ends and the execution succeeds
terminal-per-drain | execution
    each drain of an execution, the follow-up included, logs its own execution_succeeded
ended-execution-kept | execution
    an execution that failed or was interrupted stays registered: a later wake or resume
    joins it and nothing runs
doorbell-dropped-on-failure | wake
    a wake rung during a step that fails is forgotten: no follow-up execution
follow-up-drain-forced | wake
    the follow-up drain a rung doorbell gives is forced: a model call with nothing to promote
resume-forces-follow-up | wake
    a resume that joins a running execution turns its follow-up into a forced drain: a
    model call with nothing to promote
one-session-at-a-time | wake
    one runner for all sessions: a session woken while another runs waits until it ends
compact-no-wake | wake
    a compaction request records its barrier but wakes nothing
restart-resumes-pending | wake
    a (re)started process wakes every session with pending input: replay that wakes
resume-as-wake | wake
    resume is an unforced wake: nothing pending, no call
resume-flag-ignored | wake
    prompt's resume=false is ignored: admission always wakes
synthetic-wakes-under-revert | wake
    a synthetic input wakes the session while a revert is staged
interrupt-clears-inbox | interrupt
    interrupt deletes the session's pending input
idle-interrupt-appends | interrupt
    interrupt on an idle session logs an execution_interrupted event
interrupt-keeps-doorbell | interrupt
    a wake rung before an interrupt survives it and starts a successor execution
interrupt-leaves-call-open | interrupt
    the interrupted step's call stays listed as open
revert-keeps-boundary | revert
    a committed revert truncates after the boundary message, keeping it (> instead of >=)
revert-keeps-pending | revert
    a committed revert leaves pending rows past the boundary
fork-cutoff-inclusive | fork
    fork before N copies N too (cutoff N.seq instead of N.seq - 1)
fork-copies-pending | fork
    a fork copies the parent's pending input into the child's inbox
copied-from-not-root | fork
    a copy of a copy names its immediate original, not the root message
fork-copy-ids-unstable | fork
    a fork's copies are renamed by each new process: their IDs do not survive a restart
"""


def _parse(text: str) -> dict[str, Mutant]:
    out: dict[str, Mutant] = {}
    name = kind = ""
    words: list[str] = []
    for line in [*text.strip().splitlines(), "end | end"]:
        if line.startswith(" "):
            words.append(line.strip())
            continue
        if name:
            out[name] = Mutant(name, " ".join(words), kind)
        name, _, kind = (part.strip() for part in line.partition("|"))
        words = []
    return out


MUTANTS: dict[str, Mutant] = _parse(CATALOGUE)

# Race bugs (issue 19): each is right when requests come one at a time and
# wrong only when two overlap, so sequential conformance cannot kill them (they
# stay out of MUTANTS and its kill matrix); the group driver with pause points
# does (tests/test_sqlite_races.py).
RACE_CATALOGUE = """
race-retry-check-then-insert | retry
    an exact retry's "is this ID known?" check and the admission's insert run in two
    transactions: two concurrent first sends of one ID both insert
race-seq-read-then-write | ordering
    an admission without an ID reads the session's next seq in one transaction and writes
    it back in another: a concurrent admission's seq is taken twice
race-promote-trusts-batch | barrier
    a promotion trusts the boundary's earlier read: its transaction does not check again that
    the row is still pending and no barrier holds it, so a compaction admitted meanwhile is
    overtaken
race-boundary-clears-steers | promotion
    the boundary reads its batch, then its last promotion clears the session's pending steers
    by session instead of by ID: a steer admitted after the read is lost
race-wake-without-runner-lock | wake
    an admission rings the doorbell of the session's execution without the session's runner
    lock: an execution past its last doorbell check, about to end, swallows the wake
race-call-counter-unlocked | execution
    the call counter, shared by every session's runner, is bumped and read back later without
    a lock: two sessions' calls opened side by side get one ID
race-resume-check-outside-lock | execution
    resume looks for an active execution before it takes the session's runner lock: one
    started meanwhile by a prompt's wake gets a second execution beside it
race-interrupt-pops-before-lock | interrupt
    interrupt takes the execution off the running table before it takes the session's runner
    lock to cancel it: a prompt's wake meanwhile starts a new one, which the cancel then loses
race-synthetic-revert-read-apart | revert
    a synthetic notice reads the session's staged revert before its admission's transaction:
    a revert staged meanwhile does not hold its wake, and the notice is promoted
"""
RACES: dict[str, Mutant] = _parse(RACE_CATALOGUE)


def mutant_command(name: str | None) -> tuple[list[str], dict[str, str]]:
    """The SQLite adapter's command line and the environment that switch the
    mutant on (either alone suffices; ``None`` for the correct build); a
    race bug (:data:`RACES`) too."""
    argv = [sys.executable, str(ADAPTER)]
    if name is None:
        return argv, {}
    if name not in MUTANTS and name not in RACES:
        raise KeyError(f"unknown mutant {name!r}; known: {', '.join(MUTANTS)}")
    return [*argv, "--mutant", name], {"INBOXSIM_MUTANT": name}


def library_planted_bugs() -> dict[str, str]:
    """Library scenario name -> the planted bug its ``breaker`` names (scenarios
    broken by a policy preset are left out)."""

    out = {}
    for loaded in load_library():
        bug = loaded.scenario.breaker
        if bug is not None and not bug.preset:
            out[loaded.scenario.name] = bug.name
    return out


# --- the kill check ---------------------------------------------------------------


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
FORMAT = "inboxsim-mutants"
FORMAT_VERSION = 1


def _median(values: Sequence[float]) -> float | None:
    import statistics

    return statistics.median(values) if values else None


def matrix_document(
    results: Sequence[KillResult], *, seeds: int, ops: int, policy: str = "g4"
) -> dict[str, Any]:
    """The kill matrix as one JSON document (``inboxsim mutants --json`` and
    ``--out PATH``): the run's parameters, one entry per mutant
    (:data:`RESULT_FIELDS` first), and the summary figures."""
    survived = [r.mutant for r in results if not r.killed]
    killed = [r for r in results if r.first is not None]
    times = [r.first.seconds for r in killed if r.first is not None]
    shrunk = [float(r.shrunk_ops) for r in killed if r.shrunk_ops is not None]
    lengths = [
        float(r.first.operations)
        for r in killed
        if r.first is not None and r.first.operations is not None
    ]
    by: dict[str, int] = {}
    for r in results:
        kind = r.first.by if r.first is not None else "none"
        by[kind] = by.get(kind, 0) + 1

    def rounded(x: float | None) -> float | None:
        return round(x, 3) if x is not None else None

    return {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "policy": policy,
        "seeds": seeds,
        "ops": ops,
        "mutants": [r.to_dict() for r in results],
        "killed": len(results) - len(survived),
        "survived": survived,
        "summary": {
            "mutants": len(results),
            "killed_by": dict(sorted(by.items())),
            "median_seconds_to_detect": rounded(_median(times)),
            "worst_seconds_to_detect": rounded(max(times) if times else None),
            "median_operations": _median(lengths),
            "median_shrunk_ops": _median(shrunk),
        },
        "exit_code": 1 if survived else 0,
    }


def render_matrix(results: Sequence[KillResult]) -> str:
    """The kill matrix as a Markdown table. ``length`` is the detecting run's
    operations up to the detection, ``shrunk`` that run shrunk (``-`` when no
    shrinker ran)."""
    lines = [
        "| mutant | class | killed by | first detection | time to detect | length | shrunk "
        "| all detections |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        m = MUTANTS.get(r.mutant or "")
        first = r.first
        others = sorted({k.where.removeprefix("scenario ") for k in r.kills if k.counts})
        bad = [f"{k.by} ({k.where})" for k in r.bad]
        length = first.operations if first and first.operations is not None else "-"
        shrunk = r.shrunk_ops if r.shrunk_ops is not None else "-"
        lines.append(
            f"| {r.mutant or '(none)'} | {m.bug_class if m else ''} | "
            f"{first.by if first else 'SURVIVED'} | {first.where if first else ''} | "
            f"{f'{first.seconds:.2f} s' if first else ''} | {length} | {shrunk} | "
            f"{', '.join(others)}{'; NOT COUNTED: ' + ', '.join(bad) if bad else ''} |"
        )
    return "\n".join(lines)


def summary_line(document: dict[str, Any]) -> str:
    """One line of figures from :func:`matrix_document`'s summary."""
    s = document["summary"]

    def fig(x: float | None, unit: str = "") -> str:
        return "-" if x is None else f"{x:g}{unit}"

    kinds = ", ".join(f"{n} by {k}" for k, n in s["killed_by"].items())
    return (
        f"{document['killed']}/{s['mutants']} killed ({kinds}); time to detect: median "
        f"{fig(s['median_seconds_to_detect'], ' s')}, "
        f"worst {fig(s['worst_seconds_to_detect'], ' s')}; "
        f"median length {fig(s['median_operations'], ' ops')}, "
        f"median shrunk length {fig(s['median_shrunk_ops'], ' ops')}"
    )


# --- first detection under a wall-time budget: seeded conformance vs Hypothesis -----


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


__all__ = [
    "ADAPTER",
    "MUTANTS",
    "CountingTarget",
    "Detection",
    "adapter_machine",
    "hypothesis_detection",
    "seeded_detection",
    "Kill",
    "KillResult",
    "Mutant",
    "check_mutant",
    "library_planted_bugs",
    "matrix_document",
    "mutant_command",
    "RESULT_FIELDS",
    "render_matrix",
    "repro_operations",
    "shrunk_length",
    "summary_line",
]
