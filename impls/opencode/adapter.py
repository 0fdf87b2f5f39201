"""The OpenCode adapter: the released ``opencode-ai@1.18.33`` server (inbox
generation G2) behind the adapter protocol (``docs/protocol.md``), version 1.

    INBOXSIM_DATA_DIR=/some/folder python impls/opencode/adapter.py
    python impls/opencode/adapter.py --install      # download into the cache, then exit
    python impls/opencode/adapter.py --check-netns  # exit 0 if a loopback-only netns works

Standard library only; it imports nothing from ``inboxsim`` (so it runs from a
checkout or a copy of this folder on its own) and loads its sibling modules by
their bare names:

- ``adapter`` (this file): the protocol loop, each op mapped onto its route,
  quiescence, free-running groups, and the program's entry;
- ``failures`` (exit codes, protocol refusals), ``settings`` (the
  environment), ``install`` (the npm package), ``netns`` (the namespace);
- ``server`` (the ``opencode serve`` process), ``client`` (its HTTP client),
  ``database`` (read-only queries of its SQLite database);
- ``idmap`` (harness IDs to OpenCode's), ``clock`` (its clock to ``now``),
  ``file_parts`` (protocol files to its file parts), ``records`` (its answers,
  events and rows back as the protocol's), ``calls`` (held calls as the
  protocol's calls), ``events`` (its event types), ``fake_provider`` (the
  model provider that holds every call).

See ``docs/opencode.md`` for what it maps and what it observes; the short
version:

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

import http.client
import json
import os
import sqlite3
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from calls import CallViews
from client import Http
from clock import Clock
from database import Database
from failures import EXIT_NETNS, EXIT_USAGE, Fatal, Refused, say
from fake_provider import Provider, monotonic_ms
from file_parts import file_to_opencode
from idmap import Ids
from install import VERSION, ensure_installed
from netns import enter_netns
from records import Records, refusal
from server import MODEL_ID, PROVIDER_ID, Server
from settings import (
    IDLE_SWEEP_MARGIN,
    netns_mode,
    settle_timeout,
    start_timeout,
    stream_mode,
)

PROTOCOL = 1
# See docs/opencode.md: no synthetic, compaction barrier, fork, resume route,
# crash op or failpoints in 1.18.33; and "no_metadata", a restriction: the
# 1.18.33 prompt has no metadata field, so the harness sends none. Groups run
# free (one thread and one HTTP connection per member): the server has no
# pause points.
FEATURES = ["interrupt", "revert", "no_metadata", "group"]

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
        self.db = Database(self.server.db_path)
        self.records = Records(self.ids, self.clock, self.project)
        self.calls = CallViews(self.ids, self.db)
        self.settle_timeout = settle_timeout()
        self.requests = 0
        # A group member's thread: its own HTTP connection, and no settling
        # of its own (the group settles once, when every member is done).
        self.member = threading.local()

    def _new_call_id(self) -> str:
        call = self.ids.fresh_call()
        self.ids.save()
        return call

    def start(self) -> None:
        self.server.start(start_timeout())
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
        self.calls.clear()
        with self.provider.lock:
            self.provider.hung_up.clear()  # the dead server's connections
        for held in self.provider.snapshot():  # the dead server's requests
            self.provider.drop(held.call, "the server died")
        self.server.start(start_timeout())

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
        if oc is None or not self.db.session_exists(oc):
            raise Refused("session_not_found", f"no session {harness!r}")
        return oc

    def active(self) -> set[str]:
        status, body = self.http.call("GET", "/api/session/active")
        if status != 200 or not isinstance(body, dict):
            raise Refused("internal", f"GET /api/session/active answered {status}: {body!r}")
        return set((body.get("data") or {}).keys())

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
                waking = time.monotonic() < wake_deadline and self.db.has_pending(wake)
            watched = {s: self.db.last_seq(s) for s in sorted(watch | active)}
            state = (frozenset(active), frozenset(held), tuple(watched.items()))
            if not running and not waking and state == previous:
                for oc in watch - active - held:
                    self.calls.idle(oc)
                for call in self.provider.snapshot():
                    self.calls.entry(call)  # fix its context now
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
        mark = self.provider.opened()

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
            for m, outcome in zip(members, outcomes, strict=True):
                # An interrupt that found its session idle and then ended a
                # run the group started meanwhile (``op_interrupt``).
                result = outcome.get("result")
                if m.get("op") == "interrupt" and result == {"interrupted": False}:
                    oc = self.ids.sessions[m["session"]]
                    result["interrupted"] = self.provider.cut_since(mark, oc)
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
        if oc is not None and self.db.session_exists(oc):
            return {"session": harness}  # adopted
        if oc is None:
            oc = self.ids.new_session(harness)
        body = {"id": oc, "model": {"id": MODEL_ID, "providerID": PROVIDER_ID}}
        status, answer = self.http.call("POST", "/api/session", body)
        if status != 200:
            raise refusal(status, answer, "POST /api/session")
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
            raise refusal(status, answer, "POST prompt")
        data = answer["data"]
        self.ids.admitted_in(input_id, harness)
        receipt = self.records.receipt(data)
        self.settle({oc}, wake=oc if req.get("resume") is not False else None)
        return receipt

    def op_interrupt(self, req: dict[str, Any]) -> dict[str, Any]:
        """``interrupted``: the session was running when the request began,
        or a call of it that opened since was cut off unanswered (a run that
        started between that look and the POST, which OpenCode's interrupt
        then ended: seed 116 at concurrency 4, an interrupt racing a prompt
        that woke the session, reported false although it ended the run).
        A group member's cut-off is seen once the group settles (``op_group``)."""
        oc = self.oc_session(_str(req, "session"))
        mark = self.provider.opened()
        busy = oc in self.active() or any(c.oc_session == oc for c in self.provider.snapshot())
        status, answer = self.http.call("POST", f"/api/session/{oc}/interrupt")
        if status not in (200, 204):
            raise refusal(status, answer, "POST interrupt")
        self.settle({oc})
        if getattr(self.member, "http", None) is None:
            self.drop_interrupted({oc})
            busy = busy or self.provider.cut_since(mark, oc)
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
        self.calls.keep_only(held)
        return {"calls": [self.calls.entry(c) for c in held]}

    def op_answer(self, req: dict[str, Any]) -> dict[str, Any]:
        call, finish = _str(req, "call"), _str(req, "finish")
        if finish not in ("stop", "tool", "error"):
            raise Refused("invalid_request", f"finish must be stop, tool or error: {finish!r}")
        held = next((c for c in self.provider.snapshot() if c.call == call), None)
        if held is None:
            raise Refused("invalid_request", f"call {call!r} is not open")
        if finish == "tool" and self.calls.entry(held)["final"]:
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
            raise refusal(status, answer, "POST revert/stage")
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
            raise refusal(status, answer, f"POST revert/{action}")
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
            created = self.db.created(oc)
            if created is not None:
                events.append(self.records.created(created))
                cursor = 0
        while True:
            query = "limit=100" if cursor is None or cursor < 0 else f"after={cursor}&limit=100"
            status, body = self.http.call("GET", f"/api/session/{oc}/history?{query}")
            if status != 200:
                raise refusal(status, body, "GET history")
            for e in body["data"]:
                events.append(self.records.event(e))
                cursor = e["durable"]["seq"]
            if not body.get("hasMore") or not body["data"]:
                break
        return {"events": events}

    def op_messages(self, req: dict[str, Any]) -> dict[str, Any]:
        oc = self.oc_session(_str(req, "session"))
        return {"messages": self.records.messages(self.db.user_messages(oc))}

    def op_pending(self, req: dict[str, Any]) -> dict[str, Any]:
        oc = self.oc_session(_str(req, "session"))
        return {"pending": self.records.pending(self.db.pending(oc))}


def _sessions_named(members: list[dict[str, Any]], known: dict[str, str]) -> set[str]:
    """The harness sessions a group's members name (and the adapter knows)."""
    return {m["session"] for m in members if isinstance(m.get("session"), str)} & set(known)


def _str(req: dict[str, Any], key: str) -> str:
    value = req.get(key)
    if not isinstance(value, str):
        raise Refused("invalid_request", f"{key} must be a string, not {value!r}")
    return value


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
