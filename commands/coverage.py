"""``inboxsim coverage``: OpenCode's inbox tests and the library scenarios that
carry them, as a page printed, written, or checked against a file."""

from __future__ import annotations

from pathlib import Path

from ..errors import HarnessError
from ..scenarios import coverage as cov
from .output import echo, progress, write_file


def coverage(*, out: str | None, check: bool) -> int:
    if out is None:
        if check:
            raise HarnessError("--check needs --out FILE: the page to compare")
        echo(cov.render(cov.coverage()), end="")
        return 0
    text = cov.render(cov.coverage())
    try:
        current = Path(out).read_text(encoding="utf-8") == text
    except FileNotFoundError:
        current = False
    except OSError as exc:
        raise HarnessError(f"--out {out}: cannot read it: {exc.strerror}") from None
    if check and not current:
        progress(f"coverage: {out} is not current: inboxsim coverage --out {out}")
        return 1
    if not current:
        write_file(out, text, f"--out {out}: cannot write it")
    progress(f"coverage: {out} {'is current' if current else 'written'}")
    return 0
