"""Race hunts: the SQLite inbox's race bugs (:data:`.mutants.RACES`) hunted
through the group driver (``search/groups.py``).

A race bug is right one request at a time and wrong only when requests
overlap, and then only in some interleavings. So a hunt gives it the overlap
it needs: a **scene** brings a session to the state the race needs (one
request at a time: an open call, steers pending, a message to revert to) and
then sends the racing requests as one group. One hunt is one seed: the scene
``rounds`` times, its choices and schedules drawn from the seed, then every
open call answered; it stops at the first step the driver judges illegal.

Three modes, the columns of ``benchmarks/bench_races.py``:

- ``paused``: each group carries a schedule drawn from the seed; the
  adapter's pause points follow it, so a seed replays exactly;
- ``free``: no schedule, the group's threads run as they will (what a target
  without pause points gives);
- ``sequential``: the same requests one at a time (the control: a race bug
  must survive it, as it survives sequential conformance).

:data:`SCENE_OF` names the scene each race bug needs; the correct build is
hunted on every scene (no false alarm allowed).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..model import (
    G4,
    Answer,
    Compact,
    Create,
    Interrupt,
    Op,
    Policy,
    Prompt,
    Reply,
    Resume,
    RevertClear,
    RevertStage,
    Synthetic,
)
from ..scenarios.load import load_text
from ..search.group_scenario import Recorder
from ..search.group_shrink import write_group_repro
from ..search.groups import GroupDriver
from ..targets.adapter import AdapterTarget
from ..targets.group import GroupReply
from ..trace.record import Observed
from .catalogue import RACES, mutant_command
from .group_repro import fresh_adapters

Mode = Literal["paused", "free", "sequential"]
MODES: tuple[Mode, ...] = ("paused", "free", "sequential")
STEP_LIMIT = 4
SESSIONS = ("s1", "s2")

# A scene: (rng, now, driver) -> the steps that set it up (sent alone), the racing group.
Scene = Callable[[random.Random, int, Recorder], tuple[list[Op], list[Op]]]


def _answer_all(driver: Recorder, now: int) -> None:
    """Answer every open call with ``stop`` (one at a time) until none is open."""
    for _ in range(20):
        calls = driver.state.open_calls()
        if not calls:
            return
        _step(driver, [Answer(now, call=calls[0].call, finish="stop")])


def _open_call(driver: Recorder, now: int, sid: str) -> str:
    """The model ID of an open step call on ``sid`` (a prompt opens one if none is)."""
    for _ in range(2):
        for call in driver.state.open_calls():
            if call.session == sid:
                return call.call
        _step(driver, [Prompt(now, session=sid, input=f"o{now}", text="go")])
    raise AssertionError(f"no call opens on {sid}")


class Killed(Exception):
    """A step the driver judged illegal: the failure, and its group's size."""

    def __init__(self, why: str, size: int) -> None:
        super().__init__(why)
        self.size = size


def _step(driver: Recorder, ops: list[Op], schedule: list[int] | None = None) -> None:
    check = driver.run(ops, schedule or ())
    if not check.legal:
        raise Killed(check.explain(), len(check.group.requests))


# --- scenes ------------------------------------------------------------------------------


def retries(rng: random.Random, now: int, driver: Recorder) -> tuple[list[Op], list[Op]]:
    """Admissions racing: the first send of a new ID and its exact retry, a
    prompt without an ID, and maybe a notice or a reused ID."""
    ops: list[Op] = [Prompt(now, session="s1", input=f"u{now}", text="t") for _ in range(2)]
    ops.append(Prompt(now, session="s1", text="t"))
    if rng.random() < 0.5:
        kind = rng.choice([Prompt, Synthetic])
        ops.append(kind(now, session=rng.choice(SESSIONS), input=rng.choice(["a", None]), text="t"))
    return [], ops


def _boundary(
    rng: random.Random, now: int, driver: Recorder, steers: int, racers: list[Op]
) -> tuple[list[Op], list[Op]]:
    _answer_all(driver, now)
    call = _open_call(driver, now, "s1")
    setup: list[Op] = [
        Prompt(now, session="s1", input=f"st{now}_{k}", text="s") for k in range(steers)
    ]
    finish = rng.choice(["stop", "tool"])
    return setup, [Answer(now, call=call, finish=finish), *racers]


