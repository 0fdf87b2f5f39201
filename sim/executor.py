"""Where batches of seeds run: one ``concurrent.futures`` executor interface.

``local`` is the standard library's process pool (no extra dependency, the
fastest on one machine: python-ecosystem.md, section 4). ``dask`` is a Dask
distributed cluster through its ``concurrent.futures`` face
(``Client.get_executor``): a scheduler at an address, or a local cluster of
worker processes when there is none. Dask is the optional extra
``inboxsim[dask]``; it is imported only here, only when asked for.

Every pool is built here (:func:`open_executor`). The sweep, conformance,
the mutant matrix and the design study run their work through one loop,
:func:`run_tasks`: top-level functions over batches, results absorbed in the
client process, which stays the only store writer. The explorer keeps one
pool open across its levels and submits through :func:`open_executor` and
:func:`result` directly. A
worker that dies mid-batch is Dask's to handle: the scheduler reruns the
batch's task on another worker and the client sees one result per future.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import logging
import multiprocessing
import os
import socket
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Any, TypeVar

from ..errors import HarnessError
from ..procs.interrupt import deferred

T = TypeVar("T")
R = TypeVar("R")

EXECUTORS = ("local", "dask")
INSTALL_DASK = "pip install 'inboxsim[dask]'"
# How long a sweep waits for a scheduler to answer, and for a first worker to
# join it, before it says so instead of waiting for ever.
CONNECT_TIMEOUT = 20.0
WORKER_TIMEOUT = 60.0
POLL = 0.25  # seconds between two looks for an interrupt while a batch runs


def worker_identity() -> tuple[str, int]:
    """(host, process id) of the process running this batch."""
    return socket.gethostname(), os.getpid()


def _context(preload: Sequence[str]) -> multiprocessing.context.BaseContext:
    # forkserver (spawn where there is none), never plain fork: a forked child
    # would inherit the parent's open DuckDB connection.
    methods = multiprocessing.get_all_start_methods()
    if "forkserver" in methods:
        ctx = multiprocessing.get_context("forkserver")
        # Import the simulator once in the server, not once per worker.
        ctx.set_forkserver_preload(list(preload))
        return ctx
    return multiprocessing.get_context("spawn")


def check_executor(kind: str, scheduler: str | None) -> None:
    """Refuse an unknown executor, a scheduler without Dask, or Dask not
    installed, before any work."""
    if kind not in EXECUTORS:
        raise HarnessError(f"--executor must be 'local' or 'dask', not {kind!r}")
    if scheduler is not None and kind != "dask":
        raise HarnessError("--scheduler goes with --executor dask")
    if kind == "dask":
        try:
            import distributed  # noqa: F401 - is the extra installed?
        except ImportError:
            raise HarnessError(f"--executor dask needs the dask extra: {INSTALL_DASK}") from None


@contextlib.contextmanager
def open_executor(
    kind: str, jobs: int, scheduler: str | None = None, preload: Sequence[str] = ()
) -> Iterator[tuple[cf.Executor, int]]:
    """An executor and how many batches it runs at once (its slots).

    ``local``: a process pool of ``jobs`` workers. ``dask``: a client of the
    scheduler at ``scheduler``, its slots the worker threads it has; with no
    address, a local cluster of ``jobs`` single-threaded worker processes.
    """
    check_executor(kind, scheduler)
    if kind == "local":
        with process_pool(jobs, _context(preload)) as pool:
            yield pool, jobs
        return
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise HarnessError(f"--executor dask needs the dask extra: {INSTALL_DASK}") from None
    with contextlib.ExitStack() as stack:
        if scheduler is None:
            cluster = stack.enter_context(
                LocalCluster(  # type: ignore[no-untyped-call]
                    n_workers=jobs,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=None,
                    # Its logs are not the harness's output: what matters (a
                    # worker lost, a batch given up) reaches the client as an
                    # exception, said in one line; at shutdown its workers'
                    # heartbeats log tracebacks of the scheduler closing first.
                    silence_logs=logging.CRITICAL,
                )
            )
            address = cluster.scheduler_address
        else:
            address = scheduler
        try:
            client = Client(address, timeout=f"{CONNECT_TIMEOUT:g}s")  # type: ignore[no-untyped-call]
        except (OSError, TimeoutError) as exc:
            raise HarnessError(f"cannot reach the Dask scheduler {scheduler!r}: {exc}") from None
        stack.callback(client.close)
        try:
            client.wait_for_workers(1, timeout=WORKER_TIMEOUT)
        except TimeoutError:
            raise HarnessError(
                f"no Dask worker joined the scheduler {address} within {WORKER_TIMEOUT:g} s"
            ) from None
        slots = jobs if scheduler is None else max(1, sum(client.nthreads().values()))  # type: ignore[no-untyped-call]
        # pure=False: a rerun of the same batch is new work, never a cached result.
        pool = client.get_executor(pure=False)  # type: ignore[no-untyped-call]
        try:
            yield pool, slots
        except BaseException:
            # Interrupted, or failed: cancel this run's futures (the workers
            # are the cluster's, and stay) rather than wait for them.
            pool.shutdown(wait=False)
            raise
        pool.shutdown(wait=True)


@contextlib.contextmanager
def process_pool(jobs: int, context: multiprocessing.context.BaseContext) -> Iterator[cf.Executor]:
    """A local process pool that, when the block is interrupted or fails,
    kills its workers instead of waiting for the batches they run (a ``with
    ProcessPoolExecutor()`` waits for every running batch first). Their
    results are lost, which is what an interrupt asks for; the pool then
    shuts down as it does when a worker dies, so its queues and semaphores
    are released and the resource tracker has nothing to complain about."""
    pool = _Pool(max_workers=jobs, mp_context=context)
    try:
        yield pool
    except BaseException:
        _kill_workers(pool)
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


class _Pool(cf.ProcessPoolExecutor):
    """A pool whose ``submit`` is never cut in two by an interrupt. ``submit``
    starts a worker when the pool has fewer than it may have; an interrupt
    raised while one starts (after its fork, before the pool lists it) left a
    worker the pool did not know: not killed, it either failed to rebuild
    the pool's semaphores once they were gone, printing a traceback after the
    interrupt line, or was waited for at exit until the grace period made the
    stop a hard one (found by benchmarks/harness_kills.py)."""

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> cf.Future[T]:
        with deferred():
            return super().submit(fn, *args, **kwargs)


def _kill_workers(pool: cf.ProcessPoolExecutor) -> None:
    kill = getattr(pool, "kill_workers", None)  # Python 3.14
    if kill is not None:
        kill()
        return
    # Before 3.14 the pool names its workers only in this attribute.
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        with contextlib.suppress(Exception):
            process.kill()


def result(future: cf.Future[T]) -> T:
    """``future.result()``, where an interrupt lands only between two short
    waits. A signal raised inside a wait would leave the pool's futures
    locked (``cf.wait`` takes every future's lock in turn), and the pool's
    shutdown would then wait for ever."""
    while True:
        with deferred():
            try:
                return future.result(timeout=POLL)
            except cf.TimeoutError:
                pass


def first_done(futures: Collection[cf.Future[T]]) -> set[cf.Future[T]]:
    """``cf.wait(futures, return_when=FIRST_COMPLETED)``'s done set, where an
    interrupt lands only between two short waits (see :func:`result`)."""
    while True:
        with deferred():
            done, _ = cf.wait(futures, timeout=POLL, return_when=cf.FIRST_COMPLETED)
        if done:
            return done


def run_tasks(
    fn: Callable[[T], R],
    make_tasks: Callable[[int], Sequence[T]],
    *,
    kind: str = "local",
    jobs: int = 1,
    scheduler: str | None = None,
    preload: Sequence[str] = (),
    what: Callable[[T], str] = lambda task: "a batch",
    stop: Callable[[], bool] = lambda: False,
    in_order: bool = False,
) -> Iterator[tuple[T, R]]:
    """``fn`` over the tasks, as ``(task, result)`` pairs: the one loop every
    caller (sweep, conformance, mutants, designs) runs its work through.

    ``make_tasks(slots)`` cuts the work once the executor says how many
    batches it runs at once. One local job runs the tasks here, in this
    process, one after another. Otherwise at most two tasks per slot are in
    flight: enough to keep every worker busy, few enough that ``stop`` (a
    time budget) takes effect soon; results come in completion order, a wave
    of them in task order (so a store's insertion order varies less), or all
    in task order with ``in_order``. A task whose worker died ends the run
    with :func:`lost_work`'s one line (what was already yielded is the
    caller's to keep); an interrupt or failure cancels what is in flight.
    Stopping early is not an error: the caller counts what it got."""
    if kind == "local" and jobs <= 1:
        for task in make_tasks(1):
            if stop():
                return
            yield task, fn(task)
        return
    with open_executor(kind, jobs, scheduler, preload) as (pool, slots):
        tasks = list(make_tasks(slots))
        window = slots * 2
        next_task = 0
        running: dict[cf.Future[R], int] = {}
        finished: dict[int, R] = {}
        next_out = 0
        try:
            while next_task < len(tasks) or running:
                while next_task < len(tasks) and len(running) < window and not stop():
                    running[pool.submit(fn, tasks[next_task])] = next_task
                    next_task += 1
                if next_task < len(tasks) and stop():
                    next_task = len(tasks)
                if not running:
                    break
                for future in sorted(first_done(running), key=running.__getitem__):
                    index = running.pop(future)
                    try:
                        finished[index] = future.result()
                    except Exception as exc:
                        error = lost_work(exc, what(tasks[index]))
                        if error is None:
                            raise
                        raise error from None
                    if not in_order:
                        yield tasks[index], finished.pop(index)
                while in_order and next_out in finished:
                    yield tasks[next_out], finished.pop(next_out)
                    next_out += 1
        except cf.process.BrokenProcessPool as exc:  # the pool refuses new tasks too
            error = lost_work(exc, "the run")
            assert error is not None
            raise error from None
        except BaseException:
            for future in running:
                future.cancel()
            raise


def lost_work(exc: BaseException, what: str) -> HarnessError | None:
    """A clear error for a batch whose worker died: a local pool's worker
    (the pool is broken; nothing reruns it), or a batch Dask gave up on (it
    killed ``distributed.scheduler.allowed-failures`` workers in a row);
    else None."""
    if isinstance(exc, cf.process.BrokenProcessPool):
        return HarnessError(
            f"{what}: a local worker process died (killed, or out of memory); the batches "
            "already written are kept. Rerun, or use --executor dask, which reruns a dead "
            "worker's batch"
        )
    if type(exc).__name__ != "KilledWorker":
        return None
    return HarnessError(
        f"{what}: Dask gave up after the workers running it died repeatedly ({exc}); "
        "the batches already written are kept"
    )


__all__ = [
    "EXECUTORS",
    "INSTALL_DASK",
    "check_executor",
    "lost_work",
    "open_executor",
    "process_pool",
    "first_done",
    "result",
    "run_tasks",
    "worker_identity",
]
