"""The planted bugs of the SQLite inbox (``impls/sqlite_inbox``): what each
gets wrong, and how to switch one on.

Each mutant is a small, realistic diff in the SQLite implementation, switched
on by name with ``INBOXSIM_MUTANT=NAME`` (or ``--mutant NAME`` on the
adapter's command line; :func:`mutant_command` gives both). The catalogue
:data:`MUTANTS` names each one, says in one line what it gets wrong, and the
class of bug it stands for; :data:`RACES` are the bugs only concurrent
requests show. The kill check (:mod:`.mutants`) runs them.

Library scenarios whose ``breaker`` is a planted bug use these names: the
mutant with the same name is the bug the scenario was written to catch
(:func:`library_planted_bugs` lists them).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from ..scenarios.load import load_library

ADAPTER = Path(__file__).resolve().parent.parent / "impls" / "sqlite_inbox" / "adapter.py"


@dataclass(frozen=True, slots=True)
class Mutant:
    name: str
    description: str
    bug_class: str


# The catalogue: "name | bug class", then the one-line description, indented.
# Bug classes: durability, admission, ids, retry, promotion, ordering, time,
# barrier, execution, wake, interrupt, revert, fork.
CATALOGUE = """
admit-after-wake | durability
    the after_admit point is reached before the admission commits: a crash there loses it
volatile-inbox | durability
    pending user/synthetic rows are dropped at every start: unpromoted input is lost on a
    crash
promotion-not-atomic | durability
    promotion deletes the pending row and inserts the message in two transactions: a crash
    between loses the input
promotion-listener-before-commit | durability
    the after-promotion notification (the after_promotion point) runs before the
    boundary's promotions commit: a crash there loses them
double-promotion-after-crash | durability
    a batch's pending rows are deleted only when the whole batch is done: a crash mid-batch
    promotes an input twice
promote-without-admission | admission
    admission takes a seq but never logs the durable admitted event
dedup-by-content | admission
    an input without an ID is merged into a pending row with the same payload
second-barrier | admission
    no one-barrier rule: a compaction with a new ID adds a second barrier
pending-unknown-session-empty | admission
    log, messages and pending of an unknown session answer an empty list instead of
    session_not_found
omitted-id-reuses-last | ids
    an omitted input ID reuses the last generated ID (counter read, not bumped)
per-session-ids | ids
    the ID namespace is per session: another session's ID is judged as a retry there
owner-ignores-kind | ids
    ID ownership is checked by session alone: a compaction may take the ID of the
    session's own prompt
ids-freed-for-everyone | ids
    an ID whose lifecycle ended (consumed barrier, committed revert) is free for any session
    and kind, and generated IDs may reuse it
retry-text-only | retry
    retry identity compares only the text (files, agents, metadata ignored)
retry-ignores-metadata | retry
    retry identity ignores metadata
retry-ignores-delivery | retry
    retry identity ignores delivery
retry-appends-admission | retry
    an exact retry of a pending input re-admits it (new admitted event, new seq and time)
retry-receipt-promotion-time | retry
    a retry after promotion returns the promotion time instead of the admission time
retry-no-wake | retry
    an exact retry returns the receipt but wakes nothing, whatever its resume
retry-skips-revert-commit | revert
    a prompt retry under a staged revert returns the receipt without committing the revert
revert-commit-before-validation | revert
    a prompt commits the staged revert before its fields are checked: an invalid prompt
    still truncates
one-steer-per-boundary | promotion
    a boundary promotes only the oldest pending steer
queue-batch | promotion
    an input boundary promotes every queued input at once
queue-promotes-mid-turn | promotion
    queued input promotes at continuation boundaries too, not only when the turn ends
queue-as-steer | promotion
    delivery is ignored when promoting: queued input promotes like a steer
admission-order-ignores-delivery | ordering
    an input boundary promotes every pending input in admission order, queued ones included
steer-waits-for-idle | promotion
    steers promote only when the turn ends, not at continuation boundaries
steer-promotes-mid-step | promotion
    a steer admitted during a step becomes visible at once, not at the next boundary
message-time-is-admission | time
    a promoted message is stamped with its admission time instead of the boundary's
transcript-by-admission-order | ordering
    messages are listed in admission order instead of promotion (seq) order
barrier-ignored | barrier
    a pending compaction barrier does not block promotion: a drain promotes and steps before
    compacting
compaction-only-at-drain-start | barrier
    a pending compaction runs only when a drain starts, not at the step boundary after
    each step
barrier-kept-on-error | barrier
    a failed compaction logs its failure but keeps its barrier
revert-removes-barrier | barrier
    a committed revert also removes a compaction barrier past the boundary
interrupt-keeps-barrier | barrier
    interrupting a compaction call neither settles it nor consumes its barrier
pending-hides-barrier | barrier
    the pending listing shows user and synthetic rows only, not the compaction barrier
compaction-error-ends-drain | execution
    an error on a compaction call fails the execution instead of letting the drain go on
no-step-reset | execution
    the step counter is not reset to 1 when a boundary promotes input
final-off-by-one | execution
    the final flag is set one step before the allowance's last step
tool-on-final-continues | execution
    a tool answer on the final step continues instead of counting as stop
error-as-stop | execution
    an error answer on a step is read as stop: the step ends and the execution succeeds
terminal-per-drain | execution
    each drain of an execution, the follow-up included, logs its own execution_succeeded
