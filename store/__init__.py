"""The trace store: a DuckDB file of runs, their steps, events, violations and
probes, with the rows of policies, scenario runs, planted bugs and shrunk
counterexamples. Reports and commands read it; sweeps, runs and campaigns
write it. Store access only: rendering is :mod:`inboxsim.reports`' business.

- :mod:`.store`: open, verify and write a store (``Store``, ``open_store``);
- :mod:`.schema`: the schema version, the tables' DDL, the recorded row counts;
- :mod:`.migrate`: an older file moved forward in place, one version at a time;
- :mod:`.views`: the SQL views for common questions (``docs/queries.md``);
- :mod:`.traces`: stored runs read back as traces;
- :mod:`.policies`, :mod:`.scenario_runs`, :mod:`.mutants`, :mod:`.shrink_cache`:
  the rows of each kind.
"""
