"""The trace viewer's concurrent groups (``reports/group_view.py``): each
member of a group side by side with its invoke and complete times, the order
the group took effect and, for a group no order explains, the search's
explanation; on a recorded ``--concurrency`` trace, on ``inboxsim run FILE
--html`` of a scenario with a ``group`` step (the model, a hand-built target
that swaps two receipts, the SQLite inbox with a planted race bug), and in a
real browser. A trace without groups gets the page it always had."""

from __future__ import annotations

import json
import re
import shlex
from html import escape
from pathlib import Path

import pytest

from inboxsim.cli import main
from inboxsim.conformance.catalogue import mutant_command
from inboxsim.model import G4, PRESETS, Create, Prompt
from inboxsim.reports.conformance_view import html_parts, markdown_lines, summarize_conformance
from inboxsim.reports.group_view import (
    ILLEGAL,
    LEGAL,
    GroupRecorder,
    check_panel,
    trace_panels,
)
from inboxsim.reports.pages import findings, result_page, scenario_page, timeline
from inboxsim.reports.viewer import Page, page_html
from inboxsim.scenarios.load import load_text
from inboxsim.search.group_scenario import run_group_scenario, scenario_text
from inboxsim.search.groups import GroupCheck, GroupDriver
from inboxsim.search.linearize import describe
from inboxsim.sim.run import RunOptions, run_seed
from inboxsim.sim.show import reply_text, request_text
from inboxsim.targets.target import ModelTarget
from inboxsim.trace.record import group_of
from tests.browser import browser, console_errors
from tests.group_scenario_helpers import RACE, RACING, SwappedReceipts, retries

# Two prompts on one session, issued together (each starts the runner).
TWO_PROMPTS = scenario_text(
    [
        {"op": "create", "session": "s1"},
        {
            "op": "group",
            "requests": [{"op": "prompt", "session": "s1", "input": x, "text": x} for x in "ab"],
        },
    ],
    "g4",
    4,
    name="two-prompts",
)


def _section(page: str, key: str) -> str:
    """The group's panel, by its anchor."""
    found = re.search(rf'<details class="[^"]*" id="{key}"[^>]*>(.*?)</details>', page, re.S)
    assert found, f"no panel {key}"
    return found.group(1)


def _article(page: str, index: int) -> str:
    found = re.search(rf'<article class="[^"]*" id="step-{index}">(.*?)</article>', page, re.S)
    assert found, f"no step {index}"
    return found.group(1)


# --- a recorded trace (sweep/replay --concurrency N) -------------------------------------


@pytest.fixture(scope="module")
def concurrent():  # type: ignore[no-untyped-def]
    return run_seed(5, PRESETS["g4"], RunOptions(concurrency=4))


def test_a_concurrent_trace_shows_every_group_side_by_side(concurrent) -> None:  # type: ignore[no-untyped-def]
    page = result_page(concurrent)
    members: dict[int, list[int]] = {}
    for step in concurrent.trace.steps:
        mark = group_of(step.decision)
        if mark is not None:
            members.setdefault(mark.first, []).append(step.index)
    assert len(members) > 5
    assert f"Concurrent groups ({len(members)})" in page
    steps = {s.index: s for s in concurrent.trace.steps}
    for first, indexes in members.items():
        panel = _section(page, f"group-{first}")
        lanes = re.findall(r'<div class="lane" id="group-\d+-(\d+)">(.*?)</div></div>', panel)
        assert [int(n) for n, _ in lanes] == indexes  # one lane per member, in the order found
        for n, lane in lanes:
            assert escape(request_text(steps[int(n)])) in lane
            assert escape(reply_text(steps[int(n)])) in lane
        order = re.search(r'<ol class="order">(.*?)</ol>', panel, re.S)
        assert order is not None  # the order, each member linked to its step
        assert [int(n) for n in re.findall(r'<a href="#step-(\d+)">', order.group(1))] == indexes
        for n in indexes:  # each member's step links back to its group
            assert f'href="#group-{first}"' in _article(page, n)
    outside = [s.index for s in concurrent.trace.steps if group_of(s.decision) is None]
    assert outside and all("group-link" not in _article(page, n) for n in outside)


