"""The ``inboxsim`` command (``docs/cli.md``).

Every command prints progress on stderr and its human summary on stdout, or,
with ``--json``, one JSON document on stdout instead. Exit codes are
:class:`inboxsim.errors.ExitCode`: 0 held, 1 the target failed, 2 the harness
could not do its job. :func:`main` turns usage errors and
:class:`~inboxsim.errors.HarnessError` into one line on stderr and exit 2.

This module holds the declarations only (options, their bounds, help text);
each command's work is a function of its own module under ``commands/``.
Each declaration imports that module inside its body, on purpose: start-up
time (the model, duckdb, pyarrow, matplotlib, rich's progress load only for
the command that needs them, so ``inboxsim --help`` stays fast).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
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


# --- commands ---------------------------------------------------------------


@app.command()
def policies(as_json: JsonFlag = False) -> None:
    """List the policy presets that --policy NAME accepts."""
    from inboxsim.commands import policies as command

    raise typer.Exit(command.policies(as_json))


@app.command()
def version(as_json: JsonFlag = False) -> None:
    """Print the inboxsim version (part of every trace hash)."""
    from inboxsim.commands import version as command

    raise typer.Exit(command.version(PROG, as_json))


# --- sweep and replay (the seeded scheduler) ----------------------------------

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
    from inboxsim.commands import sweep as command

    raise typer.Exit(
        command.sweep(
            seeds=seeds,
            seed_start=seed_start,
            policy=policy,
            ops=ops,
            jobs=jobs,
            db=db,
            time_budget=time_budget,
            target=target,
            only_expected=only_expected,
            executor=executor,
            scheduler=scheduler,
            resume=resume,
            as_json=as_json,
            concurrency=concurrency,
        )
    )


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
    from inboxsim.commands import replay as command

    raise typer.Exit(
        command.replay(
            seed=seed,
            policy=policy,
            ops=ops,
            target=target,
            only_expected=only_expected,
            html=html,
            as_json=as_json,
            concurrency=concurrency,
        )
    )


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
    from inboxsim.commands import explore as command

    raise typer.Exit(
        command.explore(
            sessions=sessions,
            depth=depth,
            policy=policy,
            step_limit=step_limit,
            alphabet=alphabet,
            out=out,
            invariant=invariant,
            jobs=jobs,
            pool=pool,
            as_json=as_json,
        )
    )


# --- run (scenarios) ------------------------------------------------------------


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
    html: Annotated[
        str | None,
        typer.Option(
            "--html",
            help="Also write the run as a trace viewer page (one self-contained HTML file) to "
            "this path; one scenario only. A file with group steps shows each group's requests "
            "side by side with the order found, or why none was.",
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
    from inboxsim.commands import run as command

    raise typer.Exit(
        command.run(
            files=files,
            library=library,
            policy=policy,
            adapter=adapter,
            target=target,
            adapter_timeout=adapter_timeout,
            db=db,
            as_json=as_json,
            html=html,
        )
    )


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
    from inboxsim.commands import coverage as command

    raise typer.Exit(command.coverage(out=out, check=check))


# --- invariants (the invariant checkers) ----------------------------------------


@app.command("invariants")
def list_invariants(as_json: JsonFlag = False) -> None:
    """List every invariant the checkers judge (id, statement, source), then each
    invariant of the spec's section 4: the ids that check it, and any part the
    protocol cannot observe, with the reason."""
    from inboxsim.commands import invariants as command

    raise typer.Exit(command.invariants(as_json))


# --- check, report, diff (the trace store and reports) --------------------------

DbOption = Annotated[str, typer.Option("--db", help="The DuckDB trace store.")]


@app.command()
def check(db: DbOption = "inboxsim.duckdb", as_json: JsonFlag = False) -> None:
    """Re-judge every stored trace with the current checkers; report changed verdicts.

    Exits 1 when a stored trace now violates an invariant it did not before;
    a fixed false alarm is reported but is not a failure.
    """
    from inboxsim.commands import check as command

    raise typer.Exit(command.check(db=db, as_json=as_json))


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
    from inboxsim.commands import report as command

    raise typer.Exit(
        command.report(
            db=db, out=out, shrink=shrink, shrink_seconds=shrink_seconds, as_json=as_json
        )
    )


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
    from inboxsim.commands import diff as command

    raise typer.Exit(command.diff(base=base, new=new, rerun=rerun, as_json=as_json))


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
    group_kills: Annotated[
        bool,
        typer.Option(
            "--group-kills/--no-group-kills",
            help="With --concurrency: groups also carry kills mid-group where the adapter lists "
            "group and failpoints (--no-group-kills: never inside a group).",
        ),
    ] = True,
    as_json: JsonFlag = False,
) -> None:
    """Lockstep against the model: the scenario library, then a seeded sweep.

    Exits 1 on any divergence, invariant violation or protocol error.
    """
    from inboxsim.commands import conformance as command

    raise typer.Exit(
        command.conformance(
            adapter=adapter,
            target=target,
            policy=policy,
            seeds=seeds,
            seed_start=seed_start,
            ops=ops,
            scenario=scenario,
            no_library=no_library,
            adapter_timeout=adapter_timeout,
            db=db,
            executor=executor,
            scheduler=scheduler,
            jobs=jobs,
            shrink=shrink,
            repro_dir=repro_dir,
            shrink_seconds=shrink_seconds,
            as_json=as_json,
            concurrency=concurrency,
            free_running=free_running,
            group_kills=group_kills,
        )
    )


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
    from inboxsim.commands import mutants as command

    raise typer.Exit(
        command.mutants(
            names=names,
            seeds=seeds,
            ops=ops,
            jobs=jobs,
            list_only=list_only,
            db=db,
            out=out,
            no_shrink=no_shrink,
            shrink_seconds=shrink_seconds,
            as_json=as_json,
        )
    )


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
    from inboxsim.commands import validate as command

    raise typer.Exit(
        command.validate(file=file, opencode_db=opencode_db, policy=policy, as_json=as_json)
    )


# --- shrink (minimal failing scenarios) -------------------------------------------


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
    from inboxsim.commands import shrink as command

    raise typer.Exit(
        command.shrink(
            what=what,
            policy=policy,
            ops=ops,
            out=out,
            max_runs=max_runs,
            time_limit=time_limit,
            target=target,
            only_expected=only_expected,
            expect=expect,
            as_json=as_json,
        )
    )


# --- designs (the design-exploration report) -------------------------------------


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
    from inboxsim.commands import designs as command

    raise typer.Exit(
        command.designs(
            files=files,
            policies=policies,
            seeds=seeds,
            ops=ops,
            depth=depth,
            sessions=sessions,
            jobs=jobs,
            out=out,
            as_json=as_json,
        )
    )


# --- init-adapter (the example adapters) ------------------------------------------


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
    from inboxsim.commands import init_adapter as command

    raise typer.Exit(command.init_adapter(folder=folder, lang=lang, as_json=as_json))


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
