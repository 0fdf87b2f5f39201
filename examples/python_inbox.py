#!/usr/bin/env python3
"""A deliberately simple durable inbox, and the inboxsim adapter around it.

Standard library only; it does not import inboxsim. Run it the way the harness does::

    inboxsim conformance --adapter "python3 python_inbox.py"

The adapter protocol (version 1) is ``docs/protocol.md`` in the inboxsim
repository (``protocol.md`` beside this file if ``inboxsim init-adapter`` wrote
it). One JSON request per line on stdin, one JSON response per line on stdout,
logging on stderr.

How this inbox works, in four rules:

1. **Everything durable is one JSON file**, ``$INBOXSIM_DATA_DIR/inbox.json``:
   each session's event log, pending inbox and transcript, which session and
   kind every input ID belongs to, and the counter behind generated IDs.
2. **A request is a transaction.** It changes the state in memory; when it
   succeeds the file is rewritten (temporary file, fsync, rename) *before* the
   response is sent, so an acknowledged request survives a SIGKILL; when it
   fails the state is read back from the file, so an error changes nothing.
3. **Executions are volatile.** Open model calls, follow-up doorbells and step
   counters live in memory only (``self.runs``): a restart loses running work,
   never the inbox.
4. **Work runs inside the request that made it ready**, until every session is
   idle or waiting on an open model call (the protocol's quiescence rule).

Features: synthetic, compaction, resume, interrupt. Not fork, revert or
failpoints: ``docs/protocol.md`` ("Growing the example") says how to add them.

``INBOXSIM_EXAMPLE_BUG=1`` plants a bug (an exact retry that ignores metadata),
to see what a failure looks like.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from typing import Any

IMPLEMENTATION = "example-python-inbox 1.0"
FEATURES = ["synthetic", "compaction", "resume", "interrupt"]
BUG = os.environ.get("INBOXSIM_EXAMPLE_BUG", "") not in ("", "0")
CONFLICT = {"user": "prompt_conflict", "synthetic": "synthetic_conflict"}


class Refused(Exception):
    """An error response: a protocol error code and a message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def canonical(value: Any) -> str:
    """JSON text that is equal exactly when two payloads are equal as JSON values
    (sorted keys, and 1.0 written as 1: numbers compare by value)."""

    def norm(v: Any) -> Any:
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if isinstance(v, dict):
            return {k: norm(x) for k, x in v.items()}
        if isinstance(v, list):
            return [norm(x) for x in v]
        return v

    return json.dumps(norm(value), sort_keys=True, separators=(",", ":"))


@dataclass
class Run:
    """An active execution, parked at its one open model call. It remembers
    where the drain goes on when the call is answered: its ``phase`` ("start":
    a compaction before the first step; "step"; "after_step": a compaction
    after a step), whether the drain is ``forced`` (resume), the ``step``
    index, whether that step asked for a continuation (``cont``), and the
    ``doorbell``: a wake rung while it ran."""

    call: dict[str, Any]
    opened: int
    phase: str
    forced: bool
    step: int
    cont: bool
    doorbell: bool


