"""The simulator: seeded scheduler, virtual clock, targets and adapters.

It drives the reference model or an implementation under test with the same
decision stream and records the trace; all randomness comes from an injected,
seeded generator.
"""
