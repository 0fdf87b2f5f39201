"""The scenario file format, as pydantic models (``extra="forbid"``, strict types).

A scenario is a readable TOML file: a header (``name``, ``source``, ``policy``,
``step_limit``, ``tags``, ``breaks_under``, ``breaker``, ``invariants``,
``expect_violation``),
the OpenCode tests it carries (``[[carries]]`` tables) and an ordered list of
``[[step]]`` tables. A step is either one protocol operation (``op`` plus that
operation's fields), ``kill = true``, a crash between requests, or a
concurrent group (``op = "group"``: ``requests``, a list of operations issued
together, one of which may carry ``crash_at``, and an optional ``schedule``
that picks the interleaving where the target has pause points;
``docs/scenarios.md``). A file with a group is judged against the reference
model by the linearizability search at every step, so its steps carry no
expectations.

A scenario that cannot fail is not a test: ``breaker`` names what breaks it (a
policy preset, or a planted bug of the SQLite inbox) and the step at which it
fails then; ``tests/test_breakers.py`` checks that it does. A ``[[carries]]``
table quotes one OpenCode test by its exact name (spec section 6) and says how
the scenario carries it: ``covered`` (what the test checks, through the
protocol), ``analog`` (the nearest behaviour the protocol defines; ``note``
says what differs) or ``differs`` (OpenCode's rule under the scenario's
policy, where the protocol's default pins another; ``note`` says which
generation's). ``docs/coverage.md`` is generated from these tables
(:mod:`.coverage`). Expectations sit on the step they
judge and compare only what compares across implementations (``docs/cli.md``,
"Lockstep"): the harness's own IDs, orders and error codes, never
seq values, times or generated IDs.

IDs the target generates are written symbolically, both in requests and in
expectations, so that a file stays valid against any implementation:

- ``gen:N``: the N-th input ID the target generated (by order of appearance);
- ``copy:X``: in a forked session, the copy of original message ``X``;
- an ``answer`` names its call by ``session`` (that session's open call), or
  by a literal ``call`` for a call that is not open (a stale answer).
"""

from __future__ import annotations

from dataclasses import fields as dc_fields
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..model import FAILPOINTS, OPS, PRESETS
from ..model.values import ERROR_CODES, EVENT_TYPES

# The runner sends hello itself (at the start and after every crash), so a
# scenario never names it.
SCENARIO_OPS = tuple(name for name in OPS if name != "hello")

# Fields that are not the operation's own: the clock, the failpoint, and the
# expectations. Every other key of a step must be a field of its op.
EXPECTATIONS = (
    "expect_error",
    "expect_ok",
    "expect_result",
    "expect_receipt",
    "expect_same_receipt_as",
    "expect_session",
    "expect_pending",
    "expect_transcript",
    "expect_calls",
    "expect_events",
    "expect_log",
)
_COMMON = {"op", "kill", "now", "crash_at", *EXPECTATIONS}
# A kill has no reply: only what is observed after the restart can be expected.
_KILL_FIELDS = {
    "kill",
    "now",
    "expect_session",
    "expect_pending",
    "expect_transcript",
    "expect_calls",
    "expect_events",
}
# Fields an op cannot do without (the model would silently default them).
_REQUIRED: dict[str, tuple[str, ...]] = {
    "prompt": ("session", "text"),
    "synthetic": ("session", "text"),
    "fork": ("session", "child"),
    "revert_stage": ("session", "message"),
    "answer": ("finish",),
}


def op_fields(op: str) -> set[str]:
    """The request fields of ``op`` as a scenario writes them (``now`` aside)."""
    names = {f.name for f in dc_fields(OPS[op]) if f.name != "now"}
    return names


class _Strict(BaseModel):
    # strict: a TOML string "5" is not the integer 5; forbid: a typo is an error.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class ReceiptExpect(_Strict):
    """A subset of the receipt to match (omitted keys are not compared)."""

    input: str | None = None
    session: str | None = None
    type: Literal["user", "synthetic", "compaction"] | None = None
    delivery: Literal["steer", "queue"] | None = None
    data: dict[str, Any] | None = None


class CallExpect(_Strict):
    """One open call to match (omitted keys are not compared)."""

    session: str | None = None
    kind: Literal["step", "compaction"] | None = None
    step: int | None = None
    final: bool | None = None
    context: list[str] | None = None


class Breaker(_Strict):
    """What makes this scenario fail, and where: a policy preset (it must be
    one of ``breaks_under``), a policy file (a path ending in ``.toml``,
    relative to the scenario file, as ``policy`` is), or a planted bug of the
    SQLite inbox (a mutant of ``inboxsim.conformance.catalogue.MUTANTS``), and the
    scenario step whose expectations or invariants it breaks first."""

    name: str = Field(min_length=1)
    step: int = Field(ge=1)
    reason: str = Field(min_length=1)

    @property
    def preset(self) -> bool:
        """A policy, preset or file (run on the model), rather than a planted bug."""
        return self.name in PRESETS or self.name.endswith(".toml")