def barrier(rng: random.Random, now: int, driver: Recorder) -> tuple[list[Op], list[Op]]:
    """A compaction request racing the boundary that promotes two pending steers."""
    return _boundary(rng, now, driver, 2, [Compact(now, session="s1")])


def steers(rng: random.Random, now: int, driver: Recorder) -> tuple[list[Op], list[Op]]:
    """Steers admitted while a boundary promotes the steers pending before them."""
    racers: list[Op] = [
        Prompt(now, session="s1", input=f"n{now}_{k}", text="n") for k in range(rng.randrange(1, 3))
    ]
    return _boundary(rng, now, driver, rng.randrange(1, 3), racers)


def ending(rng: random.Random, now: int, driver: Recorder) -> tuple[list[Op], list[Op]]:
    """A prompt admitted while the answer ends the execution (nothing else pending)."""
    kind = rng.choice([Prompt, Synthetic])
    return _boundary(rng, now, driver, 0, [kind(now, session="s1", input=f"e{now}", text="e")])


def idle(rng: random.Random, now: int, driver: Recorder) -> tuple[list[Op], list[Op]]:
    """Prompts on two idle sessions at once (their runners open calls side by
    side), and a resume of one of them."""
    _answer_all(driver, now)
    racers: list[Op] = [
        Prompt(now, session=sid, input=f"i{now}{sid}", text="i") for sid in SESSIONS
    ]
    return [], [*racers, Resume(now, session="s1")]


def interrupt(rng: random.Random, now: int, driver: Recorder) -> tuple[list[Op], list[Op]]:
    """An interrupt racing a prompt on a session with an open call."""
    _answer_all(driver, now)
    _open_call(driver, now, "s1")
    racers: list[Op] = [Interrupt(now, session="s1"), Prompt(now, session="s1", text="x")]
    return [], racers


def revert(rng: random.Random, now: int, driver: Recorder) -> tuple[list[Op], list[Op]]:
    """A synthetic notice racing a revert being staged on an idle session."""
    _answer_all(driver, now)
    target = f"r{now}"
    _step(driver, [RevertClear(now, session="s1")])
    _step(driver, [Prompt(now, session="s1", input=target, text="r")])
    _answer_all(driver, now)
    stage = RevertStage(now, session="s1", message=target)
    return [], [stage, Synthetic(now, session="s1", input=f"y{now}", text="done")]


SCENES: dict[str, Scene] = {
    "retries": retries,
    "barrier": barrier,
    "steers": steers,
    "ending": ending,
    "idle": idle,
    "interrupt": interrupt,
    "revert": revert,
}

SCENE_OF: dict[str, str] = {
    "race-retry-check-then-insert": "retries",
    "race-seq-read-then-write": "retries",
    "race-promote-trusts-batch": "barrier",
    "race-boundary-clears-steers": "steers",
    "race-wake-without-runner-lock": "ending",
    "race-call-counter-unlocked": "idle",
    "race-resume-check-outside-lock": "idle",
    "race-interrupt-pops-before-lock": "interrupt",
    "race-synthetic-revert-read-apart": "revert",
}


# --- hunts -------------------------------------------------------------------------------------


class Free:
    """A target whose groups go out without a schedule: they run free, even
    where the adapter has pause points."""

    def __init__(self, inner: AdapterTarget) -> None:
        self.inner = inner
        self.name = inner.name

    def request(self, op: Op, crash_at: str | None = None) -> tuple[Reply, Observed]:
        return self.inner.request(op, crash_at)

    def kill(self) -> Observed:
        return self.inner.kill()

    def group(
        self, ops: list[Op], schedule: list[int], crash_at: Sequence[str | None] = ()
    ) -> tuple[GroupReply, Observed]:
        return self.inner.group(ops, None, crash_at)


@dataclass(frozen=True)
class Hunt:
    """One seed's hunt: killed at which round (None: survived), the failing
    group's size, the seconds it took, and the failure explained."""

    mutant: str | None
    scene: str
    seed: int
    mode: Mode
    rounds: int
    killed_at: int | None
    group_size: int
    seconds: float
    why: str = ""
    # the steps sent, as scenario tables, up to the failing one (a kill's)
    tables: tuple[dict[str, Any], ...] = field(default=(), repr=False, compare=False)

    @property
    def killed(self) -> bool:
        return self.killed_at is not None


