"""Parts of the OpenCode adapter that need no OpenCode server: the files
mapping (protocol ``{path, mime?, name?, description?}`` to 1.18.33's
``{uri, name?, description?}`` and back) and the detection of a held call
OpenCode gave up on by itself (its HTTP client's idle timeout), against the
fake provider alone. ``tests/test_opencode.py`` runs both on the real server.
"""

from __future__ import annotations

import importlib.util
import socket
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from inboxsim.impls.opencode import ADAPTER


def _load() -> ModuleType:
    """The adapter program, loaded by path as Python runs it (its folder on
    ``sys.path``, so its sibling modules import by their bare names)."""
    spec = importlib.util.spec_from_file_location("inboxsim_opencode_adapter", ADAPTER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


oc = _load()
# Its sibling modules, as the adapter imported them.
failures = importlib.import_module("failures")
file_parts = importlib.import_module("file_parts")
file_to_opencode = file_parts.file_to_opencode
file_from_opencode = file_parts.file_from_opencode
Ids = importlib.import_module("idmap").Ids
Server = importlib.import_module("server").Server
PROJECT = Path("/data/run 1/project")


@pytest.mark.parametrize(
    "part",
    [
        {"path": "src/parser.ts", "mime": "text/plain"},
        {"path": "src/parser.ts"},
        {"path": "docs/a b%c?.md", "mime": "text/markdown; charset=utf-8", "name": "n"},
        {"path": "/etc/hosts", "description": "outside the project"},
        {"path": "../up.txt", "mime": "text/plain"},
    ],
)
def test_a_file_round_trips_through_its_uri(part: dict[str, str]) -> None:
    sent = file_to_opencode(part, PROJECT)
    assert set(sent) <= {"uri", "name", "description"}
    assert sent["uri"].startswith("file:///")
    # What OpenCode records: the part as sent plus its own MIME guess.
    recorded = {**sent, "mime": "video/mp2t"}
    assert file_from_opencode(recorded, PROJECT) == part


def test_the_uri_carries_path_and_mime_so_a_retry_compares_both() -> None:
    uri = file_to_opencode({"path": "src/parser.ts", "mime": "text/plain"}, PROJECT)["uri"]
    assert uri == "file:///data/run%201/project/src/parser.ts?mime=text%2Fplain"
    same = file_to_opencode({"mime": "text/plain", "path": "src/parser.ts"}, PROJECT)["uri"]
    assert same == uri  # key order is not part of the file
    for other in ({"path": "src/lexer.ts", "mime": "text/plain"}, {"path": "src/parser.ts"}):
        assert file_to_opencode(other, PROJECT)["uri"] != uri


def test_a_part_the_adapter_did_not_write_comes_back_as_recorded() -> None:
    part = {"uri": "data:text/plain;base64,aGVsbG8=", "mime": "text/plain"}
    assert file_from_opencode(part, PROJECT) == part


@pytest.mark.parametrize(
    "part",
    [
        {"uri": "file:///x"},
        {"path": ""},
        {"path": "a", "size": 3},
        {"path": "a", "mime": 1},
        "src/parser.ts",
    ],
)
def test_a_file_the_adapter_cannot_map_is_unsupported(part: Any) -> None:
    with pytest.raises(failures.Refused) as refused:
        file_to_opencode(part, PROJECT)
    assert refused.value.code == "unsupported"
    assert "{uri, name?, description?}" in str(refused.value)


# --- a held call OpenCode gives up on ------------------------------------------


def test_call_timeout_reaches_the_server_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    made = Server(Path("/nonexistent"), tmp_path, 1)
    assert made.env()["BUN_CONFIG_HTTP_IDLE_TIMEOUT"] == "3600"
    monkeypatch.setenv("INBOXSIM_OPENCODE_CALL_TIMEOUT", "2")
    assert Server(Path("/nonexistent"), tmp_path, 1).env()["BUN_CONFIG_HTTP_IDLE_TIMEOUT"] == "2"
    for bad in ("0", "-1", "2.5", "soon"):
        monkeypatch.setenv("INBOXSIM_OPENCODE_CALL_TIMEOUT", bad)
        with pytest.raises(failures.Fatal) as fatal:
            Server(Path("/nonexistent"), tmp_path, 1)
        assert fatal.value.code == failures.EXIT_USAGE and "INBOXSIM_OPENCODE_CALL_TIMEOUT" in str(
            fatal.value
        )


def _open_call(port: int, session: str) -> socket.socket:
    """A chat-completions request, as OpenCode sends one, left waiting."""
    body = (
        b'{"model": "fake-model", "stream": true, "messages": [{"role": "user", "content": "hi"}]}'
    )
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        + f"x-session-id: {session}\r\ncontent-length: {len(body)}\r\n\r\n".encode()
        + body
    )
    return sock


