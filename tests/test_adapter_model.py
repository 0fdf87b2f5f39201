"""The model adapter process on its own: request validation, its journal, and
recovery after a kill (the lockstep comparison is in ``test_adapter_e2e``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from inboxsim.model import Create, Hello, Prompt
from inboxsim.targets.adapter import AdapterTarget
from inboxsim.targets.model_adapter import CRASH_EXIT, JOURNAL

COMMAND = [sys.executable, "-m", "inboxsim.targets.model_adapter"]


def converse(
    data_dir: Path, *lines: Any, args: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    text = "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
    env = dict(os.environ, INBOXSIM_DATA_DIR=str(data_dir))
    return subprocess.run(
        [*COMMAND, *args], input=text, capture_output=True, text=True, env=env, timeout=60
    )


def responses(done: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_malformed_requests_get_protocol_errors(tmp_path: Path) -> None:
    done = converse(
        tmp_path,
        {"rid": 1, "op": "hello", "now": 0, "step_limit": 2},
        {"rid": 2, "op": "teleport", "now": 1},
        {"rid": 3, "op": "create", "now": 1, "session": "s", "colour": "red"},
        {"rid": 4, "op": "hello", "now": 1, "step_limit": -1},
        {"rid": 5, "op": "prompt", "now": 1, "session": "missing", "text": "x"},
    )
    assert done.returncode == 0, done.stderr
    got = responses(done)
    assert [r["rid"] for r in got] == [1, 2, 3, 4, 5]
    assert got[0]["result"]["step_limit"] == 2
    assert [r["error"]["code"] for r in got[1:]] == [
        "unsupported",
        "invalid_request",
        "invalid_request",
        "session_not_found",
    ]
    assert "colour" in got[2]["error"]["message"]


def test_a_line_without_a_rid_cannot_be_answered(tmp_path: Path) -> None:
    done = converse(tmp_path, {"rid": 1, "op": "hello", "now": 0}, "this is not json")
    assert done.returncode == 2
    assert len(responses(done)) == 1
    assert "request is not JSON" in done.stderr


def test_an_unknown_policy_is_refused(tmp_path: Path) -> None:
    done = converse(tmp_path, args=("--policy", "g9"))
    assert done.returncode == 2 and "unknown policy 'g9'" in done.stderr


def test_only_state_changes_are_journalled(tmp_path: Path) -> None:
    converse(
        tmp_path,
        {"rid": 1, "op": "hello", "now": 0},
        {"rid": 2, "op": "create", "now": 1, "session": "s"},
        {"rid": 3, "op": "log", "now": 2, "session": "s"},
        {"rid": 4, "op": "create", "now": 3, "session": "s"},  # adopted: no change
        {"rid": 5, "op": "prompt", "now": 4, "session": "nope", "text": "x"},  # error: no change
        {"rid": 6, "op": "calls", "now": 5},
    )
    records = [json.loads(line) for line in (tmp_path / JOURNAL).read_text().splitlines()]
    assert records[0]["policy"] == "g4"
    assert [r["request"]["op"] for r in records[1:]] == ["create"]  # hello changed nothing


def test_a_failpoint_crash_exits_without_responding_and_keeps_the_admission(tmp_path: Path) -> None:
    done = converse(
        tmp_path,
        {"rid": 1, "op": "hello", "now": 0},
        {"rid": 2, "op": "create", "now": 1, "session": "s"},
        {
            "rid": 3,
            "op": "prompt",
            "now": 2,
            "session": "s",
            "input": "a",
            "text": "x",
            "crash_at": "after_admit",
        },
        {"rid": 4, "op": "calls", "now": 3},
    )
    assert done.returncode == CRASH_EXIT
    assert [r["rid"] for r in responses(done)] == [1, 2]
    done = converse(tmp_path, {"rid": 1, "op": "pending", "now": 4, "session": "s"})
    (pending,) = responses(done)
    assert [row["input"] for row in pending["result"]["pending"]] == ["a"]


def test_a_torn_journal_line_is_dropped(tmp_path: Path) -> None:
    converse(
        tmp_path,
        {"rid": 1, "op": "hello", "now": 0},
        {"rid": 2, "op": "create", "now": 1, "session": "s"},
    )
    with (tmp_path / JOURNAL).open("ab") as journal:
        journal.write(b'{"request":{"op":"create","now":2,"sess')  # killed mid-write
    done = converse(tmp_path, {"rid": 1, "op": "log", "now": 3, "session": "s"})
    assert responses(done)[0]["ok"] is True
    assert (tmp_path / JOURNAL).read_bytes().endswith(b'{"restart":true}\n')


def test_a_journal_of_another_policy_is_refused(tmp_path: Path) -> None:
    converse(tmp_path, {"rid": 1, "op": "create", "now": 0, "session": "s"})
    done = converse(
        tmp_path, {"rid": 1, "op": "log", "now": 1, "session": "s"}, args=("--policy", "g5")
    )
    assert done.returncode != 0 and "written under another policy" in done.stderr


def test_state_survives_sigkill_through_the_target(tmp_path: Path) -> None:
    with AdapterTarget(COMMAND, tmp_path / "data", 2, timeout=20) as target:
        target.request(Hello(0, step_limit=2))
        target.request(Create(1, session="s"))
        reply, before = target.request(Prompt(2, session="s", input="a", text="x"))
        assert before.calls  # a call is open
        after_kill = target.kill()
        assert after_kill.calls == ()  # the crash dropped it; nothing durable changed
        assert after_kill.events == () and after_kill.pending == () and after_kill.transcript == ()
        retry, observed = target.request(Prompt(3, session="s", input="a", text="x"))
    assert retry == reply  # the receipt survived, field for field
    assert observed.events == ()  # an exact retry of a visible input appends nothing
