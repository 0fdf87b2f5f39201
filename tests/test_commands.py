"""The commands' words, pinned where no other test pins them whole (what
``shrink`` prints, ``coverage``'s lines, ``replay --html``'s line), and every
kind of output file written whole: a write that fails leaves the old file
and no temporary file, with one line naming the file (commands/output.py,
procs/scratch.py)."""

from __future__ import annotations

import errno
import json
import os
import re
from pathlib import Path

import pytest

from inboxsim import cli

LIBRARY = Path(cli.__file__).parent / "scenarios" / "library"
BARRIER = LIBRARY / "barrier" / "barrier-blocks-promotion.toml"
OLD = "the old file\n"


def _disk_full(monkeypatch: pytest.MonkeyPatch) -> None:
    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)


# --- shrink's words ----------------------------------------------------------------


def test_shrink_summary_of_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "min.toml"
    assert cli.main(["shrink", str(BARRIER), "--policy", "g5", "--out", str(out)]) == 1
    captured = capsys.readouterr()
    assert captured.err == f"shrink: running scenario {BARRIER}\n"
    sizes = r"\d+ operations, \d+ faults, \d+ steps, \d+ scenario_steps"
    pattern = (
        r"invariant: barrier-blocks-promotion\n"
        rf"original:  {sizes}\n"
        rf"shrunk:    {sizes}\n"
        r"time:      [0-9.]+ s, \d+ candidate runs\n"
        rf"wrote {re.escape(str(out))}: a regression test \(inboxsim run {re.escape(str(out))} "
        r"fails while the bug is present; add --expect to write it as an expected violation\)\n"
    )
    assert re.fullmatch(pattern, captured.out), captured.out
    assert "[[step]]" in out.read_text()


def test_shrink_json_of_a_file_with_expect(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "doc.toml"
    args = ["shrink", str(BARRIER), "--policy", "g5", "--out", str(out), "--expect", "--json"]
    assert cli.main(args) == 1
    doc = json.loads(capsys.readouterr().out)
    assert list(doc) == [
        "file", "violated", "invariant", "passed", "original", "final", "runs", "seconds",
        "verified", "written", "expect_violation",
    ]  # fmt: skip
    assert (doc["file"], doc["violated"], doc["written"], doc["expect_violation"]) == (
        str(BARRIER), True, str(out), True
    )  # fmt: skip


def test_shrink_nothing_to_shrink_words(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["shrink", "0", "--policy", "g4", "--ops", "20", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "seed": 0, "policy": "g4", "violated": False, "written": None
    }  # fmt: skip
    assert cli.main(["shrink", str(BARRIER), "--policy", "g4"]) == 0
    assert capsys.readouterr().out == (
        f"{BARRIER} violates no invariant (passes): nothing to shrink\n"
    )
    assert cli.main(["shrink", str(BARRIER), "--policy", "g4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "file": str(BARRIER), "violated": False, "passed": True, "written": None
    }  # fmt: skip


def test_shrink_that_cannot_write_keeps_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "min.toml"
    out.write_text(OLD)
    _disk_full(monkeypatch)
    assert cli.main(["shrink", str(BARRIER), "--policy", "g5", "--out", str(out)]) == 2
    err = capsys.readouterr().err.splitlines()[-1]
    assert err == f"inboxsim: error: cannot write {out}: No space left on device"
    assert out.read_text() == OLD and os.listdir(tmp_path) == ["min.toml"]


# --- coverage's words -------------------------------------------------------------


def test_coverage_writes_checks_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "coverage.md"
    assert cli.main(["coverage", "--out", str(page)]) == 0
    assert capsys.readouterr().err == f"coverage: {page} written\n"
    assert cli.main(["coverage", "--out", str(page), "--check"]) == 0
    assert capsys.readouterr().err == f"coverage: {page} is current\n"
    assert cli.main(["coverage", "--out", str(page)]) == 0
    assert capsys.readouterr().err == f"coverage: {page} is current\n"
    page.write_text(OLD)
    assert cli.main(["coverage", "--out", str(page), "--check"]) == 1
    assert capsys.readouterr().err == (
        f"coverage: {page} is not current: inboxsim coverage --out {page}\n"
    )
    assert page.read_text() == OLD  # --check writes nothing
    _disk_full(monkeypatch)
    assert cli.main(["coverage", "--out", str(page)]) == 2
    assert capsys.readouterr().err == (
        f"inboxsim: error: --out {page}: cannot write it: No space left on device\n"
    )
    assert page.read_text() == OLD and os.listdir(tmp_path) == ["coverage.md"]


# --- replay --html ----------------------------------------------------------------


def test_replay_html_line_and_a_failed_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "run.html"
    assert cli.main(["replay", "1", "--ops", "20", "--html", str(page)]) == 0
    assert capsys.readouterr().out == f"seed 1 (g4): held; wrote {page}\n"
    written = page.read_text()
    assert written.startswith("<!DOCTYPE html>")
    _disk_full(monkeypatch)
    assert cli.main(["replay", "1", "--ops", "20", "--html", str(page)]) == 2
    assert capsys.readouterr().err == (
        f"inboxsim: error: cannot write {page}: No space left on device\n"
    )
    assert page.read_text() == written and os.listdir(tmp_path) == ["run.html"]


# --- init-adapter -----------------------------------------------------------------


def test_init_adapter_that_cannot_write_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "adapter"
    _disk_full(monkeypatch)
    assert cli.main(["init-adapter", str(folder), "--lang", "python"]) == 2
    assert capsys.readouterr().err == (
        f"inboxsim: error: init-adapter: cannot write into {folder}: No space left on device\n"
    )
    assert os.listdir(folder) == []
