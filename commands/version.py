"""``inboxsim version``: the version that is part of every trace hash."""

from __future__ import annotations

from .. import __version__
from .output import echo, emit_json


def version(prog: str, as_json: bool) -> int:
    if as_json:
        emit_json({"version": __version__})
    else:
        echo(f"{prog} {__version__}")
    return 0
