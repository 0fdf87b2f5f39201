"""``inboxsim invariants``: what the checkers judge, and the spec's section 4
invariant by invariant."""

from __future__ import annotations

from typing import Any

from ..invariants import listing
from .output import echo, emit_json


def invariants(as_json: bool) -> int:
    document: dict[str, list[dict[str, Any]]] = listing()
    if as_json:
        emit_json(document)
        return 0
    for entry in document["invariants"]:
        echo(f"{entry['id']}  [{entry['source']}]")
        echo(f"    {entry['statement']}")
        if entry["holds_under"] != "every policy":
            echo(f"    expected under: {entry['holds_under']}")
    echo("")
    echo("Spec section 4, invariant by invariant (checked by the ids above, or not")
    echo("observable through the adapter protocol, and why):")
    for spec in document["spec"]:
        echo(f"4.{spec['number']}  {spec['title']}")
        if spec["checked_by"]:
            echo(f"    checked by: {', '.join(spec['checked_by'])}")
        for part in spec["not_observable"]:
            echo(f"    not observable: {part['statement']}")
            echo(f"        {part['reason']}")
    return 0
