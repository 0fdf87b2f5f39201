"""A misbehaving adapter never hangs or crashes the harness.

Each fake in ``tests/adapters/`` answers ``hello`` and then breaks the
protocol one way; each must end in :class:`ProtocolError`, within the timeout,
with a message that names the request and quotes the offending bytes, and
with no process left behind.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from inboxsim.errors import ExitCode, HarnessError
from inboxsim.model import Create, Hello, Prompt
from inboxsim.targets.adapter import AdapterTarget, quote, split_command
from inboxsim.targets.protocol import ProtocolError

FAKES = Path(__file__).parent / "adapters"
TIMEOUT = 1.0
SLACK = 2.0  # process start and teardown on a slow machine


def fake(tmp_path: Path, name: str, timeout: float = TIMEOUT) -> AdapterTarget:
    return AdapterTarget([sys.executable, str(FAKES / f"{name}.py")], tmp_path / "data", 4, timeout)


def living_in_group(pgid: int) -> list[int]:
    """Processes of the group that are not zombies. (A killed grandchild
    stays a zombie until init reaps it; some container inits never do.)"""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        state, _ppid, pgrp = stat.rsplit(")", 1)[1].split()[:3]
        if int(pgrp) == pgid and state != "Z":
            found.append(int(entry))
    return found


def assert_gone(pid: int) -> None:
    """The child was reaped (no zombie of ours) and its group has no live process."""
    assert (
        not Path(f"/proc/{pid}").exists()
        or "Z" not in Path(f"/proc/{pid}/stat").read_text().split(")")[-1][:3]
    )
    deadline = time.monotonic() + 2
    while living_in_group(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert living_in_group(pid) == []


def fail_after_hello(target: AdapterTarget, op: object) -> tuple[ProtocolError, int, float]:
    """Hello, then ``op``: returns the error, the adapter's pid, the seconds taken."""
    target.request(Hello(0, step_limit=4))
    assert target._proc is not None
    pid = target._proc.pid
    started = time.monotonic()
    with pytest.raises(ProtocolError) as caught:
        target.request(op)  # type: ignore[arg-type]
    return caught.value, pid, time.monotonic() - started


PROMPT = Prompt(1, session="s1", input="a", text="hi")

CASES = [
    # fake, request, words in the message, offending bytes quoted
    ("bad_json", PROMPT, "not valid JSON", b'"ok": tru'),
    ("wrong_rid", PROMPT, "rid 44, expected 3", b'"rid": 44'),
    ("missing_field", PROMPT, "admitted_seq: Field required", b'"delivery": "steer"'),
    ("unknown_error", PROMPT, "error.code", b"kaboom"),
    ("garbage_stdout", Create(1, session="s1"), "not valid JSON", b"Starting server on port 8080"),
    ("partial_then_exit", PROMPT, "mid-response", b'"ok": true, "res'),
]


@pytest.mark.parametrize(("name", "op", "words", "offending"), CASES, ids=[c[0] for c in CASES])
def test_malformed_response_is_a_protocol_error(
    tmp_path: Path, name: str, op: object, words: str, offending: bytes
) -> None:
    with fake(tmp_path, name) as target:
        error, pid, seconds = fail_after_hello(target, op)
    message = str(error)
    assert words in message
    # hello is rid 1 and its observation (calls) rid 2
    assert f"(request rid=3 op={op.OP})" in message  # type: ignore[attr-defined]
    assert repr(offending)[2:-1] in message
    assert error.rid == 3 and error.op == op.OP  # type: ignore[attr-defined]
    assert error.offending is not None and offending in error.offending
    assert error.exit_code == ExitCode.TARGET_FAILED
    assert seconds < TIMEOUT + SLACK
    assert_gone(pid)


def test_a_hanging_adapter_times_out(tmp_path: Path) -> None:
    with fake(tmp_path, "hangs") as target:
        error, pid, seconds = fail_after_hello(target, PROMPT)
    assert "no response within 1 s; nothing received (request rid=3 op=prompt)" in str(error)
    assert TIMEOUT <= seconds < TIMEOUT + SLACK
    assert_gone(pid)


def test_exit_mid_request_without_a_failpoint(tmp_path: Path) -> None:
    with fake(tmp_path, "exits_mid_request") as target:
        error, pid, _ = fail_after_hello(target, PROMPT)
        log = target.stderr_text()
    message = str(error)
    assert "exited without responding (exit status 7), and no failpoint was asked" in message
    assert "rid=3 op=prompt" in message
    assert "fake: giving up on prompt" in message  # its stderr, quoted in the error
    assert "fake: giving up on prompt" in log  # and kept in the run's log
    assert_gone(pid)


