"""The trace viewer: a run as one self-contained HTML page
(``inboxsim replay SEED --html FILE``), its steps, views and marks."""

from __future__ import annotations

import re
from html import escape
from pathlib import Path

import pytest

from inboxsim.cli import main
from inboxsim.invariants import REGISTRY
from inboxsim.model import PRESETS, Crashed
from inboxsim.reports.plots import run_detail, swimlane_svg
from inboxsim.reports.viewer import Finding, Page, page_html, step_table, step_views
from inboxsim.sim.run import RunOptions, run_seed
from inboxsim.sim.show import message_text, pending_text

# g5 seed 36 (--ops 100): a kill and its restart, then a retry that breaks
# retry-same-receipt, citing the original admission.
SEED, POLICY = 36, "g5"


@pytest.fixture(scope="module")
def result():  # type: ignore[no-untyped-def]
    return run_seed(SEED, PRESETS[POLICY], RunOptions())


def _articles(page: str) -> dict[int, str]:
    """Each step's <article>, by index."""
    found = re.findall(r'<article class="([^"]*)" id="step-(\d+)">(.*?)</article>', page, re.S)
    return {int(n): f"{cls}\n{body}" for cls, n, body in found}


def test_replay_html_writes_the_viewer_page(result, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "seed.html"
    assert main(["replay", str(SEED), "--policy", POLICY, "--html", str(out)]) == 1
    assert f"wrote {out}" in capsys.readouterr().out
    page = out.read_text()
    steps = result.trace.steps
    articles = _articles(page)
    assert sorted(articles) == [s.index for s in steps]  # every step, in order
    crashes = [s.index for s in steps if s.kind == "crash" or isinstance(s.reply, Crashed)]
    restarts = [s.index for s in steps if s.decision == "restart"]
    assert crashes and restarts
    for i in crashes:
        assert articles[i].split("\n")[0].split()[:2] == ["step", "crash"]
    for i in restarts:
        assert "restart" in articles[i].split("\n")[0]
    (violation,) = result.violations
    at, *_ = sorted(violation.steps, reverse=True)
    assert "violating" in articles[at].split("\n")[0]
    assert escape(REGISTRY[violation.invariant].statement) in articles[at]
    assert escape(violation.message) in articles[at]
    for cited in set(violation.steps) - {at}:
        assert "cited" in articles[cited].split("\n")[0]
    assert [i for i, a in articles.items() if "violating" in a.split("\n")[0]] == [at]
    # self-contained: nothing fetched, no script
    assert not re.search(r'(src|href)="(https?:)?//', page) and "<script" not in page
    # the timeline: a titled link per mark, to its step
    marks = re.findall(r'<a class="mark" href="#step-(\d+)"><title>([^<]+)</title>', page)
    events = sum(len(s.observed.events) for s in steps)
    assert len(marks) >= len(crashes) and all(int(n) in articles for n, _ in marks)
    assert any(f"violation of {violation.invariant}" in t for _, t in marks)
    assert len(marks) <= events + len(crashes) + len(violation.steps)


def test_replay_html_to_a_folder_that_is_not_there_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "nope" / "seed.html"
    assert main(["replay", "1", "--html", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"cannot write {out}" in err


def test_the_views_after_each_step_carry_what_the_trace_recorded(result) -> None:  # type: ignore[no-untyped-def]
    """The trace records a session's views only when they change: each step
    shows the latest recorded, for every session seen so far."""
    latest_pending: dict[str, tuple[str, ...]] = {}
    latest_transcript: dict[str, tuple[str, ...]] = {}
    for step, view in zip(result.trace.steps, step_views(result.trace.steps), strict=True):
        for s, rows in step.observed.pending:
            latest_pending[s] = tuple(pending_text(r) for r in rows)
        for s, msgs in step.observed.transcript:
            latest_transcript[s] = tuple(message_text(m) for m in msgs)
        assert dict(view.pending) == {s: latest_pending.get(s, ()) for s, _ in view.pending}
        assert dict(view.transcript) == {
            s: latest_transcript.get(s, ()) for s, _ in view.transcript
        }
        assert set(dict(view.pending)) == set(latest_pending) | set(latest_transcript)
        assert view.changed == {s for s, _ in step.observed.pending} | {
            s for s, _ in step.observed.transcript
        }
        assert view.kill == (step.request is None)


def test_a_held_run_and_the_step_table(result) -> None:  # type: ignore[no-untyped-def]
    steps = result.trace.steps[:5]
    page = page_html(Page("a held run", steps))
    assert "No invariant was violated." in page
    assert all("violating" not in a.split("\n")[0] for a in _articles(page).values())
    found = Finding("retry-same-receipt", (1, 3), "it broke", "the statement")
    table = step_table(steps, [found])
    rows = re.findall(r'<tr class="([^"]*)"><td>(\d+)', table)
    assert [int(n) for _, n in rows] == [s.index for s in steps]
    assert dict((int(n), c) for c, n in rows)[3] == "violating"
    assert "cited by retry-same-receipt" in table


def test_the_timeline_svg_titles_every_mark(result) -> None:  # type: ignore[no-untyped-def]
    cited = [(v.invariant, v.steps) for v in result.violations]
    detail = run_detail(result.trace.steps, cited, POLICY, SEED)
    svg = swimlane_svg(detail)  # no links: titles only
    titled = re.findall(r'<g class="mark"><title>([^<]+)</title>', svg)
    points = sum(1 for e in detail.events if e[2] in ("admitted", "promoted", "step_started"))
    assert len(titled) >= points and "<a " not in svg
    assert svg == swimlane_svg(detail)  # byte-stable
