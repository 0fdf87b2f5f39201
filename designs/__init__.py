"""The design study (``inboxsim designs``, ``docs/designs.md``): the presets run
side by side on the same seeds and scenarios, measured, and judged question by
question.

- :mod:`.study`: runs the experiments, measures the traces, writes the report;
- :mod:`.verdicts`: the questions and how each is decided from the measures;
- :mod:`.difference`: where two policies part, scenario by scenario.
"""
