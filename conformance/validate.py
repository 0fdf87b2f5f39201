"""``inboxsim validate``: judge a durable event log written outside the harness.

The input is a JSON-lines file of protocol events (``docs/protocol.md``,
"Receipts, messages and events"), one session's durable log as an implementation wrote it,
or several sessions' logs interleaved: each line is
``{"seq", "type", "time", "input"?, "data", "session"?}`` (``session``
defaults to ``"session"``). Blank lines and lines starting with ``#`` are
skipped.

The log becomes a synthetic trace: a ``hello`` step, then one read-only
``log`` step per event whose observation carries that event, in file order.
The invariant :class:`~inboxsim.invariants.Monitor` then judges it,
restricted to :data:`EVENT_ONLY`: the invariants whose checkers decide from
the durable events alone (no replies, no pending or transcript views, no
open calls). They are:

- ``seq-contiguous``: seqs start at 0 and grow by one (the fork's one gap);
- ``admission-fresh-id``: one admission per lifecycle;
- ``promotion-after-admission``: a promotion needs an earlier admission;
- ``promoted-once``: at most one promotion per lifecycle;
- ``single-barrier``, ``barrier-blocks-promotion``,
  ``barrier-holds-later-input``: the compaction barrier rules, from the
  ``compaction_*`` events.

Two more, ``replay-matches-views`` (the log folds without contradiction) and
``monotonic-visible-time`` (times never run backward), are judged by folding
the log once (:func:`inboxsim.invariants.log.judge_log`, which says what each
checks), and reported under those ids.

Everything else needs what only a live run shows (replies, views, calls,
crash points) and is listed as not decidable from a log.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import HarnessError
from ..invariants import Monitor
from ..invariants.log import LOG_JUDGED, judge_log
from ..invariants.registry import expected
from ..model import Event, Ok, Policy
from ..model.ops import Hello, Log
from ..model.values import canonical_json
from ..policy_file import load_policy
from ..trace.record import Observed, Step

EVENT_ONLY = (
    "seq-contiguous",
    "admission-fresh-id",
    "promotion-after-admission",
    "promoted-once",
    "single-barrier",
    "barrier-blocks-promotion",
    "barrier-holds-later-input",
)
DIRECT = LOG_JUDGED  # judged by folding the log (invariants/log.py)
JUDGED = EVENT_ONLY + DIRECT
DEFAULT_SESSION = "session"
ALL_FEATURES = ["synthetic", "compaction", "fork", "revert", "resume", "interrupt"]


@dataclass
class ValidateResult:
    file: str
    policy: str
    events: int
    sessions: list[str]
    violations: list[dict[str, Any]] = field(default_factory=list)
    exercised: list[str] = field(default_factory=list)
    judged: tuple[str, ...] = JUDGED

    @property
    def exit_code(self) -> int:
        return 1 if self.violations else 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "policy": self.policy,
            "events": self.events,
            "sessions": self.sessions,
            "judged": list(self.judged),
            "exercised": self.exercised,
            "violations": self.violations,
            "exit_code": self.exit_code,
        }

    def lines(self) -> list[str]:
        out = [
            f"{self.file}: {self.events} events in {len(self.sessions)} session(s), "
            f"policy {self.policy}"
        ]
        failed = {v["invariant"] for v in self.violations}
        for inv in self.judged:
            verdict = (
                "violated"
                if inv in failed
                else ("held" if inv in self.exercised else "not exercised")
            )
            out.append(f"  {inv:<28} {verdict}")
        for v in self.violations:
            out.append(f"{v['invariant']} (line {v['lines']}): {v['message']}")
        out.append("VIOLATED" if self.violations else "HELD")
        return out


# --- parsing --------------------------------------------------------------------


def parse_line(text: str, number: int) -> Event:
    """One line as an Event, or a HarnessError naming the line and what was expected."""
    where = f"line {number}"
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise HarnessError(f"{where}: not JSON ({exc.msg}); expected one event object") from None
    if not isinstance(doc, dict):
        raise HarnessError(f"{where}: expected a JSON object (an event), got {type(doc).__name__}")
    allowed = {"seq", "type", "time", "input", "data", "session"}
    extra = sorted(set(doc) - allowed)
    if extra:
        raise HarnessError(
            f"{where}: unexpected field(s) {', '.join(extra)}; an event has seq, type, time, "
            "input?, data, session?"
        )
    for name in ("seq", "type", "time", "data"):
        if name not in doc:
            raise HarnessError(f"{where}: missing {name!r}; an event has seq, type, time, data")
    seq, kind, when, data = doc["seq"], doc["type"], doc["time"], doc["data"]
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
        raise HarnessError(f"{where}: 'seq' must be a non-negative integer, not {seq!r}")
    if not isinstance(kind, str) or not kind:
        raise HarnessError(f"{where}: 'type' must be a non-empty string, not {kind!r}")
    if not isinstance(when, int) or isinstance(when, bool):
        raise HarnessError(f"{where}: 'time' must be an integer (milliseconds), not {when!r}")
    if not isinstance(data, dict):
        raise HarnessError(f"{where}: 'data' must be a JSON object, not {data!r}")
    ident = doc.get("input")
    if ident is not None and not isinstance(ident, str):
        raise HarnessError(f"{where}: 'input' must be a string, not {ident!r}")
    session = doc.get("session", DEFAULT_SESSION)
    if not isinstance(session, str) or not session:
        raise HarnessError(f"{where}: 'session' must be a non-empty string, not {session!r}")
    return Event(session, seq, kind, when, ident, canonical_json(data))


def read_events(path: str | Path) -> list[tuple[int, Event]]:
    """(line number, event) for each event line of the file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise HarnessError(f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise HarnessError(f"{path} is not UTF-8 text") from None
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        try:
            out.append((number, parse_line(stripped, number)))
        except HarnessError as exc:
            raise HarnessError(f"{path}: {exc}") from None
    return out


def write_events(path: str | Path, events: list[Event], session: bool = True) -> None:
    """Write events as a JSON-lines log (what an implementation's log looks like)."""
    with open(path, "w", encoding="utf-8") as handle:
        for ev in events:
            doc = ev.to_wire()
            if session:
                doc["session"] = ev.session
            handle.write(json.dumps(doc, sort_keys=True) + "\n")


# --- judging --------------------------------------------------------------------


def steps_of(events: list[Event], step_limit: int = 4) -> list[Step]:
    """The synthetic trace: hello, then one ``log`` step per event."""
    hello = {
        "protocol": 1,
        "implementation": "validate",
        "features": ALL_FEATURES,
        "step_limit": step_limit,
    }
    steps = [
        Step(0, "safety", "request", "hello", Hello(0, step_limit), None, Ok(hello), Observed())
    ]
    for ev in events:
        steps.append(
            Step(
                len(steps),
                "safety",
                "request",
                "log",
                Log(ev.time, session=ev.session),
                None,
                Ok({"events": [ev.to_wire()]}),
                Observed(events=(ev,)),
            )
        )
    return steps


def judged_under(policy: Policy) -> tuple[str, ...]:
    """The invariants of :data:`JUDGED` the policy is expected to keep (``g5``'s
    barrier lets earlier steers through; ``g2`` stamps admission time)."""

    keep = expected(policy)
    return tuple(i for i in JUDGED if i in keep)


def validate_events(
    events: list[tuple[int, Event]], policy: Policy, file: str = "<events>"
) -> ValidateResult:

    only = [ev for _, ev in events]
    lines = [n for n, _ in events]
    judged = judged_under(policy)
    monitor = Monitor(
        policy,
        {"features": ALL_FEATURES, "step_limit": 4},
        invariants=[i for i in EVENT_ONLY if i in judged],
    )
    violations: list[dict[str, Any]] = []
    for step in steps_of(only):
        for v in monitor.feed(step):
            violations.append(
                {
                    "invariant": v.invariant,
                    "lines": [lines[i - 1] for i in v.steps if 0 < i <= len(lines)],
                    "message": v.message,
                }
            )
    violations.extend(
        {"invariant": v.invariant, "lines": v.lines, "message": v.message}
        for v in judge_log(events, policy)
        if v.invariant in judged
    )
    direct = {i for i in DIRECT if i in judged} if events else set()
    exercised = sorted(set(monitor.exercised) | direct)
    sessions = list(dict.fromkeys(ev.session for ev in only))
    return ValidateResult(file, policy.name, len(only), sessions, violations, exercised, judged)


def validate_file(path: str | Path, policy: str = "g4") -> ValidateResult:
    """Judge the log at ``path``; a log with no event is a :class:`HarnessError`
    (nothing was judged, which is no pass)."""
    the_policy = load_policy(policy)
    events = read_events(path)
    if not events:
        raise HarnessError(f"{path} holds no event (nothing to judge): give a log with events")
    return validate_events(events, the_policy, str(path))


__all__ = [
    "EVENT_ONLY",
    "JUDGED",
    "ValidateResult",
    "parse_line",
    "read_events",
    "steps_of",
    "validate_events",
    "validate_file",
    "write_events",
]
