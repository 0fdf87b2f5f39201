"""One way to count a Python script's instructions: ``valgrind
--tool=callgrind``, which counts instructions, not seconds, so the figure is
the same whatever else the machine is doing (the benchmarks that compare
passes of a few percent use it; CPU time on a shared machine moves by more).

The environment is this one's less every ``PYTHON*`` variable, with the hash
seed fixed, so that two runs of one side hash (and iterate sets) alike; not
``-I``, which implies ``-E`` and so ignores ``PYTHONHASHSEED``. Two more
sources of run-to-run spread are shut off: address space randomisation
(``setarch -R``), since caches and sets keyed by object identity hash by
address (unchanged code at explorer depth 2 counted 883.0 M, then 934.8 M;
under ``setarch -R``, the same count twice); and OpenBLAS's spinning
threads (numpy, which pyarrow imports), counted as this process's work
(``OPENBLAS_NUM_THREADS=1``). And the package is byte-compiled first, once
per interpreter, so that no count pays for writing ``.pyc`` files (the first
count after an edit read ~35 % high).
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile

COMPILE = (
    "import compileall, os, inboxsim;"
    " compileall.compile_dir(os.path.dirname(inboxsim.__file__), quiet=1)"
)
compiled: set[str] = set()


def count(python: str, script: str, *args: str) -> tuple[int, str]:
    """The instructions ``python -c script args...`` ran, and what it printed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    if python not in compiled:
        subprocess.run([python, "-c", COMPILE], check=True, env=env, cwd=tempfile.gettempdir())
        compiled.add(python)
    env["PYTHONHASHSEED"] = "0"
    env["OPENBLAS_NUM_THREADS"] = "1"
    done = subprocess.run(
        ["setarch", "-R", "valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]
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
