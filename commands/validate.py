"""``inboxsim validate``: a durable event log written outside the harness (a
JSON-lines file, or an OpenCode database), judged by every invariant the log
alone can decide."""

from __future__ import annotations

from ..conformance.opencode_db import DbResult, validate_db
from ..conformance.validate import ValidateResult, validate_file
from ..errors import HarnessError
from .output import echo, emit_json


def validate(
    *, file: str | None, opencode_db: str | None, policy: str | None, as_json: bool
) -> int:
    result: ValidateResult | DbResult
    if opencode_db is not None and file is None:
        result = validate_db(opencode_db, policy or "g2")
    elif file is not None and opencode_db is None:
        result = validate_file(file, policy or "g4")
    else:
        raise HarnessError("give one of FILE (a JSON-lines event log) or --opencode-db PATH")
    if as_json:
        emit_json(result.to_dict())
    else:
        for line in result.lines():
            echo(line)
    return result.exit_code