def test_unsolicited_output_is_caught_before_the_next_request(tmp_path: Path) -> None:
    with fake(tmp_path, "unsolicited") as target:
        target.request(Hello(0, step_limit=4))
        assert target._proc is not None
        pid = target._proc.pid
        with pytest.raises(ProtocolError, match="no request asked for") as caught:
            target.request(Create(1, session="s1"))  # its observation query trips
    assert b'"rid": 999' in (caught.value.offending or b"")
    assert_gone(pid)


def test_an_adapter_that_exits_at_once(tmp_path: Path) -> None:
    with fake(tmp_path, "exits_at_once") as target:
        started = time.monotonic()
        with pytest.raises(ProtocolError) as caught:
            target.request(Hello(0, step_limit=4))
        pid = target._holder[0].pid if target._holder[0] else None
    message = str(caught.value)
    assert "op=hello" in message and "exit status 1" in message
    assert "fake: cannot open /nonexistent/inbox.db" in message
    assert time.monotonic() - started < TIMEOUT + SLACK
    assert pid is None  # already reaped and forgotten


def test_a_command_that_cannot_start(tmp_path: Path) -> None:
    target = AdapterTarget(["/nonexistent/adapter", "--serve"], tmp_path / "data", 4, TIMEOUT)
    with pytest.raises(
        ProtocolError, match=r"/nonexistent/adapter --serve cannot start: No such file"
    ):
        target.request(Hello(0, step_limit=4))
    with pytest.raises(ProtocolError, match="already failed"):
        target.request(Hello(1, step_limit=4))
    target.close()
    target.close()  # idempotent


def test_protocol_2_is_refused_clearly(tmp_path: Path) -> None:
    with fake(tmp_path, "protocol2") as target:
        with pytest.raises(ProtocolError) as caught:
            target.request(Hello(0, step_limit=4))
    message = str(caught.value)
    assert "adapter speaks protocol 2; this harness speaks protocol 1 only" in message
    assert "refused" in message and "op=hello" in message and '"protocol": 2' in message


def test_close_takes_down_what_the_adapter_spawned(tmp_path: Path) -> None:
    target = fake(tmp_path, "spawns_and_hangs", timeout=0.5)
    target.request(Hello(0, step_limit=4))
    assert target._proc is not None
    pid = target._proc.pid
    time.sleep(0.2)
    assert len(living_in_group(pid)) == 2  # the adapter and its helper
    target.close()
    assert_gone(pid)


def test_a_timeout_also_takes_down_the_helpers(tmp_path: Path) -> None:
    with fake(tmp_path, "spawns_and_hangs", timeout=0.5) as target:
        _, pid, _ = fail_after_hello(target, PROMPT)
    assert_gone(pid)


def test_a_forgotten_target_is_cleaned_up_when_collected(tmp_path: Path) -> None:
    target = fake(tmp_path, "hangs")
    target.request(Hello(0, step_limit=4))
    assert target._proc is not None
    pid = target._proc.pid
    del target
    import gc

    gc.collect()
    assert_gone(pid)


def test_split_command_is_shell_like_without_a_shell() -> None:
    assert split_command("python -m my.adapter --db 'a b.db'") == [
        "python",
        "-m",
        "my.adapter",
        "--db",
        "a b.db",
    ]
    assert split_command("adapter $HOME; rm -rf x") == ["adapter", "$HOME;", "rm", "-rf", "x"]
    with pytest.raises(HarnessError, match="needs a command"):
        split_command("   ")
    with pytest.raises(HarnessError, match="cannot be split"):
        split_command("adapter 'unclosed")


def test_long_offending_bytes_are_cut_in_the_middle() -> None:
    data = b"x" * 150 + b"M" * 1000 + b"y" * 70
    shown = quote(data)
    head, _, tail = shown.partition(" … ")
    assert head == repr(b"x" * 150 + b"M" * 10)  # the first 160 bytes
    assert tail == f"{b'y' * 60!r} ({len(data)} bytes in all)"  # the last 60
    assert quote(b"short\n") == "b'short\\n'"


def test_failpoints_are_only_asked_of_an_adapter_that_has_them(tmp_path: Path) -> None:
    with fake(tmp_path, "hangs") as target:
        target.request(Hello(0, step_limit=4))  # features: none
        with pytest.raises(ValueError, match="does not list the feature 'failpoints'"):
            target.request(PROMPT, "after_admit")
        with pytest.raises(ValueError, match="unknown failpoint 'somewhere'"):
            target.request(PROMPT, "somewhere")
