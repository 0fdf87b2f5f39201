"""SQLite-backed durable Session inbox speaking the inboxsim adapter protocol, version 1.

Run: ``python impls/sqlite_inbox/adapter.py`` (or ``python impls/sqlite_inbox``).
Reads one JSON request per line on stdin, writes one JSON response per line on
stdout, logs on stderr. Durable state lives in ``$INBOXSIM_DATA_DIR/inbox.sqlite3``.
Standard library only; it does not import inboxsim.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
if len(sys.argv) == 3 and sys.argv[1] == "--mutant":  # same as INBOXSIM_MUTANT=NAME
    os.environ["INBOXSIM_MUTANT"] = sys.argv[2]

import admission  # noqa: E402
import history  # noqa: E402
import interleave  # noqa: E402
from common import MUTANT, AdapterError, invalid, log  # noqa: E402
from runner import Runner, check_failpoint  # noqa: E402
from storage import Store  # noqa: E402

IMPLEMENTATION = "inboxsim-sqlite-inbox 0.1.0"
FEATURES = [
    "synthetic",
    "compaction",
    "fork",
    "revert",
    "resume",
    "interrupt",
    "failpoints",
    "group",
    "pause_points",
]
PAUSE_POINTS = ["start", "begin", "read", "runner"]  # interleave.py says where each is


class Adapter:
    def __init__(self, folder: str) -> None:
        self.folder = folder
        self._store = Store(folder)
        self.runner = Runner(self._store)
        self.runner.step_limit = int(os.environ.get("INBOXSIM_STEP_LIMIT", "10"))

    @property
    def store(self) -> Store:
        """This thread's connection: a group member's own, or the process's."""
        mine: Store | None = interleave.member_store()
        return mine if mine is not None else self._store

    @property
    def now(self) -> int:
        return self.runner.now

    # --- setup and queries ------------------------------------------------------

    def op_hello(self, req: dict[str, Any]) -> dict[str, Any]:
        if "step_limit" in req:
            limit = req["step_limit"]
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
                raise invalid("step_limit must be a positive integer")
            self.runner.step_limit = limit
        if MUTANT == "restart-resumes-pending":  # a (re)started process picks up pending work
            waiting = "SELECT DISTINCT session_id FROM session_pending ORDER BY 1"
            for (sid,) in self.store.all(waiting):
                self.runner.wake(sid)
        return {
            "protocol": 1,
            "implementation": IMPLEMENTATION,
            "features": list(FEATURES),
            "step_limit": self.runner.step_limit,
            "pause_points": PAUSE_POINTS,
        }

    def op_create(self, req: dict[str, Any]) -> dict[str, Any]:
        sid = req.get("session")
        if not isinstance(sid, str) or not sid:
            raise invalid("session must be a non-empty string")
        with self.store.tx():
            if self.store.session(sid) is None:
                self.store.insert_session(sid, self.now)
        return {"session": sid}

    def query_session(self, sid: Any) -> str:
        """The session a query names (``log``, ``messages``, ``pending``)."""
        if MUTANT == "pending-unknown-session-empty" and isinstance(sid, str):
            return sid  # an unknown session reads as an empty one
        return str(self.store.require(sid)["id"])

    def op_log(self, req: dict[str, Any]) -> dict[str, Any]:
        sid = self.query_session(req.get("session"))
        after = req.get("after")
        if after is not None and (isinstance(after, bool) or not isinstance(after, int)):
            raise invalid("after must be an integer")
        return {"events": self.store.events(sid, after)}

    def op_messages(self, req: dict[str, Any]) -> dict[str, Any]:
        sid = self.query_session(req.get("session"))
        out = []
        for msg in self.store.messages(sid):
            entry = {
                "id": msg["id"],
                "type": msg["type"],
                "seq": msg["seq"],
                "time": msg["time_created"],
            }
            if msg["copied_from"] is not None:
                entry["copied_from"] = msg["copied_from"]
            out.append(entry)
        return {"messages": out}

    def op_pending(self, req: dict[str, Any]) -> dict[str, Any]:
        sid = self.query_session(req.get("session"))
        rows = self.store.pending(sid)
        if MUTANT == "pending-hides-barrier":  # the inbox listing shows input only
            rows = [r for r in rows if r["type"] != "compaction"]
        return {
            "pending": [
                {
                    "input": r["id"],
                    "type": r["type"],
                    "delivery": r["delivery"],
                    "admitted_seq": r["admitted_seq"],
                    "time": r["time_created"],
                }
                for r in rows
            ]
        }

    def op_calls(self, req: dict[str, Any]) -> dict[str, Any]:
        return {"calls": self.runner.open_calls()}

    # --- admission ------------------------------------------------------------------

    def op_prompt(self, req: dict[str, Any]) -> dict[str, Any]:
        if MUTANT == "revert-commit-before-validation":  # the revert commits before the checks
            with self.store.tx():
                history.commit(self.store, self.store.require(req.get("session"))["id"], self.now)
        ident = admission.input_id_of(req)
        data = admission.user_data(req)
        delivery, resume = admission.delivery_of(req), admission.resume_of(req)
        sid = self.store.require(req.get("session"))["id"]
        if MUTANT == "race-retry-check-then-insert" and ident is not None:
            with self.store.tx():  # the check, in a transaction of its own
                unknown = self.store.owner(ident) is None
            if unknown:  # ... and the insert in another: a racing twin got there first
                with self.store.tx():
                    history.commit(self.store, sid, self.now)
                    receipt = admission.new_admission(
                        self.store, sid, "user", ident, data, delivery, self.now
                    )
                self.after_admission(sid, True, resume)
                return receipt
        if MUTANT == "race-seq-read-then-write" and ident is None:
            with self.store.tx():  # the seq and the ID read in one transaction ...
                (seq,) = self.store.one("SELECT next_seq FROM session WHERE id = ?", sid) or (0,)
                ident = self.store.fresh_id("sq_in_")
            with self.store.tx():  # ... and the seq written back in another
                self.store.db.execute("UPDATE session SET next_seq = ? WHERE id = ?", (seq, sid))
                history.commit(self.store, sid, self.now)
                receipt = admission.new_admission(
                    self.store, sid, "user", ident, data, delivery, self.now
                )
            self.after_admission(sid, True, resume)
            return receipt
        with self.store.tx():
            retry = ident is not None and self.store.live_owner(ident) == (sid, "user")
            if not (MUTANT == "retry-skips-revert-commit" and retry):
                history.commit(self.store, sid, self.now)  # a staged revert commits with the prompt
            receipt, fresh = admission.admit_input(
                self.store, sid, "user", ident, data, delivery, self.now
            )
            if MUTANT == "admit-after-wake" and fresh:
                self.runner.fire("after_admit")  # the wake is scheduled before the commit
        self.after_admission(sid, fresh, resume or MUTANT == "resume-flag-ignored")
        return receipt

    def op_synthetic(self, req: dict[str, Any]) -> dict[str, Any]:
        ident = admission.input_id_of(req)
        data = admission.synthetic_data(req)
        delivery, resume = admission.delivery_of(req), admission.resume_of(req)
        session = self.store.require(req.get("session"))
        with self.store.tx():
            if MUTANT != "race-synthetic-revert-read-apart":  # (the mutant trusts its early read)
                session = self.store.require(session["id"])  # a revert staged meanwhile holds it
            receipt, fresh = admission.admit_input(
                self.store, session["id"], "synthetic", ident, data, delivery, self.now
            )
        held = session["revert"] is not None and MUTANT != "synthetic-wakes-under-revert"
        self.after_admission(session["id"], fresh, resume and not held)
        return receipt

    def op_compact(self, req: dict[str, Any]) -> dict[str, Any]:
        ident = admission.input_id_of(req)
        sid = self.store.require(req.get("session"))["id"]
        with self.store.tx():
            receipt, fresh = admission.admit_compaction(self.store, sid, ident, self.now)
        self.after_admission(sid, fresh, MUTANT != "compact-no-wake")
        return receipt

    def after_admission(self, sid: str, fresh: bool, wake: bool) -> None:
        if fresh:
            self.runner.fire("after_admit")
        if MUTANT == "retry-no-wake" and not fresh:  # only a new admission wakes
            return
        if wake:
            self.runner.wake(sid)

    # --- execution ---------------------------------------------------------------------

    def op_resume(self, req: dict[str, Any]) -> dict[str, Any]:
        self.runner.resume(self.store.require(req.get("session"))["id"])
        return {}

    def op_interrupt(self, req: dict[str, Any]) -> dict[str, Any]:
        sid = self.store.require(req.get("session"))["id"]
        return {"interrupted": self.runner.interrupt(sid)}

    def op_answer(self, req: dict[str, Any]) -> dict[str, Any]:
        self.runner.answer(req.get("call"), req.get("finish"))
        return {}

    # --- history -------------------------------------------------------------------------

    def op_fork(self, req: dict[str, Any]) -> dict[str, Any]:
        parent = self.store.require(req.get("session"))["id"]
        with self.store.tx():
            history.fork(self.store, parent, req.get("child"), req.get("before"), self.now)
        return {"session": req["child"]}

    def op_revert_stage(self, req: dict[str, Any]) -> dict[str, Any]:
        sid = self.store.require(req.get("session"))["id"]
        with self.store.tx():
            history.stage(self.store, sid, req.get("message"), self.now)
        return {}

    def op_revert_clear(self, req: dict[str, Any]) -> dict[str, Any]:
        sid = self.store.require(req.get("session"))["id"]
        with self.store.tx():
            history.clear(self.store, sid, self.now)
        return {}

    def op_revert_commit(self, req: dict[str, Any]) -> dict[str, Any]:
        sid = self.store.require(req.get("session"))["id"]
        with self.store.tx():
            history.commit(self.store, sid, self.now)
        return {}

    # --- groups: several requests at once (interleave.py) ---------------------------------------

    def op_group(self, req: dict[str, Any]) -> dict[str, Any]:
        members = req.get("requests")
        if not isinstance(members, list) or not members:
            raise invalid("requests must be a non-empty list")
        for m in members:
            if not isinstance(m, dict) or m.get("now") != req["now"]:
                raise invalid("every request of a group carries the group's now")
            if m.get("op") in ("hello", "crash", "group"):
                raise invalid(f"a group cannot hold {m.get('op')}")
        if sum("crash_at" in m for m in members) > 1:
            raise invalid("a group holds at most one member with crash_at (one kill)")
        if len({m.get("rid") for m in members}) != len(members):
            raise invalid("the requests of a group need distinct rids")
        schedule = req.get("schedule")
        group = interleave.Scheduler(list(schedule) if schedule is not None else None)
        ran = group.run([functools.partial(self.member, m) for m in members])
        outcomes = []
        for m, (body, invoked, completed) in zip(members, ran, strict=True):
            outcomes.append({"rid": m["rid"], **body, "invoked": invoked, "completed": completed})
        return {"outcomes": outcomes, "pauses": group.pauses}

    def member(self, req: dict[str, Any]) -> dict[str, Any]:
        """One member, in its own thread, on its own connection."""
        store = Store(self.folder, boot=self._store.boot)
        interleave.use_store(store)
        try:
            return {"ok": True, "result": self.handle(req)}
        except AdapterError as err:
            return {"ok": False, "error": {"code": err.code, "message": err.message}}
        except Exception as err:  # noqa: BLE001 - an adapter bug is reported, not fatal
            log("internal error:", repr(err))
            return {"ok": False, "error": {"code": "internal", "message": repr(err)}}
        finally:
            store.db.close()

    # --- dispatch ------------------------------------------------------------------------

    def handle(self, req: dict[str, Any]) -> dict[str, Any]:
        op = req.get("op")
        handler: Callable[[dict[str, Any]], dict[str, Any]] | None = getattr(self, f"op_{op}", None)
        if not isinstance(op, str) or handler is None:
            raise AdapterError("unsupported", f"unsupported operation {op!r}")
        now = req.get("now")
        if isinstance(now, bool) or not isinstance(now, int):
            raise invalid("now must be an integer")
        self.runner.now = now
        self.runner.failpoint = check_failpoint(req.get("crash_at"))
        try:
            return handler(req)
        finally:
            self.runner.failpoint = None


def respond(rid: Any, body: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"rid": rid, **body}, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def serve(adapter: Adapter) -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        rid: Any = None
        try:
            req = json.loads(line)
            if not isinstance(req, dict):
                raise invalid("a request must be a JSON object")
            rid = req.get("rid")
            result = adapter.handle(req)
            respond(rid, {"ok": True, "result": result})
        except AdapterError as err:
            respond(rid, {"ok": False, "error": {"code": err.code, "message": err.message}})
        except json.JSONDecodeError as err:
            respond(rid, {"ok": False, "error": {"code": "invalid_request", "message": str(err)}})
        except Exception as err:  # noqa: BLE001 - an adapter bug is reported, not fatal
            log("internal error:", repr(err))
            respond(rid, {"ok": False, "error": {"code": "internal", "message": repr(err)}})


def main() -> None:
    folder = os.environ.get("INBOXSIM_DATA_DIR")
    if not folder:
        log("INBOXSIM_DATA_DIR is not set")
        sys.exit(2)
    adapter = Adapter(folder)
    log("started, boot", adapter.store.boot, "data", folder, f"mutant {MUTANT}" if MUTANT else "")
    serve(adapter)


if __name__ == "__main__":
    main()
