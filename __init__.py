"""inboxsim: deterministic simulation and verification of durable agent inboxes.

The repository root is this package: ``inboxsim.model`` is the pure reference
model, ``inboxsim.sim`` drives it (or an implementation under test) with seeded
decisions, ``inboxsim.invariants`` judges the traces, ``inboxsim.scenarios``
holds the scenario library, ``inboxsim.reports`` writes the reports, and
``inboxsim.cli`` is the ``inboxsim`` command.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__: str = version("inboxsim")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.1.0"

__all__ = ["__version__"]
