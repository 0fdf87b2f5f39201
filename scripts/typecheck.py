"""mypy --strict on the package, as CI runs it: ``python scripts/typecheck.py``.

The repository root *is* the package ``inboxsim`` (pyproject.toml:
``package-dir = {"inboxsim" = "."}``), so its folder carries whatever name the
clone has, and ``mypy .`` from the root would name every module after that
folder (``habits.model.apply``) and fail to resolve ``inboxsim.*`` imports.
This script links the root as ``inboxsim`` in a temporary folder and runs
``mypy -p inboxsim`` from there, so that mypy sees the source tree under the
name it is installed as, with the settings of ``[tool.mypy]``.

Then it checks ``impls/sqlite_inbox`` and ``impls/opencode`` a second time the
way Python runs them: standalone programs (``python impls/NAME/adapter.py``)
whose folder is their import root, their modules importing each other by bare
name. The package run skips them (``[tool.mypy] exclude``): under
``inboxsim.impls.NAME`` those bare imports do not resolve.

Extra arguments go to both mypy runs. The exit status is mypy's (0 clean,
1 errors found, 2 mypy could not run).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "pyproject.toml"
STANDALONE = (ROOT / "impls" / "sqlite_inbox", ROOT / "impls" / "opencode")


def mypy(args: list[str], cwd: Path, env_path: Path | None = None) -> int:
    env = None
    if env_path is not None:
        import os

        env = {**os.environ, "MYPYPATH": str(env_path)}
    command = [sys.executable, "-m", "mypy", "--config-file", str(CONFIG), *args]
    return subprocess.run(command, cwd=cwd, env=env, check=False).returncode


def main(extra: list[str]) -> int:
    with tempfile.TemporaryDirectory(prefix="inboxsim-mypy-") as tmp:
        (Path(tmp) / "inboxsim").symlink_to(ROOT, target_is_directory=True)
        package = mypy(["-p", "inboxsim", *extra], Path(tmp))
    worst = package
    for folder in STANDALONE:  # one run each: both have an ``adapter`` module
        programs = sorted(
            str(p.relative_to(ROOT)) for p in folder.glob("*.py") if p.name != "__init__.py"
        )
        standalone = mypy(["--explicit-package-bases", *extra, *programs], ROOT, env_path=folder)
        worst = max(worst, standalone)
    return worst


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