# The parts of the spec's section 6 (OpenCode's test files).
Section = Literal["6.1", "6.2", "6.3", "6.4", "6.5", "6.6", "6.7", "6.8"]
SECTIONS: tuple[str, ...] = get_args(Section)


class Citation(_Strict):
    """One OpenCode test this scenario carries (``[[carries]]``)."""

    test: str = Field(min_length=1)  # the test's name, quoted exactly as spec section 6 has it
    section: Section
    kind: Literal["covered", "analog", "differs"] = "covered"
    note: str | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _noted(self) -> Citation:
        if self.kind != "covered" and self.note is None:
            what = "what it does differently" if self.kind == "analog" else "which rule it pins"
            article = "an" if self.kind == "analog" else "a"
            raise ValueError(f"{article} {self.kind} citation needs a note saying {what}")
        return self


class StepSpec(_Strict):
    """One ``[[step]]`` table: an operation or a kill, with expectations."""

    op: str | None = None
    kill: bool | None = None
    now: int | None = Field(default=None, ge=0)
    crash_at: Literal["after_admit", "mid_promotion", "after_promotion"] | None = None
    # --- the protocol's request fields --------------------------------------
    session: str | None = None
    input: str | None = None
    text: str | None = None
    files: list[Any] | None = None
    agents: list[Any] | None = None
    metadata: dict[str, Any] | None = None
    delivery: str | None = None  # a string, so a scenario may send a bad one
    resume: bool | None = None
    description: str | None = None
    child: str | None = None
    before: str | None = None
    message: str | None = None
    after: int | str | None = None  # a seq, or "TYPE:INPUT": the seq of that event
    call: str | None = None
    finish: str | None = None
    # --- expectations -------------------------------------------------------
    expect_error: str | None = None
    expect_ok: bool | None = None
    expect_result: dict[str, Any] | None = None
    expect_receipt: ReceiptExpect | None = None
    expect_same_receipt_as: int | None = Field(default=None, ge=1)
    expect_session: str | None = None
    expect_pending: list[str] | None = None
    expect_transcript: list[str] | None = None
    expect_calls: list[CallExpect] | None = None
    expect_events: list[str] | None = None
    expect_log: list[str] | None = None  # a log reply's events: "TYPE" or "TYPE:INPUT"
    # --- a concurrent group (op = "group") --------------------------------------
    requests: list[StepSpec] | None = None
    schedule: list[int] | None = None

    @model_validator(mode="after")
    def _shape(self) -> StepSpec:
        given = {k for k in type(self).model_fields if getattr(self, k) is not None}
        if self.op == "group":
            return self._group(given)
        if self.requests is not None or self.schedule is not None:
            raise ValueError("'requests' and 'schedule' belong to a step with op = \"group\"")
        if self.kill is not None:
            if self.kill is not True:
                raise ValueError("kill must be true (a crash between requests)")
            if self.op is not None:
                raise ValueError("a step is either an op or kill = true, not both")
            extra = sorted(given - _KILL_FIELDS)
            if extra:
                raise ValueError(f"a kill step takes no {', '.join(map(repr, extra))}")
            if (
                self.expect_pending is not None or self.expect_transcript is not None
            ) and not self.expect_session:
                raise ValueError("a kill step names the session it expects with 'expect_session'")
            return self
        if self.op is None:
            raise ValueError("a step needs 'op' (one of the protocol operations) or 'kill = true'")
        if self.op not in SCENARIO_OPS:
            raise ValueError(f"unknown op {self.op!r}; expected one of {', '.join(SCENARIO_OPS)}")
        allowed = _COMMON | op_fields(self.op)
        if self.op == "answer":
            allowed |= {"session"}  # the session's open call, instead of a call ID
        stray = sorted(given - allowed)
        if stray:
            raise ValueError(f"op {self.op!r} has no field {', '.join(map(repr, stray))}")
        missing = [f for f in _REQUIRED.get(self.op, ()) if f not in given]
        if missing:
            raise ValueError(f"op {self.op!r} needs {', '.join(map(repr, missing))}")
        if self.op == "answer" and (self.session is None) == (self.call is None):
            raise ValueError(
                "an answer names its call by 'session' (its open call) or 'call', not both"
            )
        if (
            self.expect_pending is not None or self.expect_transcript is not None
        ) and not self.state_session:
            raise ValueError(f"op {self.op!r} names no session: say which with 'expect_session'")
        if self.expect_error is not None:
            if self.expect_error not in ERROR_CODES:
                raise ValueError(
                    f"expect_error {self.expect_error!r} is not one of {', '.join(ERROR_CODES)}"
                )
            if (
                self.expect_ok
                or self.expect_receipt
                or self.expect_result
                or self.expect_same_receipt_as
            ):
                raise ValueError("expect_error contradicts expect_ok/expect_receipt/expect_result")
        for event in self.expect_events or ():
            if event not in EVENT_TYPES and not event.startswith("other:"):
                raise ValueError(f"expect_events: {event!r} is not an event type")
        if self.expect_log is not None and self.op != "log":
            raise ValueError("expect_log judges the reply of a 'log' op")
        for entry in self.expect_log or ():
            if entry.partition(":")[0] not in EVENT_TYPES:
                raise ValueError(f"expect_log: {entry!r} is not TYPE or TYPE:INPUT")
        if isinstance(self.after, str) and self.after.partition(":")[0] not in EVENT_TYPES:
            raise ValueError(f"after = {self.after!r}: a seq, or TYPE:INPUT naming an event")
        return self

    def _group(self, given: set[str]) -> StepSpec:
        stray = sorted(given - {"op", "now", "requests", "schedule"})
        if stray:
            raise ValueError(f"op 'group' has no field {', '.join(map(repr, stray))}")
        if not self.requests:
            raise ValueError("op 'group' needs 'requests', a non-empty list of operations")
        for number, member in enumerate(self.requests, start=1):
            if member.op in (None, "group", "crash"):
                raise ValueError(f"group request {number}: a member is one operation, not a kill")
            own = {k for k in type(member).model_fields if getattr(member, k) is not None}
            extra = sorted(own & ({"now"} | set(EXPECTATIONS)))
            if extra:
                raise ValueError(
                    f"group request {number} takes no {', '.join(map(repr, extra))}: members "
                    "share the group's now, and the search judges them"
                )
        if sum(m.crash_at is not None for m in self.requests) > 1:
            raise ValueError("a group holds at most one member with 'crash_at' (one kill)")
        if any(k < 0 for k in self.schedule or ()):
            raise ValueError("schedule: choices are non-negative integers")
        return self

    @property
    def state_session(self) -> str | None:
        """The session whose pending inbox and transcript the step's
        expectations name."""
        return self.expect_session or self.session

    def request_fields(self) -> dict[str, Any]:
        """The op's own fields that the file gives (references unresolved)."""
        assert self.op is not None
        names = op_fields(self.op) | ({"session"} if self.op == "answer" else set())
        return {k: getattr(self, k) for k in sorted(names) if getattr(self, k) is not None}


