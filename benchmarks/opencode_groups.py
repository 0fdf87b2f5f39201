"""The released OpenCode 1.18.33 under concurrent clients (issue 22, section 3).

Each *try* is one race, on a fresh session of a running server: the
adapter fires the group's HTTP requests at once (one thread and connection
each, released by a barrier: ``impls/opencode/adapter.py``, ``op_group``),
and :class:`~inboxsim.search.groups.GroupDriver` judges the group by the
linearizability search against the model under ``g2``. The server has no
pause points, so a race is probabilistic: every workload is tried many
times, and a failure is reported with how often it reproduced.

Workloads (``--workload``, each at every group size of ``--sizes``):

- ``exact``: N exact retries of one prompt ID (text, delivery equal), on an
  idle session: the prompt wakes it (invariant 22: one admitted event,
  identical receipts).
- ``exact-parked``: the same with ``resume: false`` (nothing runs).
- ``conflict``: N-1 exact retries of one ID racing one conflicting retry (other
  text): one text wins, every request with the other gets ``prompt_conflict``.
- ``steer-answer``: a session busy at an open call; its answer (``tool`` or
  ``stop``, alternately) races N-1 steers: spec A6 and G2's captured cutoff
  (a steer joins the batch the boundary promotes, or waits for the next).
- ``prompts``: N user prompts with distinct IDs on one idle session (steer
  and queue mixed): one admission order, one wake.
- ``prompts-kill``: the same, and the server is SIGKILLed a random 0 to
  ``--kill-ms`` ms after the group is sent (:class:`KillDuring`): a member in
  flight has an unknown outcome (took no effect, or took effect up to a crash
  point), the adapter restarts the server, and the group is judged with the
  kill (``Group.killed``). A kill that lands after the group's response (the
  next read fails) is counted as ``late`` and the server starts afresh.

Every ``--per-server`` tries the server (and the driver, whose observation
reads every session it knows) starts afresh. Keep that under the adapter's
``INBOXSIM_OPENCODE_CALL_TIMEOUT`` (an hour): OpenCode 1.18.33 fails a model
call held that long ("HTTP transport failed"; 300 s by its own default),
which the model does not know (``docs/opencode.md``). Writes a JSON summary
(``--out``) with every failing group's explanation, and prints a table.

    python benchmarks/opencode_groups.py --tries 40 --sizes 2,3,4 --out oc-groups.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from inboxsim.impls.opencode import RECOMMENDED_TIMEOUT, adapter_command
from inboxsim.model import PRESETS, Answer, Create, Op, Prompt, Reply
from inboxsim.search.groups import GroupCheck, GroupDriver
from inboxsim.targets.adapter import AdapterTarget
from inboxsim.targets.group import GroupReply
from inboxsim.trace.record import Observed

STEP_LIMIT = 4


class Clock:
    """The harness's ``now``: one more per step."""

    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        self.now += 1
        return self.now


Setup = Callable[[GroupDriver, str, Clock, int, int], list[Op]]


def exact(driver: GroupDriver, sid: str, clock: Clock, n: int, k: int) -> list[Op]:
    now = clock()
    return [Prompt(now, session=sid, input=f"{sid}-x", text="same") for _ in range(n)]


def exact_parked(driver: GroupDriver, sid: str, clock: Clock, n: int, k: int) -> list[Op]:
    now = clock()
    return [Prompt(now, session=sid, input=f"{sid}-x", text="same", resume=False) for _ in range(n)]


def conflict(driver: GroupDriver, sid: str, clock: Clock, n: int, k: int) -> list[Op]:
    now = clock()
    ops: list[Op] = [Prompt(now, session=sid, input=f"{sid}-x", text="one") for _ in range(n - 1)]
    ops.insert(k % n, Prompt(now, session=sid, input=f"{sid}-x", text="other"))
    return ops


def steer_answer(driver: GroupDriver, sid: str, clock: Clock, n: int, k: int) -> list[Op]:
    opened = driver.run([Prompt(clock(), session=sid, input=f"{sid}-m0", text="start")])
    if not opened.legal:
        raise Failed(opened, "the setup prompt")
    call = next(c.call for c in driver.state.open_calls() if c.session == sid)
    now = clock()
    steers: list[Op] = [
        Prompt(now, session=sid, input=f"{sid}-st{i}", text=f"steer {i}") for i in range(n - 1)
    ]
    answer = Answer(now, call=call, finish="tool" if k % 2 == 0 else "stop")
    return [answer, *steers] if k % 4 < 2 else [*steers, answer]


