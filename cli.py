"""The ``inboxsim`` command (``docs/cli.md``).

Every command prints progress on stderr and its human summary on stdout, or,
with ``--json``, one JSON document on stdout instead. Exit codes are
:class:`inboxsim.errors.ExitCode`: 0 held, 1 the target failed, 2 the harness
could not do its job. :func:`main` turns usage errors and
:class:`~inboxsim.errors.HarnessError` into one line on stderr and exit 2.

Heavy modules (the model, duckdb, pyarrow, matplotlib, rich's progress) are
imported inside the commands that use them, so ``inboxsim --help`` stays fast.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

import typer

from inboxsim import __version__
from inboxsim.errors import ExitCode, HarnessError

PROG = "inboxsim"
TRACEBACK_ENV = "INBOXSIM_TRACEBACK"

app = typer.Typer(
    name=PROG,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

JsonFlag = Annotated[
    bool,
    typer.Option("--json", help="Print one JSON document on stdout instead of the summary."),
]

# Every number is checked where typer parses it, by its own min/max (a usage
# error: one line, exit 2). A duration needs a max as well as a min: a min
# alone lets `inf` through (nan fails every bound), and the waits a duration
# becomes must fit the system's timers. A week is far beyond any useful wait.
MAX_SECONDS = 7 * 24 * 3600.0


def seconds(flag: str, help: str, minimum: float = 0.001) -> Any:
    """A duration option: a finite number of seconds from ``minimum`` to a week."""
    return typer.Option(flag, help=help, min=minimum, max=MAX_SECONDS)


@app.callback()
def _root() -> None:
    """Deterministic simulation and verification harness for durable agent inboxes.

    Exit codes: 0 everything judged held; 1 the target failed; 2 the harness
    could not do its job (the reason is one line on stderr).
    """


def _emit_json(document: Mapping[str, Any]) -> None:
    typer.echo(json.dumps(document, indent=2))


# --- commands ---------------------------------------------------------------
# The contract's other commands (sweep, replay, shrink, run, explore,
# conformance, mutants, check, validate, report, diff, designs, invariants)
# are added here, one function each, as their issues land.


@app.command()
def policies(as_json: JsonFlag = False) -> None:
    """List the policy presets that --policy NAME accepts."""
    from inboxsim.model.policy import PRESETS

    if as_json:
        _emit_json(policies_document(PRESETS))
        return
    width = max((len(p.name) for p in PRESETS.values()), default=0)
    for p in PRESETS.values():
        typer.echo(f"{p.name:<{width}}  {p.summary}")


def policies_document(presets: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The ``policies --json`` document: each preset's name, summary and fields."""
    return {
        "policies": [
            {"name": p.name, "summary": p.summary, "fields": p.fields()} for p in presets.values()
        ]
    }


@app.command()
def version(as_json: JsonFlag = False) -> None:
    """Print the inboxsim version (part of every trace hash)."""
    if as_json:
        _emit_json({"version": __version__})
    else:
        typer.echo(f"{PROG} {__version__}")


# --- sweep and replay (issue 4: the seeded scheduler) -------------------------

PolicyOption = Annotated[
    str,
    typer.Option(
        "--policy", help="A policy preset name (see `inboxsim policies`) or a TOML file of fields."
    ),
]
OpsOption = Annotated[
    int, typer.Option("--ops", help="Workload operations in each run's safety phase.", min=1)
]
OnlyExpectedOption = Annotated[
    bool,
    typer.Option(
        "--only-expected",
        help="Judge only the invariants the policy is expected to keep (default: every invariant).",
    ),
]
ExecutorOption = Annotated[
    str,
    typer.Option(
        "--executor", help="Where seeds run: `local` (this machine) or `dask` (a Dask cluster)."
    ),
]
SchedulerOption = Annotated[
    str | None,
    typer.Option(
        "--scheduler",
        help="With --executor dask: the scheduler address (default: a local cluster).",
    ),
]
TargetOption = Annotated[
    str, typer.Option("--target", help="What to run against: `model` (the reference model).")
]
ConcurrencyOption = Annotated[
    int,
    typer.Option(
        "--concurrency",
        help="Most requests in a concurrent group: with N > 1 each seed also sends swarm-chosen "
        "groups aimed at the races, interleaved by a schedule drawn from the seed. 1: every "
        "request alone.",
        min=1,
    ),
]


def _sim_inputs(
    policy: str, ops: int, target: str, only_expected: bool, concurrency: int = 1
) -> tuple[Any, Any]:
    """Check the options every seeded command shares; the policy and run options."""
    from inboxsim.model import load_policy
    from inboxsim.sim.run import RunOptions

    if target != "model":
        raise HarnessError(f"--target {target!r} is not available yet: only 'model' is")
    options = RunOptions(ops=ops, only_expected=only_expected, concurrency=concurrency)
    return load_policy(policy), options


