"""Where batches of seeds run: one ``concurrent.futures`` executor interface.

``local`` is the standard library's process pool (no extra dependency, the
fastest on one machine: python-ecosystem.md, section 4). ``dask`` is a Dask
distributed cluster through its ``concurrent.futures`` face
(``Client.get_executor``): a scheduler at an address, or a local cluster of
worker processes when there is none. Dask is the optional extra
``inboxsim[dask]``; it is imported only here, only when asked for.

Callers (the sweep, conformance) submit top-level functions over batches and
absorb results in the client process, which stays the only store writer. A
worker that dies mid-batch is Dask's to handle: the scheduler reruns the
batch's task on another worker and the client sees one result per future.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import multiprocessing
import os
import socket
from collections.abc import Iterator, Sequence

from ..errors import HarnessError

EXECUTORS = ("local", "dask")
INSTALL_DASK = "pip install 'inboxsim[dask]'"
# How long a sweep waits for a scheduler to answer, and for a first worker to
# join it, before it says so instead of waiting for ever.
CONNECT_TIMEOUT = 20.0
WORKER_TIMEOUT = 60.0


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
        with cf.ProcessPoolExecutor(max_workers=jobs, mp_context=_context(preload)) as pool:
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
                    n_workers=jobs, threads_per_worker=1, processes=True, dashboard_address=None
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
        pool = stack.enter_context(client.get_executor(pure=False))  # type: ignore[no-untyped-call]
        yield pool, slots


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
    "worker_identity",
]
