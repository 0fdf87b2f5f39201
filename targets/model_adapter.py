"""The reference model as an adapter process: ``python -m
inboxsim.targets.model_adapter [--policy NAME|FILE]`` speaks ``docs/protocol.md``
on stdin/stdout, so the model is one more target behind the same protocol
(and the harness side of the protocol is tested against a known-good peer).

Durability. The model lives in memory, and the harness kills adapters with
SIGKILL, so the process keeps a journal in ``$INBOXSIM_DATA_DIR``: every
request that changed the model's state (durable or volatile), with its
``crash_at``, one JSON line each, written and fsynced before the response is
sent (``--no-fsync`` stops at the flush: the kernel keeps what a SIGKILLed
process wrote, and the harness never crashes the machine). On start it
replays the journal through the model from the initial state, applying
``State.crashed()`` wherever an earlier process died (a ``restart`` record,
written at each start that found a journal), and once more for the death
that led to this start. Replaying requests rather than storing a snapshot
keeps the recovery path the model's own ``apply``: the durable state, the
generated-ID counter and the step limit come back exactly as they were, and
no generated ID repeats after a restart. A torn last line (a kill mid-write)
is dropped: its request never got a response.

Failpoints: ``crash_at`` goes to ``model.apply``; when it returns
``Crashed``, the request is journalled (the durable state it reached must
survive) and the process exits at once, status 3, without responding. A
group's member may carry one too (``group.py`` says when it is reached);
the group is journalled and the process dies the same way.

Requests are validated strictly with the protocol's own types: an unknown op
is ``unsupported``, any other malformed request ``invalid_request``. A line
that is not a JSON object with an integer ``rid`` cannot be answered: the
adapter says why on stderr and exits with status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, BinaryIO

from ..model import Crashed, Err, Policy, State, apply, initial_state, load_policy, op_from_wire
from ..model.policy import PolicyError
from .group import PAUSE_POINTS, serve_group
from .request_check import valid

# pydantic and the protocol's validators (targets/protocol.py) are imported only
# for a request the quick check (targets/request_check.py) is not sure of: this
# process starts once per seed and after every kill, and that import was about
# half of its start-up time.

JOURNAL = "model-journal.jsonl"
JOURNAL_VERSION = 1
CRASH_EXIT = 3
BAD_INPUT_EXIT = 2
READ_ONLY = frozenset({"log", "messages", "pending", "calls"})


class Journal:
    """The append-only request journal (see the module docstring)."""

    def __init__(self, path: Path, policy: Policy, fsync: bool = True) -> None:
        self.path = path
        self.policy = policy
        self.fsync = fsync
        self._file: BinaryIO | None = None

    def recover(self) -> State:
        """The state after the previous processes' requests and their deaths."""
        header = {
            "journal": JOURNAL_VERSION,
            "policy": self.policy.name,
            "fields": self.policy.fields(),
        }
        lines = self._read_whole_lines()
        self._file = open(self.path, "ab")  # noqa: SIM115 - held for the process's life
        state = initial_state(self.policy)
        if not lines:
            self._append(header)
            return state
        if json.loads(lines[0]) != header:
            raise SystemExit(
                f"inboxsim-model: {self.path} was written under another policy "
                f"({lines[0].decode(errors='replace')}); start with an empty INBOXSIM_DATA_DIR"
            )
        for line in lines[1:]:
            record = json.loads(line)
            if "restart" in record:
                state = state.crashed()
            elif "group" in record:
                state = _group(state, record["group"]).state
            else:
                state = apply(state, op_from_wire(record["request"]), record.get("crash_at")).state
        self._append({"restart": True})
        return state.crashed()

    def record_group(self, group: dict[str, Any]) -> None:
        self._append({"group": group})

    def record(self, request: dict[str, Any], crash_at: str | None) -> None:
        entry: dict[str, Any] = {"request": request}
        if crash_at is not None:
            entry["crash_at"] = crash_at
        self._append(entry)

    def _append(self, record: dict[str, Any]) -> None:
        assert self._file is not None
        self._file.write(
            json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
        )
        self._file.flush()  # in the kernel: survives SIGKILL of this process
        if self.fsync:  # on the disk: survives the machine, at ~ms per request
            os.fsync(self._file.fileno())

    def _read_whole_lines(self) -> list[bytes]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        end = data.rfind(b"\n") + 1
        if end < len(data):  # a torn write: cut it off before appending
            with open(self.path, "r+b") as f:
                f.truncate(end)
        return data[:end].splitlines()


def changed(before: State, after: State) -> bool:
    """Did a request change anything a later request could depend on?"""
    return (
        after.store is not before.store
        or after.counter != before.counter
        or after.step_limit != before.step_limit
        or after.runs != before.runs
    )