class Scenario(_Strict):
    """One scenario file."""

    name: str = Field(min_length=1)
    source: str = Field(min_length=1)
    policy: str = "g4"
    step_limit: int = Field(default=4, ge=1)
    tags: list[str] = []
    breaks_under: list[str] = []
    breaker: Breaker | None = None
    # "expected": under its own policy the file is judged only by the
    # invariants that policy keeps (for a file written for rules that depart
    # from g4's, such as g5's first admission wins); "all": by every one.
    invariants: Literal["all", "expected"] = "all"
    expect_violation: str | None = None
    carries: list[Citation] = []
    step: list[StepSpec] = Field(min_length=1)

    @model_validator(mode="after")
    def _checks(self) -> Scenario:
        for preset in self.breaks_under:
            if preset not in PRESETS:
                raise ValueError(
                    f"breaks_under: {preset!r} is not a policy preset ({', '.join(PRESETS)})"
                )
        if self.breaker is not None:
            if self.breaker.step > len(self.step):
                raise ValueError(
                    f"breaker.step = {self.breaker.step}: the scenario has {len(self.step)} steps"
                )
            if self.breaker.name in PRESETS and self.breaker.name not in self.breaks_under:
                raise ValueError(
                    f"breaker: preset {self.breaker.name!r} must be listed in breaks_under"
                )
        if any(step.op == "group" for step in self.step):
            expecting = [
                number
                for number, step in enumerate(self.step, start=1)
                if any(getattr(step, k) is not None for k in EXPECTATIONS)
            ]
            if expecting or self.expect_violation is not None:
                where = f"step {expecting[0]}" if expecting else "expect_violation"
                raise ValueError(
                    f"{where}: a scenario with a group step is judged against the model at "
                    "every step by the linearizability search; it takes no expectations"
                )
        cited = [(c.section, c.test) for c in self.carries]
        if len(set(cited)) != len(cited):
            raise ValueError("carries: an OpenCode test is cited twice")
        now = 0  # the runner's hello is at 0; each step defaults to the previous now + 1
        for number, step in enumerate(self.step, start=1):
            if step.now is not None and step.now < now:
                raise ValueError(
                    f"step {number}: now = {step.now} goes back in time (previous now {now})"
                )
            now = step.now if step.now is not None else now + 1
            ref = step.expect_same_receipt_as
            if ref is not None and not (ref < number and self.step[ref - 1].op is not None):
                raise ValueError(
                    f"step {number}: expect_same_receipt_as = {ref} must name an earlier op step"
                )
        return self


# Failpoints are the model's; the Literal above must list the same names.
assert set(FAILPOINTS) == {"after_admit", "mid_promotion", "after_promotion"}