@app.command()
def sweep(
    seeds: Annotated[int, typer.Option("--seeds", help="How many seeds to run.", min=1)] = 100,
    seed_start: Annotated[int, typer.Option("--seed-start", help="The first seed.", min=0)] = 0,
    policy: PolicyOption = "g4",
    ops: OpsOption = 100,
    jobs: Annotated[
        int | None,
        typer.Option(
            "--jobs", help="Worker processes (default: all cores).", show_default=False, min=1
        ),
    ] = None,
    db: Annotated[str, typer.Option("--db", help="The DuckDB trace store.")] = "inboxsim.duckdb",
    time_budget: Annotated[
        float | None, seconds("--time-budget", "Stop starting new seeds after this many seconds.")
    ] = None,
    target: TargetOption = "model",
    only_expected: OnlyExpectedOption = False,
    concurrency: ConcurrencyOption = 1,
    executor: ExecutorOption = "local",
    scheduler: SchedulerOption = None,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="Go on with an interrupted sweep: seeds the database already holds under the same "
            "policy, options and inboxsim version count from it instead of running again.",
        ),
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Run seeds through the simulator: swarm faults, then liveness; judge every run.

    Every invariant is judged (--only-expected: only those the policy is
    expected to keep). Exits 1 when a run violated an invariant or did not
    settle, or when a required coverage probe was never hit. Failing seeds
    are remembered in the database and run first by the next sweep with the
    same policy and options.
    """
    from inboxsim.procs.interrupt import Interrupted
    from inboxsim.sim.console import SweepProgress, print_summary
    from inboxsim.sim.executor import check_executor
    from inboxsim.sim.sweep import SweepPlan, default_jobs, resume_line
    from inboxsim.sim.sweep import sweep as run_sweep
    from inboxsim.store.store import Store

    the_policy, options = _sim_inputs(policy, ops, target, only_expected, concurrency)
    check_executor(executor, scheduler)
    plan = SweepPlan(
        policy,
        the_policy,
        options,
        seed_start,
        seeds,
        jobs or default_jobs(),
        time_budget,
        executor=executor,
        scheduler=scheduler,
        resume=resume,
    )
    report = None
    try:
        with Store(db) as store:
            with SweepProgress(seeds) as progress:
                report = run_sweep(plan, store, progress)
        if as_json:
            document = report.document()
            document["db"] = db
            _emit_json(document)
        else:
            print_summary(report)
    except Interrupted as stop:
        if stop.kept is None and report is not None:  # after the sweep: all of it is kept
            stop.kept = resume_line(plan, db)
        raise
    raise typer.Exit(report.exit_code)


@app.command()
def replay(
    seed: Annotated[int, typer.Argument(help="The seed to run again.", min=0)],
    policy: PolicyOption = "g4",
    ops: OpsOption = 100,
    target: TargetOption = "model",
    only_expected: OnlyExpectedOption = False,
    concurrency: ConcurrencyOption = 1,
    html: Annotated[
        str | None,
        typer.Option(
            "--html",
            help="Write the run as a trace viewer page (one self-contained HTML file) to this "
            "path instead of printing it.",
            show_default=False,
        ),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Rerun one seed with the options a sweep ran it with, and print its trace.

    With --html, write it as a viewer page instead: the steps with the views
    after each, crashes shaded, the violating step highlighted, a timeline.
    Exits 1 when the run violated an invariant or did not settle.
    """
    from inboxsim.sim.run import run_seed
    from inboxsim.sim.show import result_document, trace_lines

    the_policy, options = _sim_inputs(policy, ops, target, only_expected, concurrency)
    result = run_seed(seed, the_policy, options)
    if html is not None:
        from inboxsim.reports.pages import result_page, verdict_words
        from inboxsim.reports.summary import replay_command

        page = result_page(result, replay_command(seed, policy, options.to_dict()) or "")
        _write_text(html, page)
        violations = [(v.invariant, v.steps, v.message) for v in result.violations]
        typer.echo(f"seed {seed} ({result.policy}): {verdict_words(violations)}; wrote {html}")
    elif as_json:
        _emit_json(result_document(result))
    else:
        for line in trace_lines(result):
            typer.echo(line)
    raise typer.Exit(1 if result.violations else 0)


# --- explore (bounded-exhaustive search) ---------------------------------------


