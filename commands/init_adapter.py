"""``inboxsim init-adapter``: an example adapter copied into a folder of the
user's, with a README and the protocol guide."""

from __future__ import annotations

from pathlib import Path

from .. import __version__
from ..errors import HarnessError
from ..examples import skeleton
from .output import echo, emit_json, write_file


def init_adapter(*, folder: str, lang: str, as_json: bool) -> int:
    written, command = write_skeleton(lang, folder)
    if as_json:
        emit_json({"lang": lang, "files": [str(p) for p in written], "command": command})
        return 0
    for path in written:
        echo(f"wrote {path}")
    echo(f"check it: inboxsim conformance --adapter {command!r}")
    return 0


def write_skeleton(lang: str, folder: str | Path) -> tuple[list[Path], str]:
    """Write the ``lang`` example into ``folder`` (created if missing); the
    files written and the conformance command line for the copy. Refuses,
    writing nothing, when one of those files is already there."""
    made = skeleton(lang, folder, __version__)
    target = Path(folder)
    there = [str(p) for p in made.files if p.exists() or p.is_symlink()]
    if there:
        raise HarnessError(f"init-adapter: already there: {', '.join(there)}; nothing written")
    if target.exists() and not target.is_dir():
        raise HarnessError(f"init-adapter: {target} is not a folder")
    failure = f"init-adapter: cannot write into {target}"
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise HarnessError(f"{failure}: {exc.strerror}") from None
    for path, text in made.files.items():
        write_file(path, text, failure)
    try:
        made.adapter.chmod(0o755)  # it starts with a #! line
    except OSError as exc:
        raise HarnessError(f"{failure}: {exc.strerror}") from None
    return list(made.files), made.command
