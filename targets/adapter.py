"""``AdapterTarget``: an implementation under test, as a child process that
speaks ``docs/protocol.md``, behind the same :class:`~.target.Target`
interface as the in-process model.

Theory of operation.

- **Lockstep I/O.** One request line, then one response line with the same
  ``rid``, read with a deadline (``timeout``, the ``--adapter-timeout``). Any
  breach (not JSON, wrong ``rid``, a field missing or ill-typed, an unknown
  error code, no answer in time, an exit mid-request, output nobody asked
  for, a command that will not start) raises :class:`ProtocolError` naming the
  request's op and rid and quoting the offending bytes; the process group is
  killed at once, so a failing run leaves no process behind.
- **Observation.** A target reports what each request changed, as an
  :class:`~.trace.Observed` equal to :class:`~.target.ModelTarget`'s for the
  same behaviour. The adapter's insides are not visible, so after each request
  that may change state the harness asks: ``log`` after the last seen ``seq``
  for every known session (new events, in seq order, sessions in sorted
  order); ``pending`` and ``messages`` for the sessions that got events or
  that the request named (reported when they differ from what was last seen,
  and always for a session seen for the first time); and ``calls`` (reported
  when the open set changed). The read-only operations (``log``, ``messages``,
  ``pending``, ``calls``) are not followed by queries: they change nothing in a
  correct adapter, and a stray change still shows in the next observation.
  Sessions are known once ``create`` or ``fork`` succeeded.
- **Crashes: the target restarts itself, eagerly.** After a failpoint crash
  (the adapter exits without responding; the reply is ``Crashed``, outcome
  unknown) and after :meth:`AdapterTarget.kill` (SIGKILL to the process
  group), the target starts the same command on the same folder, sends
  ``hello`` itself (with the last step limit and the last ``now``) and then
  observes everything. Why eagerly rather than at the next request: the
  durable effects of a crashed request can only be read from a live process,
  and reading them at once puts them in the crash step's observation, where
  the model puts them, so lockstep compares step by step. The simulator's own
  restart ``hello`` that follows is then a second ``hello``, which the
  protocol allows (it is sent after every restart, and answers the same).
  The first request of a fresh target starts the process; if it is not a
  ``hello``, the target sends one first.
- **Failpoints** are sent as ``crash_at`` only to an adapter whose ``hello``
  lists ``failpoints``; asking otherwise is a harness bug (``ValueError``).
  Kills are real (SIGKILL); the ``crash`` operation is only ever sent when the
  simulator sends it as a request.
"""

from __future__ import annotations

import json
import os
import shlex
import time
import weakref
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, BinaryIO, NoReturn

from pydantic import ValidationError

from ..errors import ExitCode, HarnessError
from ..model import Call, Crashed, Err, Event, Fork, Hello, Ok, Op, Reply
from ..model.ops import FAILPOINTS, Answer, Create
from ..model.values import canonical_json, parse_json
from ..trace.decode import call_from_wire, message_from_wire, pending_from_wire
from ..trace.record import NOTHING, MessageView, Observed, PendingView
from .adapter_process import AdapterProcess, Eof, Timeout, TooLong, stderr_tail
from .group import GroupReply
from .protocol import PROTOCOL_VERSION, RESPONSE, RESULTS, ProtocolError, describe

DEFAULT_TIMEOUT = 10.0
READ_ONLY = frozenset({"log", "messages", "pending", "calls"})
QUOTE_HEAD, QUOTE_TAIL = 160, 60
START_MARKER = "--- inboxsim: start "


NEVER_READY = 3  # runs in a row whose adapter never answered hello: stop there


class AdapterNeverStarted(HarnessError):
    """The adapter never became ready: :data:`NEVER_READY` runs in a row
    started it and none got an answer to ``hello``. The target failed (exit
    1); waiting out the timeout for every scenario and seed left would only
    say so again, for hours at --seeds 1000."""

    exit_code = ExitCode.TARGET_FAILED