def hunt(
    folder: Path,
    mutant: str | None,
    seed: int,
    mode: Mode = "paused",
    rounds: int = 40,
    scene: str | None = None,
) -> Hunt:
    """Hunt ``mutant`` (None: the correct build) on its scene (or ``scene``) for one seed."""
    name = scene or SCENE_OF[mutant or ""]
    build = SCENES[name]
    rng = random.Random(f"{name}/{seed}")
    began = time.perf_counter()
    done = 0
    if mutant is not None and mutant not in RACES:
        raise KeyError(f"unknown race bug {mutant!r}; known: {', '.join(RACES)}")
    with AdapterTarget(mutant_command(mutant)[0], folder, STEP_LIMIT) as target:
        driver = Recorder(GroupDriver(Free(target) if mode == "free" else target, G4, STEP_LIMIT))
        try:
            for sid in SESSIONS:
                _step(driver, [Create(1, session=sid)])
            for k in range(rounds):
                done = k + 1
                now = 10 + k
                setup, racers = build(rng, now, driver)
                for op in setup:
                    _step(driver, [op])
                schedule = [rng.randrange(1000) for _ in range(80)]
                if mode == "sequential":
                    for op in racers:
                        _step(driver, [op])
                else:
                    _step(driver, racers, schedule)
            done = rounds + 1
            _answer_all(driver, 10 + rounds)
        except Killed as killed:
            seconds = time.perf_counter() - began
            tables = tuple(driver.tables)
            why = str(killed)
            return Hunt(mutant, name, seed, mode, rounds, done, killed.size, seconds, why, tables)
    return Hunt(mutant, name, seed, mode, rounds, None, 0, time.perf_counter() - began)


# --- minimal repros ----------------------------------------------------------------------------


# A seed (and the hunt's rounds) whose paused hunt kills each race bug early:
# the fast repro of each in the tests (benchmarks/bench_races.py --repros
# shrinks the first killing seed of each instead).
REPRO_SEEDS: dict[str, tuple[int, int]] = {
    "race-retry-check-then-insert": (4, 1),
    "race-seq-read-then-write": (0, 1),
    "race-promote-trusts-batch": (7, 1),
    "race-boundary-clears-steers": (4, 1),
    "race-wake-without-runner-lock": (1, 4),
    "race-call-counter-unlocked": (6, 1),
    "race-resume-check-outside-lock": (3, 2),
    "race-interrupt-pops-before-lock": (4, 1),
    "race-synthetic-revert-read-apart": (0, 1),
}


@dataclass(frozen=True)
class Repro:
    """A race bug's killing hunt shrunk to a scenario file: the file, the
    hunt, and the steps and requests before and after shrinking."""

    path: Path
    hunt: Hunt
    steps: tuple[int, int]  # recorded, shrunk
    requests: tuple[int, int]  # recorded, shrunk (a group's members counted one by one)
    seconds: float


def adapter_factory(mutant: str | None, folder: Path) -> Callable[[Policy, int], AdapterTarget]:
    """Fresh SQLite inboxes (``mutant`` switched on), each in a folder of its
    own under ``folder``: the shrinker's targets."""
    return fresh_adapters(mutant_command(mutant)[0], folder)


def write_repro(
    folder: Path, mutant: str, seed: int, path: Path, rounds: int = 40, attempts: int = 200
) -> Repro | None:
    """Hunt ``mutant`` paused on ``seed``; its first failing group, and the
    steps that led to it, shrunk to the scenario file ``path`` (None: the
    seed did not kill it). The file's schedules are the hunt's, so the
    SQLite adapter's pause points replay the interleaving."""
    began = time.perf_counter()
    found = hunt(folder / "hunt", mutant, seed, "paused", rounds)
    if not found.killed:
        return None
    factory = adapter_factory(mutant, folder / "shrink")
    name = f"{mutant}-seed-{seed}"
    write_group_repro(found.tables, G4, STEP_LIMIT, factory, path, name=name, attempts=attempts)
    shrunk = load_text(path.read_text(encoding="utf-8"), str(path)).scenario.step
    return Repro(
        path,
        found,
        (len(found.tables), len(shrunk)),
        (
            sum(len(t.get("requests", [t])) for t in found.tables),
            sum(len(s.requests or [s]) for s in shrunk),
        ),
        time.perf_counter() - began,
    )
