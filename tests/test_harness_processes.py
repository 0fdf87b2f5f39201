"""What the harness starts ends with it (issue 17, item 2), piece by piece:
the process tree read from /proc and killed whole (procs/proctree.py), folders
that name their owner (procs/scratch.py), SIGINT and SIGTERM as an exception
and the line it ends with (procs/interrupt.py), the supervisor of the command
line (procs/supervise.py), and an adapter that never becomes ready failed fast
(issue 17, item 5). The kills at random moments are test_harness_kills.py.

Every test that starts processes tags them through the environment and kills
whatever carries the tag when it ends, so a failing test leaves nothing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from inboxsim.model import PRESETS, Hello, Prompt
from inboxsim.procs import interrupt, proctree, scratch
from inboxsim.sim.run import RunOptions
from inboxsim.sim.sweep import SweepPlan
from inboxsim.targets.adapter import AdapterNeverStarted, AdapterTarget, ReadyWatch
from inboxsim.targets.protocol import ProtocolError
from tests.harness_faults import TAG, harness_of, kill_tagged, tagged, wait_gone

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc (Linux)")

FAKES = Path(__file__).parent / "adapters"
PATIENCE = 60.0  # seconds before a wait that should end at once fails the test


@pytest.fixture
def tag(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A tag in the environment of every process the test starts; whatever
    carries it is killed at the end (and listed, if the test passed)."""
    value = uuid.uuid4().hex
    monkeypatch.setenv(TAG, value)
    yield value
    kill_tagged(value)


def living(pid: int) -> bool:
    return wait_gone(pid, 0) is False


def pids_on_stderr(path: Path, word: str, count: int) -> list[int]:
    """The process ids a fake adapter wrote as ``fake: WORD PID`` lines."""
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        found = (
            [
                int(line.split()[-1])
                for line in path.read_text().splitlines()
                if line.startswith(f"fake: {word}")
            ]
            if path.exists()
            else []
        )
        if len(found) >= count:
            return found
        time.sleep(0.05)
    raise AssertionError(f"{path} never named {count} {word}")


def sleeper(*, new_session: bool = False) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=new_session
    )


# --- proctree -------------------------------------------------------------------------


FORKER = """
import os, subprocess, sys, time
helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                          start_new_session=True)
print(helper.pid, flush=True)
time.sleep(600)
"""


def test_descendants_include_a_child_in_a_session_of_its_own(tag: str) -> None:
    parent = subprocess.Popen([sys.executable, "-c", FORKER], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    helper = int(parent.stdout.readline())
    try:
        assert helper in proctree.descendants(parent.pid)
        assert helper in proctree.descendants(parent.pid, fast=True)
        assert helper in proctree.descendants(os.getpid())
        assert proctree.stat(helper) is not None and proctree.stat(helper)[2] == helper  # type: ignore[index]
    finally:
        parent.kill()
        parent.wait()


FORKING = """
import os, time
# Starts a sleeping child every few milliseconds, each in a session of its
# own, for ever: a tree that grows while it is being killed.
while True:
    if os.fork() == 0:
        os.setsid()
        time.sleep(600)
        os._exit(0)
    time.sleep(0.005)
"""


def test_kill_tree_ends_a_tree_that_keeps_forking(tag: str) -> None:
    """Stop first, kill after: no process escapes by forking (or by its
    parent dying) while the kill is being sent."""
    holder = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys, time\n"
         f"subprocess.Popen([sys.executable, '-c', {FORKING!r}])\ntime.sleep(600)"],
    )  # fmt: skip
    try:
        deadline = time.monotonic() + PATIENCE
        while len(proctree.descendants(holder.pid)) < 20 and time.monotonic() < deadline:
            time.sleep(0.02)
        below = proctree.descendants(holder.pid)
        assert len(below) >= 20
        assert proctree.kill_tree(holder.pid) >= len(below)
        assert not [p for p in proctree.descendants(holder.pid) if living(p)]
        assert tagged(tag) == [holder.pid]  # only the root is left, as asked
    finally:
        holder.kill()
        holder.wait()


def test_kill_tree_also_ends_what_left_the_tree_and_spares_what_it_is_told(tag: str) -> None:
    outside = sleeper(new_session=True)  # our child, but given as "also"
    spared = sleeper()
    try:
        pids = proctree.with_env(f"{TAG}={tag}")
        assert {outside.pid, spared.pid} <= set(pids)
        proctree.kill_tree(
            1 << 22,  # a root with no children: only ``also`` is killed
            also=lambda: [outside.pid, spared.pid],
            spare=lambda pid: pid == spared.pid,
            spare_patience=None,
        )
        assert outside.wait(PATIENCE) == -signal.SIGKILL
        assert spared.poll() is None  # left alone
    finally:
        spared.kill()
        spared.wait()


