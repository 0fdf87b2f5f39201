"""Re-pin the trace hashes that ``tests/test_pinned_hashes.py`` checks.

    python scripts/pin_hashes.py [OUT.json]

Run it after a deliberate change of what a seed means (a model rule, the
workload, a checker that stops a run elsewhere), commit the new
``tests/pinned_hashes.json`` and say in ``CHANGELOG.md`` which change moved
the hashes and why. Needs the package installed (``pip install -e .``).

The pinning code lives beside the test that checks the pins. The tests are
not installed (they are the repository's ``tests/`` package), so this runs
them as ``python -m tests.test_pinned_hashes`` from the repository root.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

if __name__ == "__main__":
    out = [str(Path(arg).resolve()) for arg in sys.argv[1:]]  # relative to the caller's folder
    command = [sys.executable, "-m", "tests.test_pinned_hashes", *out]
    sys.exit(subprocess.run(command, cwd=ROOT, check=False).returncode)