def never_ready(targets: Iterable[AdapterTarget], error: BaseException) -> str | None:
    """One line on why an adapter never became ready, when ``error`` ended a
    run in which ``targets`` were started and none answered ``hello``; else
    None. A command that cannot be started at all (``op`` start) is not this:
    that is bad usage, not a target that failed."""
    if not isinstance(error, ProtocolError) or error.op == "start":
        return None
    started = [t for t in targets if t.starts]
    if not started or any(t.hello is not None for t in started):
        return None
    tail = " | ".join(started[-1].stderr_text(300).splitlines()) or "nothing"
    return f"{str(error).splitlines()[0]}; its stderr: {tail}"


class ReadyWatch:
    """Counts runs in a row whose adapter never became ready, and raises
    :class:`AdapterNeverStarted` at :data:`NEVER_READY`; a run whose adapter
    answered ``hello`` starts the count again."""

    def __init__(self, limit: int = NEVER_READY) -> None:
        self.limit = limit
        self.count = 0

    def see(self, failure: str | None, ready: bool) -> None:
        """``failure``: :func:`never_ready` of a run; ``ready``: an adapter of
        the run answered ``hello``."""
        if failure:
            self.count += 1
            if self.count >= self.limit:
                raise AdapterNeverStarted(
                    f"the adapter never started: {self.count} starts in a row ended before it "
                    f"answered hello; the last: {failure}"
                )
        elif ready:
            self.count = 0


def split_command(text: str) -> list[str]:
    """``--adapter "COMMAND"`` split as a shell would, without running one."""
    try:
        parts = shlex.split(text)
    except ValueError as exc:
        raise HarnessError(f"--adapter {text!r} cannot be split into a command: {exc}") from None
    if not parts:
        raise HarnessError("--adapter needs a command to run")
    return parts


def check_startable(argv: list[str]) -> None:
    """A :class:`HarnessError` when ``argv``'s program cannot be started at
    all (no such file, not executable, not on ``PATH``): the harness's usage
    problem, exit 2, said once, not a protocol error of every run that
    tries to start it."""
    import shutil

    program = argv[0]
    if shutil.which(program) is not None:
        return
    path = Path(program)
    if os.sep not in program:
        why = "not found on PATH"
    elif path.is_dir():
        why = "is a directory"
    elif path.exists():
        why = "is not executable"
    else:
        why = "no such file"
    raise HarnessError(f"the adapter command cannot be started: {program}: {why}")


def quote(data: bytes) -> str:
    """Offending bytes as a Python bytes literal, long ones cut in the middle."""
    if len(data) <= QUOTE_HEAD + QUOTE_TAIL:
        return repr(data)
    return f"{data[:QUOTE_HEAD]!r} … {data[-QUOTE_TAIL:]!r} ({len(data)} bytes in all)"