def prompts(driver: GroupDriver, sid: str, clock: Clock, n: int, k: int) -> list[Op]:
    now = clock()
    return [
        Prompt(
            now,
            session=sid,
            input=f"{sid}-p{i}",
            text=f"prompt {i}",
            delivery="queue" if (i + k) % 3 == 2 else None,
        )
        for i in range(n)
    ]


WORKLOADS: dict[str, Setup] = {
    "exact": exact,
    "exact-parked": exact_parked,
    "conflict": conflict,
    "steer-answer": steer_answer,
    "prompts": prompts,
    "prompts-kill": prompts,
}
KILLS = {"prompts-kill"}


class KillDuring:
    """The target, with the next group cut by a SIGKILL of the OpenCode
    server ``delay`` seconds after it is sent (the harness's fault; the
    adapter stays up, reports the members in flight as unknown and restarts
    the server). ``fired``: whether the kill was sent before the group's
    response came back."""

    def __init__(self, target: AdapterTarget, folder: Path) -> None:
        self.target = target
        self.folder = folder
        self.name = target.name
        self.delay: float | None = None
        self.fired = False

    def request(self, op: Op, crash_at: str | None = None) -> tuple[Reply, Observed]:
        return self.target.request(op, crash_at)

    def group(self, ops: list[Op], schedule: list[int]) -> tuple[GroupReply, Observed]:
        if self.delay is None:
            return self.target.group(ops, schedule)
        pid = int((self.folder / "server.pid").read_text())
        lock, done, delay = threading.Lock(), [False], self.delay
        self.delay, self.fired = None, False

        def kill() -> None:
            time.sleep(delay)
            with lock:
                if not done[0]:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                    self.fired = True

        killer = threading.Thread(target=kill)
        killer.start()
        try:
            reply, observed = self.target.group(ops, schedule)
        finally:
            with lock:
                done[0] = True
            killer.join()
        return reply._replace(killed=self.fired), observed


class Failed(Exception):
    def __init__(self, check: GroupCheck, what: str) -> None:
        super().__init__(what)
        self.check = check


def overlapped(check: GroupCheck) -> bool:
    """Did every member's request overlap every other's in real time?"""
    reqs = check.group.requests
    done = [r.completed for r in reqs if r.completed is not None]
    return len(done) == len(reqs) and max(r.invoked for r in reqs) < min(done)


def shape(check: GroupCheck, sid: str) -> str:
    """What the race came to: each member's outcome, then the session's
    transcript, open call's context and pending inputs (the interleaving's
    footprint)."""
    replies = []
    for r in check.group.requests:
        returned = r.returned
        reply = getattr(returned, "code", None) or type(returned).__name__.lower()
        replies.append(f"{r.op.finish}:{reply}" if isinstance(r.op, Answer) else reply)
    shown = check.group.after.get(sid)
    call = list(shown.call.context) if shown is not None and shown.call is not None else None
    pending = [row.input for row in shown.pending] if shown is not None else []
    seen = [m.id for m in shown.transcript] if shown is not None else []
    short = sid + "-"
    text = f"{' '.join(replies)} | transcript {seen} | call {call} | pending {pending}"
    return text.replace(short, "")


