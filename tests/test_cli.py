"""How ``inboxsim.cli.main`` reports results and errors (in process)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer

import inboxsim
from inboxsim import cli
from inboxsim.errors import ExitCode, HarnessError


def test_version_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["version", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"version": inboxsim.__version__}


def test_policies_lists_every_preset(capsys: pytest.CaptureFixture[str]) -> None:
    from inboxsim.model.policy import PRESETS

    assert cli.main(["policies"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == [p.name for p in PRESETS.values()]
    assert all(line.endswith(p.summary) for line, p in zip(lines, PRESETS.values(), strict=True))


def test_policies_json_carries_fields(capsys: pytest.CaptureFixture[str]) -> None:
    from inboxsim.model.policy import PRESETS

    assert cli.main(["policies", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["policies"]
    assert [entry["name"] for entry in listed] == list(PRESETS)
    for entry in listed:
        policy = PRESETS[entry["name"]]
        assert entry["summary"] == policy.summary
        assert entry["fields"] == json.loads(json.dumps(policy.fields()))
        assert "retry_identity" in entry["fields"] and "name" not in entry["fields"]


@pytest.fixture
def failing_app(monkeypatch: pytest.MonkeyPatch) -> None:
    """Replace the app with one whose commands fail in each way main() handles."""
    app = typer.Typer()

    @app.command()
    def harness() -> None:
        raise HarnessError("cannot open store.duckdb:\n  it is locked")

    @app.command()
    def target() -> None:
        raise typer.Exit(ExitCode.TARGET_FAILED)

    @app.command()
    def bug() -> None:
        raise RuntimeError("oops")

    monkeypatch.setattr(cli, "app", app)
    monkeypatch.delenv(cli.TRACEBACK_ENV, raising=False)


@pytest.mark.usefixtures("failing_app")
@pytest.mark.parametrize(
    ("command", "code", "reason"),
    [
        ("harness", 2, "inboxsim: error: cannot open store.duckdb: it is locked\n"),
        ("bug", 2, "inboxsim: error: internal error: RuntimeError: oops"),
        ("target", 1, ""),
    ],
)
def test_failures_are_one_line_with_their_exit_code(
    capsys: pytest.CaptureFixture[str], command: str, code: int, reason: str
) -> None:
    assert cli.main([command]) == code
    err = capsys.readouterr().err
    assert err.startswith(reason) and err.count("\n") == (1 if reason else 0)
    assert "Traceback" not in err
    if command == "bug":  # the traceback is in the file the line names
        log = Path(err.rsplit("traceback in ", 1)[1].rstrip(")\n"))
        assert 'raise RuntimeError("oops")' in log.read_text()
        log.unlink()


@pytest.mark.usefixtures("failing_app")
def test_traceback_on_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cli.TRACEBACK_ENV, "1")
    with pytest.raises(RuntimeError, match="oops"):
        cli.main(["bug"])