class Inbox:
    def __init__(self, folder: str) -> None:
        self.path = os.path.join(folder, "inbox.json")
        self.saved = ""  # the file's text, to skip rewriting it unchanged
        self.state = self.load()
        self.runs: dict[str, Run] = {}  # volatile: session -> its execution
        self.now = 0
        self.step_limit = 4

    # --- the durable file ---------------------------------------------------------

    def load(self) -> dict[str, Any]:
        try:
            with open(self.path, encoding="utf-8") as f:
                self.saved = f.read()
            state: dict[str, Any] = json.loads(self.saved)
            return state
        except FileNotFoundError:
            return {"sessions": {}, "owners": {}, "counter": 0}

    def save(self) -> None:
        text = json.dumps(self.state, sort_keys=True)
        if text == self.saved:
            return
        tmp = self.path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)  # atomic: a kill leaves the old file or the new one
        self.saved = text

    def handle(self, req: dict[str, Any]) -> dict[str, Any]:
        handler = getattr(self, "op_" + str(req.get("op")), None)
        if handler is None:
            raise Refused("unsupported", f"operation {req.get('op')!r} is not supported")
        self.now = max(self.now, req["now"])  # the harness's clock is the only clock
        try:
            result: dict[str, Any] = handler(req)
        except Refused:
            self.state = self.load()  # throw away anything half done
            raise
        self.save()
        return result

    # --- small helpers --------------------------------------------------------------

    def session(self, req: dict[str, Any]) -> dict[str, Any]:
        sid = req.get("session")
        if sid not in self.state["sessions"]:
            raise Refused("session_not_found", f"session {sid!r} does not exist")
        session: dict[str, Any] = self.state["sessions"][sid]
        return session

    def append(self, sid: str, kind: str, input_id: str | None = None, **data: Any) -> int:
        """Append one event to the session's log; returns its seq."""
        events = self.state["sessions"][sid]["events"]
        event = {"seq": len(events), "type": kind, "time": self.now, "data": data}
        if input_id is not None:
            event["input"] = input_id
        events.append(event)
        return len(events) - 1

    def fresh_id(self, prefix: str) -> str:
        """A generated ID: never one that was ever admitted (owners keep every ID)."""
        while True:
            self.state["counter"] += 1
            candidate = f"{prefix}{self.state['counter']}"
            if candidate not in self.state["owners"]:
                return candidate

    def barrier(self, sid: str) -> dict[str, Any] | None:
        pending: list[dict[str, Any]] = self.state["sessions"][sid]["pending"]
        return next((row for row in pending if row["type"] == "compaction"), None)

    # --- setup and queries ----------------------------------------------------------

    def op_hello(self, req: dict[str, Any]) -> dict[str, Any]:
        if "step_limit" in req:
            limit = req["step_limit"]
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
                raise Refused("invalid_request", f"step_limit {limit!r} is not a positive int")
            self.step_limit = limit
        return {
            "protocol": 1,
            "implementation": IMPLEMENTATION,
            "features": FEATURES,
            "step_limit": self.step_limit,
        }

    def op_create(self, req: dict[str, Any]) -> dict[str, Any]:
        sid = req["session"]
        self.state["sessions"].setdefault(sid, {"events": [], "pending": [], "messages": []})
        return {"session": sid}  # an existing session is adopted

    def op_log(self, req: dict[str, Any]) -> dict[str, Any]:
        after = req.get("after", -1)
        return {"events": [e for e in self.session(req)["events"] if e["seq"] > after]}

    def op_pending(self, req: dict[str, Any]) -> dict[str, Any]:
        keys = ("input", "type", "delivery", "admitted_seq", "time")
        return {"pending": [{k: r[k] for k in keys} for r in self.session(req)["pending"]]}

    def op_messages(self, req: dict[str, Any]) -> dict[str, Any]:
        keys = ("id", "type", "seq", "time")
        return {"messages": [{k: m[k] for k in keys} for m in self.session(req)["messages"]]}

    def op_calls(self, req: dict[str, Any]) -> dict[str, Any]:
        runs = sorted(self.runs.values(), key=lambda run: run.opened)
        return {"calls": [run.call for run in runs]}

    # --- admission --------------------------------------------------------------------

    def op_prompt(self, req: dict[str, Any]) -> dict[str, Any]:
        data = {
            "text": req["text"],
            "files": req.get("files", []),
            "agents": req.get("agents", []),
            "metadata": req.get("metadata", {}),
        }
        return self.admit(req, "user", data)

    def op_synthetic(self, req: dict[str, Any]) -> dict[str, Any]:
        data = {
            "text": req["text"],
            "description": req.get("description"),
            "metadata": req.get("metadata", {}),
        }
        return self.admit(req, "synthetic", data)

    def admit(self, req: dict[str, Any], kind: str, data: dict[str, Any]) -> dict[str, Any]:
        session = self.session(req)
        sid = req["session"]
        delivery = req.get("delivery", "steer")
        if delivery not in ("steer", "queue"):
            raise Refused("invalid_request", f"delivery must be steer or queue: {delivery!r}")
        input_id, receipt = req.get("input"), None
        if input_id is None:
            input_id = self.fresh_id("in-")
        else:
            # An input ID belongs to one session and one kind, for good.
            owner = self.state["owners"].get(input_id)
            if owner is not None and owner != [sid, kind]:
                raise Refused(CONFLICT[kind], f"input {input_id!r} belongs to {owner}")
            # While it is pending or visible, a reuse is a retry: same payload and
            # delivery, or a conflict. Judged against the admission record.
            records = session["pending"] + [m["receipt"] for m in session["messages"]]
            receipt = next((r for r in records if r["input"] == input_id), None)
            # Otherwise its lifecycle ended: a new input of the same session and kind.
        if receipt is not None:
            self.judge_retry(receipt, kind, data, delivery)
        else:
            seq = self.append(sid, "admitted", input_id, data=data, delivery=delivery, type=kind)
            receipt = {
                "input": input_id,
                "session": sid,
                "type": kind,
                "data": data,
                "delivery": delivery,
                "admitted_seq": seq,
                "time": self.now,
            }
            session["pending"].append(receipt)
            self.state["owners"][input_id] = [sid, kind]
        if req.get("resume", True):  # an exact retry wakes the session too
            self.wake(sid)
        return receipt

    def judge_retry(
        self, record: dict[str, Any], kind: str, data: dict[str, Any], delivery: str
    ) -> None:
        before, now = dict(record["data"]), dict(data)
        if BUG:  # the planted bug: metadata is left out of the comparison
            before.pop("metadata", None)
            now.pop("metadata", None)
        if canonical(before) != canonical(now) or record["delivery"] != delivery:
            raise Refused(CONFLICT[kind], f"input {record['input']!r} was admitted differently")

    def op_compact(self, req: dict[str, Any]) -> dict[str, Any]:
        self.session(req)
        sid, input_id = req["session"], req.get("input")
        owner = self.state["owners"].get(input_id) if input_id is not None else None
        if owner is not None and owner != [sid, "compaction"]:
            raise Refused("compaction_conflict", f"input {input_id!r} belongs to {owner}")
        receipt = self.barrier(sid)  # a session has at most one barrier: requests coalesce
        if receipt is None:
            input_id = input_id if input_id is not None else self.fresh_id("cmp-")
            seq = self.append(sid, "compaction_admitted", input_id)
            receipt = {
                "input": input_id,
                "session": sid,
                "type": "compaction",
                "data": {},
                "delivery": None,
                "admitted_seq": seq,
                "time": self.now,
            }
            self.state["sessions"][sid]["pending"].append(receipt)
            self.state["owners"][input_id] = [sid, "compaction"]
        self.wake(sid)
        return receipt

    # --- the runner: wakes, drains, Safe Step Boundaries, model calls -----------------

    def wake(self, sid: str) -> None:
        if sid in self.runs:
            self.runs[sid].doorbell = True  # one follow-up drain, however many wakes
        elif self.state["sessions"][sid]["pending"]:
            self.append(sid, "execution_started")
            self.start_drain(sid, forced=False, doorbell=False)

    def op_resume(self, req: dict[str, Any]) -> dict[str, Any]:
        self.session(req)
        if req["session"] not in self.runs:  # else: join the active execution
            self.append(req["session"], "execution_started")
            self.start_drain(req["session"], forced=True, doorbell=False)
        return {}

    def start_drain(self, sid: str, forced: bool, doorbell: bool) -> None:
        if not forced and not self.state["sessions"][sid]["pending"]:
            self.drain_done(sid, doorbell)
        elif self.barrier(sid) is not None:
            self.open_call(sid, "compaction", "start", forced, 0, False, doorbell)
        else:
            self.after_first_compaction(sid, forced, doorbell)

    def after_first_compaction(self, sid: str, forced: bool, doorbell: bool) -> None:
        if forced or self.promotable(sid):
            self.run_step(sid, "input", 1, forced, doorbell)
        else:
            self.drain_done(sid, doorbell)

    def drain_done(self, sid: str, doorbell: bool) -> None:
        if doorbell:
            self.start_drain(sid, forced=False, doorbell=False)
        else:
            self.append(sid, "execution_succeeded")
            self.runs.pop(sid, None)

    def promotable(self, sid: str) -> list[dict[str, Any]]:
        """Pending user and synthetic input, in admission order; none while a
        compaction barrier is pending (it blocks all promotion)."""
        if self.barrier(sid) is not None:
            return []
        return list(self.state["sessions"][sid]["pending"])

    def run_step(self, sid: str, scope: str, step: int, forced: bool, doorbell: bool) -> None:
        """A Safe Step Boundary: promote, then open one step call."""
        rows = self.promotable(sid)
        steers = [r for r in rows if r["delivery"] == "steer"]
        if steers or scope == "steer":
            batch = steers  # every pending steer joins
        else:
            batch = [r for r in rows if r["delivery"] == "queue"][:1]  # the oldest queued one
        session = self.state["sessions"][sid]
        for row in batch:
            seq = self.append(sid, "promoted", row["input"])
            session["pending"].remove(row)
            message = {"id": row["input"], "type": row["type"], "seq": seq, "time": self.now}
            session["messages"].append({**message, "receipt": row})
        if batch:
            step = 1  # promoted input starts a fresh step allowance
        self.open_call(sid, "step", "step", forced, step, False, doorbell)

    def open_call(
        self, sid: str, kind: str, phase: str, forced: bool, step: int, cont: bool, doorbell: bool
    ) -> None:
        self.state["counter"] += 1  # durable, so call IDs never repeat across restarts
        final = kind == "step" and step >= self.step_limit
        call = {
            "call": f"call-{self.state['counter']}",
            "session": sid,
            "kind": kind,
            "step": step if kind == "step" else 0,  # a compaction call is step 0
            "final": final,
            "context": [m["id"] for m in self.state["sessions"][sid]["messages"]],
        }
        if kind == "step":
            self.append(sid, "step_started", final=final, step=step)
        else:
            barrier = self.barrier(sid)
            assert barrier is not None
            self.append(sid, "compaction_started", barrier["input"], reason="manual")
        self.runs[sid] = Run(call, self.state["counter"], phase, forced, step, cont, doorbell)

    def op_answer(self, req: dict[str, Any]) -> dict[str, Any]:
        finish = req["finish"]
        if finish not in ("stop", "tool", "error"):
            raise Refused("invalid_request", f"finish must be stop, tool or error: {finish!r}")
        run = next((r for r in self.runs.values() if r.call["call"] == req["call"]), None)
        if run is None:
            raise Refused("invalid_request", f"call {req['call']!r} is not open")
        sid, forced, step, doorbell = run.call["session"], run.forced, run.step, run.doorbell
        del self.runs[sid]
        if run.call["kind"] == "compaction":
            self.settle_compaction(sid, failed=finish == "error", error="model call failed")
            if run.phase == "start":
                self.after_first_compaction(sid, forced, doorbell)
            else:
                self.go_on(sid, step, run.cont, forced, doorbell)
        elif finish == "error":  # the step fails, and with it the execution
            self.append(sid, "step_failed", step=step, error="model call failed")
            self.append(sid, "execution_failed", error="model call failed")
            if doorbell:
                self.wake(sid)
        else:
            self.append(sid, "step_ended", step=step, finish=finish)
            cont = finish == "tool" and not run.call["final"]  # "tool" on a final step: "stop"
            if self.barrier(sid) is not None:
                self.open_call(sid, "compaction", "after_step", forced, step, cont, doorbell)
            else:
                self.go_on(sid, step, cont, forced, doorbell)
        return {}

    def go_on(self, sid: str, step: int, cont: bool, forced: bool, doorbell: bool) -> None:
        """After a step: continue it, take pending steers, start on the next
        queued input, or end the drain."""
        rows = self.promotable(sid)
        if cont or any(r["delivery"] == "steer" for r in rows):
            self.run_step(sid, "steer", step + 1, forced, doorbell)
        elif rows:
            self.run_step(sid, "input", 1, forced, doorbell)
        else:
            self.drain_done(sid, doorbell)

    def settle_compaction(self, sid: str, failed: bool, error: str) -> None:
        """The barrier is consumed whether the compaction ended or failed."""
        barrier = self.barrier(sid)
        assert barrier is not None
        if failed:
            self.append(sid, "compaction_failed", barrier["input"], reason="manual", error=error)
        else:
            self.append(sid, "compaction_ended", barrier["input"], reason="manual")
        self.state["sessions"][sid]["pending"].remove(barrier)

    def op_interrupt(self, req: dict[str, Any]) -> dict[str, Any]:
        self.session(req)
        run = self.runs.pop(req["session"], None)
        if run is None:
            return {"interrupted": False}
        sid = req["session"]
        if run.call["kind"] == "compaction":
            self.settle_compaction(sid, failed=True, error="Compaction cancelled")
        else:
            self.append(sid, "step_failed", step=run.step, error="interrupted")
        self.append(sid, "execution_interrupted", reason="user")
        return {"interrupted": True}  # pending input stays pending


def main() -> None:
    inbox = Inbox(os.environ["INBOXSIM_DATA_DIR"])
    for line in sys.stdin:
        request = json.loads(line)
        try:
            response = {"rid": request["rid"], "ok": True, "result": inbox.handle(request)}
        except Refused as refused:
            error = {"code": refused.code, "message": refused.message}
            response = {"rid": request["rid"], "ok": False, "error": error}
        sys.stdout.write(json.dumps(response) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
