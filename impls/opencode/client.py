"""The adapter's HTTP client of the OpenCode server: JSON over one keep-alive
connection (a group member opens its own)."""

from __future__ import annotations

import http.client
import json
from typing import Any

from failures import Refused


class Http:
    """A small JSON client for the server, one keep-alive connection."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.conn: http.client.HTTPConnection | None = None

    def call(
        self, method: str, path: str, body: Any = None, timeout: float = 10.0
    ) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        headers = {"content-type": "application/json"} if data is not None else {}
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
            try:
                self.conn.timeout = timeout
                self.conn.request(method, path, body=data, headers=headers)
                resp = self.conn.getresponse()
                raw = resp.read()
                kind = resp.getheader("content-type") or ""
                if resp.getheader("connection", "").lower() == "close":
                    self.close()
                break
            except (ConnectionError, http.client.HTTPException, OSError):
                self.close()
                if attempt or method != "GET":
                    raise
        if "json" in kind:
            return resp.status, json.loads(raw) if raw else None
        if resp.status < 300 and raw:
            # Unknown paths fall through to the web UI's index.html, with 200.
            raise Refused("internal", f"{method} {path}: not a JSON response ({kind})")
        return resp.status, raw.decode(errors="replace")

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None
