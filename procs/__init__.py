"""The harness's own processes: what makes a command safe to kill.

- :mod:`.interrupt`: SIGINT and SIGTERM as an exception that unwinds the
  command, and the one line that says what was kept;
- :mod:`.proctree`: the processes below a process, read from ``/proc``, and how
  to end them all;
- :mod:`.scratch`: temporary folders that name their owner, so that a killed
  harness's folders are found and removed by the next run;
- :mod:`.supervise`: the command line's process tree, which no process the
  harness starts outlives.

It imports nothing else of inboxsim: targets, sweeps, search and conformance
all build on it.
"""
