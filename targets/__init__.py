"""Targets: what the harness drives, behind one interface.

- :mod:`.target`: the ``Target`` interface and the model target (the
  reference model in process);
- :mod:`.protocol`: the adapter protocol, version 1, as validated types, and
  its published JSON Schema (``schema/``; ``python -m inboxsim.targets.protocol``);
- :mod:`.request_check`: a request checked against that schema;
- :mod:`.adapter_process`: one adapter child process (start, read with a
  deadline, kill its process group);
- :mod:`.adapter`: the adapter target, an implementation in any language
  driven through the protocol;
- :mod:`.model_adapter`: the reference model behind the protocol
  (``python -m inboxsim.targets.model_adapter``).
"""
