"""The work of the ``inboxsim`` commands, one module per command: each holds a
plain function that takes the command's options as typed arguments (checking
the combinations typer cannot), prints its summary or ``--json`` document,
writes its output files (:mod:`.output`, whole or not at all) and returns the
exit code. No typer here: ``cli.py`` holds the declarations and calls these.
"""
