"""A policy by name or from a TOML file: the one place the harness reads one.

The model (``model/policy.py``) stays pure: it holds the presets and builds a
policy from a parsed table (:func:`~inboxsim.model.policy.policy_from_table`),
checking every field and value. Opening and parsing the file is I/O, so it
lives here, in the shell, for every command and program that takes
``--policy NAME|FILE.toml`` (the CLI, the model adapter, scenario files).
"""

from __future__ import annotations

from pathlib import Path

from .model.policy import PRESETS, Policy, PolicyError, policy_from_table


def load_policy(name_or_file: str) -> Policy:
    """A preset by name, or a custom policy from a TOML file of fields.

    A file may name a ``base`` preset (default ``g4``) and override any field;
    an unknown field or value raises :class:`PolicyError` naming it.
    """
    if name_or_file in PRESETS:
        return PRESETS[name_or_file]
    path = Path(name_or_file)
    if not path.suffix == ".toml":
        raise PolicyError(
            f"unknown policy {name_or_file!r}: expected one of {', '.join(PRESETS)} or a .toml file"
        )
    import tomllib  # here: a preset (the usual case) needs no TOML parser at start-up

    try:
        table = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PolicyError(f"cannot read policy file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(f"policy file {path} is not valid TOML: {exc}") from None
    return policy_from_table(table, origin=str(path))
