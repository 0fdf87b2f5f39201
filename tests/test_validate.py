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


@pytest.mark.parametrize("text", ["", "\n\n", "# a comment, no event\n"])
def test_a_log_without_events_judges_nothing_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    """Was HELD, exit 0: a log with nothing in it is no pass."""
    path = tmp_path / "empty.jsonl"
    path.write_text(text)
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds no event (nothing to judge)" in err, err


# --- --opencode-db: a hand-made OpenCode database --------------------------------

OPENCODE_SCHEMA = """
CREATE TABLE event (id text PRIMARY KEY, aggregate_id text NOT NULL, seq integer NOT NULL,
                    type text NOT NULL, data text NOT NULL);
CREATE TABLE session_input (id text PRIMARY KEY, session_id text NOT NULL, prompt text NOT NULL,
                            delivery text NOT NULL, admitted_seq integer NOT NULL,
                            promoted_seq integer, time_created integer NOT NULL);
"""


def _opencode_db(path: Path, events: list[tuple], rows: list[tuple]) -> Path:
    """A database with OpenCode 1.18.33's two tables: events (session, seq, type,
    message, delivery) and session_input rows (message, session, delivery,
    admitted_seq, promoted_seq)."""
    import sqlite3

    con = sqlite3.connect(path)
    con.executescript(OPENCODE_SCHEMA)
    for n, (session, seq, kind, message, delivery) in enumerate(events):
        data: dict = {"timestamp": 1000 + n, "sessionID": session}
        if message is not None:
            data["messageID"] = message
        if delivery is not None:
            data["delivery"] = delivery
        con.execute(
            "INSERT INTO event VALUES (?, ?, ?, ?, ?)",
            (f"evt_{n}", session, seq, kind, json.dumps(data)),
        )
    for message, session, delivery, admitted, promoted in rows:
        con.execute(
            "INSERT INTO session_input VALUES (?, ?, '{}', ?, ?, ?, 0)",
            (message, session, delivery, admitted, promoted),
        )
    con.commit()
    con.close()
    return path


GOOD_EVENTS = [
    ("ses_1", 0, "session.created.1", None, None),
    ("ses_1", 1, "session.next.prompt.admitted.1", "msg_a", "steer"),
    ("ses_1", 2, "session.next.prompted.1", "msg_a", "steer"),
    ("ses_1", 3, "session.next.step.started.1", None, None),
    ("ses_1", 4, "session.next.step.ended.2", None, None),
    ("ses_1", 5, "session.next.prompt.admitted.1", "msg_b", "queue"),
    ("ses_2", 0, "session.created.1", None, None),
]
GOOD_ROWS = [("msg_a", "ses_1", "steer", 1, 2), ("msg_b", "ses_1", "queue", 5, None)]


def test_a_good_opencode_db_holds_and_is_not_modified(tmp_path: Path) -> None:
    from inboxsim.sim.opencode_db import validate_db

    db = _opencode_db(tmp_path / "opencode.db", GOOD_EVENTS, GOOD_ROWS)
    before = (db.read_bytes(), db.stat().st_mtime_ns)
    result = validate_db(db)
    assert result.exit_code == 0, result.lines()
    assert [s.sessions for s in result.sessions] == [["ses_1"], ["ses_2"]]
    assert {"promoted-once", "admission-projects-row", "seq-contiguous"} <= set(
        result.sessions[0].exercised
    )
    assert (db.read_bytes(), db.stat().st_mtime_ns) == before
    assert main(["validate", "--opencode-db", str(db)]) == 0


@pytest.mark.parametrize(
    ("events", "rows", "invariant"),
    [
        # promoted twice
        (
            GOOD_EVENTS + [("ses_1", 6, "session.next.prompted.1", "msg_a", "steer")],
            GOOD_ROWS,
            "promoted-once",
        ),
        # a gap in the seqs
        (
            [e if e[1] != 5 else (*e[:1], 7, *e[2:]) for e in GOOD_EVENTS],
            GOOD_ROWS,
            "seq-contiguous",
        ),
        # the projection says promoted, the log does not
        (GOOD_EVENTS, [GOOD_ROWS[0], ("msg_b", "ses_1", "queue", 5, 6)], "replay-matches-views"),
        # an admission without its row
        (GOOD_EVENTS, GOOD_ROWS[:1], "admission-projects-row"),
    ],
)
def test_a_broken_opencode_db_is_reported_per_session(
    tmp_path: Path, events: list[tuple], rows: list[tuple], invariant: str
) -> None:
    from inboxsim.sim.opencode_db import validate_db

    db = _opencode_db(tmp_path / "opencode.db", events, rows)
    result = validate_db(db)
    bad = {s.sessions[0]: {v["invariant"] for v in s.violations} for s in result.sessions}
    assert invariant in bad["ses_1"], result.lines()
    assert bad["ses_2"] == set()
    assert result.exit_code == 1
    assert main(["validate", "--opencode-db", str(db)]) == 1


