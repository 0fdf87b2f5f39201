"""The ``inboxsim`` command (harness-contract.md, "Command line").

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
            {"name": p.name, "summary": p.summary, "fields": p.fields()}
            for p in presets.values()
        ]
    }


@app.command()
def version(as_json: JsonFlag = False) -> None:
    """Print the inboxsim version (part of every trace hash)."""
    if as_json:
        _emit_json({"version": __version__})
    else:
        typer.echo(f"{PROG} {__version__}")


# --- entry point ------------------------------------------------------------


def _fail(reason: str, code: ExitCode = ExitCode.HARNESS_ERROR) -> int:
    """Print ``reason`` as one line on stderr and return ``code``."""
    print(f"{PROG}: error: {' '.join(reason.split())}", file=sys.stderr)
    return int(code)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line and return its exit code (the console script's entry)."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        result = app(args=args, prog_name=PROG, standalone_mode=False)
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
        name = type(exc).__name__
        return _fail(f"internal error: {name}: {exc} (set {TRACEBACK_ENV}=1 for the traceback)")
    # Without standalone mode, typer returns the exit code of typer.Exit (and of
    # --help) and None when a command simply returns.
    return result if isinstance(result, int) else int(ExitCode.OK)


if __name__ == "__main__":
    sys.exit(main())
