"""The installed package and its console script (whichever way it was installed)."""

from __future__ import annotations

import shutil
import site
import subprocess
import sys
import sysconfig
from importlib import import_module, resources
from importlib.metadata import distributions, entry_points
from pathlib import Path

import inboxsim
import inboxsim.cli


def _script() -> str:
    """Path of the installed ``inboxsim`` console script."""
    beside_python = Path(sysconfig.get_path("scripts")) / "inboxsim"
    found = str(beside_python) if beside_python.exists() else shutil.which("inboxsim")
    assert found, "the inboxsim console script is not installed"
    return found


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_script(), *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )


def test_console_script_resolves_to_cli_main() -> None:
    (script,) = entry_points(group="console_scripts", name="inboxsim")
    assert script.value == "inboxsim.cli:main"
    assert script.load() is inboxsim.cli.main


def test_only_inboxsim_lands_in_site_packages() -> None:
    # Look in site-packages only: `python -m pytest` also puts the repository root,
    # with the inboxsim.egg-info an in-tree build leaves there, on sys.path.
    places = [sysconfig.get_path("purelib"), site.getusersitepackages()]
    (dist,) = distributions(name="inboxsim", path=places)
    installed = [f.as_posix() for f in dist.files or () if f.parts[0] != ".."]
    # A wheel install: inboxsim/ and its dist-info; an editable one: a .pth and a finder.
    allowed = ("inboxsim/", "inboxsim-", "__editable__", "__pycache__/__editable__")
    assert installed and [f for f in installed if not f.startswith(allowed)] == []
    # The tests are the repository's, not the package's (pyproject.toml's package list).
    assert [f for f in installed if f.startswith("inboxsim/tests/")] == []


def test_subpackages_and_data_are_inside_inboxsim() -> None:
    for name in ("model", "sim", "invariants", "scenarios", "reports", "search"):
        assert import_module(f"inboxsim.{name}").__name__ == f"inboxsim.{name}"
    assert resources.files("inboxsim").joinpath("py.typed").is_file()


def test_help_exits_0(tmp_path: Path) -> None:
    done = _run("--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "policies" in done.stdout and "version" in done.stdout


def test_version_exits_0(tmp_path: Path) -> None:
    done = _run("version", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"inboxsim {inboxsim.__version__}\n"


def test_unknown_subcommand_exits_2_with_one_line(tmp_path: Path) -> None:
    done = _run("no-such-command", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and "no-such-command" in done.stderr
    assert "Traceback" not in done.stderr


def test_module_entry_matches_script(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "inboxsim.cli", "version"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout) == (0, f"inboxsim {inboxsim.__version__}\n")


def test_ci_runs_exactly_the_readme_test_command() -> None:
    """.ci/run's last command is the README's second quick-start command."""
    root = Path(__file__).resolve().parent.parent
    readme = (root / "README.md").read_text(encoding="utf-8")
    blocks = [b.split("```", 1)[0].strip() for b in readme.split("```sh\n")[1:]]
    ci_lines = [
        ln
        for ln in (root / ".ci" / "run").read_text().splitlines()
        if ln and not ln.startswith("#")
    ]
    assert len(blocks) >= 2
    assert ci_lines[-1].strip() == blocks[1]
    assert "inboxsim sweep" in blocks[0]


def test_dask_is_an_optional_extra_not_a_dependency() -> None:
    from importlib.metadata import requires

    needs = requires("inboxsim") or []
    dask = [r for r in needs if r.startswith("dask")]
    assert dask and all('extra == "dask"' in r for r in dask), needs