@app.command()
def explore(
    sessions: Annotated[
        int, typer.Option("--sessions", help="Sessions, created up front.", min=1)
    ] = 2,
    depth: Annotated[
        int,
        typer.Option("--depth", help="Most operations on a path (restarts not counted).", min=0),
    ] = 3,
    policy: Annotated[
        str,
        typer.Option(
            "--policy",
            help="A policy preset name (see `inboxsim policies`) or a TOML file of fields.",
        ),
    ] = "g4",
    step_limit: Annotated[
        int, typer.Option("--step-limit", help="The agent's step allowance sent in hello.", min=1)
    ] = 2,
    alphabet: Annotated[
        str,
        typer.Option(
            "--alphabet",
            help="`full`, a comma-separated list of operation families, or `full-FAMILY,...` "
            "(the full alphabet without some); the summary lists the families.",
        ),
    ] = "full",
    out: Annotated[
        str | None,
        typer.Option(
            "--out",
            help="Where to write the shortest counterexample (default explore-<policy>.toml).",
        ),
    ] = None,
    invariant: Annotated[
        str | None,
        typer.Option(
            "--invariant",
            help="Stop only at a violation of this invariant (the search goes on through others): "
            "the depth of its shortest counterexample.",
            show_default=False,
        ),
    ] = None,
    jobs: Annotated[
        int,
        typer.Option(
            "--jobs",
            help="Worker processes judging each level's transitions (the result is the same).",
            min=1,
        ),
    ] = 1,
    pool: Annotated[
        int,
        typer.Option(
            "--pool", help="Fresh input IDs per session (part of the world's bound).", min=1
        ),
    ] = 2,
    as_json: JsonFlag = False,
) -> None:
    """Every interleaving of a small world, breadth first, every invariant in every state.

    Exits 1 with the shortest counterexample (written as a scenario file) when
    an invariant is violated, 0 when none is within the bound.
    """
    from inboxsim.model import load_policy
    from inboxsim.search import explore as ex
    from inboxsim.sim import checkers

    try:
        families = ex.parse_alphabet(alphabet)
    except ValueError as exc:
        raise HarnessError(f"--alphabet: {exc}") from None
    the_policy = load_policy(policy)
    monitor, _ = checkers.load()

    if invariant is not None:
        from inboxsim.invariants import REGISTRY

        if invariant not in REGISTRY:
            raise HarnessError(
                f"--invariant: unknown invariant {invariant!r} (see `inboxsim invariants`)"
            )
    from inboxsim.sim.console import ExploreProgress

    with ExploreProgress(depth) as shown:
        result = ex.explore(
            the_policy,
            monitor,
            sessions,
            depth,
            step_limit,
            families,
            shown.level,
            invariant,
            jobs=jobs,
            pool=pool,
            tick=shown.tick,
        )
    written = None
    if result.violations:
        text, fmt = ex.render_counterexample(result, the_policy)
        written = out or f"explore-{the_policy.name}.{fmt}"
        try:
            with open(written, "w", encoding="utf-8") as handle:
                handle.write(text)
        except OSError as exc:
            raise HarnessError(f"cannot write {written}: {exc.strerror}") from None
    if as_json:
        _emit_json(ex.result_document(result, written))
    else:
        for line in ex.summary_lines(result, written):
            typer.echo(line)
    raise typer.Exit(int(ExitCode.TARGET_FAILED if result.violations else ExitCode.OK))


# --- run (issue 5: scenarios) ---------------------------------------------------