def describe(check: GroupCheck) -> list[str]:
    out = []
    for r in check.group.requests:
        span = f"{r.invoked:.1f}-{r.completed:.1f} ms" if r.completed is not None else "?"
        out.append(f"{type(r.op).__name__} {r.op.to_wire()} [{span}] -> {r.returned}")
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    policy = PRESETS["g2"]
    sizes = [int(s) for s in args.sizes.split(",")]
    plan = [(w, n, k) for w in args.workload for n in sizes for k in range(args.tries)]
    results: dict[str, Any] = defaultdict(
        lambda: {"tries": 0, "legal": 0, "illegal": 0, "undecided": 0, "overlapped": 0,
                 "seconds": 0.0, "spread_ms": [], "shapes": Counter(), "failures": [],
                 "killed": 0, "unknown": 0, "late": 0}
    )  # fmt: skip
    root = Path(tempfile.mkdtemp(prefix="oc-groups-", dir=args.workdir))
    target: AdapterTarget | None = None
    killing: KillDuring | None = None
    driver: GroupDriver | None = None
    rng = random.Random(args.seed)
    clock = Clock()
    servers = 0
    started = time.monotonic()
    try:
        for index, (workload, n, k) in enumerate(plan):
            if driver is None or index % args.per_server == 0:
                if target is not None:
                    target.close()
                servers += 1
                folder = root / f"server-{servers}"
                # A group cut by a kill waits for the server's restart too.
                target = AdapterTarget(
                    adapter_command(), folder, STEP_LIMIT, timeout=2 * RECOMMENDED_TIMEOUT
                )
                killing = KillDuring(target, folder)
                clock = Clock()
                driver = GroupDriver(killing, policy, STEP_LIMIT)
            sid = f"s{index}"
            key = f"{workload} n={n}"
            row = results[key]
            t0 = time.monotonic()
            try:
                made = driver.run([Create(clock(), session=sid)])
                if not made.legal:
                    raise Failed(made, "create")
                ops = WORKLOADS[workload](driver, sid, clock, n, k)
                assert killing is not None
                if workload in KILLS:
                    killing.delay = rng.uniform(0, args.kill_ms / 1000)
                check = driver.run(ops)
            except Failed as failed:
                check = failed.check
            except RuntimeError as exc:  # a read after the group failed
                if not (killing is not None and killing.fired):
                    raise
                row["late"] += 1
                print(f"{key} try {k}: the kill landed late ({exc})", file=sys.stderr)
                driver = None
                continue
            if workload in KILLS:
                row["killed"] += check.group.killed
                row["unknown"] += sum(r.completed is None for r in check.group.requests)
            row["tries"] += 1
            row["seconds"] += time.monotonic() - t0
            row["overlapped"] += overlapped(check)
            row["shapes"][shape(check, sid)] += 1
            done = [r.completed for r in check.group.requests if r.completed is not None]
            if done:
                row["spread_ms"].append(
                    round(max(done) - min(r.invoked for r in check.group.requests), 2)
                )
            verdict = type(check.verdict).__name__.lower()
            row[verdict] += 1
            if not check.legal:
                row["failures"].append(
                    {"try": k, "group": describe(check), "explain": check.explain()}
                )
                # The model cannot follow a target it found illegal: start afresh.
                driver = None
            if args.progress:
                print(
                    f"[{time.monotonic() - started:6.0f} s] {key} try {k}: {verdict}"
                    f"{'' if overlapped(check) else ' (not all overlapped)'}",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        if target is not None:
            target.close()
    return {
        "opencode": "1.18.33",
        "policy": "g2",
        "servers": servers,
        "seconds": round(time.monotonic() - started, 1),
        "load": os.getloadavg(),
        "workdir": str(root),
        "results": dict(results),
    }


def table(summary: dict[str, Any]) -> str:
    lines = [
        "| group | tries | legal | illegal | undecided | all overlapped | s/try |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for key, row in summary["results"].items():
        lines.append(
            f"| {key} | {row['tries']} | {row['legal']} | {row['illegal']} | {row['undecided']}"
            f" | {row['overlapped']} | {row['seconds'] / max(row['tries'], 1):.2f} |"
        )
    for key, row in summary["results"].items():
        if row["killed"] or row["late"]:
            lines.append(
                f"\n{key}: cut by the kill {row['killed']} of {row['tries']}, members in flight"
                f" (unknown) {row['unknown']}; kills that landed after the response {row['late']}"
            )
    load = ", ".join(f"{x:.1f}" for x in summary["load"])
    lines.append(
        f"\n{summary['servers']} server starts, {summary['seconds']} s in all; load {load}"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", action="append", choices=sorted(WORKLOADS))
    parser.add_argument("--tries", type=int, default=20, help="per workload and size")
    parser.add_argument("--sizes", default="2,3,4", help="group sizes, comma-separated")
    parser.add_argument("--per-server", type=int, default=10, help="tries per server start")
    parser.add_argument("--workdir", default=None, help="where the servers' folders go")
    parser.add_argument("--out", default=None, help="the JSON summary")
    parser.add_argument("--kill-ms", type=float, default=400, help="prompts-kill: latest kill")
    parser.add_argument("--seed", type=int, default=0, help="draws the kill delays")
    parser.add_argument("--progress", action="store_true")
    args = parser.parse_args(argv)
    args.workload = args.workload or list(WORKLOADS)
    os.environ.setdefault("INBOXSIM_OPENCODE_NETNS", "require")
    summary = run(args)
    print(table(summary))
    for key, row in summary["results"].items():
        print(f"\n{key}: what the races came to (outcomes | transcript | call context | pending):")
        for what, count in row["shapes"].most_common():
            print(f"  {count:4d}  {what}")
    for key, row in summary["results"].items():
        for failure in row["failures"][:2]:
            print(f"\n--- {key}, try {failure['try']}:\n" + "\n".join(failure["group"]))
            print(failure["explain"])
    if args.out:
        Path(args.out).write_text(json.dumps(summary, indent=1, default=str))
    return 1 if any(r["illegal"] + r["undecided"] for r in summary["results"].values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
