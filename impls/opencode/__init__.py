"""The released OpenCode server (``opencode-ai@1.18.33``, inbox generation G2)
as an adapter-protocol target: see ``adapter.py`` and ``docs/opencode.md``.

The adapter is a standalone program (standard library only, no ``inboxsim``
imports), started by path so that it works from a checkout or an installed
copy alike. :func:`adapter_command` is what ``--target opencode`` runs.
"""

from __future__ import annotations

import sys
from pathlib import Path

ADAPTER = Path(__file__).resolve().parent / "adapter.py"

#: ``--adapter-timeout`` to use with this target: a (re)start of the server,
#: which the first ``hello`` after a start waits for, takes 1-2 s on an idle
#: machine and 8-12 s on a busy 2-CPU one; one step of the agent loop about 1 s.
RECOMMENDED_TIMEOUT = 60.0


def adapter_command() -> list[str]:
    """The command line of the OpenCode adapter (run with ``INBOXSIM_DATA_DIR`` set)."""
    return [sys.executable, str(ADAPTER)]


def install_command() -> list[str]:
    """Download ``opencode-ai@1.18.33`` into the cache now (exit 0), or say why not (exit 4)."""
    return [sys.executable, str(ADAPTER), "--install"]


def netns_check_command() -> list[str]:
    """Exit 0 if a loopback-only network namespace can be entered here (exit 5 and why if not)."""
    return [sys.executable, str(ADAPTER), "--check-netns"]
