"""Every command that opens a store gives one line and exit 2 for a missing,
corrupt, truncated, locked or misplaced (a directory) database file."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from inboxsim.cli import main
from inboxsim.scenarios.load import library_paths

SCENARIO = str(library_paths()[0])

# command -> argv builder; READERS need the file to exist, WRITERS create it.
READERS = {
    "check": lambda db, tmp: ["check", "--db", db],
    "report": lambda db, tmp: ["report", "--db", db, "--out", str(tmp / "out")],
    "diff": lambda db, tmp: ["diff", db, db],
    "diff-new": lambda db, tmp: ["diff", str(tmp / "good.duckdb"), db],
    "diff --rerun": lambda db, tmp: ["diff", "--rerun", db],
}
WRITERS = {
    "run --db": lambda db, tmp: ["run", SCENARIO, "--db", db],
    "sweep": lambda db, tmp: ["sweep", "--seeds", "1", "--ops", "5", "--jobs", "1", "--db", db],
    "mutants --db": lambda db, tmp: ["mutants", "--names", "volatile-inbox", "--db", db],
}
ALL = {**READERS, **WRITERS}


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real store (a few scenario runs), big enough that truncating it
    leaves a file that opens and fails on a later read."""
    folder = tmp_path_factory.mktemp("good")
    db = folder / "good.duckdb"
    files = [str(p) for p in library_paths()[:6]]
    assert main(["run", *files, "--db", str(db)]) == 0
    return db


def _one_line(capsys: pytest.CaptureFixture[str], *reasons: str) -> str:
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1, err
    assert any(r in err[0] for r in reasons), err[0]
    assert "internal error" not in err[0]
    return err[0]


def _setup(tmp: Path, good: Path) -> None:
    shutil.copy(good, tmp / "good.duckdb")


@pytest.mark.parametrize("command", sorted(READERS))
def test_missing(
    command: str, tmp_path: Path, good: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _setup(tmp_path, good)
    assert main(READERS[command](str(tmp_path / "none.duckdb"), tmp_path)) == 2
    _one_line(capsys, "does not exist")


@pytest.mark.parametrize("command", sorted(ALL))
def test_corrupt_and_directory(
    command: str, tmp_path: Path, good: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _setup(tmp_path, good)
    junk = tmp_path / "junk.duckdb"
    junk.write_bytes(os.urandom(8192))
    assert main(ALL[command](str(junk), tmp_path)) == 2
    _one_line(capsys, "not a readable DuckDB file")
    folder = tmp_path / "folder.duckdb"
    folder.mkdir()
    assert main(ALL[command](str(folder), tmp_path)) == 2
    _one_line(capsys, "is a directory")


@pytest.mark.parametrize("command", sorted(READERS))
def test_truncated(
    command: str, tmp_path: Path, good: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _setup(tmp_path, good)
    cut = tmp_path / "cut.duckdb"
    shutil.copy(good, cut)
    with cut.open("r+b") as f:
        f.truncate(cut.stat().st_size * 3 // 4)
    assert main(READERS[command](str(cut), tmp_path)) == 2
    _one_line(capsys, "truncated", "not a readable DuckDB file")


@pytest.fixture()
def locked(tmp_path: Path, good: Path) -> Iterator[str]:
    path = tmp_path / "locked.duckdb"
    shutil.copy(good, path)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import duckdb, time; c = duckdb.connect({str(path)!r}); "
            "print('held', flush=True); time.sleep(120)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        yield str(path)
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.parametrize("command", sorted(ALL))
def test_locked(
    command: str, locked: str, tmp_path: Path, good: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _setup(tmp_path, good)
    assert main(ALL[command](locked, tmp_path)) == 2
    line = _one_line(capsys, "is locked by another process (PID")
    assert locked in line
