"""The work of the ``inboxsim`` commands whose bodies outgrew ``cli.py``: option
checks, reading and writing files, exit codes. ``cli.py`` declares the
commands and imports these lazily (start-up time).

- :mod:`.run`: ``inboxsim run`` (scenario files against a target);
- :mod:`.report`: ``inboxsim check``, ``report`` and ``diff``.
"""