def test_started_tells_a_reused_process_id_apart() -> None:
    child = sleeper()
    start = proctree.started(child.pid)
    assert start is not None and proctree.alive(child.pid, start)
    assert not proctree.alive(child.pid, start + 1)  # the same id, another process
    child.kill()
    child.wait()
    assert not proctree.alive(child.pid, start)
    assert proctree.started(child.pid) is None


# --- scratch ---------------------------------------------------------------------------


def test_a_folder_names_its_owner_and_goes_however_the_block_ends(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), scratch.folder("conformance", tmp_path) as made:
        assert made.parent == tmp_path
        assert made.name.startswith(f"inboxsim-conformance-{scratch.owner()}-")
        (made / "data").write_text("x")
        raise RuntimeError("the block fails")
    assert not made.exists()


def test_only_folders_whose_owner_is_gone_are_stale(tmp_path: Path) -> None:
    child = sleeper()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    gone = int(dead.stdout)
    names = {
        "mine": f"inboxsim-run-{scratch.owner()}-abcdefgh",
        "live": f"inboxsim-seeded-{scratch.owner(child.pid)}-abcdefgh",
        "gone": f"inboxsim-conformance-{gone}-12345-abcdefgh",
        "reused": f"inboxsim-shrink-{child.pid}-{(proctree.started(child.pid) or 0) + 7}-abc_efgh",
        "foreign": "inboxsim-bench-abcdefgh",  # no owner in its name: never touched
        "other": "pymp-abcdefgh",
    }
    for name in names.values():
        (tmp_path / name).mkdir()
        (tmp_path / name / "file").write_text("x")
    try:
        assert {p.name for p in scratch.stale(tmp_path)} == {names["gone"], names["reused"]}
        assert {p.name for p in scratch.stale(tmp_path, mine=True)} == {
            names["gone"], names["reused"], names["mine"]
        }  # fmt: skip
        scratch.remove_stale(tmp_path)
        assert sorted(os.listdir(tmp_path)) == sorted(
            [names["mine"], names["live"], names["foreign"], names["other"]]
        )
    finally:
        child.kill()
        child.wait()
    assert [p.name for p in scratch.remove_stale(tmp_path)] == [names["live"]]


# --- interrupt --------------------------------------------------------------------------


@pytest.fixture
def handlers() -> Iterator[list[int]]:
    """The interrupt handlers installed in this process for the test (put back
    after); the list collects the codes a hard stop was asked for."""
    stops: list[int] = []
    restore = interrupt.install(stops.append, parent_death=signal.SIGUSR1)
    yield stops
    restore()


def _signal_self(signum: int) -> None:
    os.kill(os.getpid(), signum)
    time.sleep(0.05)  # the handler runs at the next bytecode of the main thread


def test_sigterm_raises_interrupted_with_exit_143_and_a_line(handlers: list[int]) -> None:
    with pytest.raises(interrupt.Interrupted) as caught:
        _signal_self(signal.SIGTERM)
    assert caught.value.exit_code == 143
    assert interrupt.line(caught.value).startswith("interrupted by SIGTERM: nothing was kept")
    caught.value.kept = "kept 3 runs"
    assert interrupt.line(caught.value) == "interrupted by SIGTERM: kept 3 runs"


def test_a_signal_inside_a_deferred_step_is_raised_when_it_ends(handlers: list[int]) -> None:
    steps = []
    with pytest.raises(interrupt.Interrupted) as caught:
        with interrupt.deferred():
            _signal_self(signal.SIGINT)
            steps.append("written")  # the step is not cut in two
            steps.append("counted")
        steps.append("after")
    assert steps == ["written", "counted"]
    assert caught.value.exit_code == 130


