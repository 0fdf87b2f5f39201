"""inboxsim: deterministic simulation and verification of durable agent inboxes.

The repository root is this package: ``inboxsim.model`` is the pure reference
model, ``inboxsim.sim`` drives it (or an implementation under test) with seeded
decisions, ``inboxsim.invariants`` judges the traces, ``inboxsim.scenarios``
holds the scenario library, ``inboxsim.reports`` writes the reports, and
``inboxsim.cli`` is the ``inboxsim`` command.
"""

from functools import cache


@cache
def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("inboxsim")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0.2.0"


def __getattr__(name: str) -> str:
    # Looked up on first use (PEP 562): importlib.metadata is a noticeable part
    # of the start-up of a process that never needs the version (the model
    # adapter, started once per seed and after every kill).
    if name == "__version__":
        return _version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["__version__"]
