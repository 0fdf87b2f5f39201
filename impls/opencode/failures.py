"""How the OpenCode adapter fails: :class:`Fatal` ends the program with one of
its exit codes (usage, install, netns, start), :class:`Refused` is one
protocol error response; :func:`say` is its one stderr voice.

Standard library only; every other module of the adapter imports this one.
"""

from __future__ import annotations

import sys

EXIT_USAGE, EXIT_INSTALL, EXIT_NETNS, EXIT_START = 2, 4, 5, 6


def say(text: str) -> None:
    print(f"inboxsim-opencode: {text}", file=sys.stderr, flush=True)


class Fatal(Exception):
    """The adapter cannot go on: ``code`` is its exit code."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


class Refused(Exception):
    """A protocol error response: ``code`` is a protocol error code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
