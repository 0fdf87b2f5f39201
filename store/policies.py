"""A policy's full field values in the store (schema v3), and back.

A run records its policy's name, and since v3 a content hash into the
``policies`` table, which keeps every field of the :class:`~inboxsim.model.Policy`
as JSON. A custom policy built from a TOML file can then be rebuilt after the
file is gone, so ``check`` and ``diff --rerun`` judge and replay it as it ran.
The hash covers every field, name and summary included, so two files that
differ only in their name are two policies, as they are in the runs table.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

from ..model import PRESETS, Policy
from ..model.policy import PolicyError, policy_from_table


def policy_record(policy: Policy) -> tuple[str, str, str | None, str]:
    """(content hash, name, preset name or None, fields as canonical JSON) of
    ``policy``. It is a preset when it equals the preset of its name in every
    field, summary included (a custom ``g2.toml`` is named g2 but is not g2)."""
    fields = {f.name: getattr(policy, f.name) for f in dataclasses.fields(policy)}
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"))
    preset = policy.name if PRESETS.get(policy.name) == policy else None
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16], policy.name, preset, text


def policy_from_fields(text: str, origin: str) -> Policy:
    """Rebuild a policy from its stored fields, checked as a TOML file's are
    (a field this inboxsim no longer knows is a :class:`PolicyError`; one it
    added since takes the g4 default)."""
    try:
        table: dict[str, Any] = json.loads(text)
    except ValueError as exc:
        raise PolicyError(f"{origin}: the stored fields are not JSON: {exc}") from None
    if table.get("steer_batch_cap") is None:
        table.pop("steer_batch_cap", None)  # no cap: g4's default, which a TOML file cannot spell
    return policy_from_table({"base": "g4", **table}, origin=origin)


def stored_policy(
    name: str, policy_hash: str | None, stored: dict[str, tuple[str | None, str]]
) -> Policy:
    """The policy a stored run ran under: its stored fields when the store has
    them (``stored``: :func:`load_fields`), else the preset of that name.
    Raises :class:`PolicyError` with a one-line reason when neither exists."""
    if policy_hash is not None and policy_hash in stored:
        return policy_from_fields(stored[policy_hash][1], f"the stored policy {name!r}")
    if name in PRESETS:
        return PRESETS[name]
    raise PolicyError(
        f"policy {name!r} is not a preset and the store keeps no fields for it "
        "(written before schema v3, from a custom TOML file): sweep it again to store them"
    )


def current_policy(
    name: str, policy_hash: str | None, stored: dict[str, tuple[str | None, str]]
) -> Policy:
    """The policy to replay a stored run under today: a preset as it is
    defined now (so a changed preset shows as a behavioural change), any other
    policy as it was stored (its TOML file may be gone)."""
    record = stored.get(policy_hash) if policy_hash is not None else None
    preset = record[0] if record is not None else name
    if preset is not None and preset in PRESETS:
        return PRESETS[preset]
    return stored_policy(name, policy_hash, stored)


def load_fields(con: Any) -> dict[str, tuple[str | None, str]]:
    """Every stored policy by content hash: (preset name or None, fields JSON)."""
    rows = con.execute("SELECT policy_hash, preset, fields FROM policies").fetchall()
    return {h: (preset, fields) for h, preset, fields in rows}
