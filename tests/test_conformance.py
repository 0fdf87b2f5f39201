"""inboxsim conformance / mutants and the pytest plugin (small: a few scenarios, 1-2 seeds)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from inboxsim.cli import main
from inboxsim.conformance.catalogue import mutant_command
from inboxsim.conformance.check import conformance
from inboxsim.conformance.command_lines import target_command
from inboxsim.conformance.rows import store_results

SCENARIOS = ["seed-retry", "metadata-retry-identity", "queue-fifo"]
MODEL_ADAPTER = f"{sys.executable} -m inboxsim.targets.model_adapter"


def test_api_model_adapter_holds(tmp_path: Path) -> None:
    report = conformance(MODEL_ADAPTER, "g4", 1, ops=25, scenarios=SCENARIOS)
    assert report.passed, "\n".join(report.lines())
    kinds = {i.kind for i in report.items}
    assert {"scenario", "seed", "invariant"} <= kinds
    assert all(i.verdict == "held" for i in report.of("scenario"))
    db = tmp_path / "c.duckdb"
    assert store_results(db, report) == 1
    import duckdb

    with duckdb.connect(str(db)) as con:
        n = con.execute("select count(*) from conformance where verdict='held'").fetchone()
    assert n is not None and n[0] >= 4


def test_cli_sqlite_holds_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    args = ["conformance", "--target", "sqlite", "--seeds", "1", "--ops", "25", "--json"]
    args += ["--db", str(db)] + [a for s in SCENARIOS[:2] for a in ("--scenario", s)]
    code = main(args)
    doc = json.loads(capsys.readouterr().out)
    assert code == 0, doc
    assert doc["passed"] and doc["conformance_id"] == 1
    assert db.exists()


def test_cli_mutant_killed_exit_1(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    argv, _ = mutant_command("retry-ignores-metadata")
    cmd = " ".join(argv)
    repros = tmp_path / "repros"
    code = main(
        ["conformance", "--adapter", cmd, "--scenario", "metadata-retry-identity", "--seeds", "0"]
        + ["--repro-dir", str(repros), "--shrink-seconds", "60"]
    )
    out = capsys.readouterr().out
    assert code == 1, out
    assert "metadata-retry-identity" in out and "repro: inboxsim conformance" in out
    assert "diverged" in out or "violated" in out
    # the failing library scenario, shrunk through the same adapter, is a file
    written = repros / "scenario-metadata-retry-identity.toml"
    assert written.exists(), out
    assert f"minimal repro scenario: {written}" in out and "fails in lockstep: yes" in out
    assert main(["run", str(written), "--adapter", cmd]) == 1
    assert main(["run", str(written), "--adapter", " ".join(mutant_command(None)[0])]) == 0


def test_divergence_rendered_side_by_side() -> None:
    argv, _ = mutant_command("queue-batch")
    report = conformance(argv, "g4", 0, scenarios=["queue-fifo"])
    assert not report.passed
    item = report.of("scenario")[0]
    assert item.verdict in ("diverged", "violated")
    if item.verdict == "diverged":
        assert "| " in item.detail and "divergence at step" in item.detail


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["conformance"]) == 2
    assert main(["conformance", "--target", "nope"]) == 2
    assert main(["conformance", "--target", "sqlite", "--scenario", "no-such", "--seeds", "0"]) == 2
    assert "error" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        # A run that tests nothing is no pass (was PASSED, exit 0, no adapter started).
        (["--target", "sqlite", "--no-library", "--seeds", "0"], "nothing to test: --no-library"),
        # A program that cannot start is the harness's usage problem, said once
        # (was 36 "protocol errors", exit 1).
        (
            ["--adapter", "/nonexistent/bin/adapter", "--seeds", "1"],
            "the adapter command cannot be started: /nonexistent/bin/adapter: no such file",
        ),
        (["--adapter", "no-such-adapter-xyz --flag"], "no-such-adapter-xyz: not found on PATH"),
        (["--adapter", "{tmp}/plain.txt"], "plain.txt: is not executable"),
    ],
)
def test_nothing_tested_and_unstartable_adapters_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: list[str], needle: str
) -> None:
    (tmp_path / "plain.txt").write_text("not a program")
    args = [a.format(tmp=tmp_path) for a in args]
    db = tmp_path / "c.duckdb"
    assert main(["conformance", *args, "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err, err
    assert not db.exists()  # refused before anything was written
    if args[0] == "--adapter":  # run --adapter refuses it the same way
        assert main(["run", "--library", "--adapter", args[1]]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and needle in err, err


def test_target_commands() -> None:
    argv, policy, timeout, _ = target_command(None, "opencode", None, 5)
    assert policy == "g2" and timeout >= 60
    argv, policy, _, _ = target_command(None, "model-adapter", "g5", 5)
    assert argv[-2:] == ["--policy", "g5"] and policy == "g5"
    argv, _, _, _ = target_command(None, "sqlite", None, 5)
    assert argv[-1].endswith("sqlite_inbox/adapter.py") and Path(argv[-1]).exists()


def test_mutants_command(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from inboxsim.conformance.mutants import RESULT_FIELDS

    out = tmp_path / "mutants.json"
    names = "queue-batch,retry-ignores-metadata"
    argv = ["mutants", "--names", names, "--seeds", "1", "--shrink-seconds", "5"]
    code = main([*argv, "--json", "--out", str(out)])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0, doc
    assert doc["killed"] == 2 and all(m["killed"] for m in doc["mutants"])
    # --out writes the same document: the stable shape the store reads
    assert json.loads(out.read_text()) == doc
    assert (doc["format"], doc["version"]) == ("inboxsim-mutants", 1)
    for entry in doc["mutants"]:
        assert tuple(entry)[: len(RESULT_FIELDS)] == RESULT_FIELDS
        assert entry["killed_by"] == "divergence" and entry["scenario"] and entry["runs"] >= 1
        assert entry["operations"] >= 1 and entry["seconds_to_detect"] is not None
        # shrunk through the adapter (5 s at most: the best repro found by then)
        assert isinstance(entry["shrunk_ops"], int) and entry["shrunk_ops"] >= 1
    assert doc["summary"]["killed_by"] == {"divergence": 2}
    assert doc["summary"]["median_shrunk_ops"] is not None
    assert main(["mutants", "--names", "queue-batch", "--no-shrink", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["mutants"][0]["shrunk_ops"] is None
    assert main(["mutants", "--shrink-seconds", "0"]) == 2
    assert main(["mutants", "--names", "no-such-mutant"]) == 2
    # a bad --out is refused before anything runs, and nothing is written
    assert main(["mutants", "--names", "queue-batch", "--out", str(tmp_path / "no" / "x")]) == 2
    assert "no such folder" in capsys.readouterr().err


REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, str]]:
    """A wheel of the repository installed with ``pip install --target`` into a
    folder outside it, and a venv (system site packages: the dependencies,
    no inboxsim of its own on the path first) whose PYTHONPATH is only that
    folder: (the venv's python, the installed package, the environment)."""
    root = tmp_path_factory.mktemp("installed")
    # built from a copy, so that setuptools' build/ never lands in the repository
    src = root / "src"
    shutil.copytree(
        REPO,
        src,
        ignore=shutil.ignore_patterns(
            ".venv", ".git", "build", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis"
        ),
    )
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    subprocess.run(
        [*pip, "wheel", str(src), "--no-deps", "-w", str(root / "wheel")],
        check=True,
        timeout=300,
        capture_output=True,
    )
    (wheel,) = (root / "wheel").glob("inboxsim-*.whl")
    site = root / "site"
    subprocess.run(
        [*pip, "install", "--no-deps", "--target", str(site), str(wheel)],
        check=True,
        timeout=120,
        capture_output=True,
    )
    venv = root / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)],
        check=True,
        timeout=120,
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "VIRTUAL_ENV"))}
    env["PYTHONPATH"] = str(site)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"  # "python" is the venv's
    python = venv / "bin" / "python"
    where = subprocess.run(
        [str(python), "-c", "import inboxsim.conformance as c; print(c.__file__)"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert where.stdout.strip() == str(site / "inboxsim" / "conformance" / "__init__.py")
    return python, site / "inboxsim", env


def _pytest_outside(
    installed: tuple[Path, Path, dict[str, str]], cwd: Path, adapter: str, *extra: str
) -> subprocess.CompletedProcess[str]:
    python, _, env = installed
    return subprocess.run(
        [str(python), "-m", "pytest", "--pyargs", "inboxsim.conformance"]
        + ["--inboxsim-adapter", adapter, "--inboxsim-seeds", "1", "--inboxsim-ops", "20"]
        + ["-p", "no:cacheprovider", "-rA", *extra],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_plugin_from_an_installed_copy_collects_and_passes(
    installed: tuple[Path, Path, dict[str, str]], tmp_path: Path
) -> None:
    from inboxsim.invariants.registry import expected
    from inboxsim.model import G4
    from inboxsim.scenarios.load import load_library

    adapter = "python -m inboxsim.targets.model_adapter --no-fsync"
    listed = _pytest_outside(installed, tmp_path, adapter, "--collect-only", "-q", "--rootdir=/")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    ids = [line for line in listed.stdout.splitlines() if "::" in line]
    # collected from the installed copy, one test per scenario, seed and invariant
    suite = str(installed[1] / "conformance" / "test_adapter.py").lstrip("/")
    assert ids and all(i.startswith(suite + "::") for i in ids), ids[:3]
    assert sum("::test_scenario[" in i for i in ids) == len(load_library())
    assert sum("::test_invariant[" in i for i in ids) == len(expected(G4))
    assert sum("::test_seed[" in i for i in ids) == 1
    done = _pytest_outside(
        installed, tmp_path, adapter, "-k", "metadata-retry or seed0 or durability or fifo"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for test in (
        "test_scenario[metadata-retry-identity]",
        "test_scenario[queue-fifo]",
        "test_seed[seed0]",
        "test_invariant[durability]",
    ):
        assert (
            f"PASSED {test}" in done.stdout or f"PASSED test_adapter.py::{test}" in done.stdout
        ), done.stdout


def test_plugin_from_an_installed_copy_shows_the_minimal_repro(
    installed: tuple[Path, Path, dict[str, str]], tmp_path: Path
) -> None:
    adapter_py = installed[1] / "impls" / "sqlite_inbox" / "adapter.py"
    adapter = f"python {adapter_py} --mutant retry-ignores-metadata"
    repros = tmp_path / "repros"
    done = _pytest_outside(
        installed, tmp_path, adapter, "-k", "metadata-retry", "--inboxsim-repro-dir", str(repros)
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAILED" in done.stdout and "metadata-retry-identity" in done.stdout
    written = repros / "scenario-metadata-retry-identity.toml"
    assert f"minimal repro scenario {written}:" in done.stdout, done.stdout
    assert "[[step]]" in done.stdout and written.exists()


def test_init_adapter_from_an_installed_copy(
    installed: tuple[Path, Path, dict[str, str]], tmp_path: Path
) -> None:
    """The examples and the protocol guide are package data of the wheel (what
    ``init-adapter`` copies; called without the CLI, whose typer this venv lacks:
    the command's module has no typer in it)."""
    python, package, env = installed
    for lang, name in (("python", "adapter.py"), ("node", "adapter.js")):
        write = f"import inboxsim.commands.init_adapter as c; c.write_skeleton({lang!r}, {lang!r})"
        done = subprocess.run(
            [str(python), "-c", write],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        source = package / "examples" / ("python_inbox.py" if lang == "python" else "node_inbox.js")
        assert (tmp_path / lang / name).read_text() == source.read_text()
        assert (tmp_path / lang / "protocol.md").read_text() == (
            package / "docs" / "protocol.md"
        ).read_text()


def test_plugin_skips_without_adapter(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--pyargs",
            "inboxsim.conformance",
            "-q",
            "-rs",
            "-p",
            "no:cacheprovider",
            "-k",
            "metadata",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "--inboxsim-adapter" in done.stdout


# --- CI-sized seeded runs with crashes (the benchmark-sized runs are in the README) --


def _held_with_crashes(report: object, seeds: int) -> None:
    items = report.of("seed")  # type: ignore[attr-defined]
    bad = [(i.item, i.verdict, i.detail.splitlines()[:3]) for i in items if i.verdict != "held"]
    assert len(items) == seeds and not bad, bad[:3]
    totals = report.totals  # type: ignore[attr-defined]
    # crashes were really on: kills between requests and crashes at failpoints
    assert totals["kills"] > 0 and totals["failpoint_crashes"] > 0, totals


def test_model_adapter_conforms_on_two_hundred_seeds_with_crashes() -> None:
    report = conformance(MODEL_ADAPTER, "g4", 200, ops=20, library=False, jobs=2, shrink=0)
    _held_with_crashes(report, 200)


def test_sqlite_inbox_conforms_on_three_dozen_seeds_with_crashes() -> None:
    argv, _ = mutant_command(None)  # the SQLite inbox with no planted bug
    report = conformance(argv, "g4", 36, ops=40, library=False, jobs=2, shrink=0)
    _held_with_crashes(report, 36)