def serve(
    policy: Policy,
    data_dir: Path,
    stdin: BinaryIO,
    stdout: BinaryIO,
    stderr: Any,
    fsync: bool = True,
    groups: bool = False,
) -> int:
    journal = Journal(data_dir / JOURNAL, policy, fsync)
    state = journal.recover()
    for line in stdin:
        try:
            doc = json.loads(line)
        except ValueError:
            print(f"inboxsim-model: request is not JSON: {line[:200]!r}", file=stderr)
            return BAD_INPUT_EXIT
        rid = doc.get("rid") if isinstance(doc, dict) else None
        if not isinstance(rid, int) or isinstance(rid, bool):
            print(f"inboxsim-model: request has no integer rid: {line[:200]!r}", file=stderr)
            return BAD_INPUT_EXIT
        request = doc if valid(doc) else _validated(doc, rid, stdout)
        if request is None:
            continue
        if request["op"] == "group":
            state = _serve_group(state, request, journal, stdout)
            continue
        wire = {k: v for k, v in request.items() if k not in ("rid", "crash_at")}
        crash_at = request.get("crash_at")
        outcome = apply(state, op_from_wire(wire), crash_at)
        if wire["op"] not in READ_ONLY and changed(state, outcome.state):
            journal.record(wire, crash_at)
        if isinstance(outcome.reply, Crashed):
            print(
                f"inboxsim-model: crashed at failpoint {crash_at} (rid {rid})",
                file=stderr,
                flush=True,
            )
            os._exit(CRASH_EXIT)  # at once, as a real crash: no response, no cleanup
        state = outcome.state
        reply = outcome.reply
        if isinstance(reply, Err):
            response = {
                "rid": rid,
                "ok": False,
                "error": {"code": reply.code, "message": reply.message},
            }
        else:
            result = reply.result
            # Groups are the adapter's own features, declared only when asked
            # (--groups): a sequential run through the adapter then records the
            # model's own hello, so its trace hashes like the model's.
            if wire["op"] == "hello" and groups:
                result = {
                    **result,
                    "features": [*result["features"], "group", "pause_points"],
                    "pause_points": list(PAUSE_POINTS),
                }
            response = {"rid": rid, "ok": True, "result": result}
        _respond(stdout, response)
    return 0


def _group(state: State, request: dict[str, Any]) -> Any:
    members = request["requests"]
    ops = [op_from_wire({k: v for k, v in m.items() if k != "rid"}) for m in members]
    rids = [m["rid"] for m in members]
    points = [m.get("crash_at") for m in members]
    return serve_group(state, ops, rids, request.get("schedule", []), points)


def _serve_group(
    state: State, request: dict[str, Any], journal: Journal, stdout: BinaryIO
) -> State:
    """A group (docs/protocol.md, "Groups"): journalled whole, then answered."""
    members = request["requests"]
    why = None
    if any(m["now"] != request["now"] for m in members):
        why = "every request of a group carries the group's now"
    elif len({m["rid"] for m in members}) != len(members):
        why = "the requests of a group need distinct rids"
    elif sum("crash_at" in m for m in members) > 1:
        why = "a group holds at most one failpoint (one kill)"
    if why is not None:
        error = {"code": "invalid_request", "message": why}
        _respond(stdout, {"rid": request["rid"], "ok": False, "error": error})
        return state
    served = _group(state, request)
    if changed(state, served.state) or served.killed:
        journal.record_group({k: v for k, v in request.items() if k != "rid"})
    if served.killed:
        # A member's failpoint was reached: the implementation dies, and this
        # adapter with it, so nothing is answered (every member is unknown).
        print(f"inboxsim-model: group rid {request['rid']} killed", file=sys.stderr, flush=True)
        os._exit(CRASH_EXIT)
    result = {"outcomes": served.outcomes, "pauses": served.pauses}
    _respond(stdout, {"rid": request["rid"], "ok": True, "result": result})
    return served.state


def _validated(doc: dict[str, Any], rid: int, stdout: BinaryIO) -> dict[str, Any] | None:
    """The protocol's own (pydantic) validation: the request, or None after
    answering it with the error."""
    from pydantic import ValidationError

    from .protocol import REQUEST, describe

    try:
        request: dict[str, Any] = REQUEST.validate_python(doc)
    except ValidationError as exc:
        unknown_op = any(e["type"] == "union_tag_invalid" for e in exc.errors())
        code = "unsupported" if unknown_op else "invalid_request"
        _respond(
            stdout,
            {
                "rid": rid,
                "ok": False,
                "error": {"code": code, "message": describe(exc, tagged=True)},
            },
        )
        return None
    return request


def _respond(stdout: BinaryIO, response: dict[str, Any]) -> None:
    stdout.write(json.dumps(response, separators=(",", ":"), ensure_ascii=False).encode() + b"\n")
    stdout.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m inboxsim.targets.model_adapter",
        description="The inboxsim reference model speaking the adapter protocol on stdin/stdout.",
    )
    parser.add_argument("--policy", default="g4", help="a preset name or a TOML policy file")
    parser.add_argument(
        "--no-fsync",
        dest="fsync",
        action="store_false",
        help="flush the journal to the kernel but do not fsync it: enough for the harness's "
        "SIGKILLs (it never crashes the machine), and several times faster",
    )
    parser.add_argument(
        "--groups",
        action="store_true",
        help="declare the features group and pause_points in hello (groups are served either "
        "way; without the flag the hello reply is the model's own)",
    )
    args = parser.parse_args(argv)
    try:
        policy = load_policy(args.policy)
    except PolicyError as exc:
        print(f"inboxsim-model: {exc}", file=sys.stderr)
        return BAD_INPUT_EXIT
    folder = os.environ.get("INBOXSIM_DATA_DIR")
    if not folder:
        print("inboxsim-model: INBOXSIM_DATA_DIR is not set", file=sys.stderr)
        return BAD_INPUT_EXIT
    data_dir = Path(folder)
    data_dir.mkdir(parents=True, exist_ok=True)
    return serve(
        policy, data_dir, sys.stdin.buffer, sys.stdout.buffer, sys.stderr, args.fsync, args.groups
    )


if __name__ == "__main__":
    raise SystemExit(main())
