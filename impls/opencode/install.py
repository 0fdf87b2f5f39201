"""The package the OpenCode adapter runs: ``opencode-ai@1.18.33``, installed
with npm into ``$INBOXSIM_OPENCODE_CACHE`` (default
``~/.cache/inboxsim/opencode``) on first use, under a file lock so that
parallel jobs download it once; the platform binary found in it.

Standard library only. No npm, or no package: :class:`Fatal` with exit 4 and
npm's own words.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

from failures import EXIT_INSTALL, Fatal, say

VERSION = "1.18.33"
PACKAGE = f"opencode-ai@{VERSION}"


def cache_dir() -> Path:
    env = os.environ.get("INBOXSIM_OPENCODE_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "inboxsim" / "opencode"


def find_binary(cache: Path) -> Path | None:
    """The platform binary of the installed package, if it is 1.18.33."""
    try:
        meta = json.loads((cache / "node_modules" / "opencode-ai" / "package.json").read_text())
    except (OSError, ValueError):
        return None
    if meta.get("version") != VERSION:
        return None
    arch = {"x86_64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(os.uname().machine, "x64")
    for name in (f"opencode-linux-{arch}", f"opencode-linux-{arch}-baseline"):
        binary = cache / "node_modules" / name / "bin" / "opencode"
        if binary.is_file() and os.access(binary, os.X_OK):
            return binary
    return None


def ensure_installed() -> Path:
    cache = cache_dir()
    binary = find_binary(cache)
    if binary is not None:
        return binary
    npm = shutil.which("npm")
    if npm is None:
        raise Fatal(
            f"cannot install {PACKAGE}: npm is not on PATH (install Node.js and npm, or put an "
            f"npm-installed {PACKAGE} in {cache}/node_modules, or set INBOXSIM_OPENCODE_CACHE)",
            EXIT_INSTALL,
        )
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # parallel jobs: one downloads, the rest wait
        binary = find_binary(cache)
        if binary is not None:
            return binary
        if not (cache / "package.json").exists():
            (cache / "package.json").write_text(
                '{"name":"inboxsim-opencode-cache","private":true}\n'
            )
        say(f"downloading {PACKAGE} with npm into {cache} (about 180 MB, once) ...")
        started = time.monotonic()
        try:
            done = subprocess.run(
                [npm, "install", "--no-audit", "--no-fund", "--loglevel=error", PACKAGE],
                cwd=cache,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=float(os.environ.get("INBOXSIM_OPENCODE_INSTALL_TIMEOUT", "900")),
            )
        except subprocess.TimeoutExpired:
            raise Fatal(f"cannot install {PACKAGE}: npm install timed out", EXIT_INSTALL) from None
        binary = find_binary(cache)
        if done.returncode != 0 or binary is None:
            tail = (done.stderr or done.stdout).strip()[-1500:]
            raise Fatal(
                f"cannot install {PACKAGE} into {cache}: npm install exited {done.returncode}"
                f"{' but no binary for this platform was found' if done.returncode == 0 else ''}"
                f":\n{tail}",
                EXIT_INSTALL,
            )
        say(f"installed {PACKAGE} in {time.monotonic() - started:.1f} s: {binary}")
        return binary