@app.command("run")
def run_scenarios(
    files: Annotated[
        list[str] | None, typer.Argument(help="Scenario files (TOML).", show_default=False)
    ] = None,
    library: Annotated[
        bool, typer.Option("--library", help="Run the whole named scenario library.")
    ] = False,
    policy: Annotated[
        str | None,
        typer.Option(
            "--policy",
            help="Override every file's policy: a preset name or a TOML file.",
            show_default=False,
        ),
    ] = None,
    adapter: Annotated[
        str | None,
        typer.Option(
            "--adapter",
            help="Run against this adapter-protocol program instead of the model.",
            show_default=False,
        ),
    ] = None,
    target: Annotated[
        str | None,
        typer.Option(
            "--target",
            help="Run against a shipped target instead: sqlite, model-adapter or opencode.",
            show_default=False,
        ),
    ] = None,
    adapter_timeout: Annotated[
        float, seconds("--adapter-timeout", "The longest wait for one adapter response.")
    ] = 10.0,
    db: Annotated[
        str | None,
        typer.Option(
            "--db",
            help="Also store every scenario run in this DuckDB trace store.",
            show_default=False,
        ),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Run scenario files against the model (or --adapter), checking every invariant and
    expectation.

    Exits 1 when any scenario failed (an adapter's protocol error included),
    2 when a file is malformed. For a comparison step by step with the model,
    use `inboxsim conformance`.
    """
    import contextlib

    from inboxsim.commands import run as command
    from inboxsim.procs import scratch
    from inboxsim.store.store import Store

    if target is not None:
        import shlex

        from inboxsim.conformance.check import target_command

        adapter = shlex.join(target_command(adapter, target, None, adapter_timeout)[0])
    loaded = command.gather(files or [], library)
    # The store opens before anything runs: a bad --db fails fast, exit 2.
    with Store(db) if db is not None else contextlib.nullcontext() as store:
        with scratch.folder("run") as work:
            factory = command.adapter_factory(adapter, adapter_timeout, work) if adapter else None
            results, checked = command.run_all(loaded, policy, target_factory=factory)
        if store is not None:
            command.store_results(store, loaded, results, policy)
    if as_json:
        _emit_json(command.document(results, checked, policy))
    else:
        for line in command.table(results, checked):
            typer.echo(line)
    raise typer.Exit(command.exit_code(results))


@app.command("coverage")
def coverage_command(
    out: Annotated[
        str | None,
        typer.Option(
            "--out", help="Write the page to this file (default: print it).", show_default=False
        ),
    ] = None,
    check: Annotated[
        bool,
        typer.Option(
            "--check", help="With --out: exit 1 if the file is not current; write nothing."
        ),
    ] = False,
) -> None:
    """OpenCode's inbox tests and the library scenarios that carry them (docs/coverage.md).

    Generated from scenarios/opencode_tests.toml and each scenario's [[carries]]
    tables. Exits 2 when a citation names no test or a test is neither carried
    nor out of scope; with --check, 1 when the file is out of date.
    """
    from pathlib import Path

    from inboxsim.scenarios import coverage

    if out is None:
        if check:
            raise HarnessError("--check needs --out FILE: the page to compare")
        typer.echo(coverage.render(coverage.coverage()), nl=False)
        return
    current = coverage.write(Path(out), check=check)
    if check and not current:
        print(f"coverage: {out} is not current: inboxsim coverage --out {out}", file=sys.stderr)
        raise typer.Exit(1)
    print(f"coverage: {out} {'is current' if current else 'written'}", file=sys.stderr)


# --- invariants (issue 3: the invariant checkers) -------------------------------


@app.command("invariants")
def list_invariants(as_json: JsonFlag = False) -> None:
    """List every invariant the checkers judge (id, statement, source), then each
    invariant of the spec's section 4: the ids that check it, and any part the
    protocol cannot observe, with the reason."""
    from inboxsim.invariants import listing

    document = listing()
    if as_json:
        _emit_json(document)
        return
    for entry in document["invariants"]:
        typer.echo(f"{entry['id']}  [{entry['source']}]")
        typer.echo(f"    {entry['statement']}")
        if entry["holds_under"] != "every policy":
            typer.echo(f"    expected under: {entry['holds_under']}")
    typer.echo("")
    typer.echo("Spec section 4, invariant by invariant (checked by the ids above, or not")
    typer.echo("observable through the adapter protocol, and why):")
    for spec in document["spec"]:
        typer.echo(f"4.{spec['number']}  {spec['title']}")
        if spec["checked_by"]:
            typer.echo(f"    checked by: {', '.join(spec['checked_by'])}")
        for part in spec["not_observable"]:
            typer.echo(f"    not observable: {part['statement']}")
            typer.echo(f"        {part['reason']}")


# --- check, report, diff (issue 6: the trace store and reports) -----------------

DbOption = Annotated[str, typer.Option("--db", help="The DuckDB trace store.")]


@app.command()
def check(db: DbOption = "inboxsim.duckdb", as_json: JsonFlag = False) -> None:
    """Re-judge every stored trace with the current checkers; report changed verdicts.

    Exits 1 when a stored trace now violates an invariant it did not before;
    a fixed false alarm is reported but is not a failure.
    """
    from inboxsim.commands.report import run_check
    from inboxsim.reports.check import check_lines

    document = run_check(db, os.environ.get("INBOXSIM_CHECKERS") or None)
    if as_json:
        _emit_json(document)
    else:
        for line in check_lines(document):
            typer.echo(line)
    raise typer.Exit(document["exit_code"])


@app.command()
def report(
    db: DbOption = "inboxsim.duckdb",
    out: Annotated[
        str, typer.Option("--out", help="The folder to write the report into.")
    ] = "report",
    shrink: Annotated[
        int,
        typer.Option("--shrink", help="Shrink at most N problems not yet shrunk (0: none).", min=0),
    ] = 10,
    shrink_seconds: Annotated[
        float, seconds("--shrink-seconds", "Time budget of each problem's shrink.")
    ] = 30.0,
    as_json: JsonFlag = False,
) -> None:
    """Write an HTML report with plots, a Markdown and a JSON summary, and JUnit XML.

    Failing runs are grouped into problems (by policy and violated invariant);
    each problem's first seed is shrunk to a minimal scenario with a viewer
    page, cached in the store so that the next report reuses it.
    Exits 1 when the store holds a run that violated an invariant.
    """
    from inboxsim.commands.report import run_report
    from inboxsim.procs.interrupt import Interrupted

    try:
        document, written = run_report(db, out, shrink_seconds, shrink)
    except Interrupted as stop:  # each shrink is cached as soon as it is made
        stop.kept = f"every shrunk example it finished is cached in {db}; rerun it to go on"
        raise
    if as_json:
        _emit_json(document)
    else:
        problems = len(document["problems"])
        typer.echo(
            f"{document['runs']} runs, {len(document['failing'])} failing in {problems} "
            f"problem{'s' if problems != 1 else ''}; wrote:"
        )
        for path in written:
            typer.echo(f"  {path}")
    raise typer.Exit(document["exit_code"])


@app.command()
def diff(
    base: Annotated[str, typer.Argument(help="The baseline store.")],
    new: Annotated[
        str | None, typer.Argument(help="The store to compare with it.", show_default=False)
    ] = None,
    rerun: Annotated[
        bool,
        typer.Option(
            "--rerun", help="Replay BASE's stored decisions under the current model and checkers."
        ),
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Regression report between two stores (or, with --rerun, a store and the current code).

    Exits 1 when something regressed: a seed or invariant newly failing, or a
    required probe no longer hit.
    """
    from inboxsim.commands.report import run_diff
    from inboxsim.reports.diff import diff_lines, rerun_lines

    if rerun == (new is not None):
        raise HarnessError("give BASE and NEW, or --rerun BASE")
    document = run_diff(base, new)
    if as_json:
        _emit_json(document)
    else:
        for line in rerun_lines(document) if rerun else diff_lines(document):
            typer.echo(line)
    raise typer.Exit(document["exit_code"])


# --- conformance, mutants, validate (lockstep conformance and external logs) ----


@app.command("conformance")
def conformance_command(
    adapter: Annotated[
        str | None,
        typer.Option(
            "--adapter", help="An adapter command (split as a shell would).", show_default=False
        ),
    ] = None,
    target: Annotated[
        str | None,
        typer.Option(
            "--target",
            help="A shipped target: sqlite, model-adapter or opencode.",
            show_default=False,
        ),
    ] = None,
    policy: Annotated[
        str | None,
        typer.Option(
            "--policy", help="The model's policy (default g4; g2 for opencode).", show_default=False
        ),
    ] = None,
    seeds: Annotated[
        int, typer.Option("--seeds", help="Seeded lockstep runs after the library.", min=0)
    ] = 3,
    seed_start: Annotated[int, typer.Option("--seed-start", help="The first seed.", min=0)] = 0,
    ops: Annotated[
        int, typer.Option("--ops", help="Workload operations per seeded run.", min=1)
    ] = 40,
    scenario: Annotated[
        list[str] | None,
        typer.Option(
            "--scenario",
            help="Run only these library scenarios: a name, a topic folder or a glob (repeatable).",
            show_default=False,
        ),
    ] = None,
    no_library: Annotated[
        bool, typer.Option("--no-library", help="Skip the scenario library.")
    ] = False,
    adapter_timeout: Annotated[
        float, seconds("--adapter-timeout", "Longest wait for one response, in seconds.")
    ] = 10.0,
    db: Annotated[
        str | None,
        typer.Option(
            "--db",
            help="Also write the results into this store's conformance table.",
            show_default=False,
        ),
    ] = None,
    executor: ExecutorOption = "local",
    scheduler: SchedulerOption = None,
    jobs: Annotated[int, typer.Option("--jobs", help="Worker processes for the seeds.", min=1)] = 1,
    shrink: Annotated[
        int,
        typer.Option(
            "--shrink",
            help="Shrink the first N failures through the adapter to repro files.",
            min=0,
        ),
    ] = 3,
    repro_dir: Annotated[
        str, typer.Option("--repro-dir", help="Where the minimal repro scenarios are written.")
    ] = "inboxsim-repros",
    shrink_seconds: Annotated[
        float, seconds("--shrink-seconds", "Time budget of each shrink.")
    ] = 60.0,
    concurrency: ConcurrencyOption = 1,
    free_running: Annotated[
        bool,
        typer.Option(
            "--free-running",
            help="With --concurrency: groups run without a schedule even where the adapter has "
            "pause points (a failing seed is run once more: the report says if it reproduced).",
        ),
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Lockstep against the model: the scenario library, then a seeded sweep.

    Exits 1 on any divergence, invariant violation or protocol error.
    """
    from inboxsim.conformance.check import conformance, store_results, target_command
    from inboxsim.store.store import check_writable

    if no_library and seeds == 0:
        raise HarnessError(
            "nothing to test: --no-library and --seeds 0 run no scenario and no seed"
        )
    argv, policy_name, timeout, label = target_command(adapter, target, policy, adapter_timeout)
    if db is not None:
        check_writable(db)  # a bad --db fails before the run, not after it
    result = conformance(
        argv,
        policy_name,
        seeds,
        ops=ops,
        seed_start=seed_start,
        timeout=timeout,
        scenarios=scenario or None,
        library=not no_library,
        progress=lambda msg: print(msg, file=sys.stderr),
        target_name=label,
        executor=executor,
        scheduler=scheduler,
        shrink=shrink,
        jobs=jobs,
        repro_dir=repro_dir,
        shrink_seconds=shrink_seconds,
        concurrency=concurrency,
        free_running=free_running,
    )
    batch = store_results(db, result) if db is not None else None
    if as_json:
        document = result.to_dict()
        if db is not None:
            document["db"] = db
            document["conformance_id"] = batch
        _emit_json(document)
    else:
        for line in result.lines():
            typer.echo(line)
        if db is not None:
            typer.echo(f"stored as conformance batch {batch} in {db}")
    raise typer.Exit(result.exit_code)


@app.command("mutants")
def mutants_command(
    names: Annotated[
        str | None,
        typer.Option(
            "--names", help="Comma-separated mutant names (default: all).", show_default=False
        ),
    ] = None,
    seeds: Annotated[
        int,
        typer.Option("--seeds", help="Seeded lockstep runs for mutants the library misses.", min=0),
    ] = 5,
    ops: Annotated[
        int, typer.Option("--ops", help="Workload operations per seeded run.", min=1)
    ] = 60,
    jobs: Annotated[int, typer.Option("--jobs", help="Worker processes.", min=1)] = 2,
    list_only: Annotated[bool, typer.Option("--list", help="List the mutants and exit.")] = False,
    db: Annotated[
        str | None,
        typer.Option(
            "--db",
            help="Also record the kill matrix in this store's mutants table.",
            show_default=False,
        ),
    ] = None,
    out: Annotated[
        str | None,
        typer.Option(
            "--out", help="Also write the results document (JSON) to this file.", show_default=False
        ),
    ] = None,
    no_shrink: Annotated[
        bool, typer.Option("--no-shrink", help="Do not shrink the detections.")
    ] = False,
    shrink_seconds: Annotated[
        float, seconds("--shrink-seconds", "Longest shrink of one detection, through the adapter.")
    ] = 30.0,
    as_json: JsonFlag = False,
) -> None:
    """The kill matrix: conformance against each planted bug in the SQLite inbox.

    Exits 0 when every mutant was killed by an invariant, a divergence or a
    failed scenario expectation, 1 when one survived.
    """
    from inboxsim.conformance.check import mutant_matrix
    from inboxsim.conformance.mutants import MUTANTS, matrix_document, render_matrix, summary_line

    if list_only:
        if as_json:
            _emit_json({"mutants": [vars_of(m) for m in MUTANTS.values()]})
        else:
            for m in MUTANTS.values():
                typer.echo(f"{m.name}  [{m.bug_class}]  {m.description}")
        return
    if out is not None:
        _check_out(out)  # before the run, not after it
    chosen = [n.strip() for n in names.split(",") if n.strip()] if names else None
    if db is not None:  # a bad --db fails before the campaign, not after it
        from inboxsim.store.store import check_writable

        check_writable(db)
    results = mutant_matrix(
        chosen,
        seeds,
        ops=ops,
        jobs=jobs,
        progress=lambda msg: print(msg, file=sys.stderr),
        shrink_seconds=None if no_shrink else shrink_seconds,
    )
    document = matrix_document(results, seeds=seeds, ops=ops)
    survived = document["survived"]
    if out is not None:
        _write_document(out, document)
    if db is not None:
        from inboxsim.store.mutants import kill_rows
        from inboxsim.store.store import Store

        with Store(db) as store:
            store.write_mutants(kill_rows(r.to_dict() for r in results))
    if as_json:
        _emit_json(document)
    else:
        typer.echo(render_matrix(results))
        typer.echo("")
        typer.echo(
            summary_line(document)
            + (f"; survived: {', '.join(str(s) for s in survived)}" if survived else "")
        )
        if out is not None:
            typer.echo(f"results written to {out}")
    raise typer.Exit(document["exit_code"])


def _check_out(path: str) -> Any:
    """The ``--out`` file as a Path, or a one-line error if it cannot be one."""
    from pathlib import Path

    target = Path(path)
    if target.is_dir():
        raise HarnessError(f"--out {path}: is a directory")
    if not target.parent.is_dir():
        raise HarnessError(f"--out {path}: no such folder {str(target.parent)!r}")
    return target


def _write_text(path: str, text: str) -> None:
    """Write a file the user named, or one line saying why it cannot be."""
    from pathlib import Path

    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise HarnessError(f"cannot write {path}: {exc.strerror or exc}") from None


def _write_document(path: str, document: Mapping[str, Any]) -> None:
    """Write a JSON document whole (a temporary file renamed over the target:
    a failed write never leaves half a document, nor clobbers the old one)."""
    target = _check_out(path)
    tmp = target.with_name(target.name + ".tmp")
    try:
        tmp.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise HarnessError(f"--out {path}: cannot write ({exc.strerror})") from None


def vars_of(mutant: Any) -> dict[str, Any]:
    return {"name": mutant.name, "class": mutant.bug_class, "description": mutant.description}


@app.command("validate")
def validate_command(
    file: Annotated[
        str | None, typer.Argument(help="A JSON-lines file of protocol events.", show_default=False)
    ] = None,
    opencode_db: Annotated[
        str | None,
        typer.Option(
            "--opencode-db",
            help="Judge an OpenCode database instead (opened read-only), per session.",
            show_default=False,
        ),
    ] = None,
    policy: Annotated[
        str | None,
        typer.Option(
            "--policy",
            help="The policy the log was written under (g4; g2 for --opencode-db).",
            show_default=False,
        ),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Judge a durable event log written outside the harness with every
    invariant the log alone can decide.

    Exits 1 when one is violated, 2 when the file or database is malformed.
    """
    from inboxsim.conformance.validate import validate_file

    if (file is None) == (opencode_db is None):
        raise HarnessError("give one of FILE (a JSON-lines event log) or --opencode-db PATH")
    result: Any
    if opencode_db is not None:
        from inboxsim.conformance.opencode_db import validate_db

        result = validate_db(opencode_db, policy or "g2")
    else:
        assert file is not None
        result = validate_file(file, policy or "g4")
    if as_json:
        _emit_json(result.to_dict())
    else:
        for line in result.lines():
            typer.echo(line)
    raise typer.Exit(result.exit_code)


# --- shrink (issue 5: minimal failing scenarios) ----------------------------------


@app.command()
def shrink(
    what: Annotated[str, typer.Argument(help="A failing seed, or a failing scenario file.")],
    policy: Annotated[
        str | None,
        typer.Option(
            "--policy",
            help="A policy preset name or a TOML file of fields (default: g4 for a seed, "
            "the file's own for a scenario).",
            show_default=False,
        ),
    ] = None,
    ops: OpsOption = 100,
    out: Annotated[
        str | None,
        typer.Option(
            "--out",
            help="Where to write the minimal scenario (default shrink-<policy>-<seed>.toml, "
            "or <file>-min.toml).",
            show_default=False,
        ),
    ] = None,
    max_runs: Annotated[
        int, typer.Option("--max-runs", help="Most candidate runs the shrinker may try.", min=1)
    ] = 20_000,
    time_limit: Annotated[
        float, seconds("--time-limit", "Most seconds the shrinker may spend.")
    ] = 60.0,
    target: TargetOption = "model",
    only_expected: OnlyExpectedOption = False,
    expect: Annotated[
        bool,
        typer.Option(
            "--expect",
            help="Write expect_violation: a document of a known counterexample, which "
            "`inboxsim run` passes while the violation is there (default: a regression "
            "test, which `inboxsim run` fails until the bug is fixed).",
        ),
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Shrink a failing seed (or scenario file) to a minimal scenario that fails the same way.

    Reduces the run's decision list, then the scenario's steps, while the
    same invariant is still violated, and writes the minimal run's steps, up
    to the violation, as a scenario file. By default the file is a
    regression test: `inboxsim run FILE` fails while the bug is present.
    With --expect it carries expect_violation and passes instead.
    Exits 1 when a violation was found and the scenario written, 0 when
    there is nothing to shrink (the seed violates nothing).
    """
    from pathlib import Path

    from inboxsim.search import shrink as sh

    seed: int | None = None
    try:
        seed = int(what)
    except ValueError:
        if not Path(what).is_file():
            raise HarnessError(
                f"{what!r} is neither a seed (an integer) nor a scenario file"
            ) from None
    if seed is not None:
        if seed < 0:
            raise HarnessError(f"the seed must be a non-negative integer, not {seed}")
        the_policy, options = _sim_inputs(policy or "g4", ops, target, only_expected)
        print(f"shrink: running seed {seed} under {the_policy.name}", file=sys.stderr)
        result = sh.shrink_seed(
            seed, the_policy, options, max_runs=max_runs, time_limit=time_limit, expect=expect
        )
        if result is None:
            if as_json:
                _emit_json(
                    {"seed": seed, "policy": the_policy.name, "violated": False, "written": None}
                )
            else:
                typer.echo(
                    f"seed {seed} violates no invariant under {the_policy.name}: nothing to shrink"
                )
            raise typer.Exit(int(ExitCode.OK))
        written = out or f"shrink-{the_policy.name}-{seed}.toml"
        document = {"seed": seed, "policy": the_policy.name, "violated": True, **result.document()}
    else:
        from inboxsim.model import load_policy

        if target != "model":
            raise HarnessError(f"--target {target!r} is not available yet: only 'model' is")
        the_policy = load_policy(policy) if policy is not None else None
        print(f"shrink: running scenario {what}", file=sys.stderr)
        result = sh.shrink_scenario_file(
            what, the_policy, max_runs=max_runs, time_limit=time_limit, expect=expect
        )
        if result.invariant is None:
            state = (
                "passes"
                if result.passed
                else "fails only on expectations, which shrink does not reduce"
            )
            if as_json:
                _emit_json(
                    {"file": what, "violated": False, "passed": result.passed, "written": None}
                )
            else:
                typer.echo(f"{what} violates no invariant ({state}): nothing to shrink")
            raise typer.Exit(int(ExitCode.OK if result.passed else ExitCode.TARGET_FAILED))
        written = out or str(Path(what).with_suffix("")) + "-min.toml"
        document = {"file": what, "violated": True, **result.document()}
    try:
        Path(written).write_text(result.text or "", encoding="utf-8")
    except OSError as exc:
        raise HarnessError(f"cannot write {written}: {exc.strerror}") from None
    document["written"] = written
    document["expect_violation"] = expect
    if as_json:
        _emit_json(document)
    else:
        original, final = document["original"], document["final"]

        def line(size: dict[str, Any]) -> str:
            keys = ("operations", "faults", "steps", "decisions", "scenario_steps")
            parts = [f"{size[k]} {k}" for k in keys if k in size]
            return ", ".join(parts)

        typer.echo(f"invariant: {document['invariant']}")
        typer.echo(f"original:  {line(original)}")
        typer.echo(f"shrunk:    {line(final)}")
        typer.echo(f"time:      {document['seconds']} s, {document['runs']} candidate runs")
        if document.get("also_violated"):
            typer.echo(f"note: the last step also violates {', '.join(document['also_violated'])}")
        if document.get("verified") is False:
            typer.echo("warning: the written scenario did not reproduce the violation when run")
        if expect:
            typer.echo(
                f"wrote {written}: expects the violation (inboxsim run {written} passes "
                "while it is there)"
            )
        else:
            typer.echo(
                f"wrote {written}: a regression test (inboxsim run {written} fails while the "
                f"bug is present; add --expect to write it as an expected violation)"
            )
    raise typer.Exit(int(ExitCode.TARGET_FAILED))


# --- designs (issue 10: the design-exploration report) ---------------------------


@app.command()
def designs(
    files: Annotated[
        list[str] | None, typer.Argument(help="Custom policy files (TOML).", show_default=False)
    ] = None,
    policies: Annotated[
        str | None,
        typer.Option(
            "--policies",
            help="Comma-separated presets or TOML files (default: every preset).",
            show_default=False,
        ),
    ] = None,
    seeds: Annotated[int, typer.Option("--seeds", help="Seeds per policy (0..N-1).", min=1)] = 200,
    ops: Annotated[int, typer.Option("--ops", help="Workload actions per run.", min=1)] = 60,
    depth: Annotated[int, typer.Option("--depth", help="Exploration depth.", min=0)] = 3,
    sessions: Annotated[int, typer.Option("--sessions", help="Exploration sessions.", min=1)] = 1,
    jobs: Annotated[
        int, typer.Option("--jobs", help="Worker processes (one policy each).", min=1)
    ] = 4,
    out: Annotated[str, typer.Option("--out", help="Output folder.")] = "designs",
    as_json: JsonFlag = False,
) -> None:
    """The design-exploration report: each policy swept and explored; designs.html, .md, .json.

    Exits 0 when the report was written (it is informational), 2 on bad usage.
    """
    from pathlib import Path

    from inboxsim.designs import study as ds

    specs = ds.resolve(policies, files or ())
    if not specs:
        raise HarnessError("no policies to study")
    doc, figures = ds.build(
        specs, seeds, depth, sessions, ops, jobs, progress=lambda line: print(line, file=sys.stderr)
    )
    try:
        paths = ds.write(doc, figures, Path(out))
    except OSError as exc:
        raise HarnessError(f"cannot write the report to {out}: {exc.strerror}") from None
    if as_json:
        _emit_json(
            {
                "files": [str(p) for p in paths],
                "questions": doc["questions"],
                "seconds": doc["seconds"],
            }
        )
        return
    for q in doc["questions"]:
        typer.echo(f"{q['title']}\n  {q['verdict']}")
    typer.echo(f"written: {', '.join(str(p) for p in paths)} ({doc['seconds']} s)")


# --- init-adapter (issue 20: the example adapters) --------------------------------


@app.command("init-adapter")
def init_adapter(
    folder: Annotated[str, typer.Argument(help="Where to write (created if missing).")],
    lang: Annotated[
        str, typer.Option("--lang", help="`python` (standard library) or `node` (Node's).")
    ],
    as_json: JsonFlag = False,
) -> None:
    """Start an adapter from an example: a simple durable inbox that passes conformance.

    Writes the example adapter, a README and the protocol guide into FOLDER.
    Exits 2, writing nothing, when one of those files is already there.
    """
    from inboxsim.examples import write_skeleton

    written, command = write_skeleton(lang, folder, __version__)
    if as_json:
        _emit_json({"lang": lang, "files": [str(p) for p in written], "command": command})
        return
    for path in written:
        typer.echo(f"wrote {path}")
    typer.echo(f"check it: inboxsim conformance --adapter {command!r}")


# --- entry point ------------------------------------------------------------


def _fail(reason: str, code: ExitCode = ExitCode.HARNESS_ERROR) -> int:
    """Print ``reason`` as one line on stderr and return ``code``."""
    print(f"{PROG}: error: {' '.join(reason.split())}", file=sys.stderr)
    return int(code)


def _internal_error(exc: Exception, args: Sequence[str]) -> int:
    """A bug in the harness: one line naming the exception and the file
    that holds its traceback (or, if none can be written, how to see it)."""
    import tempfile
    import traceback

    from inboxsim.procs.supervise import lasting_tempdir

    try:
        handle, path = tempfile.mkstemp(
            prefix="inboxsim-traceback-", suffix=".txt", dir=lasting_tempdir()
        )
        with os.fdopen(handle, "w", encoding="utf-8") as log:
            log.write(f"inboxsim {__version__}: {PROG} {' '.join(args)}\n")
            log.write("".join(traceback.format_exception(exc)))
        where = f"traceback in {path}"
    except OSError:
        where = f"set {TRACEBACK_ENV}=1 for the traceback"
    return _fail(f"internal error: {type(exc).__name__}: {exc} ({where})")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line and return its exit code (the console script's entry).

    Without ``argv`` (the real command line) the command runs under the
    supervisor (:mod:`inboxsim.procs.supervise`): its processes end with it,
    SIGINT and SIGTERM stop it gracefully (exit 130, 143) with one line
    saying what was kept. With ``argv`` (a caller in Python) it runs here."""
    if argv is None:
        from inboxsim.procs.supervise import run

        return run(lambda: _main(sys.argv[1:]))
    return _main(list(argv))


def _main(args: list[str]) -> int:
    from inboxsim.procs.interrupt import Interrupted, line

    try:
        result = app(args=args, prog_name=PROG, standalone_mode=False)
    except Interrupted as stop:
        print(f"{PROG}: {line(stop)}", file=sys.stderr)
        return stop.exit_code
    except HarnessError as exc:
        return _fail(str(exc), exc.exit_code)
    except typer.TyperException as exc:  # click's usage errors: no such command, bad option
        ctx = getattr(exc, "ctx", None)
        path = ctx.command_path if ctx is not None else PROG
        return _fail(f"{exc.format_message()} (see '{path} --help')")
    except typer.Abort:
        return _fail("aborted")
    except Exception as exc:  # a bug in the harness: still one line, unless asked
        if os.environ.get(TRACEBACK_ENV):
            raise
        return _internal_error(exc, args)
    # Without standalone mode, typer returns the exit code of typer.Exit (and of
    # --help) and None when a command simply returns.
    return result if isinstance(result, int) else int(ExitCode.OK)


if __name__ == "__main__":
    sys.exit(main())
