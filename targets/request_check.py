"""A quick, conservative check of adapter-protocol requests, for the model
adapter's start-up path (no pydantic import).

An adapter process is started for every seed and again after every SIGKILL,
so its import time is the largest part of a conformance step (see
``benchmarks/bench_conformance.py``). Importing pydantic and building the
protocol's validators was about half of it. This module reads the protocol's
committed JSON Schema (``targets/schema/protocol-v1.json``, generated from the
pydantic types in :mod:`.protocol` and checked for staleness by the tests)
and interprets the few keywords the request definitions use.

It only ever answers "valid for certain" (``True``) or "not sure"
(``False``): any keyword it does not know, any value it does not expect,
makes it unsure, and the caller then asks the pydantic validator, which stays
the authority and writes the error. So the two agree on every request the
fast path accepts (``tests/test_request_check.py`` checks this with
Hypothesis); a harness only ever pays for pydantic when it sends something
odd.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

SCHEMA = Path(__file__).parent / "schema" / "protocol-v1.json"
_IGNORED = frozenset({"title", "description"})
_KNOWN = frozenset(
    {
        "type",
        "const",
        "enum",
        "required",
        "properties",
        "additionalProperties",
        "items",
        "minimum",
        "minItems",
        "discriminator",  # with its oneOf: a group's requests, dispatched on op
        "oneOf",
    }
)


@cache
def _defs() -> dict[str, Any]:
    defs: dict[str, Any] = json.loads(SCHEMA.read_text(encoding="utf-8"))["$defs"]
    return defs


def _dispatch(discriminator: Any, value: Any) -> dict[str, Any] | None:
    """The definition a discriminated union picks for ``value``, or None."""
    if not isinstance(discriminator, dict) or not isinstance(value, dict):
        return None
    tag = value.get(discriminator.get("propertyName"))
    ref = discriminator.get("mapping", {}).get(tag) if isinstance(tag, str) else None
    if not isinstance(ref, str) or not ref.startswith("#/$defs/"):
        return None
    found: dict[str, Any] | None = _defs().get(ref.rsplit("/", 1)[-1])
    return found


def valid(request: Any) -> bool:
    """True only when ``request`` certainly validates as a protocol request."""
    if not isinstance(request, dict):
        return False
    schema = _dispatch(_defs()["Request"]["discriminator"], request)
    return schema is not None and _check(schema, request)


def _type_ok(kind: Any, value: Any) -> bool:
    # strict, as the pydantic types are: no bool for a number, no float for an integer
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "object":
        return isinstance(value, dict) and all(isinstance(k, str) for k in value)
    if kind == "array":
        return isinstance(value, list)
    return False  # "number", "null", lists of types: not used by requests, so unsure


def _same(value: Any, wanted: Any) -> bool:
    return type(value) is type(wanted) and value == wanted  # True is not 1


def _check(schema: Any, value: Any) -> bool:
    if not isinstance(schema, dict):
        return False
    for key in schema:
        if key not in _KNOWN and key not in _IGNORED:
            return False  # a keyword this check does not interpret: unsure
    if "type" in schema and not _type_ok(schema["type"], value):
        return False
    if "const" in schema and not _same(value, schema["const"]):
        return False
    if "enum" in schema and not any(_same(value, e) for e in schema["enum"]):
        return False
    if "discriminator" in schema or "oneOf" in schema:
        picked = _dispatch(schema.get("discriminator"), value)
        if picked is None or not _check(picked, value):
            return False  # (a oneOf without a discriminator is not used by requests)
    if "minItems" in schema and not (isinstance(value, list) and len(value) >= schema["minItems"]):
        return False
    if "minimum" in schema and not (
        isinstance(value, int) and not isinstance(value, bool) and value >= schema["minimum"]
    ):
        return False
    if "items" in schema:
        if not isinstance(value, list):
            return False
        if schema["items"] != {} and not all(_check(schema["items"], v) for v in value):
            return False
    if "properties" in schema or "required" in schema or "additionalProperties" in schema:
        if not isinstance(value, dict):
            return False
        props = schema.get("properties", {})
        if any(name not in value for name in schema.get("required", ())):
            return False
        extra = schema.get("additionalProperties", True)
        for name, item in value.items():
            if name in props:
                if not _check(props[name], item):
                    return False
            elif extra is False:
                return False
            elif extra is not True:
                return False  # a schema for extra properties: not used by requests
    return True


__all__ = ["valid"]
