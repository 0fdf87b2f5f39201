"""Output files are written whole or not at all (procs/scratch.py,
``write_atomic``): a write that fails part way, by an error, an interrupt, a
hard stop or SIGKILL, leaves the old file as it was and, once the writer is
gone, no temporary file. Each failure is built by hand at a chosen point of
the write (the flush to disk), not left to timing."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from inboxsim.procs import scratch
from inboxsim.procs.interrupt import Interrupted

OLD = "the old report\n"


def _only(folder: Path) -> list[str]:
    return sorted(os.listdir(folder))


def test_a_write_replaces_the_file_whole_and_leaves_nothing_else(tmp_path: Path) -> None:
    target = tmp_path / "summary.json"
    target.write_text(OLD)
    target.chmod(0o640)
    assert scratch.write_atomic(target, '{"new": true}\n') == target
    assert target.read_text() == '{"new": true}\n'
    assert stat.S_IMODE(target.stat().st_mode) == 0o640  # an existing file keeps its mode
    scratch.write_atomic(tmp_path / "plot.png", b"\x89PNG\x00")
    assert (tmp_path / "plot.png").read_bytes() == b"\x89PNG\x00"
    assert _only(tmp_path) == ["plot.png", "summary.json"]


@pytest.mark.parametrize(
    "failure",
    [OSError(28, "No space left on device"), Interrupted(signal.SIGTERM), KeyboardInterrupt()],
    ids=["disk-full", "sigterm", "ctrl-c"],
)
def test_a_write_that_fails_part_way_keeps_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: BaseException
) -> None:
    target = tmp_path / "report.html"
    target.write_text(OLD)
    seen: list[list[str]] = []

    def fails(fd: int) -> None:  # the new text is in the temporary file, not yet renamed
        seen.append(_only(tmp_path))
        raise failure

    monkeypatch.setattr(os, "fsync", fails)
    with pytest.raises(type(failure)):
        scratch.write_atomic(target, "<html>the new report, half written")
    assert len(seen[0]) == 2 and seen[0][0].startswith(".report.html.inboxsim-")
    assert target.read_text() == OLD
    assert _only(tmp_path) == ["report.html"]


def test_a_hard_stop_removes_the_file_being_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hard stop (supervise: kill the tree, remove_stale(mine=True),
    os._exit) runs in the middle of a write: the temporary file goes."""
    target = tmp_path / "junit.xml"
    target.write_text(OLD)
    removed: list[str] = []

    def hard_stop(fd: int) -> None:
        removed.extend(p.name for p in scratch.remove_stale(tmp_path / "none", mine=True))
        raise SystemExit(130)  # os._exit in the real thing: nothing after this runs

    monkeypatch.setattr(os, "fsync", hard_stop)
    with pytest.raises(SystemExit):
        scratch.write_atomic(target, "<testsuites/>")
    assert len(removed) == 1 and removed[0].startswith(".junit.xml.inboxsim-")
    assert _only(tmp_path) == ["junit.xml"] and target.read_text() == OLD


def test_a_writer_killed_mid_write_leaves_the_old_file_and_the_next_write_cleans_up(
    tmp_path: Path,
) -> None:
    """SIGKILL at the flush: nothing of the writer runs, so its temporary file
    stays, named for its dead owner; the next write of the file removes it.
    A live writer's temporary file is never removed."""
    target = tmp_path / "designs.md"
    target.write_text(OLD)
    killed = textwrap.dedent(
        f"""
        import os, signal
        from inboxsim.procs import scratch
        os.fsync = lambda fd: os.kill(os.getpid(), signal.SIGKILL)
        scratch.write_atomic({str(target)!r}, "# the new page, never renamed")
        """
    )
    run = subprocess.run([sys.executable, "-c", killed], timeout=120)
    assert run.returncode == -signal.SIGKILL
    assert target.read_text() == OLD
    (left,) = [n for n in _only(tmp_path) if n != "designs.md"]
    assert left.startswith(".designs.md.inboxsim-")
    live = f".designs.md.inboxsim-{scratch.owner()}-0123abcd.tmp"  # this process: alive
    (tmp_path / live).write_text("another writer's")
    scratch.write_atomic(target, "# the page\n")
    assert target.read_text() == "# the page\n"
    assert _only(tmp_path) == sorted([live, "designs.md"])
