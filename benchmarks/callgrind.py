"""One way to count a Python script's instructions: ``valgrind
--tool=callgrind``, which counts instructions, not seconds, so the figure is
the same whatever else the machine is doing (the benchmarks that compare
passes of a few percent use it; CPU time on a shared machine moves by more).

The environment is this one's less every ``PYTHON*`` variable, with the hash
seed fixed, so that two runs of one side hash (and iterate sets) alike; not
``-I``, which implies ``-E`` and so ignores ``PYTHONHASHSEED``.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile


def count(python: str, script: str, *args: str) -> tuple[int, str]:
    """The instructions ``python -c script args...`` ran, and what it printed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONHASHSEED"] = "0"
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]
        + [python, "-c", script, *args],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        cwd=tempfile.gettempdir(),
    )
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"{python}: callgrind failed ({done.returncode}): {done.stderr[-500:]}")
    return int(found.group(1)), done.stdout.strip()
