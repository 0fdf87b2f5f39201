"""The previous release beside this checkout: one benchmark run measures both.

A benchmark compares the code in this checkout with a release the user names
by a git ref (``--base perf-base-0.2.0``), never with old code kept in the
tree. The release is built from the repository itself: ``git archive`` of
the ref into a folder, a virtual environment there, ``pip install`` of the
archive. Each side then runs the *same* measuring script in a subprocess of
its own interpreter (this checkout's under ``sys.executable``), so both pay
the same start-up and neither shares a cache with the other.

- **Dependencies are shared.** The release's environment reads this
  environment's site-packages through a ``.pth`` path line (``pip install
  --no-deps``): the same duckdb, hypothesis and Python on both sides, so a
  ratio measures inboxsim's own code. A path line does not run that
  folder's ``.pth`` hooks, so this checkout's editable install stays
  invisible there, and the release's own ``inboxsim`` comes first on its
  path.
- **Where it is built.** A temporary folder, removed afterwards (also on
  Ctrl-C), unless ``--base-keep DIR`` names a folder to keep it in: then
  ``DIR/<commit>`` is reused by later runs (a ``ready`` file, written last,
  marks a finished build).
- **What a measurement holds.** The script's own JSON (its last line of
  output), the wall time, the CPU time of the subprocess and every worker it
  waited for (``wait4``), and the load average before and after: on a shared
  machine the CPU time is what the work cost, the wall time an upper bound.
  ``Side.start`` runs sides at once (each one's CPU time is still its own):
  both then run under the same load.

Use from a benchmark::

    parser = argparse.ArgumentParser(); baseline.add_arguments(parser)
    with baseline.sides(args) as sides:          # [this checkout, the release]
        for side in sides:
            m = side.run(SCRIPT, {"depth": 4})    # a Measured
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import venv
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import inboxsim

REPOSITORY = Path(inboxsim.__file__).resolve().parent  # the repository root is the package


@dataclass
class Measured:
    """One run of a measuring script on one side."""

    side: str
    result: dict[str, Any]
    wall: float
    cpu: float  # the subprocess and the workers it waited for
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float]

    def load_text(self) -> str:
        return f"load {self.load_before[0]:.1f} -> {self.load_after[0]:.1f}"


@dataclass
class Side:
    """An interpreter with an inboxsim installed: this checkout or a release."""

    label: str
    python: str
    version: str = ""
    runs: list[Measured] = field(default_factory=list)

    def run(self, script: str, args: dict[str, Any], cwd: str | None = None) -> Measured:
        """Run ``script`` (Python source) with ``args`` as JSON in ``sys.argv[1]``;
        its last line of standard output is its JSON result. Standard error
        (progress) goes to this process's."""
        return self.start(script, args, cwd).wait()

    def start(self, script: str, args: dict[str, Any], cwd: str | None = None) -> Running:
        """:meth:`run` started, not waited for: several sides may run at once
        (each one's CPU time is its own, read when it is waited for)."""
        output = tempfile.TemporaryFile(mode="w+")
        load_before = os.getloadavg()
        started = time.perf_counter()
        process = subprocess.Popen(
            [self.python, "-I", "-c", script, json.dumps(args)],
            stdout=output,
            text=True,
            cwd=cwd or tempfile.gettempdir(),
        )
        return Running(self, process, output, started, load_before)


@dataclass
class Running:
    """A measuring script started on one side (:meth:`Side.start`)."""

    side: Side
    process: subprocess.Popen[str]
    output: Any  # the script's standard output, a temporary file
    started: float
    load_before: tuple[float, float, float]

    def wait(self) -> Measured:
        """Its measurement, once it has exited: the CPU time is this child's
        and the workers it waited for (``wait4``), whatever else runs."""
        _, status, usage = os.wait4(self.process.pid, 0)
        wall = time.perf_counter() - self.started
        self.process.returncode = code = os.waitstatus_to_exitcode(status)
        if code != 0:
            raise SystemExit(f"{self.side.label}: the measuring script exited {code}")
        self.output.seek(0)
        lines = self.output.read().strip().splitlines()
        self.output.close()
        cpu = usage.ru_utime + usage.ru_stime
        measured = Measured(
            self.side.label, json.loads(lines[-1]), wall, cpu, self.load_before, os.getloadavg()
        )
        self.side.runs.append(measured)
        return measured

    def stop(self) -> None:
        """Kill it unless it was waited for (another side failed, or Ctrl-C)."""
        if self.process.returncode is None:
            self.process.kill()
            self.process.wait()
            self.output.close()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--base",
        metavar="REF",
        help="also measure this git ref (a tag, branch or commit of this repository), "
        "installed in its own virtual environment, side by side",
    )
    parser.add_argument(
        "--base-keep",
        metavar="DIR",
        help="build the --base environment in DIR/<commit> and keep it for later runs "
        "(default: a temporary folder, removed afterwards)",
    )


