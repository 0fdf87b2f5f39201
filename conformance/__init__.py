"""Conformance tests for any adapter, collected by pytest from the installed package::

    pytest --pyargs inboxsim.conformance --inboxsim-adapter "COMMAND" \\
        [--inboxsim-policy g4] [--inboxsim-seeds 3] [--inboxsim-ops 40]

One test per library scenario (lockstep against the model) and one test per
seed of a seeded lockstep sweep. Without ``--inboxsim-adapter`` every test is
skipped with the reason. The options come from :mod:`.plugin`, registered
as the ``inboxsim`` pytest11 entry point. Users without pytest call
:func:`inboxsim.conformance.check.conformance` instead.

The package holds conformance in all its forms: :mod:`.check` (lockstep
conformance against an adapter: the library, a seeded sweep, each failure
shrunk; its parts in :mod:`.report`, :mod:`.command_lines`,
:mod:`.lockstep_targets`, :mod:`.scenario`, :mod:`.seeds`, :mod:`.repro` and
:mod:`.rows`), :mod:`.mutants` (the planted bugs of the SQLite implementation and
the check that conformance kills each), :mod:`.validate` (a durable log written
outside the harness, judged), :mod:`.opencode_db` (a real OpenCode
database, read-only) and :mod:`.breakers` (a scenario run against what breaks
it: a preset or a planted bug), beside the pytest plugin and its tests.
"""
