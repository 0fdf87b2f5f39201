"""The test suite, run with ``python -m pytest`` from the repository root.

Tests import the installed package (``import inboxsim...``), never the source
folders by their bare names. This folder is not installed: it is the top-level
package ``tests`` (pyproject.toml puts the repository root on ``sys.path``),
and its helpers are imported as ``tests.model_helpers`` and the like, by
worker processes too.
"""