class AdapterTarget:
    """An adapter process as a :class:`~.target.Target` (see the module docstring)."""

    def __init__(
        self,
        command: list[str],
        data_dir: Path,
        step_limit: int,
        timeout: float = DEFAULT_TIMEOUT,
        *,
        stderr_path: Path | None = None,
        name: str | None = None,
    ) -> None:
        if not command:
            raise HarnessError("an adapter needs a command to run")
        self.command = list(command)
        self.data_dir = Path(data_dir)
        self.step_limit = step_limit
        self.timeout = timeout
        # Kept with the run, beside (not inside) the adapter's own folder.
        self.stderr_path = stderr_path or self.data_dir.with_name(
            self.data_dir.name + ".stderr.log"
        )
        self.name = name or f"adapter:{shlex.join(self.command)}"
        self.hello: dict[str, Any] | None = None  # the last hello result
        self.features: frozenset[str] = frozenset()
        self.starts = 0
        self._proc: AdapterProcess | None = None
        self._stderr: BinaryIO | None = None
        self._rid = 0
        self._now = 0
        self._broken: ProtocolError | None = None
        # What the harness has seen: observations are diffs against these.
        self._sessions: list[str] = []  # known, first-seen order
        self._last_seq: dict[str, int] = {}
        self._pending: dict[str, tuple[PendingView, ...]] = {}
        self._transcript: dict[str, tuple[MessageView, ...]] = {}
        self._calls: tuple[Call, ...] = ()
        self._opened = 0
        # A forgotten close() must not leave a process behind either.
        self._holder: list[AdapterProcess | None] = [None]
        self._finalizer = weakref.finalize(self, _kill_held, self._holder)

    # --- the Target protocol ---------------------------------------------------

    def request(self, op: Op, crash_at: str | None = None) -> tuple[Reply, Observed]:
        self._usable()
        if crash_at is not None and crash_at not in FAILPOINTS:
            raise ValueError(f"unknown failpoint {crash_at!r}; known: {', '.join(FAILPOINTS)}")
        self._now = max(self._now, op.now)
        fresh = self._proc is None
        if fresh:
            self._start()
            if not isinstance(op, Hello):
                self._hello()
        if crash_at is not None and self.hello is not None and "failpoints" not in self.features:
            raise ValueError(
                f"{self.name} does not list the feature 'failpoints'; cannot crash at {crash_at}"
            )
        response = self._exchange(op.to_wire(), crash_at)
        if response is None:  # died at the failpoint, as asked
            self._restart()
            return Crashed(crash_at or ""), self._observe(op, None, everything=True)
        reply = _reply(response)
        if isinstance(op, Hello) and isinstance(reply, Ok):
            self._accept_hello(reply.result)
            if op.step_limit is not None:  # what restarts send from now on
                self.step_limit = op.step_limit
        return reply, self._observe(op, reply, everything=fresh or isinstance(op, Hello))

    def group(
        self, ops: list[Op], schedule: list[int] | None, crash_at: Sequence[str | None] = ()
    ) -> tuple[GroupReply, Observed]:
        """A concurrent group (``docs/protocol.md``, "Groups"): the requests
        go out in one ``group`` request, with the schedule when the adapter
        has pause points and a member's failpoint (``crash_at``) when one is
        asked; then everything is observed, as after a restart. An adapter
        that dies at the failpoint answers nothing: every member is unknown,
        and the target restarts."""
        self._usable()
        now = max(op.now for op in ops)
        self._now = max(self._now, now)
        if self._proc is None:
            self._start()
            self._hello()
        if "group" not in self.features:
            raise ValueError(f"{self.name} does not list the feature 'group'")
        points = list(crash_at) + [None] * (len(ops) - len(crash_at))
        if any(p is not None for p in points) and "failpoints" not in self.features:
            raise ValueError(f"{self.name} does not list the feature 'failpoints'")
        members = []
        for op, point in zip(ops, points, strict=True):
            self._rid += 1
            member = {"rid": self._rid, **op.to_wire(), "now": now}
            if point is not None:
                member["crash_at"] = point
            members.append(member)
        wire: dict[str, Any] = {"op": "group", "now": now, "requests": members}
        if schedule is not None and "pause_points" in self.features:
            wire["schedule"] = list(schedule)
        response = self._exchange(wire, None, may_die=any(p is not None for p in points))
        if response is None:  # died at the failpoint, as asked
            self._restart()
            lost = GroupReply([None] * len(ops), [], killed=True)
            return lost, self._observe(None, None, everything=True)
        if not response["ok"]:
            error = response["error"]
            self._fail(
                ProtocolError(
                    f"{self.name}: group refused with {error['code']}: {error['message']} "
                    f"(request rid={response['rid']} op=group)",
                    op="group",
                    rid=response["rid"],
                )
            )
        outcomes = self._outcomes(members, response)
        for op, outcome in zip(ops, outcomes, strict=True):
            if isinstance(op, (Create, Fork)) and outcome is not None and outcome.get("ok"):
                sid = op.child if isinstance(op, Fork) else op.session
                if sid not in self._last_seq:
                    self._sessions.append(sid)
                    self._last_seq[sid] = -1
        killed = any(o is not None and o.get("unknown") for o in outcomes)
        reply = GroupReply(outcomes, list(response["result"].get("pauses", [])), killed)
        return reply, self._observe(None, None, everything=True)

    def _outcomes(
        self, members: list[dict[str, Any]], response: dict[str, Any]
    ) -> list[dict[str, Any] | None]:
        """Each member's outcome, checked: in order, one per request, a reply
        valid for its op, or unknown."""
        got = response["result"]["outcomes"]
        rid = response["rid"]

        def fail(what: str) -> NoReturn:
            self._fail(
                ProtocolError(
                    f"{self.name}: group {what} (request rid={rid} op=group)", op="group", rid=rid
                )
            )

        if len(got) != len(members):
            fail(f"answered {len(got)} outcomes for {len(members)} requests")
        out: list[dict[str, Any] | None] = []
        for member, outcome in zip(members, got, strict=True):
            if outcome["rid"] != member["rid"]:
                fail(f"outcome has rid {outcome['rid']}, expected {member['rid']} at its place")
            if outcome.get("unknown"):
                if "ok" in outcome or "completed" in outcome:
                    fail(f"outcome of rid {member['rid']} is unknown yet has a reply or completion")
                out.append(outcome)
                continue
            if "completed" not in outcome or not isinstance(outcome.get("ok"), bool):
                fail(f"outcome of rid {member['rid']} needs ok and completed, or unknown")
            if outcome["ok"]:
                try:
                    outcome["result"] = RESULTS[member["op"]].validate_python(outcome.get("result"))
                except ValidationError as exc:
                    fail(
                        f"malformed {member['op']} result for rid {member['rid']}: {describe(exc)}"
                    )
            elif "error" not in outcome:
                fail(f"outcome of rid {member['rid']} has ok false and no error")
            out.append(outcome)
        return out

    def kill(self) -> Observed:
        """SIGKILL the adapter between requests, start it again on the same
        folder, ``hello``, and report what the restart changed."""
        self._usable()
        if self._proc is None:
            return NOTHING  # never started: nothing to kill
        self._restart()
        return self._observe(None, None, everything=True)

    def close(self) -> None:
        """Kill the process group and release the stderr log. Idempotent."""
        if self._proc is not None:
            self._proc.kill()
            self._proc = None
            self._holder[0] = None
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def __enter__(self) -> AdapterTarget:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def stderr_text(self, limit: int = 2000) -> str:
        """What the adapter's current (or last) process wrote on stderr, its
        last ``limit`` bytes (the whole log is kept at ``stderr_path``)."""
        if self._stderr is not None:
            self._stderr.flush()
        tail = stderr_tail(self.stderr_path, limit)
        marker = tail.rfind(START_MARKER)
        if marker >= 0:  # drop the harness's own marker line
            tail = tail[marker:].partition("\n")[2]
        return tail.strip()

    # --- process life ----------------------------------------------------------

    def _usable(self) -> None:
        if self._broken is not None:
            raise ProtocolError(
                f"{self.name} already failed: {self._broken}",
                op=self._broken.op,
                rid=self._broken.rid,
            )

    def _start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self._stderr is None:
            self.stderr_path.parent.mkdir(parents=True, exist_ok=True)
            self._stderr = open(self.stderr_path, "ab")  # noqa: SIM115 - lives with the target
        self.starts += 1
        # A marker between the runs of the process, so the log reads in order.
        self._stderr.write(f"{START_MARKER}{self.starts}: {shlex.join(self.command)}\n".encode())
        self._stderr.flush()
        env = dict(os.environ, INBOXSIM_DATA_DIR=str(self.data_dir))
        try:
            self._proc = AdapterProcess(self.command, env, self._stderr)
        except OSError as exc:
            self._fail(
                ProtocolError(
                    f"adapter command {shlex.join(self.command)} cannot start: "
                    f"{exc.strerror or exc}",
                    op="start",
                )
            )
        self._holder[0] = self._proc

    def _restart(self) -> None:
        assert self._proc is not None
        self._proc.kill()
        self._proc = None
        self._start()
        self._hello()

    def _hello(self) -> None:
        """The harness's own hello after a (re)start."""
        response = self._exchange(Hello(self._now, step_limit=self.step_limit).to_wire(), None)
        assert response is not None
        if not response["ok"]:
            error = response["error"]
            self._fail(
                ProtocolError(
                    f"adapter refused hello with step_limit {self.step_limit}: "
                    f"{error['code']}: {error['message']}",
                    op="hello",
                    rid=response["rid"],
                )
            )
        self._accept_hello(response["result"])

    def _accept_hello(self, result: dict[str, Any]) -> None:
        self.hello = result
        self.features = frozenset(result["features"])

    def _fail(self, error: ProtocolError) -> NoReturn:
        """Kill everything, remember why, and raise."""
        if self._proc is not None:
            self._proc.kill()  # first, so that its last words are in the log
            self._proc = None
            self._holder[0] = None
        tail = self.stderr_text() if self._stderr is not None else ""
        if tail:
            error = ProtocolError(
                f"{error}\nadapter stderr ({self.stderr_path}), last lines:\n{tail}",
                op=error.op,
                rid=error.rid,
                offending=error.offending,
            )
        self._broken = error
        raise error

    # --- one exchange ----------------------------------------------------------

    def _exchange(
        self, wire: dict[str, Any], crash_at: str | None, may_die: bool = False
    ) -> dict[str, Any] | None:
        """Send one request and return its validated response (``result``
        validated for the op), or None when the adapter died at ``crash_at``
        (or, ``may_die``, at a failpoint a group's member carries)."""
        proc = self._proc
        assert proc is not None
        self._rid += 1
        rid, op = self._rid, wire["op"]
        message = {"rid": rid, **wire}
        if crash_at is not None:
            message["crash_at"] = crash_at
        line = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"

        def fail(what: str, offending: bytes | None = None) -> NoReturn:
            shown = f": {quote(offending)}" if offending is not None else ""
            self._fail(
                ProtocolError(
                    f"{self.name}: {what} (request rid={rid} op={op}){shown}",
                    op=op,
                    rid=rid,
                    offending=offending,
                )
            )

        stray = proc.unread()
        if stray:
            fail("output on stdout that no request asked for, before this request", stray)
        deadline = time.monotonic() + self.timeout
        try:
            proc.send(line, deadline)
            raw = proc.read_line(deadline)
        except BrokenPipeError:
            return fail(f"adapter exited before reading the request ({_status(proc, deadline)})")
        except Eof as eof:
            if (crash_at is not None or may_die) and not eof.partial:
                return None
            status = _status(proc, deadline)
            if eof.partial:
                return fail(
                    f"adapter closed stdout mid-response ({status}); partial response", eof.partial
                )
            return fail(f"adapter exited without responding ({status}), and no failpoint was asked")
        except Timeout as late:
            got = late.partial
            return fail(
                f"no response within {self.timeout:g} s"
                + ("; partial response" if got else "; nothing received"),
                got if got else None,
            )
        except TooLong as long:
            return fail("response line longer than the harness accepts", long.partial)
        try:
            doc = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            return fail(f"response is not valid JSON ({exc})", raw)
        if not isinstance(doc, dict):
            return fail("response is not a JSON object", raw)
        if doc.get("rid") != rid or isinstance(doc.get("rid"), bool):
            return fail(f"response has rid {doc.get('rid')!r}, expected {rid}", raw)
        try:
            response: dict[str, Any] = RESPONSE.validate_python(doc)
        except ValidationError as exc:
            return fail(f"malformed response: {describe(exc, tagged=True)}", raw)
        if response["ok"]:
            result = response["result"]
            if op == "hello" and result.get("protocol") != PROTOCOL_VERSION:
                return fail(
                    f"adapter speaks protocol {result.get('protocol')!r}; "
                    "this harness speaks protocol "
                    f"{PROTOCOL_VERSION} only (docs/protocol.md): refused",
                    raw,
                )
            try:
                response["result"] = RESULTS[op].validate_python(result)
            except ValidationError as exc:
                return fail(f"malformed {op} result: {describe(exc)}", raw)
        return response

    def _ask(self, wire: dict[str, Any]) -> dict[str, Any]:
        """An observation query: it must succeed."""
        response = self._exchange(wire, None)
        assert response is not None
        if not response["ok"]:
            error = response["error"]
            where = f" of session {wire['session']!r}" if "session" in wire else ""
            self._fail(
                ProtocolError(
                    f"{self.name}: observation query {wire['op']}{where} "
                    f"failed with {error['code']}: "
                    f"{error['message']} (request rid={response['rid']} op={wire['op']})",
                    op=wire["op"],
                    rid=response["rid"],
                )
            )
        result: dict[str, Any] = response["result"]
        return result

    # --- observation -----------------------------------------------------------

    def _observe(self, op: Op | None, reply: Reply | None, everything: bool) -> Observed:
        if op is not None and not everything and op.OP in READ_ONLY:
            return NOTHING
        new: list[str] = []
        if isinstance(op, (Create, Fork)) and not isinstance(reply, Err):
            sid = op.child if isinstance(op, Fork) else op.session
            if sid not in self._last_seq and (reply is not None or self._exists(sid)):
                self._sessions.append(sid)
                self._last_seq[sid] = -1
                new.append(sid)
        events: list[Event] = []
        touched = set(new)
        for sid in sorted(self._sessions):
            got = self._log(sid)
            if got:
                events.extend(got)
                touched.add(sid)
        if everything:
            touched.update(self._sessions)
        else:
            touched.update(s for s in self._named(op) if s in self._last_seq)
        pending, transcript = [], []
        for sid in sorted(touched):
            asked = self._ask({"op": "pending", "now": self._now, "session": sid})
            rows = tuple(pending_from_wire(r) for r in asked["pending"])
            if sid in new or rows != self._pending.get(sid):
                pending.append((sid, rows))
                self._pending[sid] = rows
            asked = self._ask({"op": "messages", "now": self._now, "session": sid})
            msgs = tuple(message_from_wire(m) for m in asked["messages"])
            if sid in new or msgs != self._transcript.get(sid):
                transcript.append((sid, msgs))
                self._transcript[sid] = msgs
        calls = self._open_calls()
        changed = calls != self._calls
        self._calls = calls
        return Observed(
            tuple(events), tuple(pending), tuple(transcript), calls if changed else None
        )

    def _exists(self, sid: str) -> bool:
        """After a crashed ``create`` or ``fork`` (outcome unknown): did it happen?"""
        response = self._exchange({"op": "log", "now": self._now, "session": sid}, None)
        return response is not None and bool(response["ok"])

    def _named(self, op: Op | None) -> Iterable[str]:
        for attr in ("session", "child"):
            value = getattr(op, attr, None)
            if isinstance(value, str):
                yield value
        if isinstance(op, Answer):
            yield from (c.session for c in self._calls if c.call == op.call)

    def _log(self, sid: str) -> list[Event]:
        after = self._last_seq[sid]
        wire: dict[str, Any] = {"op": "log", "now": self._now, "session": sid}
        if after >= 0:
            wire["after"] = after
        entries = self._ask(wire)["events"]
        events = []
        last = after
        for e in entries:
            if e["seq"] <= last:
                self._fail(
                    ProtocolError(
                        f"{self.name}: log of session {sid!r} after seq {after} "
                        f"returned seq {e['seq']} after {last}: not in increasing seq "
                        "order after the cursor (request op=log)",
                        op="log",
                        rid=self._rid,
                    )
                )
            last = e["seq"]
            events.append(
                Event(
                    sid, e["seq"], e["type"], e["time"], e.get("input"), canonical_json(e["data"])
                )
            )
        self._last_seq[sid] = last
        return events

    def _open_calls(self) -> tuple[Call, ...]:
        """Open calls as model values; ``opened`` numbers a call by when the
        harness first saw it open (kept while it stays open)."""
        known = {c.call: c.opened for c in self._calls}
        calls = []
        for c in self._ask({"op": "calls", "now": self._now})["calls"]:
            opened = known.get(c["call"])
            if opened is None:
                self._opened += 1
                opened = self._opened
            calls.append(call_from_wire(c, opened))
        return tuple(calls)


def _reply(response: dict[str, Any]) -> Reply:
    if response["ok"]:
        result = response["result"]
        if "data" in result:  # a receipt: its payload compares as JSON values,
            # numbers by value (protocol "Exact retry"), so 1.0 is written 1, as
            # the model writes it and as event data is (canonical_json).
            result["data"] = parse_json(canonical_json(result["data"]))
        return Ok(result)
    return Err(response["error"]["code"], response["error"]["message"])


def _status(proc: AdapterProcess, deadline: float) -> str:
    code = proc.wait(min(deadline, time.monotonic() + 0.5))
    if code is None:
        return "still running"
    if code < 0:
        return f"killed by signal {-code}"
    return f"exit status {code}"


def _kill_held(holder: list[AdapterProcess | None]) -> None:
    proc = holder[0]
    if proc is not None:
        proc.kill()
