"""The OpenCode adapter: the released ``opencode-ai@1.18.33`` server (inbox
generation G2) behind the adapter protocol (``docs/protocol.md``), version 1.

    INBOXSIM_DATA_DIR=/some/folder python impls/opencode/adapter.py
    python impls/opencode/adapter.py --install      # download into the cache, then exit
    python impls/opencode/adapter.py --check-netns  # exit 0 if a loopback-only netns works

Standard library only; it imports nothing from ``inboxsim`` (so it runs from a
checkout or a copy on its own). See ``docs/opencode.md`` for what it maps and
what it observes; the short version:

- **Install** ``opencode-ai@1.18.33`` with npm into ``$INBOXSIM_OPENCODE_CACHE``
  (default ``~/.cache/inboxsim/opencode``) on first use, under a file lock,
  saying so on stderr. No npm, or no package: a clear error (exit 4).
- **Isolate**: the adapter process enters a new network namespace with only
  ``lo`` up (``unshare(CLONE_NEWNET)`` through ctypes; we are usually root),
  after the install and before anything else, so the server and the fake
  provider (threads of this process) can reach nothing but loopback. If that
  fails, it says so loudly on stderr and goes on with the loopback-only config
  alone (``INBOXSIM_OPENCODE_NETNS=require`` makes that an error instead, exit 5;
  ``off`` skips the namespace).
- **Server**: ``opencode serve --port P --hostname 127.0.0.1`` with fresh XDG
  folders under ``INBOXSIM_DATA_DIR``, a clean environment (no API keys, the
  ``OPENCODE_DISABLE_*`` variables) and a config file naming the fake provider.
  It dies with the adapter (``PR_SET_PDEATHSIG`` = SIGKILL, and it stays in the
  adapter's process group, which the harness kills); a server left by an
  earlier adapter on the same folder (``server.pid``) is killed first. A start
  waits for ``/api/health`` and for ``/api/provider`` to list the fake
  provider, up to ``$INBOXSIM_OPENCODE_START_TIMEOUT`` seconds (default 60).
- **IDs**: OpenCode wants ``ses…`` and ``msg_…`` IDs and lists messages by ID,
  so every harness session and input ID gets an ascending OpenCode-style ID,
  kept in ``ids.json`` (written before the request that uses it).
- **Clock**: OpenCode stamps its own clock. Each request's ``now`` is recorded
  with the wall-clock millisecond it started at (``clock.log``), and every
  OpenCode timestamp is reported as the ``now`` of the last request that had
  started by then: exact, since requests are sequential and no progress
  happens between them.
- **Answers**: whole, once the harness answers; with
  ``INBOXSIM_OPENCODE_STREAM=midstream`` each answer begins at once (the
  response head and a first text delta) and holds mid-stream until the harness
  answers, so that an interrupt or a kill lands after the response began.
- **Quiescence**: after each request that can start work, wait until every
  session is idle or blocked on a held model call (``/api/session/active``
  plus the open calls), seen twice in a row with no new event, up to
  ``$INBOXSIM_OPENCODE_SETTLE_TIMEOUT`` seconds (default 8); otherwise the
  request fails with ``internal`` and says what was still running.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import http.client
import json
import os
import random
import shutil
import signal
import socket
import sqlite3
import struct
import subprocess
import sys
import threading
import time
from bisect import bisect_right
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from events import EVENT_MAP
from fake_provider import TOOL_TARGET, Provider, monotonic_ms

VERSION = "1.18.33"
PACKAGE = f"opencode-ai@{VERSION}"
PROTOCOL = 1
# See docs/opencode.md: no synthetic, compaction barrier, fork, resume route,
# crash op or failpoints in 1.18.33; and "no_metadata", a restriction: the
# 1.18.33 prompt has no metadata field, so the harness sends none. Groups run
# free (one thread and one HTTP connection per member): the server has no
# pause points.
FEATURES = ["interrupt", "revert", "no_metadata", "group"]
PROVIDER_ID, MODEL_ID = "fake", "fake-model"
EXIT_USAGE, EXIT_INSTALL, EXIT_NETNS, EXIT_START = 2, 4, 5, 6

DISABLE_VARS = {
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    "OPENCODE_DISABLE_CLAUDE_CODE": "1",
    "OPENCODE_DISABLE_EXTERNAL_SKILLS": "1",
}


def say(text: str) -> None:
    print(f"inboxsim-opencode: {text}", file=sys.stderr, flush=True)


class Fatal(Exception):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


class Refused(Exception):
    """A protocol error response: ``code`` is a protocol error code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


# --- install -------------------------------------------------------------------


