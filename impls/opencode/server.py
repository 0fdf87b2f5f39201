"""The ``opencode serve`` process: its folders, clean environment and config
(naming only the fake provider), start-up until healthy with the provider
listed, its lifetime (``PR_SET_PDEATHSIG``, a stale server of the same folder
killed first) and read-only access to its database.
"""

from __future__ import annotations

import contextlib
import ctypes
import http.client
import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from client import Http
from failures import EXIT_START, Fatal, Refused, say
from fake_provider import TOOL_TARGET
from install import VERSION
from settings import call_timeout

PROVIDER_ID, MODEL_ID = "fake", "fake-model"

DISABLE_VARS = {
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    "OPENCODE_DISABLE_CLAUDE_CODE": "1",
    "OPENCODE_DISABLE_EXTERNAL_SKILLS": "1",
}


def _pdeathsig() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: die with the adapter


def kill_stale(pidfile: Path) -> None:
    """A server an earlier adapter left on this folder must not share it."""
    try:
        pid = int(pidfile.read_text().split()[0])
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError, IndexError):
        return
    if not any(part.endswith(b"opencode") for part in cmdline) or b"serve" not in cmdline:
        return
    say(f"killing the server an earlier adapter left running (pid {pid})")
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    for _ in range(200):
        if not Path(f"/proc/{pid}").exists():
            break
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.01)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    def __init__(self, binary: Path, data: Path, provider_port: int) -> None:
        self.binary = binary
        self.data = data
        self.provider_port = provider_port
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.http: Http | None = None
        self.db_path = data / "xdg" / "data" / "opencode" / "opencode.db"
        self.start_seconds = 0.0
        self.call_timeout = call_timeout()

    def env(self) -> dict[str, str]:
        d = self.data
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(d / "home"),
            "XDG_DATA_HOME": str(d / "xdg" / "data"),
            "XDG_CONFIG_HOME": str(d / "xdg" / "config"),
            "XDG_CACHE_HOME": str(d / "xdg" / "cache"),
            "XDG_STATE_HOME": str(d / "xdg" / "state"),
            "TMPDIR": str(d / "tmp"),
            "LANG": "C.UTF-8",
            "BUN_CONFIG_HTTP_IDLE_TIMEOUT": str(self.call_timeout),
            **DISABLE_VARS,
        }
        return env

    def write_config(self) -> None:
        config = {
            "$schema": "https://opencode.ai/config.json",
            "autoupdate": False,
            "share": "disabled",
            "enabled_providers": [PROVIDER_ID],
            "provider": {
                PROVIDER_ID: {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "inboxsim fake provider",
                    "options": {
                        "baseURL": f"http://127.0.0.1:{self.provider_port}/v1",
                        "apiKey": "not-a-key",
                    },
                    "models": {
                        MODEL_ID: {
                            "name": "inboxsim fake model",
                            "limit": {"context": 1000000, "output": 4096},
                        }
                    },
                }
            },
            "model": f"{PROVIDER_ID}/{MODEL_ID}",
            "small_model": f"{PROVIDER_ID}/{MODEL_ID}",
        }
        folder = self.data / "xdg" / "config" / "opencode"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "opencode.json").write_text(json.dumps(config, indent=1))

    def start(self, timeout: float) -> None:
        started = time.monotonic()
        for sub in ("home", "project", "tmp", "xdg/data", "xdg/cache", "xdg/state"):
            (self.data / sub).mkdir(parents=True, exist_ok=True)
        (self.data / "project" / TOOL_TARGET).write_text("what the fake model's glob finds\n")
        kill_stale(self.data / "server.pid")
        self.write_config()
        self.port = free_port()
        log = open(self.data / "server.log", "ab")  # noqa: SIM115 - inherited by the child
        log.write(f"--- inboxsim: server start on port {self.port}\n".encode())
        log.flush()
        self.proc = subprocess.Popen(
            [str(self.binary), "serve", "--port", str(self.port), "--hostname", "127.0.0.1"],
            cwd=self.data / "project",
            env=self.env(),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            preexec_fn=_pdeathsig,
        )
        log.close()
        (self.data / "server.pid").write_text(f"{self.proc.pid}\n")
        self.http = Http(self.port)
        deadline = started + timeout
        healthy = False
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise Fatal(
                    f"opencode serve exited with status {self.proc.returncode} during start-up; "
                    f"its log ({self.data / 'server.log'}) ends:\n{self.log_tail()}",
                    EXIT_START,
                )
            try:
                if not healthy:
                    status, body = self.http.call("GET", "/api/health", timeout=2)
                    healthy = status == 200 and isinstance(body, dict) and bool(body.get("healthy"))
                if healthy:
                    status, body = self.http.call("GET", "/api/provider", timeout=5)
                    ids = [p.get("id") for p in (body or {}).get("data", [])]
                    if PROVIDER_ID in ids:
                        self.start_seconds = time.monotonic() - started
                        say(
                            f"opencode {VERSION} serving on 127.0.0.1:{self.port} "
                            f"(ready in {self.start_seconds:.2f} s)"
                        )
                        return
            except (OSError, http.client.HTTPException, ValueError, Refused):
                pass
            time.sleep(0.05)
        what = "listing the fake provider" if healthy else "healthy"
        raise Fatal(
            f"opencode serve was not {what} within {timeout:g} s; its log ends:\n{self.log_tail()}",
            EXIT_START,
        )

    def log_tail(self, limit: int = 1500) -> str:
        try:
            return (self.data / "server.log").read_text(errors="replace")[-limit:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.http is not None:
            self.http.close()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(10)