def _until(condition: Any) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, "the fake provider did not see it within 30 s"
        time.sleep(0.01)


@pytest.fixture
def adapter(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    monkeypatch.setenv("INBOXSIM_OPENCODE_CALL_TIMEOUT", "1")
    made = oc.Adapter(tmp_path, Path("/nonexistent"), "off")  # no server is started
    made.provider.start()
    made.ids.sessions["s1"] = "ses_1"
    made.ids.session_of["ses_1"] = "s1"
    try:
        yield made
    finally:
        made.close()


def test_a_call_hung_up_on_after_the_idle_timeout_fails_the_next_request(adapter: Any) -> None:
    sock = _open_call(adapter.provider.port, "ses_1")
    _until(lambda: adapter.provider.snapshot())
    time.sleep(1.0)  # held as long as the timeout (1 s here) ...
    sock.close()  # ... then hung up on, as OpenCode's idle timeout does
    _until(lambda: adapter.provider.hung_up)
    with pytest.raises(failures.Refused) as refused:
        adapter.handle({"rid": 1, "op": "calls", "now": 1})
    assert refused.value.code == "internal"
    message = str(refused.value)
    assert "gave up on model call call-1 of session 's1'" in message
    assert "INBOXSIM_OPENCODE_CALL_TIMEOUT = 1 s" in message
    # Said once; the request after it is served (the call is gone).
    assert adapter.handle({"rid": 2, "op": "calls", "now": 2}) == {"calls": []}


def test_a_call_hung_up_on_at_once_is_left_to_lockstep(adapter: Any) -> None:
    """An interrupt, or OpenCode ending a turn, aborts a call at once: the
    call leaves the open set and the request is served (seeds 16, 107, 108
    of the concurrent run: such hang-ups 0 s after the call opened)."""
    sock = _open_call(adapter.provider.port, "ses_1")
    _until(lambda: adapter.provider.snapshot())
    sock.close()
    _until(lambda: adapter.provider.hung_up)
    assert adapter.handle({"rid": 1, "op": "calls", "now": 1}) == {"calls": []}


def test_an_id_follows_the_session_that_admitted_it(tmp_path: Path) -> None:
    """A committed revert frees an ID for any session (g2): the ID map then
    names the session OpenCode admitted it in, not the first one it was sent
    to (else a revert there was refused as message_not_found: seed 6 of the
    concurrent run), and it survives a restart of the adapter."""
    ids = Ids(tmp_path / "ids.json")
    msg = ids.input("u2", "s2")
    ids.admitted_in("u2", "s1")
    again = Ids(tmp_path / "ids.json")
    assert again.inputs["u2"] == {"oc": msg, "session": "s1"}
    assert again.input("u2", "s1") == msg  # the same OpenCode ID, as OpenCode knows it


def test_a_call_cut_off_unanswered_is_seen_since_a_mark(adapter: Any) -> None:
    """An interrupt reports ``interrupted`` when a call of its session that
    opened after its look at the session ended unanswered (seed 116 at
    concurrency 4: a run woken between that look and the POST, which the
    interrupt ended); an answered call, or another session's, is no cut-off."""
    provider = adapter.provider
    mark = provider.opened()
    answered = _open_call(provider.port, "ses_1")
    _until(lambda: provider.snapshot())
    assert provider.answer(provider.snapshot()[0].call, "stop")
    answered.close()
    assert not provider.cut_since(mark, "ses_1")
    cut = _open_call(provider.port, "ses_1")
    _until(lambda: provider.snapshot())
    later = provider.opened()
    cut.close()  # OpenCode hangs up: the interrupt aborted the request
    _until(lambda: not provider.snapshot())
    assert provider.cut_since(mark, "ses_1")
    assert not provider.cut_since(mark, "ses_2")
    assert not provider.cut_since(later, "ses_1")