def test_a_repeated_request_is_ignored_and_a_later_ctrl_c_stops_at_once(
    handlers: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(interrupt.Interrupted):
        _signal_self(signal.SIGINT)
    _signal_self(signal.SIGTERM)  # the same request again (e.g. to the group): ignored
    _signal_self(signal.SIGINT)  # within the second: the same Ctrl-C
    assert handlers == []
    monkeypatch.setattr(interrupt, "AGAIN_AFTER", 0.0)
    _signal_self(signal.SIGINT)  # pressed again later: stop now
    assert handlers == [130]


def test_the_parent_death_signal_stops_at_once(handlers: list[int]) -> None:
    _signal_self(signal.SIGUSR1)
    assert handlers == [128 + signal.SIGKILL]


def test_a_signal_while_a_pool_starts_a_worker_still_gets_the_worker_killed(
    handlers: list[int], tag: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A signal that lands right after a worker's fork, before the pool lists
    it, is raised once ``submit`` returns: the pool knows the worker and the
    interrupted block kills it (it used to live on, unknown to the pool)."""
    import multiprocessing

    from inboxsim.sim.executor import process_pool

    context = multiprocessing.get_context("fork")
    started: list[int] = []
    start = context.Process.start

    def start_then_signal(process: multiprocessing.process.BaseProcess) -> None:
        start(process)
        assert process.pid is not None
        started.append(process.pid)
        _signal_self(signal.SIGTERM)

    monkeypatch.setattr(context.Process, "start", start_then_signal)
    with pytest.raises(interrupt.Interrupted):
        with process_pool(1, context) as pool:
            pool.submit(time.sleep, 600)
    assert len(started) == 1
    assert wait_gone(started[0], PATIENCE)


# --- the supervisor (the command line) ------------------------------------------------------


def cli(*args: str, tmp: Path, background: bool = False) -> subprocess.Popen[str]:
    """The command line in a session of its own; ``background``: started as a
    shell starts ``cmd &`` without job control, SIGINT ignored."""
    return subprocess.Popen(
        [sys.executable, "-m", "inboxsim.cli", *args],
        env=dict(os.environ, TMPDIR=str(tmp)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if background else None,
    )


def test_a_background_job_stays_deaf_to_sigint_and_sigterm_still_stops_it(
    tmp_path: Path, tag: str
) -> None:
    """A program started in the background of a script inherits SIGINT
    ignored and keeps it so (the terminal's Ctrl-C is not meant for it): the
    supervisor relays no SIGINT, the harness installs no handler for it.
    SIGTERM is still the graceful stop."""
    (tmp_path / "tmp").mkdir()
    db = str(tmp_path / "z.duckdb")
    run = cli("sweep", "--seeds", "100000", "--ops", "20", "--jobs", "1", "--db", db,
              tmp=tmp_path / "tmp", background=True)  # fmt: skip
    try:
        assert run.stderr is not None
        run.stderr.readline()  # the first progress line: the harness is running
        os.killpg(run.pid, signal.SIGINT)
        with pytest.raises(subprocess.TimeoutExpired):
            run.wait(timeout=3)  # a SIGINT it heard would end it at once
        os.killpg(run.pid, signal.SIGTERM)
        _, err = run.communicate(timeout=PATIENCE * 3)
        assert run.returncode == 143
        assert err.strip().splitlines()[-1].startswith("inboxsim: interrupted by SIGTERM: kept ")
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()


def test_every_process_of_a_run_ends_with_it_even_a_daemon_of_the_adapter(
    tag: str, tmp_path: Path
) -> None:
    """An adapter starts a helper in its own session and a daemon that forked
    twice; the run ends (the adapter times out on the first request): nothing
    of it is left, and no folder."""
    adapter = f"{sys.executable} {FAKES / 'spawns_detached.py'}"
    run = cli("conformance", "--adapter", adapter, "--no-library", "--seeds", "1",
              "--adapter-timeout", "2", "--shrink", "0", tmp=tmp_path)  # fmt: skip
    out, err = run.communicate(timeout=PATIENCE * 3)
    assert run.returncode == 1, err  # the target failed: no answer in time
    assert "no response within 2 s" in out
    assert tagged(tag) == []
    assert os.listdir(tmp_path) == []


def test_an_adapter_s_helpers_die_with_it_when_it_is_closed(tag: str, tmp_path: Path) -> None:
    """The helper in a session of its own is outside the adapter's process
    group: the kill finds it by parentage."""
    target = AdapterTarget(
        [sys.executable, str(FAKES / "spawns_detached.py")], tmp_path / "data", 4, 5.0
    )
    target.request(Hello(0, step_limit=4))
    (helper,) = pids_on_stderr(target.stderr_path, "helper", 1)
    assert living(helper)
    with pytest.raises(ProtocolError):
        target.timeout = 0.2
        target.request(Prompt(1, session="s1", input="a", text="hi"))
    target.close()
    assert wait_gone(helper, PATIENCE)


def test_an_internal_error_names_a_traceback_file_that_outlives_the_run() -> None:
    """The run's own folder is ``$TMPDIR`` while it runs and is removed when
    it ends: the traceback file the one line names is written outside it."""
    with tempfile.TemporaryDirectory(prefix="ibx", dir="/tmp") as short:  # see ROOT_MAX
        _internal_error_in(Path(short))


def _internal_error_in(tmp_path: Path) -> None:
    script = (
        "import sys, typer\n"
        "from inboxsim import cli\n"
        "app = typer.Typer()\n"
        "@app.command()\n"
        "def bug() -> None:\n"
        "    raise RuntimeError('oops')\n"
        "@app.command()\n"
        "def other() -> None:\n"
        "    pass\n"
        "cli.app = app\n"
        "sys.argv = ['inboxsim', 'bug']\n"
        "sys.exit(cli.main())\n"
    )
    env = dict(os.environ, TMPDIR=str(tmp_path))
    env.pop("INBOXSIM_TRACEBACK", None)
    run = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=PATIENCE
    )
    assert run.returncode == 2
    assert run.stderr.startswith("inboxsim: error: internal error: RuntimeError: oops")
    log = Path(run.stderr.rsplit("traceback in ", 1)[1].rstrip(")\n"))
    assert log.parent == tmp_path
    assert "RuntimeError: oops" in log.read_text()
    assert os.listdir(tmp_path) == [log.name]


def test_ctrl_z_stops_the_harness_too_and_fg_continues_it(tmp_path: Path, tag: str) -> None:
    (tmp_path / "tmp").mkdir()
    run = cli("sweep", "--seeds", "100000", "--ops", "20", "--jobs", "1",
              "--db", str(tmp_path / "z.duckdb"), tmp=tmp_path / "tmp")  # fmt: skip
    try:
        assert run.stderr is not None
        run.stderr.readline()  # the first progress line: the harness is running
        harness = harness_of(run.pid)
        assert harness is not None

        def state() -> str:
            deadline = time.monotonic() + PATIENCE
            while True:
                got = proctree.stat(harness)
                assert got is not None
                if got[0] in ("T", "t") or time.monotonic() > deadline:
                    return got[0]
                time.sleep(0.02)

        os.killpg(run.pid, signal.SIGTSTP)  # the terminal's Ctrl-Z: the foreground group
        assert state() in ("T", "t")
        os.killpg(run.pid, signal.SIGCONT)  # fg
        deadline = time.monotonic() + PATIENCE
        while (proctree.stat(harness) or "T")[0] in ("T", "t") and time.monotonic() < deadline:
            time.sleep(0.02)
        assert (proctree.stat(harness) or "T")[0] not in ("T", "t")
        os.killpg(run.pid, signal.SIGINT)
        _, err = run.communicate(timeout=PATIENCE * 3)
        assert run.returncode == 130
        assert err.strip().splitlines()[-1].startswith("inboxsim: interrupted by SIGINT: kept ")
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()


# --- an adapter that never becomes ready (item 5) ----------------------------------------


def test_an_adapter_that_never_answers_hello_stops_the_run_after_three_starts(
    tag: str, tmp_path: Path
) -> None:
    adapter = f"{sys.executable} {FAKES / 'never_ready.py'}"
    run = cli("conformance", "--adapter", adapter, "--seeds", "5", "--adapter-timeout", "0.5",
              tmp=tmp_path)  # fmt: skip
    out, err = run.communicate(timeout=PATIENCE * 3)
    assert run.returncode == 1
    assert out == ""
    (line,) = err.strip().splitlines()[-1:]
    assert line.startswith("inboxsim: error: the adapter never started: 3 starts in a row")
    assert "no response within 0.5 s" in line
    assert "its stderr: fake: cannot listen on 127.0.0.1:4096: address in use" in line
    assert sum(1 for text in err.splitlines() if "conformance: scenario" in text) == 3
    assert tagged(tag) == []


def test_on_worker_processes_too(tag: str, tmp_path: Path) -> None:
    adapter = f"{sys.executable} {FAKES / 'never_ready.py'}"
    run = cli("conformance", "--adapter", adapter, "--no-library", "--seeds", "40", "--jobs", "2",
              "--adapter-timeout", "0.5", tmp=tmp_path)  # fmt: skip
    out, err = run.communicate(timeout=PATIENCE * 3)
    assert run.returncode == 1, err
    assert "the adapter never started: 3 starts in a row" in err.strip().splitlines()[-1]
    assert tagged(tag) == []


def test_an_adapter_that_started_once_resets_the_count() -> None:
    watch = ReadyWatch(limit=3)
    for _ in range(2):
        watch.see("no response", ready=False)
    watch.see(None, ready=False)  # a run that started no adapter: no news
    watch.see(None, ready=True)  # it answered hello: the count starts again
    for _ in range(2):
        watch.see("no response", ready=False)
    with pytest.raises(AdapterNeverStarted) as caught:
        watch.see("no response", ready=False)
    assert caught.value.exit_code == 1


# --- what an interrupted sweep says ---------------------------------------------------------


def test_an_interrupted_sweep_says_what_its_store_holds_and_the_resume_command(
    tmp_path: Path,
) -> None:
    """SIGINT between two batches (raised where the progress is shown): the
    line is the store's account (``resume_line``), the batches stored stay."""
    from inboxsim.sim.sweep import resume_line, sweep
    from inboxsim.store.store import Store

    db = str(tmp_path / "x.duckdb")
    plan = SweepPlan("g5", PRESETS["g5"], RunOptions(ops=30), 0, 60, 1, None, 10)
    shown: list[int] = []

    def progress(report: object) -> None:
        shown.append(1)
        if len(shown) == 2:
            raise interrupt.Interrupted(signal.SIGINT)

    with Store(db) as store, pytest.raises(interrupt.Interrupted) as caught:
        sweep(plan, store, progress)
    assert caught.value.kept == resume_line(plan, db)
    assert caught.value.kept.startswith(f"kept 20 of the 60 seeds 0..59 in {db} (")
    assert caught.value.kept.endswith(
        f"go on with: inboxsim sweep --seeds 60 --policy g5 --ops 30 --db {db} --resume"
    )


def test_an_interrupted_report_says_the_shrunk_examples_it_finished_are_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """SIGINT right after the first shrunk example was cached: the line says
    so, and the store holds that example (the next report reuses it)."""
    from inboxsim import cli
    from inboxsim.reports import counterexamples
    from inboxsim.store.store import open_store

    db = str(tmp_path / "x.duckdb")
    assert cli.main(["sweep", "--seeds", "6", "--ops", "30", "--policy", "g5", "--jobs", "1",
                     "--db", db]) == 1  # fmt: skip
    real = counterexamples.examples_for

    def interrupted_after_one(*args: object, **kwargs: object) -> object:
        *head, keep = args

        def keep_then_stop(*kept: object) -> None:
            keep(*kept)  # type: ignore[operator]
            raise interrupt.Interrupted(signal.SIGINT)

        return real(*head, keep_then_stop, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(counterexamples, "examples_for", interrupted_after_one)
    capsys.readouterr()
    code = cli.main(["report", "--db", db, "--out", str(tmp_path / "r"), "--shrink-seconds", "5"])
    assert code == 130
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"inboxsim: interrupted by SIGINT: every shrunk example it finished is cached in {db}; "
        "rerun it to go on"
    )
    with open_store(db) as store:
        assert store.con.execute("SELECT count(*) FROM shrunk").fetchone() == (1,)


def test_folders_of_a_killed_run_are_removed_by_the_next(tmp_path: Path) -> None:
    """A run's temporary folder whose owner was killed is removed when the
    next command line starts; a live owner's is not."""
    dead = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    owner = scratch.owner(dead.pid)
    dead.kill()
    dead.wait()
    left = tmp_path / f"inboxsim-harness-{owner}-abcdefgh"
    (left / "pymp-abcdefgh").mkdir(parents=True)
    live = Path(tempfile.mkdtemp(prefix=f"inboxsim-harness-{scratch.owner()}-", dir=tmp_path))
    run = subprocess.run(
        [sys.executable, "-m", "inboxsim.cli", "version"],
        env=dict(os.environ, TMPDIR=str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=PATIENCE,
    )
    assert run.returncode == 0
    assert os.listdir(tmp_path) == [live.name]


def test_the_suite_sees_an_ignored_sigint_even_when_c_code_set_it() -> None:
    """tests/conftest.py puts back the signal state a test leaves changed; it
    reads the kernel's record, which a disposition set below Python (here
    through libc, as a library's C code would) changes and Python's does not."""
    import ctypes

    from tests.signal_helpers import ignored_by_the_kernel

    libc = ctypes.CDLL(None, use_errno=True)
    libc.signal.restype = ctypes.c_void_p
    libc.signal.argtypes = (ctypes.c_int, ctypes.c_void_p)
    assert signal.SIGINT not in ignored_by_the_kernel()
    before = libc.signal(signal.SIGINT, 1)  # SIG_IGN
    try:
        assert signal.SIGINT in ignored_by_the_kernel()
        assert signal.getsignal(signal.SIGINT) is not signal.SIG_IGN  # Python did not see it
    finally:
        libc.signal(signal.SIGINT, before)
    assert signal.SIGINT not in ignored_by_the_kernel()