def current() -> Side:
    return Side("this checkout", sys.executable, _version(sys.executable))


@contextmanager
def sides(args: argparse.Namespace) -> Iterator[list[Side]]:
    """This checkout, then (with ``--base``) the release: the sides to measure."""
    if not args.base:
        yield [current()]
        return
    with release(args.base, Path(args.base_keep) if args.base_keep else None) as base:
        yield [current(), base]


@contextmanager
def release(ref: str, keep: Path | None = None) -> Iterator[Side]:
    """The release at ``ref``, installed in its own virtual environment."""
    commit = _commit(ref)
    if keep is not None:
        folder = keep / commit[:12]
        if not (folder / "ready").exists():
            shutil.rmtree(folder, ignore_errors=True)
            _build(commit, folder)
        yield _side(ref, commit, folder)
        return
    with tempfile.TemporaryDirectory(prefix="inboxsim-base-") as temp:
        folder = Path(temp)
        _build(commit, folder)
        yield _side(ref, commit, folder)


def _side(ref: str, commit: str, folder: Path) -> Side:
    python = str(folder / "venv" / "bin" / "python")
    return Side(f"{ref} ({commit[:7]})", python, _version(python))


# Releases by name. A tag is not in every clone (a CI checkout or a fresh
# clone of main may carry none), so the names the README's commands use are
# written here with their commits; any other git ref is resolved by git.
RELEASES = {"perf-base-0.2.0": "f6145d60fc5fa1418f27d17db77613e7c574833c"}


def _commit(ref: str) -> str:
    ref = RELEASES.get(ref, ref)
    done = subprocess.run(
        ["git", "-C", str(REPOSITORY), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"--base {ref}: not a commit of the repository at {REPOSITORY}")
    return done.stdout.strip()


def _build(commit: str, folder: Path) -> None:
    print(f"building the base {commit[:12]} in {folder} ...", file=sys.stderr, flush=True)
    source = folder / "src"
    source.mkdir(parents=True)
    archive = subprocess.Popen(
        ["git", "-C", str(REPOSITORY), "archive", commit], stdout=subprocess.PIPE
    )
    subprocess.run(["tar", "-x", "-C", str(source)], stdin=archive.stdout, check=True)
    assert archive.stdout is not None
    archive.stdout.close()
    if archive.wait() != 0:
        raise SystemExit(f"git archive {commit} failed")
    venv.EnvBuilder(with_pip=True).create(folder / "venv")
    python = folder / "venv" / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    shared = [p for p in sys.path if p.endswith("site-packages") and os.path.isdir(p)]
    Path(site, "_inboxsim_bench_shared.pth").write_text("".join(p + "\n" for p in shared))
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-deps", str(source)], check=True
    )
    (folder / "ready").write_text(commit + "\n")


def _version(python: str) -> str:
    done = subprocess.run(
        [python, "-I", "-c", "import importlib.metadata as m; print(m.version('inboxsim'))"],
        capture_output=True,
        text=True,
        check=False,
        cwd=tempfile.gettempdir(),
    )
    return done.stdout.strip() or "?"


def ratio(new: float, old: float) -> str:
    """``old / new`` as a speed-up factor ('3.20x faster'), or a slow-down."""
    if new <= 0 or old <= 0:
        return "n/a"
    factor = old / new
    return f"{factor:.2f}x faster" if factor >= 1 else f"{1 / factor:.2f}x slower"
