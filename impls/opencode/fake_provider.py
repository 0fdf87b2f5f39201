"""The fake model provider of the OpenCode adapter: an OpenAI-compatible
``POST /v1/chat/completions`` endpoint on loopback whose every request is held
open as one protocol ``call`` until the harness answers it.

Standard library only. It runs in the adapter's process (so inside the same
network namespace as the OpenCode server), one thread per connection
(``ThreadingHTTPServer``).

- A request becomes a :class:`HeldCall`: the OpenCode session it belongs to
  (OpenCode sends it in the ``x-session-id`` header) and the texts of the
  user messages it carries, in order (the adapter aligns them with the
  session's messages and numbers the steps).
- The handler thread waits until the adapter settles the call, and then
  answers: ``stop`` streams one short text and ``finish_reason: "stop"``;
  ``tool`` streams one harmless ``glob`` tool call (for a file the adapter
  put in the served project folder) and ``finish_reason: "tool_calls"``, so
  that OpenCode runs the tool and makes the next request; ``error`` answers
  HTTP 400 (not retried by the AI SDK, so the step fails at once).
- While it waits, the handler watches its socket: when OpenCode gives up on
  the request (an interrupt aborts the fetch; so does its HTTP client's idle
  timeout), the call is dropped from the open set at once and listed in
  ``hung_up`` for the adapter to judge.
- ``midstream=True`` (the adapter's ``INBOXSIM_OPENCODE_STREAM=midstream``):
  the answer begins at once, before the harness answers (the response head, a
  role frame and a first text delta), and the rest waits for the answer; so an
  interrupt or a kill lands after the model's response began. ``error`` is
  then an error frame inside the stream (the status is already 200).
  A request whose newest user message contains ``MIDSTREAM_MARK`` begins at
  once in any mode: the fake model's one instruction a prompt can carry, so
  that a library scenario puts a cut-off mid-stream on OpenCode (on any other
  target the text is just text).
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

STOP_TEXT = "ok"
PARTIAL_TEXT = "partial "  # what a midstream answer has sent while it is held
# A prompt whose text contains this makes its calls begin at once (see above).
MIDSTREAM_MARK = "[midstream]"
TOOL_TARGET = "inboxsim-tool-target.txt"  # the adapter puts it in the project folder
TOOL_PATTERN = TOOL_TARGET
ERROR = {
    "message": "inboxsim: the harness failed this model call",
    "type": "invalid_request_error",
    "code": "inboxsim_error",
}


@dataclass
class HeldCall:
    call: str  # the adapter's ID for it
    oc_session: str
    user_texts: list[str]
    roles: list[str]
    opened: int  # opening order, for "oldest first"
    finish: str | None = None  # set by the adapter: stop, tool or error
    gone: bool = False  # OpenCode closed the connection before an answer
    opened_at: float = field(default_factory=time.monotonic)
    released: threading.Event = field(default_factory=threading.Event)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"
        )
    return ""


class Provider:
    """Held model calls and the HTTP server that produces them."""

    def __init__(
        self, new_call_id: Callable[[], str], log: Callable[[str], None], midstream: bool = False
    ) -> None:
        self._new_call_id = new_call_id
        self._log = log
        self.midstream = midstream
        self.lock = threading.Condition()
        self.open: dict[str, HeldCall] = {}  # call id -> call, while unanswered
        self.seen: list[HeldCall] = []  # every call, in opening order (for ``cut_since``)
        self._opened = 0
        self.requests = 0  # every model request seen (for the figures)
        self.stray: list[str] = []  # requests that were not chat completions
        # Calls OpenCode hung up on before an answer (an interrupt does, and
        # so does its HTTP client's idle timeout): (call, seconds held, why).
        self.hung_up: list[tuple[HeldCall, float, str]] = []
        self._closing = False
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                provider.stray.append(f"GET {self.path}")
                self._plain(404, b"not found")

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    provider.stray.append(f"POST {self.path}")
                    self._plain(404, b"not found")
                    return
                try:
                    body = json.loads(raw)
                except ValueError:
                    self._plain(400, b"bad json")
                    return
                held = provider._register(self.headers.get("x-session-id") or "", body)
                begins = provider.midstream or MIDSTREAM_MARK in (held.user_texts or [""])[-1]
                frame = self._start_stream(held, body) if begins else None
                provider._wait(held, self.connection)
                if held.gone:
                    self.close_connection = True
                    return
                try:
                    if frame is None:
                        self._answer(held, body)
                    else:
                        self._finish_stream(held, frame)
                except OSError:
                    pass
                self.close_connection = True

            def _plain(self, code: int, data: bytes) -> None:
                self.send_response(code)
                self.send_header("content-type", "text/plain")
                self.send_header("content-length", str(len(data)))
                self.send_header("connection", "close")
                self.end_headers()
                self.wfile.write(data)
                self.close_connection = True

            def _answer(self, held: HeldCall, body: dict[str, Any]) -> None:
                if held.finish == "error":
                    data = json.dumps({"error": ERROR}).encode()
                    self.send_response(400)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.send_header("connection", "close")
                    self.end_headers()
                    self.wfile.write(data)
                    return
                self._finish_stream(held, self._start_stream(held, body, partial=False))

            def _start_stream(
                self, held: HeldCall, body: dict[str, Any], partial: bool = True
            ) -> Callable[..., None]:
                """Send the response head and the role frame (and, midstream,
                a first text delta); return the frame writer."""
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("connection", "close")
                self.end_headers()
                base = {
                    "id": f"chatcmpl-{held.call}",
                    "object": "chat.completion.chunk",
                    "created": 0,
                    "model": body.get("model", "fake-model"),
                }

                def frame(choice: dict[str, Any] | None, **extra: Any) -> None:
                    doc = {**base, "choices": [{"index": 0, **choice}]} if choice else {}
                    self.wfile.write(b"data: " + json.dumps({**doc, **extra}).encode() + b"\n\n")
                    self.wfile.flush()

                frame({"delta": {"role": "assistant", "content": ""}, "finish_reason": None})
                if partial:
                    frame({"delta": {"content": PARTIAL_TEXT}, "finish_reason": None})
                return frame

            def _finish_stream(self, held: HeldCall, frame: Callable[..., None]) -> None:
                if held.finish == "error":  # the status is sent: an error frame
                    frame(None, error=ERROR)
                    return
                if held.finish == "tool":
                    args = json.dumps({"pattern": TOOL_PATTERN})
                    call = {
                        "index": 0,
                        "id": f"toolcall_{held.call}",
                        "type": "function",
                        "function": {"name": "glob", "arguments": args},
                    }
                    frame({"delta": {"tool_calls": [call]}, "finish_reason": None})
                    reason = "tool_calls"
                else:
                    frame({"delta": {"content": STOP_TEXT}, "finish_reason": None})
                    reason = "stop"
                usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
                frame({"delta": {}, "finish_reason": reason}, usage=usage)
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self._thread: threading.Thread | None = None

    # --- lifecycle -----------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        with self.lock:
            self._closing = True
            for held in self.open.values():
                held.gone = True
                held.released.set()
            self.open.clear()
            self.lock.notify_all()
        self.server.shutdown()
        self.server.server_close()

    # --- calls -----------------------------------------------------------------

    def _register(self, oc_session: str, body: dict[str, Any]) -> HeldCall:
        messages = body.get("messages") or []
        roles = [str(m.get("role")) for m in messages if isinstance(m, dict)]
        users = [
            _text_of(m.get("content"))
            for m in messages
            if isinstance(m, dict) and m.get("role") == "user"
        ]
        with self.lock:
            self.requests += 1
            self._opened += 1
            held = HeldCall(self._new_call_id(), oc_session, users, roles, self._opened)
            if self._closing:
                held.gone = True
                return held
            self.open[held.call] = held
            self.seen.append(held)
            self.lock.notify_all()
        self._log(f"model call {held.call} opened: session {oc_session} roles {roles}")
        return held

    def _wait(self, held: HeldCall, sock: socket.socket) -> None:
        """Until the adapter answers, or OpenCode hangs up."""
        while not held.released.wait(0.02):
            try:
                readable, _, _ = select.select([sock], [], [], 0)
                if readable and sock.recv(1, socket.MSG_PEEK) == b"":
                    self.drop(held.call, "OpenCode closed the request", hung_up=True)
                    return
            except (OSError, ValueError):
                self.drop(held.call, "the connection failed", hung_up=True)
                return

    def drop(self, call: str, why: str, hung_up: bool = False) -> None:
        with self.lock:
            held = self.open.pop(call, None)
            if held is None:
                return
            if hung_up:
                self.hung_up.append((held, time.monotonic() - held.opened_at, why))
            held.gone = True
            held.released.set()
            self.lock.notify_all()
        self._log(f"model call {call} dropped: {why}")

    def answer(self, call: str, finish: str) -> bool:
        with self.lock:
            held = self.open.pop(call, None)
            if held is None:
                return False
            held.finish = finish
            held.released.set()
            self.lock.notify_all()
        return True

    def opened(self) -> int:
        """How many calls have opened so far (a mark for ``cut_since``)."""
        with self.lock:
            return len(self.seen)

    def cut_since(self, mark: int, oc_session: str) -> bool:
        """Did a call of ``oc_session`` opened after ``mark`` end unanswered
        (OpenCode hung up on it, or the adapter dropped it)?"""
        with self.lock:
            return any(h.oc_session == oc_session and h.gone for h in self.seen[mark:])

    def snapshot(self) -> list[HeldCall]:
        with self.lock:
            return sorted(self.open.values(), key=lambda c: c.opened)

    def wait_change(self, timeout: float) -> None:
        with self.lock:
            self.lock.wait(timeout)


def monotonic_ms() -> float:
    """The monotonic clock in ms, to the ns (a group member's invoke and completion)."""
    return time.monotonic_ns() / 1e6