def test_a_replayed_seed_shows_each_group_as_the_model_served_it(
    concurrent,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    """``replay --html`` watches the model serve each group: the lanes are
    the group's own order with the model's clock, the order holds every
    decision, the runner's included; the run and its hash are the same."""
    watched: list[GroupRecorder] = []

    def model(policy, step_limit):  # type: ignore[no-untyped-def]
        watched.append(GroupRecorder(policy, step_limit))
        return watched[-1]

    again = run_seed(5, PRESETS["g4"], RunOptions(concurrency=4), target=model)
    assert again.trace_hash == concurrent.trace_hash
    (recorder,) = watched
    panels = trace_panels(again.trace.steps, (), recorder.served)
    assert len(panels) == len(recorder.served) == len(trace_panels(again.trace.steps))
    steps = {s.index: s for s in again.trace.steps}
    runner = 0
    for panel, served in zip(panels, recorder.served, strict=True):
        assert [lane.name for lane in panel.lanes] == [f"r{i}" for i in range(len(served.ops))]
        for lane, op, outcome in zip(panel.lanes, served.ops, served.reply.outcomes, strict=True):
            assert outcome is not None and lane.step is not None
            assert steps[lane.step].request == op  # each lane is its member's step
            assert (lane.invoked, lane.completed) == (outcome["invoked"], outcome["completed"])
        assert len(panel.order) == len(served.reply.pauses)  # every decision
        placed = [m.step for m in panel.order if m.lane is not None]
        assert placed == sorted(placed) == sorted(panel.steps)  # along the trace's order
        runner += sum(m.lane is None for m in panel.order)
    assert runner > 0
    out = tmp_path / "seed.html"
    args = ["replay", "5", "--policy", "g4", "--concurrency", "4", "--html", str(out)]
    assert main(args) == 0
    page = out.read_text()
    first = _section(page, panels[0].key)
    assert 'id="group-3-r0"' in first and 'class="invoked">0<' in first
    assert '<li class="runner"><code>runner s1:' in first
    assert first.count('<rect class="span"') == len(panels[0].lanes)


def test_a_group_step_that_reveals_a_violation_marks_its_group(concurrent) -> None:  # type: ignore[no-untyped-def]
    first = next(s for s in concurrent.trace.steps if group_of(s.decision) is not None)
    mark = group_of(first.decision)
    assert mark is not None
    found = [("concurrent-retry", first.index, "two receipts for one ID")]
    (panel, *_) = trace_panels(concurrent.trace.steps, found)
    assert panel.key == f"group-{mark.first}" and panel.failed
    assert panel.violations == (
        f"concurrent-retry (revealed at step {first.index}): two receipts for one ID",
    )
    html = page_html(Page("t", concurrent.trace.steps, groups=(panel,)))
    assert f'<details class="group failed" id="{panel.key}" open>' in html
    assert "violates concurrent-retry" in _section(html, panel.key)
    assert trace_panels(concurrent.trace.steps)[0].failed is False


def test_a_sequential_trace_gets_the_page_it_always_had() -> None:
    """No group, no group markup: the page is the one built without panels
    (byte for byte the page before groups existed, compared when they came)."""
    result = run_seed(36, PRESETS["g5"], RunOptions())
    assert trace_panels(result.trace.steps) == ()
    page = result_page(result)
    for mark in ('class="groups"', "group-link", "details.group", ".lanes{", "Concurrent groups"):
        assert mark not in page
    violations = [(v.invariant, v.steps, v.message) for v in result.violations]
    assert timeline(result.trace.steps, violations, result.policy, result.seed) in page
    assert f"Violation: <code>{findings(violations)[0].invariant}</code>" in page


# --- a scenario's group step, judged by the group driver ----------------------------------


def _checks(target_factory, text: str) -> tuple[object, list[tuple[int, GroupCheck | None]]]:  # type: ignore[no-untyped-def]
    checks: list[tuple[int, GroupCheck | None]] = []
    result = run_group_scenario(
        load_text(text), G4, target_factory, on_check=lambda *c: checks.append(c)
    )
    return result, checks


def test_a_legal_group_shows_its_members_times_and_the_order_found() -> None:
    result, checks = _checks(ModelTarget, TWO_PROMPTS)
    assert result.passed and [n for n, _ in checks] == [1, 2]  # type: ignore[attr-defined]
    check = checks[1][1]
    assert check is not None and check.legal
    page = scenario_page(result, checks, TWO_PROMPTS)
    panel = _section(page, "group-step-2")
    for i, r in enumerate(check.group.requests):
        lane = re.search(rf'id="group-step-2-r{i}">(.*?)</div></div>', panel)
        assert lane is not None
        assert f"<code>{escape(describe(r.op))}</code>" in lane.group(1)
        assert f'class="invoked">{r.invoked:g}<' in lane.group(1)
        assert f'class="completed">{r.completed:g}<' in lane.group(1)
    order = re.findall(
        r'<li class="(request|runner)">(?:<a[^>]*>[^<]*</a> )?<code>([^<]*)</code>', panel
    )
    assert [text for _, text in order] == [
        escape(m.describe(check.group))
        for m in check.verdict.order  # type: ignore[union-attr]
    ]
    assert {kind for kind, _ in order} == {"request", "runner"}
    assert LEGAL in panel and "explanation" not in panel
    assert '<rect class="span"' in panel  # the time axis, a bar per member
    assert "No invariant was violated." in page


def test_a_group_no_order_explains_shows_the_explanation() -> None:
    driver = GroupDriver(SwappedReceipts(G4, 4), G4, 4)
    driver.run([Create(1, session="s1")])
    ops = [Prompt(5, session="s1", input=x, text=x) for x in ("a", "b")]
    check = driver.run(ops, [0, 0])
    panel = check_panel(check, 2)
    assert panel.verdict == ILLEGAL and panel.failed and panel.order == ()
    assert [lane.name for lane in panel.lanes] == ["r0", "r1"]
    assert panel.lanes[0].reply.startswith("receipt b")  # what the target said: swapped
    html = page_html(Page("t", (), groups=(panel,)))
    section = _section(html, "group-step-2")
    assert escape(check.explain()) in section  # the harness's own explanation, whole
    assert "No order found" in section
    assert '<div class="finding"><h2>1 group not linearizable</h2>' in html
    assert '<section class="steps">' not in html  # groups alone: no empty step list


def test_run_html_of_a_race_bug_on_the_sqlite_inbox(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "race.toml"
    path.write_text(retries(RACING))
    buggy, correct = (shlex.join(mutant_command(m)[0]) for m in (RACE, None))
    out = tmp_path / "race.html"
    assert main(["run", str(path), "--adapter", buggy, "--html", str(out)]) == 1
    assert f"wrote {out}" in capsys.readouterr().out
    page = out.read_text()
    panel = _section(page, "group-step-2")
    assert "not linearizable" in panel and "No order found" in panel
    explanation = re.search(r'<pre class="explanation">(.*?)</pre>', panel, re.S)
    assert explanation is not None
    assert "r1&#x27;s reply: model receipt a (user, steer), target internal" in explanation.group(1)
    assert len(re.findall(r'<div class="lane" id="group-step-2-r\d">', panel)) == 2
    assert retries(RACING).splitlines()[1].replace('"', "&quot;") in page  # the scenario file
    assert main(["run", str(path), "--adapter", correct, "--html", str(out)]) == 0
    held = _section(out.read_text(), "group-step-2")
    assert "legal" in held and '<ol class="order">' in held and "explanation" not in held


def test_run_html_takes_one_scenario(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("a", "b"):
        (tmp_path / f"{name}.toml").write_text(retries(RACING))
    assert main(["run", str(tmp_path), "--html", str(tmp_path / "x.html")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--html writes one scenario's page: 2 scenarios" in err
    out = tmp_path / "nope" / "x.html"
    assert main(["run", str(tmp_path / "a.toml"), "--html", str(out)]) == 2
    assert f"cannot write {out}" in capsys.readouterr().err


def test_run_html_of_a_plain_scenario_and_of_a_kill_between_groups(tmp_path: Path) -> None:
    plain = tmp_path / "plain.toml"
    plain.write_text(scenario_text([{"op": "create", "session": "s1"}], "g4", 4, name="plain"))
    out = tmp_path / "plain.html"
    assert main(["run", str(plain), "--html", str(out)]) == 0
    page = out.read_text()
    assert '<section class="steps">' in page and 'id="step-0"' in page  # its trace's steps
    assert "Concurrent groups" not in page and "name = &quot;plain&quot;" in page
    killed = TWO_PROMPTS.replace(
        '[[step]]\nop = "group"', '[[step]]\nkill = true\n\n[[step]]\nop = "group"'
    )
    assert killed != TWO_PROMPTS
    result, checks = _checks(ModelTarget, killed)
    assert result.passed and [c is None for _, c in checks] == [False, True, False]  # type: ignore[attr-defined]
    page = scenario_page(result, checks, killed)
    assert "Step 2: kill (the target restarted)" in _section(page, "group-step-2")
    assert "Concurrent groups (3)" in page and "No invariant was violated." in page


# --- a conformance seed whose group no order explains: the report, for CI ----------------


def test_the_conformance_report_shows_a_failing_group_and_its_explanation() -> None:
    driver = GroupDriver(SwappedReceipts(G4, 4), G4, 4)
    driver.run([Create(1, session="s1")])
    ops = [Prompt(5, session="s1", input=x, text=x) for x in ("a", "b")]
    check = driver.run(ops, [0, 0])
    divergence = {  # NotLinearizable.to_dict(), as conformance --db stores it
        "step": 4,
        "request": {"op": "group", "requests": [op.to_wire() for op in ops]},
        "where": "group not linearizable",
        "model": None,
        "target": None,
        "history": ["create session=s1"],
        "explanation": check.explain(),
    }
    failure = {"key": "diverged:group:", "divergence": divergence}
    row = (1, "sqlite", "g4", "seed", "7", "diverged", "x", "inboxsim conformance ...", 1.0, 9)
    (batch,) = summarize_conformance([(*row, json.dumps(failure))])
    (problem,) = batch["problems"]
    html = "".join(html_parts([batch]))
    section = _section(html, "conformance-group-4")
    lanes = re.findall(r'<div class="lane" id="conformance-group-4-r\d">(.*?)</div>', section)
    assert len(lanes) == 2 and all("prompt" in lane for lane in lanes)  # side by side
    assert escape(check.explain()) in section and "No order found" in section
    assert 'class="sides"' not in html  # no empty model/target table
    markdown = "\n".join(markdown_lines([batch]))
    assert "\n".join(check.explain().splitlines()) in markdown  # the CI summary has it whole
    assert problem["divergence"]["explanation"] == check.explain()  # and the JSON


# --- in a real browser ---------------------------------------------------------------------


def test_a_failing_group_page_in_headless_chromium(tmp_path: Path) -> None:
    result, checks = _checks(SwappedReceipts, TWO_PROMPTS)
    assert not result.passed  # type: ignore[attr-defined]
    out = tmp_path / "group.html"
    out.write_text(scenario_page(result, checks, TWO_PROMPTS))
    driver = browser(tmp_path)
    try:
        driver.set_window_size(1300, 1400)
        driver.get(out.as_uri())
        assert console_errors(driver) == []
        (failed,) = driver.find_elements("css selector", "details.group.failed")
        assert failed.get_attribute("open") is not None
        lanes = failed.find_elements("css selector", ".lane")
        assert [lane.find_element("css selector", ".name").text for lane in lanes] == ["r0", "r1"]
        assert all(lane.is_displayed() for lane in lanes)
        tops = {lane.location["y"] for lane in lanes}
        assert len(tops) == 1  # side by side
        assert "not linearizable" in failed.find_element("css selector", "pre.explanation").text
        bars = failed.find_elements("css selector", ".lanes-svg svg rect.span title")
        assert len(bars) == 2 and all(b.get_attribute("textContent") for b in bars)
        driver.save_screenshot(str(tmp_path / "group.png"))
    finally:
        driver.quit()
    assert (tmp_path / "group.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
