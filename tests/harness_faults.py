"""The harness killed on purpose, and what it leaves behind: the kill half of
the harness fault-injection suite (issue 17). Used by
``tests/test_harness_kills.py`` (a CI-sized set of trials) and
``benchmarks/harness_kills.py`` (the long version, documented in
``docs/harness-faults.md``).

A *trial* starts one ``inboxsim`` command line as a user or a CI job would
(``python -m inboxsim.cli``, in a session of its own), waits for its k-th
progress line on stderr and then a few more milliseconds (both drawn from a
seeded generator: the kill lands at different points of the run, and a trial
can be repeated), and sends a signal:

- SIGINT to the process group: Ctrl-C in a terminal;
- SIGTERM to the process, or to the process and its group (``timeout``, a CI
  job's time limit);
- SIGKILL to the process, to its group (``timeout -s KILL``, a runner that
  kills the job's group), or to the harness process the supervisor forked
  (the OOM killer, ``kill -9`` of the busy process in ``top``).

Then it judges, without any assertion on time (every wait is bounded only to
turn a hang into a failure):

- the exit: 130 (SIGINT) or 143 (SIGTERM) with one line saying what was kept,
  killed by SIGKILL, or 137 (the harness killed, the supervisor's line); a
  command that finished before the signal arrived counts as finished, not as
  a kill point;
- processes: once the command and the harness process it forked are gone, no
  process that carries the trial's environment tag is alive (a process of the
  run, however far it forked, in whatever session or group);
- the store: it opens; every run has all its steps and events, and no step,
  event, violation or probe row lacks its run; a sweep's runs form whole
  batches; after SIGINT or SIGTERM the line's count of kept runs is the
  store's count; the next run, ``inboxsim check --db``, exits 0;
- temporary folders: none left in the trial's ``$TMPDIR`` after SIGINT or
  SIGTERM, and none after the next run whatever the signal.
"""

from __future__ import annotations

import os
import random
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TAG = "INBOXSIM_FAULT_TAG"
FAKES = Path(__file__).resolve().parent / "adapters"
SEEDS = 500  # a sweep trial's seeds
ENDS = 180.0  # seconds: a run that has not ended by then after its signal hangs
SIGNALS = (
    ("SIGINT", "group"),
    ("SIGTERM", "process"),
    ("SIGTERM", "group"),
    ("SIGKILL", "process"),
    ("SIGKILL", "group"),
    ("SIGKILL", "harness"),
)


def _sqlite_adapter() -> str:
    from inboxsim import impls

    path = Path(impls.__file__).resolve().parent / "sqlite_inbox" / "adapter.py"
    return shlex.join([sys.executable, str(path)])


def command(kind: str, db: str) -> list[str]:
    """The command line of a trial of ``kind`` (arguments after ``inboxsim``)."""
    hang = shlex.join([sys.executable, str(FAKES / "spawns_detached.py")])
    sweep = ["sweep", "--seeds", str(SEEDS), "--ops", "20", "--db", db]
    commands = {
        "sweep-local": [*sweep, "--jobs", "2"],
        "sweep-serial": [*sweep, "--jobs", "1"],
        "sweep-dask": [*sweep, "--jobs", "2", "--executor", "dask"],
        "conformance-sqlite": [
            "conformance",
            "--target",
            "sqlite",
            "--scenario",
            "crash-keeps-inbox",
            "--scenario",
            "queue-fifo",
            "--seeds",
            "40",
            "--jobs",
            "2",
            "--shrink",
            "0",
            "--db",
            db,
        ],  # fmt: skip
        "conformance-hang": [
            "conformance",
            "--adapter",
            hang,
            "--no-library",
            "--seeds",
            "4",
            "--adapter-timeout",
            "600",
            "--db",
            db,
        ],  # fmt: skip
        "run-db": ["run", "--library", "--adapter", _sqlite_adapter(), "--db", db],
    }
    return commands[kind]


KINDS = (
    "sweep-local",
    "sweep-serial",
    "sweep-dask",
    "conformance-sqlite",
    "conformance-hang",
    "run-db",
)
# How many progress lines each kind prints before it can be counted on to be
# still running (the kill point is drawn below this).
LINES = {
    "sweep-local": 4,
    "sweep-serial": 4,
    "sweep-dask": 3,
    "conformance-sqlite": 3,
    "conformance-hang": 1,
    "run-db": 12,
}


@dataclass(frozen=True)
class Trial:
    kind: str
    signal: str
    to: str  # "process", "group" or "harness"
    line: int  # kill after this many progress lines...
    delay_ms: int  # ...and this many milliseconds more

    def describe(self) -> str:
        return f"{self.kind} {self.signal}->{self.to} after line {self.line} + {self.delay_ms} ms"


