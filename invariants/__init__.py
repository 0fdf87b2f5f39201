"""Invariant checkers: pure functions that judge a recorded trace.

Each checker returns a verdict with its evidence; none does IO.
"""