ended-execution-kept | execution
    an execution that failed or was interrupted stays registered: a later wake or resume
    joins it and nothing runs
doorbell-dropped-on-failure | wake
    a wake rung during a step that fails is forgotten: no follow-up execution
follow-up-drain-forced | wake
    the follow-up drain a rung doorbell gives is forced: a model call with nothing to promote
resume-forces-follow-up | wake
    a resume that joins a running execution turns its follow-up into a forced drain: a
    model call with nothing to promote
one-session-at-a-time | wake
    one runner for all sessions: a session woken while another runs waits until it ends
compact-no-wake | wake
    a compaction request records its barrier but wakes nothing
restart-resumes-pending | wake
    a (re)started process wakes every session with pending input: replay that wakes
resume-as-wake | wake
    resume is an unforced wake: nothing pending, no call
resume-flag-ignored | wake
    prompt's resume=false is ignored: admission always wakes
synthetic-wakes-under-revert | wake
    a synthetic input wakes the session while a revert is staged
interrupt-clears-inbox | interrupt
    interrupt deletes the session's pending input
idle-interrupt-appends | interrupt
    interrupt on an idle session logs an execution_interrupted event
interrupt-keeps-doorbell | interrupt
    a wake rung before an interrupt survives it and starts a successor execution
interrupt-leaves-call-open | interrupt
    the interrupted step's call stays listed as open
revert-keeps-boundary | revert
    a committed revert truncates after the boundary message, keeping it (> instead of >=)
revert-keeps-pending | revert
    a committed revert leaves pending rows past the boundary
fork-cutoff-inclusive | fork
    fork before N copies N too (cutoff N.seq instead of N.seq - 1)
fork-copies-pending | fork
    a fork copies the parent's pending input into the child's inbox
copied-from-not-root | fork
    a copy of a copy names its immediate original, not the root message
fork-copy-ids-unstable | fork
    a fork's copies are renamed by each new process: their IDs do not survive a restart
"""


def _parse(text: str) -> dict[str, Mutant]:
    out: dict[str, Mutant] = {}
    name = kind = ""
    words: list[str] = []
    for line in [*text.strip().splitlines(), "end | end"]:
        if line.startswith(" "):
            words.append(line.strip())
            continue
        if name:
            out[name] = Mutant(name, " ".join(words), kind)
        name, _, kind = (part.strip() for part in line.partition("|"))
        words = []
    return out


MUTANTS: dict[str, Mutant] = _parse(CATALOGUE)

# Race bugs (issue 19): each is right when requests come one at a time and
# wrong only when two overlap, so sequential conformance cannot kill them (they
# stay out of MUTANTS and its kill matrix); the group driver with pause points
# does (tests/test_sqlite_races.py).
RACE_CATALOGUE = """
race-retry-check-then-insert | retry
    an exact retry's "is this ID known?" check and the admission's insert run in two
    transactions: two concurrent first sends of one ID both insert
race-seq-read-then-write | ordering
    an admission without an ID reads the session's next seq in one transaction and writes
    it back in another: a concurrent admission's seq is taken twice
race-promote-trusts-batch | barrier
    a promotion trusts the boundary's earlier read: its transaction does not check again that
    the row is still pending and no barrier holds it, so a compaction admitted meanwhile is
    overtaken
race-boundary-clears-steers | promotion
    the boundary reads its batch, then its last promotion clears the session's pending steers
    by session instead of by ID: a steer admitted after the read is lost
race-wake-without-runner-lock | wake
    an admission rings the doorbell of the session's execution without the session's runner
    lock: an execution past its last doorbell check, about to end, swallows the wake
race-call-counter-unlocked | execution
    the call counter, shared by every session's runner, is bumped and read back later without
    a lock: two sessions' calls opened side by side get one ID
race-resume-check-outside-lock | execution
    resume looks for an active execution before it takes the session's runner lock: one
    started meanwhile by a prompt's wake gets a second execution beside it
race-interrupt-pops-before-lock | interrupt
    interrupt takes the execution off the running table before it takes the session's runner
    lock to cancel it: a prompt's wake meanwhile starts a new one, which the cancel then loses
race-synthetic-revert-read-apart | revert
    a synthetic notice reads the session's staged revert before its admission's transaction:
    a revert staged meanwhile does not hold its wake, and the notice is promoted
"""
RACES: dict[str, Mutant] = _parse(RACE_CATALOGUE)


def mutant_command(name: str | None) -> tuple[list[str], dict[str, str]]:
    """The SQLite adapter's command line and the environment that switch the
    mutant on (either alone suffices; ``None`` for the correct build); a
    race bug (:data:`RACES`) too."""
    argv = [sys.executable, str(ADAPTER)]
    if name is None:
        return argv, {}
    if name not in MUTANTS and name not in RACES:
        raise KeyError(f"unknown mutant {name!r}; known: {', '.join(MUTANTS)}")
    return [*argv, "--mutant", name], {"INBOXSIM_MUTANT": name}


def library_planted_bugs() -> dict[str, str]:
    """Library scenario name -> the planted bug its ``breaker`` names (scenarios
    broken by a policy preset are left out)."""

    out = {}
    for loaded in load_library():
        bug = loaded.scenario.breaker
        if bug is not None and not bug.preset:
            out[loaded.scenario.name] = bug.name
    return out
