"""The scenario file format, as pydantic models (``extra="forbid"``, strict types).

A scenario is a readable TOML file: a header (``name``, ``source``, ``policy``,
``step_limit``, ``tags``, ``breaks_under``, ``planted_bug``,
``expect_violation``) and an ordered list of ``[[step]]`` tables. A step is
either one protocol operation (``op`` plus that operation's fields) or
``kill = true``, a crash between requests. Expectations sit on the step they
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
from typing import Any, Literal

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


class PlantedBug(_Strict):
    """A future SQLite mutant this scenario is meant to kill, for behaviours
    that no policy preset breaks (a scenario that cannot fail is not a test)."""

    name: str = Field(min_length=1)
    reason: str = Field(min_length=1)


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
    after: int | None = None
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

    @model_validator(mode="after")
    def _shape(self) -> StepSpec:
        given = {k for k in type(self).model_fields if getattr(self, k) is not None}
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
    planted_bug: PlantedBug | None = None
    expect_violation: str | None = None
    step: list[StepSpec] = Field(min_length=1)

    @model_validator(mode="after")
    def _checks(self) -> Scenario:
        for preset in self.breaks_under:
            if preset not in PRESETS:
                raise ValueError(
                    f"breaks_under: {preset!r} is not a policy preset ({', '.join(PRESETS)})"
                )
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
