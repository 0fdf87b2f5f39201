"""``inboxsim invariants``: every invariant with its id, statement and source,
and the spec invariants the protocol cannot observe (``--json`` too)."""

from __future__ import annotations

import json

import pytest

from inboxsim import cli
from inboxsim.invariants import REGISTRY, UNOBSERVABLE
from inboxsim.invariants.registry import SPEC_TITLES, spec_coverage, spec_numbers


def test_lists_every_invariant(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["invariants"]) == 0
    out = capsys.readouterr().out
    for inv in REGISTRY.values():
        assert f"{inv.id}  [{inv.source}]" in out
        assert inv.statement in out
    for u in UNOBSERVABLE:
        assert f"not observable: {u.statement}" in out and u.reason in out
    # every invariant of spec section 4, by number and title
    for n, title in enumerate(SPEC_TITLES, start=1):
        assert f"\n4.{n}  {title}\n" in out


def test_json_document(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["invariants", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    listed = {entry["id"]: entry for entry in doc["invariants"]}
    assert list(listed) == list(REGISTRY)
    for inv in REGISTRY.values():
        entry = listed[inv.id]
        assert (entry["statement"], entry["source"], entry["tags"]) == (
            inv.statement,
            inv.source,
            list(inv.tags),
        )
        assert entry["holds_under"] == str(inv.holds_under)
        assert entry["planted_bug"] == inv.planted_bug
    assert [u["source"] for u in doc["not_observable"]] == [u.source for u in UNOBSERVABLE]
    assert [s["number"] for s in doc["spec"]] == list(range(1, 39))


def test_spec_section_4_is_covered_or_explained() -> None:
    """Every invariant of spec section 4 is judged by a registered
    invariant, declared not observable with a reason, or both (a check
    narrower than its statement declares the rest)."""
    coverage = spec_coverage()
    assert [c["number"] for c in coverage] == list(range(1, len(SPEC_TITLES) + 1))
    assert len(SPEC_TITLES) == 38
    for c in coverage:
        assert c["checked_by"] or c["not_observable"], c
        assert set(c["checked_by"]) <= set(REGISTRY)  # type: ignore[arg-type]
    # every declaration belongs to exactly one spec invariant
    for u in UNOBSERVABLE:
        assert len(spec_numbers(u.source)) == 1 and u.reason, u
    # the parts the registry declares, by the spec invariant they narrow
    partial = {c["number"] for c in coverage if c["checked_by"] and c["not_observable"]}
    assert {3, 18, 27, 28, 30, 31, 33, 38} <= partial
    by_number = {c["number"]: c for c in coverage}
    assert by_number[30]["checked_by"] == ["replay-matches-views", "replay-starts-nothing"]
    assert "wake-follow-up" in by_number[26]["checked_by"]  # type: ignore[operator]
    assert "sessions-independent" in by_number[26]["checked_by"]  # type: ignore[operator]


def test_statements_are_one_line() -> None:
    for inv in REGISTRY.values():
        assert "\n" not in inv.statement and inv.statement.endswith(".")
        assert inv.tags and inv.source
