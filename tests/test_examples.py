"""The example adapters (``examples/``) and ``inboxsim init-adapter``.

Each example passes ``inboxsim conformance``: every library scenario its
features allow, and a few seeded runs with real kills (the longer run is a
documented command in ``docs/protocol.md``). Its planted bug
(``INBOXSIM_EXAMPLE_BUG=1``) fails the scenario the docs show. The Node
example needs ``node``: under ``CI=true`` a missing one fails the test
(``.ci/run`` installs Debian's ``nodejs``); elsewhere it skips, saying why.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from inboxsim.cli import main
from inboxsim.examples import BUG_ENV, EXAMPLES, protocol_guide, source_path
from inboxsim.sim.conformance import conformance

SEEDS = 5
# What each example must pass, by feature: steer and queue prompts, exact and
# conflicting retries (before and after promotion), synthetic input,
# compaction, interrupt, resume, and a restart (a real kill) keeping the inbox.
REQUIRED = (
    "seed-send",
    "seed-steer",
    "seed-queue",
    "queue-fifo",
    "steers-before-queued",
    "seed-retry",
    "metadata-retry-identity",
    "delivery-change-conflict",
    "retry-exact-after-promotion",
    "retry-conflict-after-promotion",
    "id-namespace",
    "synthetic-queue",
    "synthetic-retry",
    "compaction-coalesces",
    "barrier-blocks-promotion",
    "interrupt-keeps-pending",
    "forced-resume",
    "crash-keeps-inbox",
)
LEFT_OUT = ("fork", "revert", "failpoints")  # what the examples do not list
# The scenario each planted bug breaks, and where the divergence shows.
PLANTED = {"python": ("metadata-retry-identity", "reply"), "node": ("queue-fifo", "pending s1")}


def command(lang: str, path: Path | None = None) -> list[str]:
    """The argv that runs an example (or a copy of it at ``path``)."""
    script = str(path or source_path(lang))
    if lang == "python":
        return [sys.executable, script]
    node = shutil.which("node")
    if node is None:
        if os.environ.get("CI") == "true":
            pytest.fail(
                "node is not installed: the Node example cannot be tested (.ci/run installs nodejs)"
            )
        pytest.skip("node is not installed")
    return [node, script]


@pytest.mark.parametrize("lang", sorted(EXAMPLES))
def test_example_passes_conformance(lang: str) -> None:
    report = conformance(command(lang), "g4", SEEDS, shrink=0)
    assert report.passed, "\n".join(report.lines())
    verdicts = {i.item: i for i in report.of("scenario")}
    assert [s for s in REQUIRED if verdicts[s].verdict != "held"] == []
    for item in verdicts.values():  # the rest needs a feature the example leaves out,
        left_out = any(f in item.detail for f in LEFT_OUT)  # or is another policy's
        other_policy = item.detail.endswith("break under g4")
        assert item.verdict == "held" or left_out or other_policy, item
    seeds = report.of("seed")
    assert len(seeds) == SEEDS and all(i.verdict == "held" for i in seeds)
    assert report.totals["kills"] > 0, report.totals  # restarts really happened
    untested = {i.item for i in report.of("feature")}
    assert untested == {*LEFT_OUT, "crash_op"}


@pytest.mark.parametrize("lang", sorted(EXAMPLES))
def test_planted_bug_fails_conformance(lang: str, monkeypatch: pytest.MonkeyPatch) -> None:
    scenario, where = PLANTED[lang]
    argv = command(lang)
    monkeypatch.setenv(BUG_ENV, "1")
    report = conformance(argv, "g4", 0, scenarios=[scenario], shrink=0)
    (item,) = report.of("scenario")
    assert item.verdict == "diverged" and f"{where} differs" in item.detail, item.detail
    assert report.exit_code == 1
    monkeypatch.setenv(BUG_ENV, "0")  # and the switch off is the correct inbox
    assert conformance(argv, "g4", 0, scenarios=[scenario], shrink=0).passed


@pytest.mark.parametrize("lang", sorted(EXAMPLES))
def test_init_adapter_writes_a_copy_that_conforms(
    lang: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "mine"
    assert main(["init-adapter", "--lang", lang, str(folder), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    adapter = folder / EXAMPLES[lang].name
    assert sorted(doc["files"]) == sorted(
        map(str, [adapter, folder / "README.md", folder / "protocol.md"])
    )
    assert adapter.read_text() == source_path(lang).read_text()
    assert os.access(adapter, os.X_OK)
    assert (folder / "protocol.md").read_text() == protocol_guide()
    readme = (folder / "README.md").read_text()
    assert f'inboxsim conformance --adapter "{EXAMPLES[lang].runner} {adapter.name}"' in readme
    assert doc["command"] == f"{EXAMPLES[lang].runner} {adapter}"
    report = conformance(command(lang, adapter), "g4", 1, scenarios=["seed-retry"], shrink=0)
    assert report.passed, "\n".join(report.lines())


def test_init_adapter_refuses_to_overwrite_and_bad_usage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "README.md").write_text("mine\n")
    assert main(["init-adapter", "--lang", "python", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"already there: {folder / 'README.md'}; nothing written" in err
    assert sorted(p.name for p in folder.iterdir()) == ["README.md"]
    assert (folder / "README.md").read_text() == "mine\n"
    assert main(["init-adapter", "--lang", "rust", str(tmp_path / "x")]) == 2
    assert "--lang 'rust' is not an example: one of python, node" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
    assert main(["init-adapter", str(tmp_path / "y")]) == 2  # --lang is required
    assert main(["init-adapter", "--lang", "python", str(folder / "README.md")]) == 2
    assert "is not a folder" in capsys.readouterr().err


def test_protocol_guide_is_the_docs_page() -> None:
    """The guide init-adapter copies is the repository's docs/protocol.md."""
    page = Path(__file__).resolve().parent.parent / "docs" / "protocol.md"
    if page.exists():  # a source tree (an installed wheel has only the packaged copy)
        assert protocol_guide() == page.read_text(encoding="utf-8")
    assert "## The first hour" in protocol_guide()
