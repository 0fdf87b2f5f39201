"""inboxsim validate: a good log from a model run, and hand-broken logs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inboxsim.cli import main
from inboxsim.model import G4
from inboxsim.sim.run import RunOptions, run_seed
from inboxsim.sim.validate import validate_file, write_events


def _model_log(path: Path, seed: int = 3) -> list[dict]:
    result = run_seed(seed, G4, RunOptions(ops=60))
    events = [ev for step in result.trace.steps for ev in step.observed.events]
    write_events(path, events)
    return [json.loads(line) for line in path.read_text().splitlines()]


def _one_session(path: Path) -> list[dict]:
    lines = [
        {"seq": 0, "type": "admitted", "time": 10, "input": "a", "data": {}},
        {"seq": 1, "type": "execution_started", "time": 11, "data": {}},
        {"seq": 2, "type": "promoted", "time": 11, "input": "a", "data": {}},
        {"seq": 3, "type": "admitted", "time": 12, "input": "b", "data": {}},
        {"seq": 4, "type": "promoted", "time": 13, "input": "b", "data": {}},
    ]
    return lines


def _write(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_good_model_logs_hold(tmp_path: Path) -> None:
    for seed in range(3):
        log = tmp_path / f"good{seed}.jsonl"
        _model_log(log, seed)
        result = validate_file(log)
        assert result.violations == [], result.lines()
        assert result.events > 0
    assert main(["validate", str(tmp_path / "good0.jsonl")]) == 0


def test_handmade_good_log(tmp_path: Path) -> None:
    result = validate_file(_write(tmp_path / "ok.jsonl", _one_session(tmp_path)))
    assert result.exit_code == 0, result.lines()
    assert "promoted-once" in result.exercised


def test_promoted_before_admitted(tmp_path: Path) -> None:
    lines = _one_session(tmp_path)
    lines[0], lines[2] = {**lines[2], "seq": 0}, {**lines[0], "seq": 2}
    result = validate_file(_write(tmp_path / "b.jsonl", lines))
    names = {v["invariant"] for v in result.violations}
    assert "promotion-after-admission" in names, result.lines()


def test_double_promotion(tmp_path: Path) -> None:
    lines = _one_session(tmp_path)
    lines.append({"seq": 5, "type": "promoted", "time": 14, "input": "b", "data": {}})
    result = validate_file(_write(tmp_path / "d.jsonl", lines))
    names = {v["invariant"] for v in result.violations}
    assert names & {"promoted-once", "promotion-after-admission"}, result.lines()


def test_seq_gap(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = _one_session(tmp_path)
    lines[4]["seq"] = 6
    path = _write(tmp_path / "g.jsonl", lines)
    result = validate_file(path)
    gap = [v for v in result.violations if v["invariant"] == "seq-contiguous"]
    assert gap and 5 in gap[0]["lines"], result.lines()
    assert main(["validate", str(path), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["violations"]


def test_time_backward_under_promotion_time(tmp_path: Path) -> None:
    lines = _one_session(tmp_path)
    lines[4]["time"] = 5
    path = _write(tmp_path / "t.jsonl", lines)
    assert any(v["invariant"] == "monotonic-visible-time" for v in validate_file(path).violations)
    # g2 stamps admission time: monotonic visible time is not expected of it
    assert not any(
        v["invariant"] == "monotonic-visible-time" for v in validate_file(path, "g2").violations
    )


@pytest.mark.parametrize(
    "line, expected",
    [
        ("not json", "line 2: not JSON"),
        ('{"seq": 1, "type": "admitted", "time": 1}', "line 2: missing 'data'"),
        ('{"seq": -1, "type": "x", "time": 1, "data": {}}', "'seq' must be a non-negative"),
        ('{"seq": 1, "type": "x", "time": "1", "data": {}}', "'time' must be an integer"),
        ("[1, 2]", "expected a JSON object"),
        ('{"seq": 1, "type": "x", "time": 1, "data": {}, "bogus": 1}', "unexpected field"),
    ],
)
def test_malformed_lines_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str, expected: str
) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text(
        '{"seq": 0, "type": "admitted", "time": 1, "input": "a", "data": {}}\n' + line + "\n"
    )
    assert main(["validate", str(path)]) == 2
    assert expected in capsys.readouterr().err


def test_missing_file_exit_2(tmp_path: Path) -> None:
    assert main(["validate", str(tmp_path / "nope.jsonl")]) == 2