def plan(seed: int, count: int, kinds: tuple[str, ...] = KINDS) -> list[Trial]:
    """``count`` trials drawn from ``seed``: kinds and signals in turn (every
    pair is covered before any repeats), kill points at random."""
    rng = random.Random(seed)
    out = []
    for n in range(count):
        kind = kinds[n % len(kinds)]
        sig, to = SIGNALS[(n // len(kinds) + n) % len(SIGNALS)]
        out.append(Trial(kind, sig, to, rng.randint(1, LINES[kind]), rng.randint(0, 1500)))
    return out


@dataclass
class Outcome:
    trial: Trial
    exit_code: int | None = None
    finished_first: bool = False  # the command ended before the signal was sent
    line: str = ""  # the last line on stderr
    stderr: str = ""  # its end, for the record
    orphans: list[str] = field(default_factory=list)
    leaked: list[str] = field(default_factory=list)  # folders left right after the run
    leaked_after_next: list[str] = field(default_factory=list)
    runs: int = 0  # runs in the store
    inconsistencies: list[str] = field(default_factory=list)  # of the store
    said: list[str] = field(default_factory=list)  # the line's count is not the store's
    seconds: float = 0.0

    @property
    def problems(self) -> list[str]:
        """What went wrong, one string each (empty: the trial passed)."""
        out = [f"inconsistent store: {i}" for i in self.inconsistencies]
        out += [f"orphan process: {o}" for o in self.orphans]
        out += [f"folder left: {f}" for f in self.folders_left]
        return out + self.wrong_exit

    @property
    def folders_left(self) -> list[str]:
        """After SIGINT or SIGTERM, at once; after SIGKILL, by the next run."""
        graceful = self.trial.signal != "SIGKILL"
        return sorted(set(self.leaked if graceful else []) | set(self.leaked_after_next))

    @property
    def wrong_exit(self) -> list[str]:
        """An exit code, or an interrupt line, that the contract does not give."""
        if self.finished_first:
            return []
        expected = {
            "SIGINT": 130,
            "SIGTERM": 143,
            "SIGKILL": 137 if self.trial.to == "harness" else -9,
        }[self.trial.signal]
        if self.exit_code not in (expected, 0, 1):
            return [f"exit code {self.exit_code}, not {expected}"]
        if expected in (130, 143) and self.exit_code == expected:
            if "interrupted by" not in self.line:
                return [f"no line saying what was kept: {self.line!r}"]
        return self.said


# --- processes ----------------------------------------------------------------------


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None


def _living(pid: int) -> bool:
    """Alive, or its threads still exiting: a process whose first thread has
    ended shows as a zombie while the others end, still holding its files
    (a store's lock among them)."""
    fields = _stat(pid)
    if fields is None:
        return False
    if fields[0] not in ("Z", "X"):
        return True
    try:
        return len(os.listdir(f"/proc/{pid}/task")) > 1
    except OSError:
        return False


def tagged(tag: str) -> list[int]:
    """Live processes whose environment carries ``TAG=tag``."""
    wanted = f"{TAG}={tag}".encode()
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            env = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:
            continue
        if wanted in env.split(b"\0") and _living(int(entry)):
            out.append(int(entry))
    return out


def kill_tagged(tag: str) -> list[str]:
    """SIGKILL every live process of the trial; returns their command lines
    (the suite never leaves a process behind, even when a trial fails)."""
    found = []
    for pid in tagged(tag):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            os.kill(pid, signal.SIGKILL)
        except OSError:
            continue
        found.append(f"{pid} {cmd.strip()[:160]}")
    return found


def harness_of(supervisor: int) -> int | None:
    """The harness process the command line's supervisor forked, if any."""
    try:
        kids = Path(f"/proc/{supervisor}/task/{supervisor}/children").read_text().split()
    except OSError:
        return None
    return int(kids[0]) if kids else None


def wait_gone(pid: int | None, patience: float = ENDS) -> bool:
    """Wait until ``pid`` is dead (gone or a zombie); False if it outlived ``patience``."""
    deadline = time.monotonic() + patience
    while pid is not None and _living(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def end_of_run(proc: subprocess.Popen[Any], harness: int | None) -> None:
    """Wait for a command line (``proc``, the supervisor) and the harness it
    forked to end: after SIGKILL of the supervisor the harness still cleans up
    (and holds the store open) for a moment."""
    proc.wait(timeout=ENDS)
    if not wait_gone(harness):
        raise AssertionError(f"the harness process {harness} did not end")


# --- the store ------------------------------------------------------------------------


def store_problems(db: Path, kind: str) -> tuple[int, list[str]]:
    """(runs stored, what is inconsistent about the store)."""
    from inboxsim.errors import HarnessError
    from inboxsim.reports.store import open_store

    if not db.exists():
        return 0, []
    try:
        store = open_store(db)
    except HarnessError as exc:
        return 0, [f"does not open: {exc}"]
    out = []
    with store:
        con = store.con
        runs = _one(con, "SELECT count(*) FROM runs")
        partial = con.execute(
            """SELECT r.run_id FROM runs r LEFT JOIN
                 (SELECT run_id, count(*) n, min(idx) lo, max(idx) hi FROM steps GROUP BY run_id) s
               USING (run_id)
               WHERE s.n IS NULL OR s.n != r.ops OR s.lo != 0 OR s.hi != r.ops - 1"""
        ).fetchall()
        if partial:
            out.append(f"{len(partial)} runs without all their steps")
        orphans = _one(
            con,
            "SELECT count(*) FROM (SELECT run_id FROM steps UNION SELECT run_id FROM events "
            "UNION SELECT run_id FROM violations UNION SELECT run_id FROM probes) x "
            "WHERE run_id NOT IN (SELECT run_id FROM runs)",
        )
        if orphans:
            out.append(f"rows of {orphans} runs that are not stored")
        listed = _one(
            con,
            "SELECT coalesce(sum(json_array_length(json_extract(observed, '$.events'))), 0) "
            "FROM steps WHERE observed LIKE '%\"events\"%'",
        )
        events = _one(con, "SELECT count(*) FROM events")
        if listed != events:
            out.append(f"{events} event rows for {listed} events in the steps")
        if kind.startswith("sweep"):
            out += _batches(con, kind)
    return runs, out


def _one(con: Any, query: str) -> int:
    row = con.execute(query).fetchone()
    return int(row[0]) if row else 0


def _batches(con: Any, kind: str) -> list[str]:
    """A sweep writes whole batches. A trial's store is fresh and holds one
    sweep, so its run ids count from 0 in the plan's seed order: batch b is
    run ids b*size.. and every batch stored is complete (the last one of the
    plan may be shorter)."""
    from inboxsim.model import PRESETS
    from inboxsim.sim.run import RunOptions
    from inboxsim.sim.sweep import SweepPlan

    slots = 1 if kind == "sweep-serial" else 2
    size = SweepPlan("g4", PRESETS["g4"], RunOptions(), 0, SEEDS, slots).batch(SEEDS, slots)
    counts: dict[int, int] = {}
    for (run_id,) in con.execute("SELECT run_id FROM runs").fetchall():
        counts[run_id // size] = counts.get(run_id // size, 0) + 1
    last = (SEEDS - 1) // size
    return [
        f"batch {b} (runs {b * size}..) holds {n} runs of {size}"
        for b, n in sorted(counts.items())
        if n != (SEEDS - last * size if b == last else size)
    ]


# --- one trial ------------------------------------------------------------------------------


def run_trial(trial: Trial, workdir: Path) -> Outcome:
    """Run one trial in ``workdir`` (a fresh folder) and judge what it left."""
    tag = uuid.uuid4().hex
    tmp = workdir / "tmp"
    tmp.mkdir(parents=True)
    db = workdir / "trial.duckdb"
    env = dict(os.environ, TMPDIR=str(tmp), **{TAG: tag})
    env.pop("INBOXSIM_TRACEBACK", None)
    outcome = Outcome(trial)
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "inboxsim.cli", *command(trial.kind, str(db))],
        cwd=workdir,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own group, as a job of a shell or a runner
    )
    try:
        lines: list[str] = []
        seen = threading.Event()

        def read() -> None:
            assert proc.stderr is not None
            for text in proc.stderr:
                lines.append(text.rstrip("\n"))
                if len(lines) >= trial.line:
                    seen.set()
            seen.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        seen.wait(ENDS)
        time.sleep(trial.delay_ms / 1000)
        harness = harness_of(proc.pid)
        if proc.poll() is not None:
            outcome.finished_first = True
        else:
            signum = getattr(signal, trial.signal)
            if trial.to == "harness" and harness is not None:
                os.kill(harness, signum)
            else:
                os.kill(proc.pid, signum)
                if trial.to == "group":
                    os.killpg(proc.pid, signum)
        try:
            end_of_run(proc, harness)
        except (subprocess.TimeoutExpired, AssertionError) as exc:
            outcome.orphans.append(f"the run did not end: {exc}")
        reader.join(10)
        outcome.exit_code = proc.returncode
        outcome.line = lines[-1] if lines else ""
        outcome.stderr = "\n".join(lines)[-3000:]
        outcome.orphans += kill_tagged(tag)
        outcome.leaked = sorted(os.listdir(tmp))
        outcome.runs, outcome.inconsistencies = store_problems(db, trial.kind)
        if outcome.exit_code in (130, 143) and trial.kind.startswith("sweep"):
            # "kept N of the M seeds A..B in DB (F failing); go on with: ..."
            kept = re.search(r"kept ([\d,]+) of", outcome.line)
            said = kept[1].replace(",", "") if kept else "nothing"
            if said != str(outcome.runs):
                outcome.said.append(f"the line says {said} runs kept, the store has {outcome.runs}")
        # The next run: it removes what a killed run left, and re-judges the store.
        following = ["check", "--db", str(db)] if outcome.runs else ["version"]
        nxt = subprocess.run(
            [sys.executable, "-m", "inboxsim.cli", *following],
            cwd=workdir,
            env=env,
            capture_output=True,
            text=True,
            timeout=ENDS,
        )
        if outcome.runs and nxt.returncode != 0:
            outcome.inconsistencies.append(
                f"check exits {nxt.returncode}: {nxt.stderr.strip()[-300:]}"
            )
        outcome.leaked_after_next = sorted(os.listdir(tmp))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        kill_tagged(tag)
    outcome.seconds = time.monotonic() - started
    return outcome


__all__ = ["KINDS", "Outcome", "Trial", "end_of_run", "harness_of", "plan", "run_trial"]
