"""``inboxsim policies``: the presets ``--policy NAME`` accepts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..model.policy import PRESETS
from .output import echo, emit_json


def policies(as_json: bool) -> int:
    if as_json:
        emit_json(policies_document(PRESETS))
        return 0
    width = max((len(p.name) for p in PRESETS.values()), default=0)
    for p in PRESETS.values():
        echo(f"{p.name:<{width}}  {p.summary}")
    return 0


def policies_document(presets: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The ``policies --json`` document: each preset's name, summary and fields."""
    return {
        "policies": [
            {"name": p.name, "summary": p.summary, "fields": p.fields()} for p in presets.values()
        ]
    }
