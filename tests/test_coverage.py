"""``docs/coverage.md`` is generated from the OpenCode test index and the
library's ``[[carries]]`` tables (``scenarios/coverage.py``), and is current."""

from __future__ import annotations

from pathlib import Path

import pytest

from inboxsim.cli import main
from inboxsim.errors import HarnessError
from inboxsim.scenarios.coverage import coverage, load_index, render
from inboxsim.scenarios.load import load_library, load_text

PAGE = Path(__file__).resolve().parent.parent / "docs" / "coverage.md"
LIBRARY = load_library()


def test_the_checked_in_page_is_current() -> None:
    assert PAGE.read_text(encoding="utf-8") == render(coverage(LIBRARY)), (
        "docs/coverage.md is out of date: run `inboxsim coverage --out docs/coverage.md`"
    )


def test_every_row_is_carried_or_out_of_scope_and_the_counts_add_up() -> None:
    cov = coverage(LIBRARY)
    kinds = ("covered", "analog", "differs", "out of scope")
    assert sum(cov.count(k) for k in kinds) == len(cov.rows) == len(load_index()["test"])
    assert cov.count("differs") == 5
    assert cov.count("covered") + cov.count("analog") > 100
    for row in cov.rows:
        assert bool(row.carriers) != bool(row.out_of_scope), row.name


def test_every_differs_row_runs_under_a_policy_where_opencode_holds() -> None:
    # the scenario's own policy is not the protocol's default, and g4 breaks it
    by_name = {s.name: s.scenario for s in LIBRARY}
    for row in coverage(LIBRARY).rows:
        for carrier in row.carriers:
            if carrier.kind == "differs":
                scenario = by_name[carrier.key.split("/")[1]]
                assert scenario.policy != "g4" and "g4" in scenario.breaks_under
                assert carrier.note and "g4" in carrier.note


def _cite(test: str, section: str = "6.1") -> str:
    return (
        f'name = "x"\nsource = "t"\n[[carries]]\ntest = "{test}"\nsection = "{section}"\n'
        '[[step]]\nop = "create"\nsession = "s1"\n'
    )


def test_a_citation_of_a_name_the_spec_does_not_have_is_refused() -> None:
    wrong = load_text(_cite("records distinct messages when the id is omitted"), "typo.toml")
    with pytest.raises(HarnessError, match=r"typo.toml cites 6.1 'records distinct .*: no such"):
        coverage([*LIBRARY, wrong])
    elsewhere = load_text(
        _cite("records distinct messages when the ID is omitted", "6.4"), "s.toml"
    )
    with pytest.raises(HarnessError, match=r"s.toml cites 6.4"):
        coverage([*LIBRARY, elsewhere])


def test_a_row_carried_by_nothing_or_out_of_scope_yet_carried_is_refused() -> None:
    index = load_index()
    carried = next(t for t in index["test"] if "out_of_scope" not in t)
    without = [s for s in LIBRARY if all(c.test != carried["name"] for c in s.scenario.carries)]
    with pytest.raises(HarnessError, match=r"carried by no scenario, no reason given"):
        coverage(without, index)
    out = next(t for t in index["test"] if "out_of_scope" in t)
    claims = load_text(_cite(out["name"], out["section"]), "claims.toml")
    with pytest.raises(HarnessError, match=r"is out of scope, yet carried"):
        coverage([*LIBRARY, claims], index)


def test_the_command_writes_checks_and_prints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "coverage.md"
    assert main(["coverage", "--out", str(out), "--check"]) == 1  # no file yet
    assert "is not current" in capsys.readouterr().err and not out.exists()
    assert main(["coverage", "--out", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == PAGE.read_text(encoding="utf-8")
    assert main(["coverage", "--out", str(out), "--check"]) == 0
    out.write_text("stale\n", encoding="utf-8")
    assert main(["coverage", "--out", str(out), "--check"]) == 1
    assert main(["coverage"]) == 0
    assert capsys.readouterr().out.startswith("# OpenCode's inbox tests as inboxsim scenarios")
    assert main(["coverage", "--check"]) == 2
