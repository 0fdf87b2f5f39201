"""``inboxsim run``: scenario files against the model (or an adapter), every
invariant and expectation checked. Its parts (:func:`gather`, :func:`run_all`)
are what other callers use to run the library the same way.
"""

from __future__ import annotations

import contextlib
import glob
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .. import __version__
from ..conformance.command_lines import target_command
from ..errors import ExitCode, HarnessError
from ..invariants.monitor import MonitorFactory
from ..model import Policy
from ..procs import scratch
from ..reports.pages import scenario_page
from ..scenarios.load import (
    LoadedScenario,
    library_paths,
    load_scenario,
    resolve_policy,
    select_library,
)
from ..scenarios.runner import (
    Failure,
    ScenarioResult,
    TargetFactory,
    default_monitor,
    model_target,
    run_scenario,
)
from ..search.group_scenario import OnCheck, has_group, run_group_scenario
from ..search.groups import GroupCheck
from ..store.scenario_runs import write_scenarios
from ..store.store import Store
from ..targets.adapter import AdapterTarget, check_startable, split_command
from ..targets.protocol import ProtocolError
from ..targets.target import Target
from ..trace.record import Trace, TraceHeader
from .output import echo, emit_json, write_file


def run(
    *,
    files: list[str] | None,
    library: bool,
    policy: str | None,
    adapter: str | None,
    target: str | None,
    adapter_timeout: float,
    db: str | None,
    as_json: bool,
    html: str | None = None,
) -> int:
    if target is not None:  # a shipped target: its adapter command line
        adapter = shlex.join(target_command(adapter, target, None, adapter_timeout)[0])
    loaded = gather(files or [], library)
    if html is not None and len(loaded) != 1:
        raise HarnessError(f"--html writes one scenario's page: {len(loaded)} scenarios given")
    if html is not None and not Path(html).parent.is_dir():  # fail before the run, not after
        raise HarnessError(f"cannot write {html}: no such folder {str(Path(html).parent)!r}")
    checks: list[tuple[int, GroupCheck | None]] = []  # a group scenario's steps, as judged
    # The store opens before anything runs: a bad --db fails fast, exit 2.
    with Store(db) if db is not None else contextlib.nullcontext() as store:
        with scratch.folder("run") as work:
            factory = adapter_factory(adapter, adapter_timeout, work) if adapter else None
            results, checked = run_all(
                loaded, policy, target_factory=factory, on_check=lambda *c: checks.append(c)
            )
        if store is not None:
            store_results(store, loaded, results, policy)
    if html is not None:
        origin = Path(loaded[0].origin)
        text = origin.read_text(encoding="utf-8") if origin.is_file() else None
        write_file(html, scenario_page(results[0], checks, text), f"cannot write {html}")
    if as_json:
        emit_json(document(results, checked, policy))
    else:
        for line in table(results, checked):
            echo(line)
        if html is not None:
            echo(f"wrote {html}")
    return exit_code(results)


def gather(files: Sequence[str], library: bool) -> list[LoadedScenario]:
    """Load every file (all of them first: a malformed file stops the command
    before anything runs). Each argument is a scenario file, a folder (its
    ``.toml`` files, recursively), a glob (``**`` recurses), or else a
    selector of the library: a scenario name, a topic folder, a glob over
    "topic/name" (:func:`~.load.select_library`)."""
    if not files and not library:
        raise HarnessError("run needs scenario files, or --library for the named library")
    paths: list[str] = [str(p) for p in library_paths()] if library else []
    for given in files:
        paths += expand(given)
    return [load_scenario(p) for p in paths]


def expand(given: str) -> list[str]:
    """The scenario files one ``run`` argument names (see :func:`gather`)."""
    path = Path(given)
    if path.is_dir():
        found = sorted(str(p) for p in path.rglob("*.toml"))
        if not found:
            raise HarnessError(f"{given}: no scenario files (*.toml) in this folder")
        return found
    if path.exists():
        return [given]
    if glob.has_magic(given):
        matched = sorted(p for p in glob.glob(given, recursive=True) if Path(p).is_file())
        if matched:
            return matched
    if given.endswith(".toml"):
        return [given]  # load_scenario says that it cannot be read
    try:
        return [str(p) for p in select_library([given])]
    except HarnessError as exc:
        raise HarnessError(f"{given}: no such scenario file or folder; {exc}") from None


def adapter_factory(command: str, timeout: float, workdir: Path) -> TargetFactory:
    """Targets that start ``command`` (an adapter-protocol program) in a fresh
    data folder per scenario, under ``workdir``."""

    argv = split_command(command)
    check_startable(argv)
    counter = iter(range(1_000_000))

    def build(policy: Policy, step_limit: int) -> Target:
        data = workdir / f"scenario-{next(counter)}"
        data.mkdir()
        return AdapterTarget(argv, data, step_limit, timeout)

    return build


