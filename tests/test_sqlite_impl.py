"""The SQLite inbox adapter (impls/sqlite_inbox), driven as a process over the protocol.

One adapter process per scenario, a temporary INBOXSIM_DATA_DIR each. These
tests speak JSON lines only; they do not use the harness, so they pin down the
implementation on its own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ADAPTER = Path(__file__).resolve().parents[1] / "impls" / "sqlite_inbox" / "adapter.py"

pytestmark = pytest.mark.skipif(
    not ADAPTER.exists(), reason="impls/ is not installed with the package"
)


class Proc:
    """One adapter process: ``req`` sends a request and returns the parsed response."""

    def __init__(self, folder: Path, step_limit: int = 10) -> None:
        self.folder = folder
        self.rid = 0
        self.now = 0
        self.step_limit = step_limit
        self.start()

    def start(self) -> None:
        env = {**os.environ, "INBOXSIM_DATA_DIR": str(self.folder)}
        self.proc = subprocess.Popen(
            [sys.executable, str(ADAPTER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            text=True,
        )
        assert self.ok("hello", step_limit=self.step_limit)["step_limit"] == self.step_limit

    def send(self, op: str, **fields: Any) -> dict[str, Any] | None:
        self.rid += 1
        self.now += 10
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(
            json.dumps({"rid": self.rid, "op": op, "now": self.now, **fields}) + "\n"
        )
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            return None
        reply: dict[str, Any] = json.loads(line)
        assert reply["rid"] == self.rid
        return reply

    def ok(self, op: str, **fields: Any) -> Any:
        reply = self.send(op, **fields)
        assert reply is not None and reply["ok"], reply
        return reply["result"]

    def err(self, op: str, **fields: Any) -> str:
        reply = self.send(op, **fields)
        assert reply is not None and not reply["ok"], reply
        return str(reply["error"]["code"])

    # shorthands
    def calls(self) -> list[dict[str, Any]]:
        return list(self.ok("calls")["calls"])

    def only_call(self) -> dict[str, Any]:
        (call,) = self.calls()
        return call

    def answer(self, finish: str = "stop") -> None:
        self.ok("answer", call=self.only_call()["call"], finish=finish)

    def pending(self, sid: str = "s") -> list[tuple[str, str | None]]:
        return [(p["input"], p["delivery"]) for p in self.ok("pending", session=sid)["pending"]]

    def messages(self, sid: str = "s") -> list[str]:
        return [m["id"] for m in self.ok("messages", session=sid)["messages"]]

    def types(self, sid: str = "s", after: int | None = None) -> list[str]:
        fields = {} if after is None else {"after": after}
        return [e["type"] for e in self.ok("log", session=sid, **fields)["events"]]

    def last_seq(self, sid: str = "s") -> int:
        events = self.ok("log", session=sid)["events"]
        return int(events[-1]["seq"]) if events else -1

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin
            self.proc.stdin.close()
            self.proc.wait(timeout=10)


@pytest.fixture
def proc(tmp_path: Path) -> Any:
    p = Proc(tmp_path / "data", step_limit=3)
    yield p
    p.close()


def shape(call: dict[str, Any]) -> tuple[Any, ...]:
    return (call["kind"], call["step"], call["final"], call["context"])


def test_steer_queue_and_step_allowance(proc: Proc) -> None:
    assert proc.ok("create", session="s") == {"session": "s"}
    assert proc.ok("create", session="s") == {"session": "s"}  # adopts, appends nothing
    assert proc.types() == []
    proc.ok("prompt", session="s", input="a", text="first")
    assert shape(proc.only_call()) == ("step", 1, False, ["a"])
    proc.ok("prompt", session="s", input="q1", text="later", delivery="queue")
    proc.ok("prompt", session="s", input="q2", text="later still", delivery="queue")
    proc.ok("prompt", session="s", input="b", text="also")
    assert proc.pending() == [("q1", "queue"), ("q2", "queue"), ("b", "steer")]
    proc.answer("tool")  # continuation: the steer joins, the allowance resets
    assert shape(proc.only_call()) == ("step", 1, False, ["a", "b"])
    proc.answer("tool")
    assert shape(proc.only_call()) == ("step", 2, False, ["a", "b"])
    proc.answer("tool")
    assert shape(proc.only_call()) == ("step", 3, True, ["a", "b"])  # step_limit 3: final
    proc.answer("tool")  # counts as stop; queued input opens new work, one at a time
    assert shape(proc.only_call()) == ("step", 1, False, ["a", "b", "q1"])
    assert proc.pending() == [("q2", "queue")]
    proc.answer("stop")
    assert shape(proc.only_call()) == ("step", 1, False, ["a", "b", "q1", "q2"])
    proc.answer("stop")
    assert proc.calls() == [] and proc.pending() == []
    types = proc.types()
    assert types.count("execution_started") == 1 and types[-1] == "execution_succeeded"
    assert types.count("promoted") == 4 and types.count("step_started") == 6
    msgs = proc.ok("messages", session="s")["messages"]
    assert [m["seq"] for m in msgs] == sorted(m["seq"] for m in msgs)
    log = proc.ok("log", session="s")["events"]
    assert [e["seq"] for e in log] == list(range(len(log)))
    assert proc.types(after=log[-3]["seq"]) == [e["type"] for e in log[-2:]]


def test_exact_retry_and_conflicts(proc: Proc) -> None:
    proc.ok("create", session="s")
    proc.ok("create", session="t")
    first = proc.ok("prompt", session="s", input="m", text="x", metadata={"n": 1}, resume=False)
    assert first["data"] == {"text": "x", "files": [], "agents": [], "metadata": {"n": 1}}
    assert first["delivery"] == "steer" and first["type"] == "user"
    again = proc.ok("prompt", session="s", input="m", text="x", files=[], metadata={"n": 1.0})
    assert again == first  # numbers by value, defaults applied; resume is not identity
    call = proc.only_call()  # the retry woke the session
    assert (
        proc.err("prompt", session="s", input="m", text="y", metadata={"n": 1}) == "prompt_conflict"
    )
    proc.ok("answer", call=call["call"], finish="stop")
    # after promotion: judged against the admission record, original receipt returned
    assert proc.messages() == ["m"]
    retry = proc.ok("prompt", session="s", input="m", text="x", metadata={"n": 1}, resume=False)
    assert retry == first
    msg = proc.ok("messages", session="s")["messages"][0]
    assert msg["time"] > first["time"]  # visible time is promotion time
    assert (
        proc.err("prompt", session="s", input="m", text="x", metadata={"n": 1}, delivery="queue")
        == "prompt_conflict"
    )
    assert proc.err("prompt", session="s", input="m", text="x", metadata={}) == "prompt_conflict"
    assert proc.err("synthetic", session="s", input="m", text="x") == "synthetic_conflict"
    assert proc.err("compact", session="s", input="m") == "compaction_conflict"
    assert (
        proc.err("prompt", session="t", input="m", text="x", metadata={"n": 1}) == "prompt_conflict"
    )
    assert proc.err("prompt", session="nope", text="x") == "session_not_found"
    assert proc.err("prompt", session="s", text=3) == "invalid_request"
    assert proc.err("prompt", session="s", text="x", delivery="later") == "invalid_request"
    # synthetic: own defaults and conflicts
    syn = proc.ok("synthetic", session="t", input="y", text="note", resume=False)
    assert syn["data"] == {"text": "note", "description": None, "metadata": {}}
    assert (
        proc.ok("synthetic", session="t", input="y", text="note", description=None, resume=False)
        == syn
    )
    assert (
        proc.err("synthetic", session="t", input="y", text="note", description="d")
        == "synthetic_conflict"
    )
    assert proc.err("prompt", session="t", input="y", text="note") == "prompt_conflict"
    # omitted IDs are fresh, never colliding
    ids = {proc.ok("prompt", session="t", text="same", resume=False)["input"] for _ in range(3)}
    assert len(ids) == 3 and not ids & {"m", "a", "y"}
    events = proc.ok("log", session="t")["events"]
    assert [e["type"] for e in events] == ["admitted"] * 4


def test_error_leaves_state_and_idle_wake_starts_nothing(proc: Proc) -> None:
    proc.ok("create", session="s")
    proc.ok("prompt", session="s", input="m", text="x")
    proc.answer("stop")
    seq = proc.last_seq()
    proc.ok("prompt", session="s", input="m", text="x")  # retry wakes, nothing pending
    assert proc.calls() == [] and proc.last_seq() == seq
    assert proc.err("answer", call="no-such-call", finish="stop") == "invalid_request"
    assert proc.err("revert_stage", session="s", message="nope") == "message_not_found"
    assert proc.err("fork", session="s", child="s") == "invalid_request"
    assert proc.err("hello", step_limit=0) == "invalid_request"
    assert proc.err("hello", step_limit="3") == "invalid_request"
    assert proc.err("interrupt", session="nope") == "session_not_found"
    assert proc.last_seq() == seq
    proc.ok("resume", session="s")  # forced drain, nothing promotable: one call
    assert shape(proc.only_call()) == ("step", 1, False, ["m"])
    proc.ok("resume", session="s")  # joins
    assert len(proc.calls()) == 1
    proc.answer("stop")
    assert proc.calls() == []


def test_step_error_fails_execution_and_doorbell_starts_another(proc: Proc) -> None:
    proc.ok("create", session="s")
    proc.ok("prompt", session="s", input="a", text="x")
    proc.ok("prompt", session="s", input="b", text="y", delivery="queue")  # rings the doorbell
    proc.answer("error")
    assert proc.types()[-5:] == [
        "step_failed",
        "execution_failed",
        "execution_started",
        "promoted",
        "step_started",
    ]
    assert shape(proc.only_call()) == ("step", 1, False, ["a", "b"])
    proc.answer("stop")
    assert proc.types()[-1] == "execution_succeeded"


def test_compaction_barrier(proc: Proc) -> None:
    proc.ok("create", session="s")
    proc.ok("prompt", session="s", input="a", text="x")
    c1 = proc.ok("compact", session="s", input="c1")
    assert c1["type"] == "compaction" and c1["delivery"] is None and c1["data"] == {}
    assert proc.ok("compact", session="s", input="c2") == c1  # coalesces
    assert proc.ok("compact", session="s") == c1
    proc.ok("prompt", session="s", input="b", text="y")
    proc.answer("stop")  # after the step: the compaction runs before any promotion
    assert shape(proc.only_call()) == ("compaction", 0, False, ["a"])
    assert proc.pending() == [("c1", None), ("b", "steer")]
    assert proc.err("prompt", session="s", input="c1", text="x") == "prompt_conflict"
    proc.answer("error")  # fails the compaction, consumes the barrier, the drain goes on
    assert shape(proc.only_call()) == ("step", 1, False, ["a", "b"])
    assert proc.pending() == []
    types = proc.types()
    assert types.count("compaction_admitted") == 1 and "compaction_failed" in types
    proc.answer("stop")
    # the consumed barrier's ID may be admitted again; with nothing else pending
    # the wake runs only the compaction
    again = proc.ok("compact", session="s", input="c1")
    assert again["input"] == "c1" and again["admitted_seq"] > c1["admitted_seq"]
    assert shape(proc.only_call()) == ("compaction", 0, False, ["a", "b"])
    proc.answer("tool")  # counts as stop
    assert proc.calls() == [] and proc.types()[-2:] == ["compaction_ended", "execution_succeeded"]


def test_interrupt(proc: Proc) -> None:
    proc.ok("create", session="s")
    seq = proc.last_seq()
    assert proc.ok("interrupt", session="s") == {"interrupted": False}
    assert proc.last_seq() == seq
    proc.ok("prompt", session="s", input="a", text="x")
    proc.ok("prompt", session="s", input="b", text="y")
    assert proc.ok("interrupt", session="s") == {"interrupted": True}
    assert proc.calls() == [] and proc.pending() == [("b", "steer")]
    assert proc.types()[-2:] == ["step_failed", "execution_interrupted"]
    proc.ok("resume", session="s")
    assert shape(proc.only_call()) == ("step", 1, False, ["a", "b"])
    proc.ok("compact", session="s", input="c")
    proc.answer("stop")
    assert proc.only_call()["kind"] == "compaction"
    proc.ok("interrupt", session="s")  # an interrupted compaction consumes its barrier
    assert proc.pending() == [] and proc.calls() == []
    assert proc.types()[-2:] == ["compaction_failed", "execution_interrupted"]


def test_fork_and_revert(proc: Proc) -> None:
    proc.ok("create", session="s")
    for ident in ("m1", "m2", "m3"):
        proc.ok("prompt", session="s", input=ident, text=ident)
        proc.answer("stop")
    proc.ok("prompt", session="s", input="p", text="p", resume=False)
    assert proc.ok("fork", session="s", child="f", before="m2") == {"session": "f"}
    child = proc.ok("messages", session="f")["messages"]
    assert [m["copied_from"] for m in child] == ["m1"] and child[0]["id"] != "m1"
    assert proc.pending("f") == []  # pending input is never copied
    assert proc.err("prompt", session="f", input=child[0]["id"], text="m1") == "prompt_conflict"
    forked = proc.ok("log", session="f")["events"]
    assert forked[0]["seq"] == 0 and forked[0]["type"] == "forked"
    proc.ok("fork", session="f", child="g")
    assert [m["copied_from"] for m in proc.ok("messages", session="g")["messages"]] == ["m1"]
    proc.ok("prompt", session="g", input="g1", text="g1")
    assert proc.only_call()["context"][1:] == ["g1"]
    proc.answer("stop")
    assert proc.err("fork", session="s", child="f") == "invalid_request"
    assert proc.err("fork", session="s", child="h", before="g1") == "message_not_found"
    # revert: synthetic under a staged revert is held, then discarded by the commit
    proc.ok("revert_stage", session="s", message="m2")
    proc.ok("synthetic", session="s", input="y", text="bg")
    assert proc.calls() == []
    assert proc.messages() == ["m1", "m2", "m3"]
    # a prompt commits the revert and is admitted in one step; m2 and m3 are truncated
    proc.ok("prompt", session="s", input="n", text="new", resume=False)
    assert proc.messages() == ["m1"]
    # p was admitted after m2 became visible: its admitted_seq is past the boundary
    assert proc.pending() == [("n", "steer")]
    assert proc.types()[-2:] == ["revert_committed", "admitted"]
    # a truncated ID is admitted again in its own session and kind only, as a new input
    proc.ok("prompt", session="s", input="m3", text="other text", resume=False)
    assert proc.err("prompt", session="g", input="y", text="u", resume=False) == "prompt_conflict"
    assert proc.err("prompt", session="s", input="y", text="u", resume=False) == "prompt_conflict"
    assert proc.ok("synthetic", session="s", input="y", text="u", resume=False)["session"] == "s"
    assert proc.types()[-1] == "admitted"
    proc.ok("revert_clear", session="s")
    proc.ok("revert_commit", session="s")
    proc.ok("revert_stage", session="s", message="m1")
    proc.ok("revert_clear", session="s")
    assert proc.types()[-2:] == ["revert_staged", "revert_cleared"]
    # a failing prompt leaves a staged revert staged
    proc.ok("revert_stage", session="s", message="m1")
    assert proc.err("prompt", session="s", input="g1", text="g1") == "prompt_conflict"
    assert proc.messages() == ["m1"] and proc.types()[-1] == "revert_staged"


def test_failpoints_and_kill_keep_the_inbox(proc: Proc) -> None:
    proc.ok("create", session="s")
    assert proc.send("prompt", session="s", input="a", text="x", crash_at="after_admit") is None
    assert proc.proc.wait(timeout=10) == -signal.SIGKILL  # it SIGKILLs itself
    proc.start()
    assert proc.pending() == [("a", "steer")] and proc.calls() == []
    proc.ok("prompt", session="s", input="b", text="y", resume=False)
    assert proc.send("resume", session="s", crash_at="mid_promotion") is None
    proc.start()
    assert proc.messages() == ["a"] and proc.pending() == [("b", "steer")]
    assert proc.send("resume", session="s", crash_at="after_promotion") is None
    proc.start()
    assert proc.messages() == ["a", "b"] and proc.calls() == []
    generated = proc.ok("prompt", session="s", text="z", resume=False)["input"]
    proc.kill()
    proc.start()
    assert proc.pending() == [(generated, "steer")]
    other = proc.ok("prompt", session="s", text="z", resume=False)["input"]
    assert other != generated
    proc.ok("resume", session="s")
    assert shape(proc.only_call()) == ("step", 1, False, ["a", "b", generated, other])
    # a failpoint the request never reaches: it completes normally
    assert proc.ok("interrupt", session="s", crash_at="after_admit") == {"interrupted": True}
