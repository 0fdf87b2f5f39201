"""Implementations of the inbox that inboxsim tests, each in its own process.

They speak the adapter protocol and import nothing from inboxsim: they ship
inside the package only so that ``inboxsim conformance`` and ``inboxsim
mutants`` can start them from an installed copy.
"""
