"""Exit codes and the error every command reports as "the harness could not do its job".

The contract (docs/cli.md, "What every command does"): exit 0 when everything
judged held, 1 when the target failed, 2 when the harness could not do its job,
with a one-line reason on stderr and never a bare traceback.
"""

from enum import IntEnum


class ExitCode(IntEnum):
    """The three exit codes of every ``inboxsim`` command."""

    OK = 0
    """Everything the command judged held."""
    TARGET_FAILED = 1
    """The target failed: an invariant violated, a divergence from the model,
    a run that did not settle, an adapter protocol error, a probe never hit."""
    HARNESS_ERROR = 2
    """The harness could not do its job: bad usage, unknown policy, malformed
    file, unwritable or corrupt database."""


class HarnessError(Exception):
    """The harness could not do its job (exit 2).

    Raise it with a message that says what was wrong and how to fix it; the
    command line prints that message as one line on stderr and exits 2,
    without a traceback.
    """

    exit_code = ExitCode.HARNESS_ERROR