def run_all(
    scenarios: Sequence[LoadedScenario],
    policy: str | None,
    progress: bool = True,
    target_factory: TargetFactory | None = None,
    on_check: OnCheck | None = None,
) -> tuple[list[ScenarioResult], bool]:
    """Run each scenario (``policy`` overrides every file's) against the model,
    or the targets ``target_factory`` builds; returns the results and whether
    the invariant checkers judged them. An adapter's protocol error ends that
    scenario as a failure naming the request (targets.protocol.ProtocolError)."""
    override: Policy | None = resolve_policy(policy) if policy is not None else None
    monitor = default_monitor()
    if monitor is None and progress:
        print(
            "run: the invariant checkers are not available; judging expectations only",
            file=sys.stderr,
        )
    results = []
    for number, loaded in enumerate(scenarios, start=1):
        if progress:
            print(f"run: [{number}/{len(scenarios)}] {loaded.name}", file=sys.stderr)
        # --policy naming the file's own policy runs it as the file's own
        own = override is not None and override.name == loaded.scenario.policy
        chosen = None if own else override
        if has_group(loaded.scenario):  # judged by the linearizability search
            factory = target_factory or model_target
            results.append(_run_on_adapter(loaded, chosen, None, factory, on_check))
        elif target_factory is None:
            results.append(run_scenario(loaded, chosen, monitor=monitor))
        else:
            results.append(_run_on_adapter(loaded, chosen, monitor, target_factory))
    return results, monitor is not None


def _run_on_adapter(
    loaded: LoadedScenario,
    policy: Policy | None,
    monitor: MonitorFactory | None,
    factory: TargetFactory,
    on_check: OnCheck | None = None,
) -> ScenarioResult:

    try:
        if has_group(loaded.scenario):
            return run_group_scenario(loaded, policy, target_factory=factory, on_check=on_check)
        return run_scenario(loaded, policy, target_factory=factory, monitor=monitor)
    except ProtocolError as error:
        chosen = policy or resolve_policy(loaded.scenario.policy, loaded.origin)
        empty = Trace(TraceHeader(None, chosen.name, "adapter", {}, __version__), ())
        failure = Failure(None, f"protocol error: {error}")
        return ScenarioResult(
            loaded.name, loaded.origin, chosen.name, (failure,), empty, "", monitor is not None, 0
        )


def store_results(
    store: Any,
    scenarios: Sequence[LoadedScenario],
    results: Sequence[ScenarioResult],
    policy: str | None,
) -> tuple[int, int]:
    """Write every scenario run into ``store`` (a
    :class:`~inboxsim.store.store.Store`) as one batch, each with the full
    fields of the policy it ran under; returns (first run_id, sweep_id)."""

    override = resolve_policy(policy) if policy is not None else None
    triples = [
        (loaded, result, override or resolve_policy(loaded.scenario.policy, loaded.origin))
        for loaded, result in zip(scenarios, results, strict=True)
    ]
    return write_scenarios(store, triples)


def exit_code(results: Sequence[ScenarioResult]) -> int:
    return int(ExitCode.OK if all(r.passed for r in results) else ExitCode.TARGET_FAILED)


def document(
    results: Sequence[ScenarioResult], checked: bool, policy: str | None
) -> dict[str, Any]:
    """The ``run --json`` document."""
    return {
        "policy_override": policy,
        "invariants_checked": checked,
        "passed": sum(r.passed for r in results),
        "failed": sum(not r.passed for r in results),
        "scenarios": [r.to_dict() for r in results],
    }


def table(results: Sequence[ScenarioResult], checked: bool) -> list[str]:
    """The human summary: one row per scenario, then each failure."""
    width = max((len(r.name) for r in results), default=8)
    pwidth = max((len(r.policy) for r in results), default=6)
    lines = [f"{'scenario':<{width}}  {'policy':<{pwidth}}  {'steps':>5}  result"]
    for r in results:
        lines.append(f"{r.name:<{width}}  {r.policy:<{pwidth}}  {r.steps_run:>5}  {r.verdict}")
    for r in results:
        for failure in r.failures:
            lines.append(f"{r.name}: {failure}")
    passed = sum(r.passed for r in results)
    expected = sum(r.passed and r.expected_violation is not None for r in results)
    note = "" if checked else " (invariant checkers not available: expectations only)"
    also = f" ({expected} of them by an expected violation)" if expected else ""
    lines.append(f"{passed} passed{also}, {len(results) - passed} failed{note}")
    return lines
