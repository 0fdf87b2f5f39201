"""The trace: the one record the simulator writes, the checkers judge, the store
keeps and the reports draw, with everything computed from a trace alone.

- :mod:`.record`: the trace record (header, steps, observations), its
  canonical JSON wire form and the trace hash;
- :mod:`.encode`: the same canonical text and hash, built fast one step at a time;
- :mod:`.decode`: the wire form read back (replies, observations, open calls):
  the one decoder the store, the adapter target and lockstep share;
- :mod:`.view`: the views of a session (pending, transcript, open calls) folded
  from a trace's observations;
- :mod:`.probes`: coverage probes, "sometimes" assertions judged from a trace.

It imports only :mod:`inboxsim.model`: everything above reads traces through it.
"""
