"""The test suite, run with ``python -m pytest`` from the repository root.

Tests import the installed package (``import inboxsim...``), never the source
folders by their bare names.
"""
