"""Minimal repro scenarios for conformance failures, shrunk through the same
adapter (``inboxsim conformance`` writes one file per failing seed or
library scenario).

A repro is a regression test for the implementation: it passes on a correct
one and fails on the one it was shrunk against. So, unlike ``inboxsim
shrink``'s files, it carries no ``expect_violation``:

- a **violation** (``violated:<invariant>``): the file's steps end at the
  step that broke the invariant; ``inboxsim run FILE --adapter CMD`` judges
  every invariant on the adapter's trace, so the violation fails it;
- a **divergence** (``diverged:<op>:<part>``): the steps end at the request
  that diverged, and that step carries the model's answer as expectations,
  in the compared part that differed (the error code or receipt, the pending
  inbox, the transcript, the open calls), computed by running the file on
  the reference model. A difference the scenario format cannot state (only
  in times, or in a call's context) leaves the file failing in lockstep but
  not alone: :attr:`Repro.standalone` says which.

Each repro is checked three ways: on the model it passes
(:attr:`Repro.model_passes`), in lockstep through the adapter it fails with
the same key (:attr:`Repro.verified`), alone on the adapter it fails
(:attr:`Repro.standalone`).
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..invariants import Monitor
from ..model import Crashed, Err, Ok, Policy
from ..policy_file import load_policy
from ..procs import scratch
from ..scenarios.load import load_text
from ..scenarios.names import COPY, GEN, Names
from ..scenarios.render import toml_key, toml_value, write_scenario
from ..scenarios.runner import run_scenario
from ..scenarios.schema import EXPECTATIONS
from ..sim.run import RunOptions
from ..targets.adapter import DEFAULT_TIMEOUT, AdapterTarget, split_command
from ..targets.protocol import ProtocolError
from ..targets.target import ModelTarget
from ..trace.view import View
from .divergence import Divergence
from .lockstep import LockstepTarget
from .shrink.engine import Candidate, Judged, Shrinker, delete_chunks, minimize
from .shrink.steps import build_scenario, candidate_steps, drop_fields, step_candidate
from .shrink.through import failure_key, shrink_through

DEFAULT_OPS = 40
DEFAULT_SHRINK_SECONDS = 60.0
DEFAULT_SHRINK_RUNS = 300


@dataclass(frozen=True, slots=True)
class Repro:
    """A minimal repro scenario for one conformance failure."""

    origin: str  # "seed 12" or "scenario name"
    key: str
    message: str
    text: str
    steps: int  # request steps and kills in the file
    original_steps: int
    runs: int
    seconds: float
    verified: bool  # in lockstep through the adapter: the same failure key
    standalone: bool  # alone on the adapter (`inboxsim run FILE --adapter`): fails
    model_passes: bool  # on the reference model: passes
    path: str | None = None
    divergence: dict[str, Any] | None = None  # in lockstep, the file's first difference

    def document(self) -> dict[str, Any]:
        return {
            "origin": self.origin,
            "key": self.key,
            "message": self.message,
            "path": self.path,
            "steps": self.steps,
            "original_steps": self.original_steps,
            "runs": self.runs,
            "seconds": round(self.seconds, 3),
            "verified": self.verified,
            "standalone": self.standalone,
            "model_passes": self.model_passes,
        }

    def write(self, folder: str | Path, name: str) -> Repro:
        """Write the file as ``folder/name.toml``; the repro with its path."""
        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        path = out / f"{_slug(name)}.toml"
        scratch.write_atomic(path, self.text)
        return replace(self, path=str(path))


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "repro"


# --- the targets -----------------------------------------------------------------


class LockstepFactory:
    """``LockstepTarget(ModelTarget, AdapterTarget(command))`` in a fresh data
    folder each time: a run_seed ``target=`` factory and a scenario
    ``target_factory`` alike."""

    def __init__(
        self, command: Sequence[str], timeout: float, base: Path, name: str = "target"
    ) -> None:
        self.command = list(command)
        self.timeout = timeout
        self.base = base
        self.name = name
        self.counter = 0

    def __call__(self, policy: Policy, step_limit: int) -> Any:

        self.counter += 1
        folder = self.base / f"lockstep-{self.counter}"
        return LockstepTarget(
            ModelTarget(policy, step_limit),
            AdapterTarget(self.command, folder, step_limit, self.timeout, name=self.name),
        )


def _bare_factory(command: Sequence[str], timeout: float, base: Path) -> Any:
    counter = iter(range(1_000_000))

    def build(policy: Policy, step_limit: int) -> Any:
        return AdapterTarget(list(command), base / f"alone-{next(counter)}", step_limit, timeout)

    return build


def _monitor() -> Any:

    def make(policy: Policy, hello: dict[str, Any], *_: Any) -> Any:
        return Monitor(policy, hello, only_expected=True)

    return make


# --- judging a scenario ------------------------------------------------------------


def scenario_key(
    loaded: Any, policy: Policy, factory: Any, found: list[Any] | None = None
) -> tuple[str, str, str]:
    """(failure key, message, a divergence's compared part) of a scenario run
    in lockstep through ``factory``; ("", "", "") when it held. Expectation
    failures are not keys (the shrinker strips expectations); a protocol
    error or a skipped feature is ``other:...`` so that it never counts as
    the same failure. A divergence is also appended to ``found``."""

    try:
        result = run_scenario(loaded, policy, target_factory=factory, monitor=_monitor())
    except Divergence as div:
        if found is not None:
            found.append(div)
        return failure_key(div), div.summary, div.where
    except ProtocolError as exc:
        return "other:protocol error", str(exc).splitlines()[0], ""
    except Exception as exc:  # noqa: BLE001 - NotTestable and the like: not the same failure
        return f"other:{type(exc).__name__}", str(exc), ""
    expected = loaded.scenario.expect_violation
    for v in result.violations:
        if v.invariant != expected:
            return failure_key(v), f"{v.invariant}: {v.message}", ""
    if result.failures:
        return "other:expectation", str(result.failures[0]), ""
    return "", "", ""


def _checks(
    text: str, key: str, policy: Policy, command: Sequence[str], timeout: float
) -> tuple[bool, bool, bool, dict[str, Any] | None]:
    """(verified, standalone, model_passes, the divergence in lockstep as
    :meth:`~.divergence.Divergence.to_dict`) of a repro text."""

    loaded = load_text(text, "<repro>")
    found: list[Any] = []
    with scratch.folder("repro-check") as tmp:
        factory = LockstepFactory(command, timeout, Path(tmp))
        got, _, _ = scenario_key(loaded, policy, factory, found)
        try:
            alone = run_scenario(
                loaded, policy, target_factory=_bare_factory(command, timeout, Path(tmp))
            )
            standalone = not alone.passed
        except ProtocolError:
            standalone = True
    model = run_scenario(loaded, policy)
    return got == key, standalone, model.passed, found[0].to_dict() if found else None


# --- the model's answer as expectations ----------------------------------------------

_WHERE = re.compile(r"^(pending|transcript) (\S+)$")


def with_model_expectations(text: str, key: str, where: str, policy: Policy) -> str:
    """``text`` with the model's answer at its last step appended as that
    step's expectations, in the part ``key`` names (a divergence key; any
    other key returns ``text`` unchanged)."""
    if not key.startswith("diverged:"):
        return text

    part = key.split(":")[2]
    loaded = load_text(text, "<repro>")
    specs = loaded.scenario.step
    if not specs:
        return text
    last = specs[-1]
    number = len(specs)
    result = run_scenario(loaded, policy, monitor=None)
    harness = {s.input for s in specs if s.input and not s.input.startswith((GEN, COPY))}
    view, names = View(), Names(harness)
    reply = None
    results: dict[int, Any] = {}
    for step in result.trace.steps:
        view.absorb(step.observed)
        names.absorb(step.reply, step.observed)
        label = step.decision
        if label.startswith("scenario step ") and not label.endswith("restart"):
            n = int(label.split()[2])
            if isinstance(step.reply, Ok) and n != number:
                results.setdefault(n, step.reply.result)
            if n == number:
                reply = step.reply
    expect: dict[str, Any] = {}
    if part in ("reply", "retry") and last.op is not None:
        if isinstance(reply, Err):
            expect["expect_error"] = reply.code
        elif isinstance(reply, Ok):
            result_doc = reply.result
            if all(k in result_doc for k in ("input", "type", "data")):
                receipt = {
                    "input": names.symbol(result_doc.get("session"), result_doc["input"]),
                    "session": result_doc.get("session"),
                    "type": result_doc["type"],
                    "delivery": result_doc.get("delivery"),
                    "data": result_doc["data"],
                }
                expect["expect_receipt"] = {k: v for k, v in receipt.items() if v is not None}
                same = [n for n, r in results.items() if r == result_doc]
                if part == "retry" and same:
                    expect["expect_same_receipt_as"] = max(same)
            else:
                expect["expect_ok"] = True
        elif isinstance(reply, Crashed):
            pass  # the scenario format has no expectation for a crash reply
    found = _WHERE.match(where)
    session = (
        found.group(2) if found else (last.session or (view.sessions[0] if view.sessions else None))
    )
    if part in ("pending", "transcript") and session is not None:
        if session != last.session or last.kill:
            expect["expect_session"] = session
        if part == "pending":
            expect["expect_pending"] = [
                names.symbol(session, r.input) for r in view.pending.get(session, ())
            ]
        else:
            expect["expect_transcript"] = [
                names.symbol(session, m.id) for m in view.transcript.get(session, ())
            ]
    if part == "calls":
        expect["expect_calls"] = [
            {"session": c.session, "kind": c.kind, "step": c.step, "final": c.final}
            for c in view.calls
        ]
    if not expect:
        return text
    lines = [f"{toml_key(k)} = {toml_value(v)}" for k, v in expect.items()]
    return text.rstrip("\n") + "\n" + "\n".join(lines) + "\n"


# --- seeds ---------------------------------------------------------------------------


def shrink_conformance(
    seed: int,
    command: Sequence[str] | str,
    policy: Policy | str = "g4",
    *,
    ops: int = DEFAULT_OPS,
    timeout: float = DEFAULT_TIMEOUT,
    max_runs: int = DEFAULT_SHRINK_RUNS,
    time_limit: float = DEFAULT_SHRINK_SECONDS,
    workdir: str | Path | None = None,
    name: str = "target",
    out: str | Path | None = None,
) -> Repro | None:
    """Run conformance seed ``seed`` against ``command`` (lockstep with the
    model under ``policy``, ``ops`` workload actions, as ``inboxsim
    conformance`` runs it) and, if it fails, shrink it through the same
    adapter to a minimal repro scenario; written to ``out`` (a folder) when
    given. None when the seed holds."""

    options = RunOptions(ops=ops, only_expected=True)
    with _lockstep_shrink(command, policy, timeout, workdir, name) as (argv, the_policy, factory):
        shrunk = shrink_through(
            seed, the_policy, options, factory, max_runs=max_runs, time_limit=time_limit
        )
    if shrunk is None:
        return None
    text = write_scenario(
        shrunk.steps,
        the_policy,
        name=f"conformance-seed-{seed}-min",
        source=(
            f"inboxsim conformance seed {seed} (--ops {ops}, policy {the_policy.name}) "
            f"shrunk through the adapter: {shrunk.key}"
        ),
    )
    found = _Found(
        shrunk.key,
        shrunk.message,
        shrunk.where,
        shrunk.final.operations + shrunk.final.faults,
        shrunk.original.operations + shrunk.original.faults,
        shrunk.runs,
        shrunk.seconds,
    )
    return _finish(f"seed {seed}", found, text, the_policy, argv, timeout, out, f"seed-{seed}")


@dataclass(frozen=True, slots=True)
class _Found:
    """What a shrink found, as a repro counts it."""

    key: str
    message: str
    where: str  # a divergence's compared part
    steps: int
    original_steps: int
    runs: int
    seconds: float


@contextlib.contextmanager
def _lockstep_shrink(
    command: Sequence[str] | str,
    policy: Policy | str,
    timeout: float,
    workdir: str | Path | None,
    name: str,
) -> Iterator[tuple[list[str], Policy, LockstepFactory]]:
    """What both drivers shrink through: the adapter's argv, the policy, and
    a factory of fresh lockstep targets in a scratch folder that is removed
    when the shrink ends."""
    argv = split_command(command) if isinstance(command, str) else list(command)
    the_policy = load_policy(policy) if isinstance(policy, str) else policy
    with scratch.folder("shrink", workdir) as tmp:
        yield argv, the_policy, LockstepFactory(argv, timeout, Path(tmp), name)


def _finish(
    origin: str,
    found: _Found,
    text: str,
    policy: Policy,
    argv: list[str],
    timeout: float,
    out: str | Path | None,
    file_name: str,
) -> Repro:
    """The repro of a shrunk ``text``: the model's answer appended as
    expectations, checked three ways, written to ``out/file_name.toml``
    when ``out`` is given."""
    text = with_model_expectations(text, found.key, found.where, policy)
    verified, standalone, model_passes, divergence = _checks(text, found.key, policy, argv, timeout)
    repro = Repro(
        origin,
        found.key,
        found.message,
        text,
        found.steps,
        found.original_steps,
        found.runs,
        found.seconds,
        verified,
        standalone,
        model_passes,
        divergence=divergence,
    )
    return repro.write(out, file_name) if out is not None else repro


# --- library scenarios ---------------------------------------------------------------


def shrink_conformance_scenario(
    loaded: Any,
    command: Sequence[str] | str,
    policy: Policy | str = "g4",
    *,
    timeout: float = DEFAULT_TIMEOUT,
    max_runs: int = DEFAULT_SHRINK_RUNS,
    time_limit: float = DEFAULT_SHRINK_SECONDS,
    workdir: str | Path | None = None,
    name: str = "target",
    out: str | Path | None = None,
) -> Repro | None:
    """A library scenario that fails in lockstep against ``command``, its
    steps deleted (and ``crash_at``, ``now`` and optional fields dropped)
    while it still fails with the same key, run through fresh adapters each
    time. None when it holds (or fails only by an expectation)."""

    started = time.perf_counter()
    sc = loaded.scenario
    header: dict[str, Any] = {
        "name": f"{sc.name}-min",
        "source": f"inboxsim conformance: library scenario {sc.name} shrunk through the adapter",
        "policy": sc.policy,
        "step_limit": sc.step_limit,
    }
    strip = set(EXPECTATIONS)
    steps0 = step_candidate(
        {k: v for k, v in s.model_dump(exclude_none=True).items() if k not in strip}
        for s in sc.step
    )
    with _lockstep_shrink(command, policy, timeout, workdir, name) as (argv, the_policy, factory):
        wheres: dict[Candidate, tuple[str, str]] = {}
        start = build_scenario(header, steps0, loaded.origin)
        if start is None:
            return None
        first_key, first_msg, first_where = scenario_key(start, the_policy, factory)
        if not first_key or first_key.startswith("other:"):
            return None

        def test(cand: Candidate) -> Judged | None:
            built = build_scenario(header, cand, loaded.origin)
            if built is None:
                return None
            k, msg, where = scenario_key(built, the_policy, factory)
            if k != first_key:
                return None
            wheres[cand] = (msg, where)
            return (len(cand), sum(len(s) for s in cand), repr(cand)), cand

        wheres[steps0] = (first_msg, first_where)
        start_key = (len(steps0), sum(len(s) for s in steps0), repr(steps0))
        search = Shrinker(test, steps0, start_key, max_runs, time_limit, runs=1)
        final = minimize(search, (delete_chunks, drop_fields)).cur
        msg, where = wheres[final]
    lines = [f"{toml_key(k)} = {toml_value(v)}" for k, v in header.items()]
    for step in candidate_steps(final):
        lines += ["", "[[step]]"] + [f"{toml_key(k)} = {toml_value(v)}" for k, v in step.items()]
    text = "\n".join(lines) + "\n"
    found = _Found(
        first_key,
        msg,
        where,
        len(final),
        len(steps0),
        search.runs,
        time.perf_counter() - started,
    )
    origin, file_name = f"scenario {sc.name}", f"scenario-{sc.name}"
    return _finish(origin, found, text, the_policy, argv, timeout, out, file_name)


__all__ = [
    "LockstepFactory",
    "Repro",
    "scenario_key",
    "shrink_conformance",
    "shrink_conformance_scenario",
    "with_model_expectations",
]