def cache_dir() -> Path:
    env = os.environ.get("INBOXSIM_OPENCODE_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "inboxsim" / "opencode"


def find_binary(cache: Path) -> Path | None:
    """The platform binary of the installed package, if it is 1.18.33."""
    try:
        meta = json.loads((cache / "node_modules" / "opencode-ai" / "package.json").read_text())
    except (OSError, ValueError):
        return None
    if meta.get("version") != VERSION:
        return None
    arch = {"x86_64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(os.uname().machine, "x64")
    for name in (f"opencode-linux-{arch}", f"opencode-linux-{arch}-baseline"):
        binary = cache / "node_modules" / name / "bin" / "opencode"
        if binary.is_file() and os.access(binary, os.X_OK):
            return binary
    return None


def ensure_installed() -> Path:
    cache = cache_dir()
    binary = find_binary(cache)
    if binary is not None:
        return binary
    npm = shutil.which("npm")
    if npm is None:
        raise Fatal(
            f"cannot install {PACKAGE}: npm is not on PATH (install Node.js and npm, or put an "
            f"npm-installed {PACKAGE} in {cache}/node_modules, or set INBOXSIM_OPENCODE_CACHE)",
            EXIT_INSTALL,
        )
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # parallel jobs: one downloads, the rest wait
        binary = find_binary(cache)
        if binary is not None:
            return binary
        if not (cache / "package.json").exists():
            (cache / "package.json").write_text(
                '{"name":"inboxsim-opencode-cache","private":true}\n'
            )
        say(f"downloading {PACKAGE} with npm into {cache} (about 180 MB, once) ...")
        started = time.monotonic()
        try:
            done = subprocess.run(
                [npm, "install", "--no-audit", "--no-fund", "--loglevel=error", PACKAGE],
                cwd=cache,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=float(os.environ.get("INBOXSIM_OPENCODE_INSTALL_TIMEOUT", "900")),
            )
        except subprocess.TimeoutExpired:
            raise Fatal(f"cannot install {PACKAGE}: npm install timed out", EXIT_INSTALL) from None
        binary = find_binary(cache)
        if done.returncode != 0 or binary is None:
            tail = (done.stderr or done.stdout).strip()[-1500:]
            raise Fatal(
                f"cannot install {PACKAGE} into {cache}: npm install exited {done.returncode}"
                f"{' but no binary for this platform was found' if done.returncode == 0 else ''}"
                f":\n{tail}",
                EXIT_INSTALL,
            )
        say(f"installed {PACKAGE} in {time.monotonic() - started:.1f} s: {binary}")
        return binary


# --- the network namespace -----------------------------------------------------

CLONE_NEWNET = 0x40000000
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1


def enter_netns() -> str | None:
    """Enter a new network namespace with ``lo`` up; None, or why it failed."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        return f"unshare(CLONE_NEWNET) failed: {os.strerror(err)}"
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            req = struct.pack("16sh", b"lo", 0)
            flags = struct.unpack("16sh", fcntl.ioctl(s, SIOCGIFFLAGS, req + b"\0" * 22)[:18])[1]
            fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sh", b"lo", flags | IFF_UP) + b"\0" * 22)
    except OSError as exc:
        return f"cannot bring lo up in the new namespace: {exc}"
    # /proc/self/net/dev is this namespace's view (/sys/class/net is the mounter's).
    with open("/proc/self/net/dev") as f:
        interfaces = sorted(line.split(":")[0].strip() for line in f.readlines()[2:])
    if interfaces != ["lo"]:
        return f"the new namespace has interfaces {interfaces}, not just lo"
    return None


def stream_mode() -> str:
    mode = os.environ.get("INBOXSIM_OPENCODE_STREAM", "whole")
    if mode not in ("whole", "midstream"):
        raise Fatal(f"INBOXSIM_OPENCODE_STREAM={mode!r}: expected whole or midstream", EXIT_USAGE)
    return mode


def call_timeout() -> int:
    """Seconds OpenCode lets a model call sit idle (no byte back) before it
    gives up on it: ``BUN_CONFIG_HTTP_IDLE_TIMEOUT`` of the server, Bun's
    fetch idle timeout, which the V2 model client (no ``timeout: false`` on
    its fetch, unlike the AI SDK path) inherits; Bun's default is 300 s, and
    the provider's ``timeout``/``headerTimeout``/``chunkTimeout`` options do
    not reach it (docs/opencode.md, "Held calls and OpenCode's give-up")."""
    raw = os.environ.get("INBOXSIM_OPENCODE_CALL_TIMEOUT", "3600")
    if not raw.isdigit() or int(raw) < 1:
        raise Fatal(
            f"INBOXSIM_OPENCODE_CALL_TIMEOUT={raw!r}: expected whole seconds >= 1", EXIT_USAGE
        )
    return int(raw)


# A hang-up of a call held at least this share of ``call_timeout`` is the
# idle timeout's (seen: 5 s gave up at 14 s, 20 at 25, 300 at ~300).
IDLE_SWEEP_MARGIN = 0.9


def netns_mode() -> str:
    mode = os.environ.get("INBOXSIM_OPENCODE_NETNS", "auto")
    if mode not in ("auto", "require", "off"):
        raise Fatal(f"INBOXSIM_OPENCODE_NETNS={mode!r}: expected auto, require or off", EXIT_USAGE)
    return mode


# --- IDs and the clock ---------------------------------------------------------

_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


class Ids:
    """Harness IDs to OpenCode IDs, persisted in ``ids.json`` before use."""

    def __init__(self, path: Path) -> None:
        self.path = path
        doc: dict[str, Any] = {}
        if path.exists():
            doc = json.loads(path.read_text())
        self.sessions: dict[str, str] = doc.get("sessions", {})
        self.inputs: dict[str, dict[str, str]] = doc.get("inputs", {})  # harness -> {oc, session}
        self.counter: int = doc.get("counter", 0)
        self.calls: int = doc.get("calls", 0)
        self.step_limit: int = doc.get("step_limit", 4)
        self.session_of = {v: k for k, v in self.sessions.items()}
        self.input_of = {v["oc"]: k for k, v in self.inputs.items()}
        self._last = 0
        self._count = 0
        # A group's members map IDs from their own threads.
        self.lock = threading.RLock()

    def save(self) -> None:
        doc = {
            "sessions": self.sessions,
            "inputs": self.inputs,
            "counter": self.counter,
            "calls": self.calls,
            "step_limit": self.step_limit,
        }
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, separators=(",", ":")))
        os.replace(tmp, self.path)  # survives a SIGKILL of this process

    def ascending(self, prefix: str) -> str:
        """An ID in OpenCode's own ascending format (prefix, 12 hex of
        time and counter, 14 base62)."""
        now = int(time.time() * 1000)
        if now != self._last:
            self._last, self._count = now, 0
        self._count += 1
        stamp = (now * 0x1000 + self._count) & 0xFFFFFFFFFFFF
        tail = "".join(random.choice(_BASE62) for _ in range(14))
        return f"{prefix}_{stamp:012x}{tail}"

    def new_session(self, harness: str) -> str:
        with self.lock:
            oc = self.ascending("ses")
            self.sessions[harness] = oc
            self.session_of[oc] = harness
            self.save()
            return oc

    def input(self, harness: str, session: str) -> str:
        """The OpenCode ID of input ``harness``, new (and saved) if unknown."""
        with self.lock:
            known = self.inputs.get(harness)
            if known is not None:
                return known["oc"]
            oc = self.ascending("msg")
            self.inputs[harness] = {"oc": oc, "session": session}
            self.input_of[oc] = harness
            self.save()
            return oc

    def admitted_in(self, harness: str, session: str) -> None:
        """OpenCode admitted input ``harness`` in ``session``: a committed
        revert frees an ID for any session (g2's ``ended_ids``), so the
        session an ID was first sent to need not be the one that holds it."""
        with self.lock:
            known = self.inputs.get(harness)
            if known is not None and known["session"] != session:
                known["session"] = session
                self.save()

    def fresh_input(self) -> str:
        with self.lock:
            while True:
                self.counter += 1
                name = f"in-{self.counter}"
                if name not in self.inputs:
                    return name

    def fresh_call(self) -> str:
        with self.lock:
            self.calls += 1
            return f"call-{self.calls}"


class Clock:
    """OpenCode's wall-clock milliseconds to the harness's ``now``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.walls: list[int] = []
        self.nows: list[int] = []
        if path.exists():
            for line in path.read_text().splitlines():
                parts = line.split()
                if len(parts) == 2:
                    self.walls.append(int(parts[0]))
                    self.nows.append(int(parts[1]))
        self._file = open(path, "a")  # noqa: SIM115 - for the process's life

    def tick(self, now: int) -> None:
        """A request with this ``now`` starts: from here on, OpenCode's
        timestamps are reported as ``now`` (until a later one)."""
        if self.nows and now <= self.nows[-1]:
            return
        # Let the millisecond of everything before turn over, so that no
        # earlier timestamp can equal this request's start.
        time.sleep(0.002)
        wall = int(time.time() * 1000)
        if self.walls and wall <= self.walls[-1]:
            wall = self.walls[-1] + 1
        self.walls.append(wall)
        self.nows.append(now)
        self._file.write(f"{wall} {now}\n")
        self._file.flush()
        time.sleep(0.002)

    def now_of(self, wall: int | None) -> int:
        if wall is None or not self.walls:
            return self.nows[-1] if self.nows else 0
        i = bisect_right(self.walls, int(wall))
        return self.nows[i - 1] if i > 0 else self.nows[0]


# --- the server ----------------------------------------------------------------


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

    def db(self) -> sqlite3.Connection:
        conn = sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True, timeout=5)
        return conn


# --- the adapter ---------------------------------------------------------------


class Adapter:
    def __init__(self, data: Path, binary: Path, netns: str) -> None:
        self.data = data
        self.netns = netns
        self.ids = Ids(data / "ids.json")
        self.clock = Clock(data / "clock.log")
        self.provider = Provider(self._new_call_id, say, midstream=stream_mode() == "midstream")
        self.server = Server(binary, data, self.provider.port)
        self.project = data / "project"  # the served folder: file paths are in it
        self.settle_timeout = float(os.environ.get("INBOXSIM_OPENCODE_SETTLE_TIMEOUT", "8"))
        self.requests = 0
        # A call's context, read once right after it opened: what the model was
        # sent, whatever a later revert does to the messages it named.
        self.contexts: dict[str, tuple[list[str], int]] = {}  # call -> (context, step)
        # OpenCode session -> (the last user message seq its previous call
        # carried, that call's step): a call carrying a later one follows a
        # promotion, so it is step 1 (``_call_entry``).
        self.runs: dict[str, tuple[int, int]] = {}
        # A group member's thread: its own HTTP connection, and no settling
        # of its own (the group settles once, when every member is done).
        self.member = threading.local()

    def _new_call_id(self) -> str:
        call = self.ids.fresh_call()
        self.ids.save()
        return call

    def start(self) -> None:
        self.server.start(float(os.environ.get("INBOXSIM_OPENCODE_START_TIMEOUT", "60")))
        self.provider.start()

    def close(self) -> None:
        self.provider.close()
        self.server.stop()

    def server_died(self, wait: float = 2.0) -> bool:
        """Has the server exited? (A SIGKILL's connection resets can come a
        moment before its exit status, so wait up to ``wait`` seconds.)"""
        proc = self.server.proc
        deadline = time.monotonic() + wait
        while proc is not None and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        return proc is None or proc.poll() is not None

    def restart(self) -> None:
        """Start the server again on the same folder, after it died."""
        self.server.stop()
        self.contexts.clear()
        self.runs.clear()
        with self.provider.lock:
            self.provider.hung_up.clear()  # the dead server's connections
        for held in self.provider.snapshot():  # the dead server's requests
            self.provider.drop(held.call, "the server died")
        self.server.start(float(os.environ.get("INBOXSIM_OPENCODE_START_TIMEOUT", "60")))

    # --- helpers ---------------------------------------------------------------

    @property
    def http(self) -> Http:
        own: Http | None = getattr(self.member, "http", None)
        if own is not None:
            return own
        assert self.server.http is not None
        return self.server.http

    def oc_session(self, harness: str) -> str:
        oc = self.ids.sessions.get(harness)
        if oc is None or not self._session_exists(oc):
            raise Refused("session_not_found", f"no session {harness!r}")
        return oc

    def _session_exists(self, oc: str) -> bool:
        with contextlib.closing(self.server.db()) as db:
            try:
                return (
                    db.execute("SELECT 1 FROM session WHERE id = ?", (oc,)).fetchone() is not None
                )
            except sqlite3.OperationalError:
                return False

    def active(self) -> set[str]:
        status, body = self.http.call("GET", "/api/session/active")
        if status != 200 or not isinstance(body, dict):
            raise Refused("internal", f"GET /api/session/active answered {status}: {body!r}")
        return set((body.get("data") or {}).keys())

    def last_seq(self, oc: str) -> int:
        with contextlib.closing(self.server.db()) as db:
            row = db.execute("SELECT max(seq) FROM event WHERE aggregate_id = ?", (oc,)).fetchone()
        return -1 if row is None or row[0] is None else int(row[0])

    def settle(self, watch: set[str], wake: str | None = None) -> None:
        """Until every session is idle or blocked on a held model call
        (adapter protocol "Quiescence"), seen twice running with nothing new
        in the watched sessions' logs. ``wake``: a session a prompt just woke,
        which must get going (become active, or promote everything) first.
        A group member does not settle: the group does, once (``op_group``)."""
        if getattr(self.member, "http", None) is not None:
            return
        deadline = time.monotonic() + self.settle_timeout
        previous: tuple[Any, ...] | None = None
        wake_deadline = time.monotonic() + 1.0
        while True:
            active = self.active()
            held = {c.oc_session for c in self.provider.snapshot()}
            running = sorted(active - held)
            waking = False
            if wake is not None and wake not in active and wake not in held:
                waking = time.monotonic() < wake_deadline and self._has_pending(wake)
            watched = {s: self.last_seq(s) for s in sorted(watch | active)}
            state = (frozenset(active), frozenset(held), tuple(watched.items()))
            if not running and not waking and state == previous:
                for oc in watch - active - held:
                    self.runs.pop(oc, None)  # idle: its next call starts a run
                for call in self.provider.snapshot():
                    self._call_entry(call)  # fix its context now
                return
            previous = state if not running and not waking else None
            if time.monotonic() > deadline:
                names = [self.ids.session_of.get(s, s) for s in running]
                raise Refused(
                    "internal",
                    f"OpenCode did not settle within {self.settle_timeout:g} s: sessions "
                    f"{names} still running with no model call open"
                    + (f"; {wake} woken but not started" if waking else ""),
                )
            self.provider.wait_change(0.015)

    def _has_pending(self, oc: str) -> bool:
        with contextlib.closing(self.server.db()) as db:
            row = db.execute(
                "SELECT 1 FROM session_input WHERE session_id = ? AND promoted_seq IS NULL",
                (oc,),
            ).fetchone()
        return row is not None

    def http_error(self, status: int, body: Any, what: str) -> Refused:
        tag = body.get("_tag") if isinstance(body, dict) else None
        message = body.get("message") if isinstance(body, dict) else str(body)
        text = f"{what}: OpenCode answered {status} {tag or ''}: {message}"
        if status == 404 and tag == "MessageNotFoundError":
            return Refused("message_not_found", text)
        if status == 404:
            return Refused("session_not_found", text)
        if status == 409:
            return Refused("prompt_conflict", text)
        if status == 400:
            return Refused("invalid_request", text)
        return Refused("internal", text)

    # --- operations ------------------------------------------------------------

    def check_hung_up(self) -> None:
        """Fail (``internal``, before the request does anything) if OpenCode
        gave up on a held call after its HTTP client's idle timeout
        (``call_timeout``) since the last request: a hang-up of a call held
        that long, which nothing but that timeout makes (an interrupt, or a
        call OpenCode aborts as its turn ends, hangs up at once and is left
        to lockstep: the call leaves the open set). The model has no wall
        clock and no such rule (its calls wait for the harness's answer), so
        lockstep cannot go on; the message says what happened instead of
        leaving a vanished call to be found as a divergence."""
        with self.provider.lock:
            hung = list(self.provider.hung_up)
            self.provider.hung_up.clear()
        timeout = self.server.call_timeout
        # Bun sweeps idle sockets now and then: never before the timeout.
        own = [h for h in hung if h[1] >= IDLE_SWEEP_MARGIN * timeout]
        if own:
            held, seconds, why = own[0]
            session = self.ids.session_of.get(held.oc_session, held.oc_session)
            raise Refused(
                "internal",
                f"OpenCode gave up on model call {held.call} of session {session!r} after "
                f"{seconds:.0f} s held without an answer ({why}): its HTTP client's idle "
                f"timeout (BUN_CONFIG_HTTP_IDLE_TIMEOUT = INBOXSIM_OPENCODE_CALL_TIMEOUT = "
                f"{timeout} s; OpenCode's own default is 300 s). The model has no such rule: "
                "answer calls sooner or raise the timeout",
            )

    def handle(self, req: dict[str, Any]) -> dict[str, Any]:
        self.check_hung_up()
        handler = self.handler(req)
        if req["op"] not in ("log", "messages", "pending", "calls"):
            self.clock.tick(req["now"])
        self.requests += 1
        return dict(handler(req))

    def handler(self, req: dict[str, Any]) -> Any:
        op = req.get("op")
        now = req.get("now")
        if not isinstance(now, int) or isinstance(now, bool):
            raise Refused("invalid_request", "now must be an integer")
        if "crash_at" in req:
            raise Refused("unsupported", "OpenCode has no failpoints (feature not listed)")
        handler = getattr(self, f"op_{op}", None)
        if handler is None:
            raise Refused("unsupported", f"OpenCode 1.18.33 has no operation {op!r} here")
        return handler

    def op_group(self, req: dict[str, Any]) -> dict[str, Any]:
        """A concurrent group (docs/protocol.md, "Groups and pause points"),
        run free: one thread and one HTTP connection per member, released
        together by a barrier, each timed on the monotonic clock (ms) just
        before it starts and when its outcome is back; then quiescence once.
        No pause points, so a ``schedule`` (never sent without the feature)
        is ignored. The clock ticked once for the group's one ``now``."""
        members = req.get("requests")
        if not isinstance(members, list) or not members:
            raise Refused("invalid_request", "a group needs a non-empty list of requests")
        rids = [m.get("rid") if isinstance(m, dict) else None for m in members]
        if any(not isinstance(r, int) or isinstance(r, bool) for r in rids):
            raise Refused("invalid_request", "every request of a group needs an integer rid")
        if len(set(rids)) != len(rids):
            raise Refused("invalid_request", "the requests of a group need distinct rids")
        if any(m.get("now") != req["now"] for m in members):
            raise Refused("invalid_request", "every request of a group carries the group's now")
        if any(m.get("op") in ("hello", "crash", "group") for m in members):
            raise Refused("invalid_request", "a group cannot hold hello, crash or group")
        sessions = {self.ids.sessions[s] for s in _sessions_named(members, self.ids.sessions)}
        calls = {c.call: c.oc_session for c in self.provider.snapshot()}
        sessions |= {calls[m["call"]] for m in members if m.get("call") in calls}
        outcomes: list[dict[str, Any]] = [{} for _ in members]
        lost: list[int] = []  # members whose HTTP request broke off
        start = threading.Barrier(len(members))

        def member(i: int) -> None:
            self.member.http = Http(self.server.port)
            outcome: dict[str, Any] = {"rid": rids[i]}
            try:
                start.wait()
                outcome["invoked"] = monotonic_ms()
                try:
                    outcome.update(ok=True, result=dict(self.handler(members[i])(members[i])))
                except Refused as refused:
                    outcome.update(ok=False, error={"code": refused.code, "message": str(refused)})
                except (OSError, http.client.HTTPException) as exc:
                    lost.append(i)
                    error = {"code": "internal", "message": f"{type(exc).__name__}: {exc}"}
                    outcome.update(ok=False, error=error)
                except (sqlite3.Error, KeyError) as exc:
                    error = {"code": "internal", "message": f"{type(exc).__name__}: {exc}"}
                    outcome.update(ok=False, error=error)
                outcome["completed"] = monotonic_ms()
            finally:
                self.member.http.close()
                outcomes[i] = outcome

        threads = [threading.Thread(target=member, args=(i,)) for i in range(len(members))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        woken = {
            self.ids.sessions[m["session"]]
            for m in members
            if m.get("op") == "prompt"
            and m.get("resume") is not False
            and m.get("session") in self.ids.sessions
        }
        interrupted = {
            self.ids.sessions[m["session"]]
            for m in members
            if m.get("op") == "interrupt" and m.get("session") in self.ids.sessions
        }
        try:
            if lost and self.server_died():
                raise ConnectionError("the server died during the group")
            wakes: list[str | None] = [*sorted(woken)] or [None]
            for oc in wakes:
                self.settle(sessions, wake=oc)
            if interrupted:
                self.drop_interrupted(interrupted)
        except (OSError, http.client.HTTPException):
            if not self.server_died():
                raise
            # The server died with the group in flight (SIGKILLed: a kill the
            # harness made, as between requests): a member whose request broke
            # off has an unknown outcome; restart, as a kill's restart would,
            # and nothing resumes by itself (G2).
            for i in lost:
                outcomes[i] = {"rid": rids[i], "unknown": True, "invoked": outcomes[i]["invoked"]}
            say("the server died during a group; restarting it")
            self.restart()
            self.settle(sessions)
        return {"outcomes": outcomes}

    def op_hello(self, req: dict[str, Any]) -> dict[str, Any]:
        if "step_limit" in req:
            limit = req["step_limit"]
            if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
                raise Refused(
                    "invalid_request", f"step_limit must be a positive integer: {limit!r}"
                )
            self.ids.step_limit = limit
            self.ids.save()
        isolation = "netns" if self.netns == "on" else "loopback config only, NO netns"
        return {
            "protocol": PROTOCOL,
            "implementation": f"opencode {VERSION} (G2 server; inboxsim adapter, {isolation})",
            "features": FEATURES,
            "step_limit": self.ids.step_limit,
        }

    def op_create(self, req: dict[str, Any]) -> dict[str, Any]:
        harness = _str(req, "session")
        oc = self.ids.sessions.get(harness)
        if oc is not None and self._session_exists(oc):
            return {"session": harness}  # adopted
        if oc is None:
            oc = self.ids.new_session(harness)
        body = {"id": oc, "model": {"id": MODEL_ID, "providerID": PROVIDER_ID}}
        status, answer = self.http.call("POST", "/api/session", body)
        if status != 200:
            raise self.http_error(status, answer, "POST /api/session")
        return {"session": harness}

    def op_prompt(self, req: dict[str, Any]) -> dict[str, Any]:
        harness = _str(req, "session")
        oc = self.oc_session(harness)
        metadata = req.get("metadata") or {}
        if metadata:
            raise Refused(
                "unsupported",
                "OpenCode 1.18.33's prompt has no metadata field (payload {text, files, agents})",
            )
        text = _str(req, "text")
        prompt: dict[str, Any] = {"text": text}
        if req.get("files"):
            prompt["files"] = [file_to_opencode(f, self.project) for f in req["files"]]
        if req.get("agents"):
            prompt["agents"] = req["agents"]
        given = req.get("input")
        input_id = self.ids.fresh_input() if given is None else _str(req, "input")
        msg = self.ids.input(input_id, harness)
        body: dict[str, Any] = {"id": msg, "prompt": prompt}
        if req.get("delivery") is not None:
            body["delivery"] = req["delivery"]
        if req.get("resume") is not None:
            body["resume"] = req["resume"]
        status, answer = self.http.call("POST", f"/api/session/{oc}/prompt", body)
        if status != 200:
            raise self.http_error(status, answer, "POST prompt")
        data = answer["data"]
        self.ids.admitted_in(input_id, harness)
        receipt = {
            "input": self.ids.input_of.get(data["id"], data["id"]),
            "session": self.ids.session_of.get(data["sessionID"], data["sessionID"]),
            "type": "user",
            "data": {
                "text": data["prompt"].get("text"),
                "files": self.files_of(data["prompt"]),
                "agents": data["prompt"].get("agents") or [],
                "metadata": {},
            },
            "delivery": data.get("delivery"),
            "admitted_seq": data["admittedSeq"],
            "time": self.clock.now_of(data.get("timeCreated")),
        }
        self.settle({oc}, wake=oc if req.get("resume") is not False else None)
        return receipt

    def files_of(self, prompt: dict[str, Any]) -> list[dict[str, Any]]:
        return [file_from_opencode(f, self.project) for f in prompt.get("files") or []]

    def op_interrupt(self, req: dict[str, Any]) -> dict[str, Any]:
        oc = self.oc_session(_str(req, "session"))
        busy = oc in self.active() or any(c.oc_session == oc for c in self.provider.snapshot())
        status, answer = self.http.call("POST", f"/api/session/{oc}/interrupt")
        if status not in (200, 204):
            raise self.http_error(status, answer, "POST interrupt")
        self.settle({oc})
        if getattr(self.member, "http", None) is None:
            self.drop_interrupted({oc})
        return {"interrupted": busy}

    def drop_interrupted(self, sessions: set[str]) -> None:
        """Once settled: a held call of an interrupted session that is no
        longer active is one OpenCode gave up on."""
        active = self.active()
        for held in self.provider.snapshot():
            if held.oc_session in sessions and held.oc_session not in active:
                self.provider.drop(held.call, "the session was interrupted")

    def op_calls(self, req: dict[str, Any]) -> dict[str, Any]:
        held = self.provider.snapshot()
        self.contexts = {c.call: self.contexts[c.call] for c in held if c.call in self.contexts}
        return {"calls": [self._call_entry(c) for c in held]}

    def _call_entry(self, held: Any) -> dict[str, Any]:
        """The protocol's view of a held call, fixed the first time it is
        asked for (at the settle after it opened): its context, the user
        messages it carries aligned in order with the session's promoted
        ones (by text; positional, so duplicates are fine), and its step: 1
        when it carries a message promoted after everything its session's
        previous call carried (a later ``session_message`` seq), else the
        previous step + 1. By seq, not by text: after a committed revert a
        new message can repeat a truncated one's text (seed 116 of the
        concurrent run took such a promotion for a next step)."""
        known = self.contexts.get(held.call)
        if known is None:
            transcript = self._user_messages(held.oc_session)
            context, i, last = [], 0, -1
            for text in held.user_texts:
                j = i
                while j < len(transcript) and transcript[j][1] != text:
                    j += 1
                if j < len(transcript):
                    context.append(transcript[j][0])
                    last = max(last, transcript[j][2])
                    i = j + 1
                else:
                    context.append(f"unmapped:{text}")
            previous = self.runs.get(held.oc_session)
            step = 1 if previous is None or last > previous[0] else previous[1] + 1
            self.runs[held.oc_session] = (max(last, previous[0] if previous else -1), step)
            known = self.contexts[held.call] = (context, step)
        context, step = known
        return {
            "call": held.call,
            "session": self.ids.session_of.get(held.oc_session, held.oc_session),
            "kind": "step",
            "step": step,
            "final": step >= self.ids.step_limit,
            "context": context,
        }

    def _user_messages(self, oc: str) -> list[tuple[str, str, int]]:
        with contextlib.closing(self.server.db()) as db:
            rows = db.execute(
                "SELECT id, data, seq FROM session_message WHERE session_id = ? AND type = 'user' "
                "ORDER BY seq",
                (oc,),
            ).fetchall()
        return [
            (self.ids.input_of.get(i, i), json.loads(d).get("text", ""), int(q)) for i, d, q in rows
        ]

    def op_answer(self, req: dict[str, Any]) -> dict[str, Any]:
        call, finish = _str(req, "call"), _str(req, "finish")
        if finish not in ("stop", "tool", "error"):
            raise Refused("invalid_request", f"finish must be stop, tool or error: {finish!r}")
        held = next((c for c in self.provider.snapshot() if c.call == call), None)
        if held is None:
            raise Refused("invalid_request", f"call {call!r} is not open")
        if finish == "tool" and self._call_entry(held)["final"]:
            finish = "stop"  # protocol: on the final step, tool counts as stop
        self.provider.answer(call, finish)
        self.settle({held.oc_session})
        return {}

    def op_revert_stage(self, req: dict[str, Any]) -> dict[str, Any]:
        harness = _str(req, "session")
        oc = self.oc_session(harness)
        message = _str(req, "message")
        known = self.ids.inputs.get(message)
        if known is None or known["session"] != harness:
            raise Refused("message_not_found", f"no message {message!r} in session {harness!r}")
        status, answer = self.http.call(
            "POST", f"/api/session/{oc}/revert/stage", {"messageID": known["oc"]}
        )
        if status != 200:
            raise self.http_error(status, answer, "POST revert/stage")
        self.settle({oc})
        return {}

    def op_revert_clear(self, req: dict[str, Any]) -> dict[str, Any]:
        return self._revert("clear", _str(req, "session"))

    def op_revert_commit(self, req: dict[str, Any]) -> dict[str, Any]:
        return self._revert("commit", _str(req, "session"))

    def _revert(self, action: str, harness: str) -> dict[str, Any]:
        """``clear`` or ``commit``: 204, and nothing at all when nothing is
        staged (1.18.33 returns early), as the protocol asks."""
        oc = self.oc_session(harness)
        status, answer = self.http.call("POST", f"/api/session/{oc}/revert/{action}")
        if status not in (200, 204):
            raise self.http_error(status, answer, f"POST revert/{action}")
        self.settle({oc})
        return {}

    def op_log(self, req: dict[str, Any]) -> dict[str, Any]:
        oc = self.oc_session(_str(req, "session"))
        after = req.get("after")
        events: list[dict[str, Any]] = []
        cursor = None if after is None else int(after)
        if cursor is None or cursor < 0:
            # The history route serves SessionDurableEvents only, so it omits
            # seq 0 (``session.created``), which the event table holds: read
            # it there, so the log starts at seq 0 as the durable log does.
            created = self._created_event(oc)
            if created is not None:
                events.append(created)
                cursor = 0
        while True:
            query = "limit=100" if cursor is None or cursor < 0 else f"after={cursor}&limit=100"
            status, body = self.http.call("GET", f"/api/session/{oc}/history?{query}")
            if status != 200:
                raise self.http_error(status, body, "GET history")
            for e in body["data"]:
                events.append(self._event(e))
                cursor = e["durable"]["seq"]
            if not body.get("hasMore") or not body["data"]:
                break
        return {"events": events}

    def _created_event(self, oc: str) -> dict[str, Any] | None:
        with contextlib.closing(self.server.db()) as db:
            row = db.execute(
                "SELECT type, data FROM event WHERE aggregate_id = ? AND seq = 0", (oc,)
            ).fetchone()
        if row is None:
            return None
        native = row[0].rsplit(".", 1)[0] if row[0][-1:].isdigit() else row[0]
        info = (json.loads(row[1]).get("info") or {}).get("time") or {}
        return {
            "seq": 0,
            "type": EVENT_MAP.get(native, f"other:{native}"),
            "time": self.clock.now_of(info.get("created")),
            "data": {},
        }

    def _event(self, e: dict[str, Any]) -> dict[str, Any]:
        native, data = e["type"], e.get("data") or {}
        kind = EVENT_MAP.get(native, f"other:{native}")
        out: dict[str, Any] = {
            "seq": e["durable"]["seq"],
            "type": kind,
            "time": self.clock.now_of(data.get("timestamp")),
        }
        msg = data.get("messageID")
        if msg is not None and kind in ("admitted", "promoted"):
            out["input"] = self.ids.input_of.get(msg, msg)
        # Only deterministic fields: no OpenCode IDs, clocks, costs or tokens.
        if kind == "admitted":
            prompt = data.get("prompt") or {}
            out["data"] = {
                "type": "user",
                "delivery": data.get("delivery"),
                "data": {
                    "text": prompt.get("text"),
                    "files": self.files_of(prompt),
                    "agents": prompt.get("agents") or [],
                    "metadata": {},
                },
            }
        elif kind == "promoted":
            out["data"] = {"delivery": data.get("delivery")}
        elif kind == "step_ended":
            out["data"] = {"finish": data.get("finish")}
        elif kind == "step_failed":
            out["data"] = {"error": _error_text(data)}
        elif kind == "revert_staged":
            staged = (data.get("revert") or {}).get("messageID")
            out["data"] = {"message": self.ids.input_of.get(staged, staged)}
        elif kind == "revert_committed":
            out["data"] = {"to": self.ids.input_of.get(msg, msg)}
        elif native == "session.next.text.ended":
            out["data"] = {"text": data.get("text")}
        elif native in ("session.next.tool.called", "session.next.tool.success"):
            out["data"] = {"tool": data.get("tool") or data.get("name")}
        else:
            out["data"] = {}
        return out

    def op_messages(self, req: dict[str, Any]) -> dict[str, Any]:
        oc = self.oc_session(_str(req, "session"))
        with contextlib.closing(self.server.db()) as db:
            rows = db.execute(
                "SELECT id, seq, time_created FROM session_message "
                "WHERE session_id = ? AND type = 'user' ORDER BY seq",
                (oc,),
            ).fetchall()
        return {
            "messages": [
                {
                    "id": self.ids.input_of.get(i, i),
                    "type": "user",
                    "seq": seq,
                    "time": self.clock.now_of(t),
                }
                for i, seq, t in rows
            ]
        }

    def op_pending(self, req: dict[str, Any]) -> dict[str, Any]:
        oc = self.oc_session(_str(req, "session"))
        with contextlib.closing(self.server.db()) as db:
            rows = db.execute(
                "SELECT id, delivery, admitted_seq, time_created FROM session_input "
                "WHERE session_id = ? AND promoted_seq IS NULL ORDER BY admitted_seq",
                (oc,),
            ).fetchall()
        return {
            "pending": [
                {
                    "input": self.ids.input_of.get(i, i),
                    "type": "user",
                    "delivery": d,
                    "admitted_seq": s,
                    "time": self.clock.now_of(t),
                }
                for i, d, s, t in rows
            ]
        }


def _sessions_named(members: list[dict[str, Any]], known: dict[str, str]) -> set[str]:
    """The harness sessions a group's members name (and the adapter knows)."""
    return {m["session"] for m in members if isinstance(m.get("session"), str)} & set(known)


def _str(req: dict[str, Any], key: str) -> str:
    value = req.get(key)
    if not isinstance(value, str):
        raise Refused("invalid_request", f"{key} must be a string, not {value!r}")
    return value


def _error_text(data: dict[str, Any]) -> str:
    err = data.get("error")
    if isinstance(err, dict):
        return str(err.get("message") or err.get("name") or "")
    return str(err or data.get("message") or "")


# --- files -------------------------------------------------------------------

# A protocol file is opaque JSON; the adapter maps the shape a scenario uses,
# ``{path, mime?, name?, description?}``, onto 1.18.33's file part
# ``{uri, name?, description?}`` (``uri`` required; 400 without it). Probed
# on the real server (docs/opencode.md, "Files"): it takes any string as the
# URI and keeps it verbatim, reads no file at admission, and sets its own
# ``mime`` from the extension (``.ts`` is ``video/mp2t``), ignoring a given
# one. So ``path`` becomes a ``file://`` URI in the served project folder, the
# protocol's ``mime`` rides in its query (which OpenCode's own MIME guess
# ignores), and a receipt or an admitted event maps the recorded URI back:
# the file round-trips through OpenCode's record, and OpenCode's retry
# identity (which compares the recorded part) judges all of it.
FILE_KEYS = ("path", "mime", "name", "description")


def file_to_opencode(part: Any, project: Path) -> dict[str, str]:
    """A protocol file as 1.18.33's file part (``unsupported`` if not mappable)."""
    if (
        not isinstance(part, dict)
        or not part.get("path")
        or set(part) - set(FILE_KEYS)
        or not all(isinstance(v, str) for v in part.values())
    ):
        raise Refused(
            "unsupported",
            f"the OpenCode adapter maps files of the shape {{path, mime?, name?, description?}}"
            f" (strings) onto 1.18.33's {{uri, name?, description?}}, not {part!r}",
        )
    uri = (project / part["path"]).as_uri()
    if "mime" in part:
        uri += "?" + urlencode({"mime": part["mime"]})
    out = {"uri": uri}
    out.update((k, part[k]) for k in ("name", "description") if k in part)
    return out


def file_from_opencode(part: dict[str, Any], project: Path) -> dict[str, Any]:
    """The protocol file a recorded OpenCode file part stands for (a part the
    adapter did not write, as OpenCode recorded it)."""
    split = urlsplit(str(part.get("uri", "")))
    if split.scheme != "file":
        return dict(part)
    path = Path(unquote(split.path))
    out: dict[str, Any] = {
        "path": str(path.relative_to(project)) if path.is_relative_to(project) else str(path)
    }
    mime = parse_qs(split.query).get("mime")
    if mime:
        out["mime"] = mime[0]
    out.update((k, part[k]) for k in ("name", "description") if k in part)
    return out


# --- main ----------------------------------------------------------------------


def serve(adapter: Adapter) -> int:
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        try:
            req = json.loads(line)
        except ValueError:
            say(f"request is not JSON: {line[:200]!r}")
            return EXIT_USAGE
        rid = req.get("rid") if isinstance(req, dict) else None
        if not isinstance(rid, int) or isinstance(rid, bool):
            say(f"request has no integer rid: {line[:200]!r}")
            return EXIT_USAGE
        try:
            response = {"rid": rid, "ok": True, "result": adapter.handle(req)}
        except Refused as refused:
            response = {
                "rid": rid,
                "ok": False,
                "error": {"code": refused.code, "message": str(refused)},
            }
        except (OSError, http.client.HTTPException, sqlite3.Error, KeyError, TypeError) as exc:
            alive = adapter.server.proc is not None and adapter.server.proc.poll() is None
            message = f"{type(exc).__name__}: {exc}" + ("" if alive else " (the server died)")
            response = {"rid": rid, "ok": False, "error": {"code": "internal", "message": message}}
        out.write(json.dumps(response, separators=(",", ":"), ensure_ascii=False).encode() + b"\n")
        out.flush()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:
        if args == ["--install"]:
            print(ensure_installed())
            return 0
        if args == ["--check-netns"]:
            why = enter_netns()
            if why:
                print(why)
                return EXIT_NETNS
            return 0
        if args:
            say(f"unknown arguments {args}; usage: adapter.py [--install | --check-netns]")
            return EXIT_USAGE
        folder = os.environ.get("INBOXSIM_DATA_DIR")
        if not folder:
            say("INBOXSIM_DATA_DIR is not set")
            return EXIT_USAGE
        data = Path(folder).resolve()
        data.mkdir(parents=True, exist_ok=True)
        mode = netns_mode()
        binary = ensure_installed()  # before the namespace: npm needs the network
        netns = "off"
        if mode != "off":
            why = enter_netns()
            if why is None:
                netns = "on"
            elif mode == "require":
                raise Fatal(f"no loopback-only network namespace: {why}", EXIT_NETNS)
            else:
                bar = "!" * 72
                say(
                    f"\n{bar}\nWARNING: no network namespace ({why}).\n"
                    "OpenCode runs with the loopback-only provider config ALONE: nothing\n"
                    "stops it from reaching the network if it falls back to a built-in\n"
                    f"provider. Set INBOXSIM_OPENCODE_NETNS=require to refuse instead.\n{bar}"
                )
        adapter = Adapter(data, binary, netns)
    except Fatal as fatal:
        say(str(fatal))
        return fatal.code
    try:
        adapter.start()
        return serve(adapter)
    except Fatal as fatal:
        say(str(fatal))
        return fatal.code
    finally:
        adapter.close()


if __name__ == "__main__":
    raise SystemExit(main())
