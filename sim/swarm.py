"""Swarm configuration: each seed first draws its own world.

Following TigerBeetle's VOPR (``options_swarm``) and Hypothesis' rule swarms,
a run does not use one fixed mix: before its first operation it draws which
operation families and fault families are on, and at what rates. A fixed mix
spreads every seed thinly over everything; a swarm of skewed mixes makes long
runs of one kind of trouble (many crashes, many conflicts, no answers at all)
likely in some seeds, which is where the rare interleavings live.

Every level table below lists its simplest setting first, so that a decision
of 0 (what a shrinker lowers toward) means "off" or "least".
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from ..model import FAILPOINTS
from .rng import Chooser

# Operation families, in the order their weights are drawn and recorded.
FAMILIES = (
    "prompt",
    "answer",
    "synthetic",
    "create",
    "retry",
    "conflict",
    "compact",
    "interrupt",
    "resume",
    "fork",
    "revert",
    "read",
)
# Always on: without prompts nothing is admitted, without answers nothing
# ever settles during the safety phase.
CORE_FAMILIES = ("prompt", "answer")

SESSION_COUNTS = (1, 2, 3)
CLIENT_COUNTS = (1, 2, 3)
ID_POOL_SIZES = (3, 5, 8)
STEP_LIMITS = (4, 1, 2, 3, 6)  # the model's default first
TICKS = (1, 3, 10)  # the largest `now` increment per request (increments may be 0)
QUEUE_RATES = (0.0, 0.25, 0.5)
OMIT_ID_RATES = (0.0, 0.15, 0.4)
NO_RESUME_RATES = (0.0, 0.1, 0.3)
METADATA_RATES = (0.0, 0.3)
UNKNOWN_SESSION_RATES = (0.0, 0.03)
FAILPOINT_RATES = (0.0, 0.05, 0.12, 0.25)
KILL_RATES = (0.0, 0.02, 0.06)
FINISH = ("stop", "tool", "error")


# Races a concurrent run (``--concurrency N``, N > 1) aims its groups at, in
# the order their weights are drawn (issue 19, section 4): several exact
# retries of one ID at once; a conflicting retry racing an exact one; steers
# admitted while the session's call is answered (spec A6); a compaction
# request racing the boundary an answer reaches; user prompts racing
# synthetic notices (one admission order); an interrupt racing an answer.
RACES = (
    "retry.exact",
    "retry.conflict",
    "steer.answer",
    "compact.boundary",
    "prompt.notice",
    "interrupt.answer",
)
GROUP_RATES = (0.1, 0.25, 0.5)  # of the safety phase's actions, how many are groups


@dataclass(frozen=True, slots=True)
class Races:
    """A concurrent seed's groups: how large, how often, aimed at what. Drawn
    after the :class:`Swarm` and only when concurrency is above 1, so a
    sequential seed draws exactly what it always drew (same trace hash)."""

    concurrency: int  # most requests in a group
    rate: float
    weights: tuple[int, ...]  # per race in RACES order; 0 is off

    def to_dict(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["weights"] = dict(zip(RACES, self.weights, strict=True))
        return doc


def draw_races(ch: Chooser, concurrency: int) -> Races:
    """Draw a concurrent seed's races (each race on in three seeds of four,
    weight 1-7; at least one stays on)."""
    rate = ch.pick(GROUP_RATES)
    weights = [0 if (level := ch.below(9)) < 2 else level - 1 for _ in RACES]
    if not any(weights):
        weights[ch.below(len(RACES))] = 1
    return Races(concurrency, rate, tuple(weights))


@dataclass(frozen=True, slots=True)
class Swarm:
    """One seed's world: the mix of operations and faults it runs with."""

    sessions: int
    clients: int
    id_pool: int
    step_limit: int
    tick: int
    weights: tuple[int, ...]  # per family in FAMILIES order; 0 is off
    finish: tuple[int, ...]  # weights of stop, tool, error answers
    queue_rate: float
    omit_id_rate: float
    no_resume_rate: float
    metadata_rate: float
    unknown_session_rate: float
    failpoint_rate: float
    failpoints: tuple[str, ...]  # the failpoints this seed may crash at
    kill_rate: float

    def to_dict(self) -> dict[str, Any]:
        # Field by field, not ``asdict`` (its deep copy walks every tuple):
        # one per run, ~1 % of a sweep's seed.
        doc = {name: getattr(self, name) for name in _SWARM_FIELDS}
        doc["weights"] = dict(zip(FAMILIES, self.weights, strict=True))
        doc["finish"] = dict(zip(FINISH, self.finish, strict=True))
        doc["failpoints"] = list(self.failpoints)
        return doc


_SWARM_FIELDS = tuple(f.name for f in fields(Swarm))


def draw_swarm(ch: Chooser) -> Swarm:
    """Draw one seed's swarm configuration (each draw recorded by ``ch``)."""
    sessions = ch.pick(SESSION_COUNTS)
    clients = ch.pick(CLIENT_COUNTS)
    id_pool = ch.pick(ID_POOL_SIZES)
    step_limit = ch.pick(STEP_LIMITS)
    tick = ch.pick(TICKS)
    weights = []
    for family in FAMILIES:
        # Each optional family is on in three seeds of four; its weight is
        # 1-8 relative to the others. Decision 0 means "on, weight 1" for core
        # families and "off" for the others.
        level = ch.below(9)
        if family in CORE_FAMILIES:
            weights.append(level + 1)
        else:
            weights.append(0 if level < 2 else level - 1)
    finish = (2 + ch.below(5), ch.below(6), ch.below(3))
    failpoints = tuple(p for p in FAILPOINTS if not ch.chance(0.25))
    return Swarm(
        sessions=sessions,
        clients=clients,
        id_pool=id_pool,
        step_limit=step_limit,
        tick=tick,
        weights=tuple(weights),
        finish=finish,
        queue_rate=ch.pick(QUEUE_RATES),
        omit_id_rate=ch.pick(OMIT_ID_RATES),
        no_resume_rate=ch.pick(NO_RESUME_RATES),
        metadata_rate=ch.pick(METADATA_RATES),
        unknown_session_rate=ch.pick(UNKNOWN_SESSION_RATES),
        failpoint_rate=ch.pick(FAILPOINT_RATES) if failpoints else 0.0,
        failpoints=failpoints,
        kill_rate=ch.pick(KILL_RATES),
    )