# a1 and b1 answered, q1 parked; a revert to a1 committed (1.18.33 keeps a1,
# deletes b1's and q1's rows); q1 admitted again after it.
REVERT_EVENTS = [
    ("ses_1", 0, "session.created.1", None, None),
    ("ses_1", 1, "session.next.prompt.admitted.1", "msg_a1", "steer"),
    ("ses_1", 2, "session.next.prompted.1", "msg_a1", "steer"),
    ("ses_1", 3, "session.next.step.started.1", None, None),
    ("ses_1", 4, "session.next.step.ended.2", None, None),
    ("ses_1", 5, "session.next.prompt.admitted.1", "msg_b1", "steer"),
    ("ses_1", 6, "session.next.prompted.1", "msg_b1", "steer"),
    ("ses_1", 7, "session.next.step.started.1", None, None),
    ("ses_1", 8, "session.next.step.ended.2", None, None),
    ("ses_1", 9, "session.next.prompt.admitted.1", "msg_q1", "queue"),
    ("ses_1", 10, "session.next.revert.staged.1", None, None),
    ("ses_1", 11, "session.next.revert.committed.1", "msg_a1", None),
    ("ses_1", 12, "session.next.prompt.admitted.1", "msg_q1", "queue"),
]
REVERT_ROWS = [("msg_a1", "ses_1", "steer", 1, 2), ("msg_q1", "ses_1", "queue", 12, None)]


def test_an_opencode_db_with_a_committed_revert(tmp_path: Path) -> None:
    """The rows a commit deleted are not missing, and an ID it discarded may
    be admitted again; a row the commit should have deleted is reported."""
    from inboxsim.sim.opencode_db import validate_db

    db = _opencode_db(tmp_path / "opencode.db", REVERT_EVENTS, REVERT_ROWS)
    result = validate_db(db)
    assert result.exit_code == 0, result.lines()
    assert {"admission-fresh-id", "promoted-once", "admission-projects-row"} <= set(
        result.sessions[0].exercised
    )
    kept_b1 = tmp_path / "kept.db"
    _opencode_db(kept_b1, REVERT_EVENTS, [*REVERT_ROWS, ("msg_b1", "ses_1", "steer", 5, 6)])
    found = validate_db(kept_b1).violations
    assert [(v["invariant"], v["lines"]) for v in found] == [
        ("admission-projects-row", [5]),
        ("replay-matches-views", [6]),  # and its promoted_seq names no live promotion
    ]
    assert "a committed revert discarded it" in found[0]["message"]
    # Under g4 the commit removes the boundary a1 too: its row should be gone.
    g4 = validate_db(db, policy="g4").violations
    assert [(v["invariant"], v["lines"]) for v in g4] == [
        ("admission-projects-row", [1]),
        ("replay-matches-views", [2]),
    ]


def test_opencode_db_errors_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import sqlite3

    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(b"this is not a database at all" * 100)
    other = tmp_path / "other.db"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    cases = {
        str(tmp_path / "missing.db"): "does not exist",
        str(corrupt): "not a readable SQLite database",
        str(other): "not an OpenCode database: it has no event table",
        str(tmp_path): "is not a file",
    }
    empty = _opencode_db(tmp_path / "empty.db", [], [])  # the tables, no session in them
    cases[str(empty)] = "holds no session (nothing to judge)"
    for path, words in cases.items():
        assert main(["validate", "--opencode-db", path]) == 2
        err = capsys.readouterr().err
        assert words in err and "Traceback" not in err, err
    assert main(["validate"]) == 2
    assert "give one of FILE" in capsys.readouterr().err
