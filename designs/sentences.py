"""The sentences of the design report: a :class:`Sentence` is a template
whose slots are figures (:class:`Fig`, by key) or names, with its basis
(``measured``, ``by construction``, ``not run``); :func:`say` makes one and
checks that a measured sentence names a figure, :func:`render` fills it from
the figures of a run. :mod:`.verdicts` decides which sentences each design
question gets."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

Figures = Mapping[str, Any]

MEASURED, CONSTRUCTION, NOT_RUN = "measured", "by construction", "not run"
SLOT = re.compile(r"\{(\w+)\}")


def key(*parts: str) -> str:
    """A figure's key: ``key("violated", "b", "queue-fifo")``."""
    return "/".join(parts)


@dataclass(frozen=True, slots=True)
class Fig:
    """A slot filled from a figure: ``part`` picks a field of a dict figure,
    ``noun`` renders a count with its noun ("2 operations"), ``form`` names
    a structured rendering (``difference``, ``when``, ``request``)."""

    key: str
    part: str | None = None
    noun: str | None = None
    form: str | None = None


@dataclass(frozen=True, slots=True)
class Sentence:
    """A template whose slots are figures (``refs``) or identifiers
    (``names``: policy, invariant and field names); ``grounds`` are the
    figures a choice between templates rested on, not shown."""

    template: str
    basis: str
    refs: tuple[tuple[str, Fig], ...] = ()
    names: tuple[tuple[str, str], ...] = ()
    grounds: tuple[str, ...] = ()

    def figure_keys(self) -> list[str]:
        return sorted({f.key for _, f in self.refs} | set(self.grounds))

    def document(self, figures: Figures) -> dict[str, Any]:
        """The sentence as the report's JSON keeps it: its text, and all it
        was built from (:meth:`load` reads it back)."""
        return {
            "text": render(self, figures),
            "basis": self.basis,
            "template": self.template,
            "refs": {
                slot: {k: v for k, v in asdict(f).items() if v is not None} for slot, f in self.refs
            },
            "names": dict(self.names),
            "grounds": list(self.grounds),
        }

    @classmethod
    def load(cls, doc: Mapping[str, Any]) -> Sentence:
        return cls(
            doc["template"],
            doc["basis"],
            tuple((slot, Fig(**f)) for slot, f in sorted(doc["refs"].items())),
            tuple(sorted(doc["names"].items())),
            tuple(doc["grounds"]),
        )


def say(
    template: str, basis: str = MEASURED, grounds: Sequence[str] = (), **slots: Any
) -> Sentence:
    """A sentence; each slot is a :class:`Fig` or an identifier (str)."""
    used = set(SLOT.findall(template))
    if used != set(slots):
        raise ValueError(f"slots {sorted(used ^ set(slots))} of {template!r} unmatched")
    refs = tuple((s, v) for s, v in sorted(slots.items()) if isinstance(v, Fig))
    names = tuple((s, v) for s, v in sorted(slots.items()) if isinstance(v, str))
    if basis == MEASURED and not refs and not grounds:
        raise ValueError(f"a measured sentence names no figure: {template!r}")
    if basis == CONSTRUCTION and (refs or CONSTRUCTION not in template):
        raise ValueError(f"a structural sentence must say so and name no figure: {template!r}")
    return Sentence(template, basis, refs, names, tuple(grounds))


# --- rendering ---------------------------------------------------------------------


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _compact(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _request(wire: Mapping[str, Any]) -> str:
    """``op session=... field=...``, the other fields sorted (the value may
    have been read back from sorted JSON)."""
    rest = sorted(k for k in wire if k not in ("op", "now", "session"))
    return " ".join(
        [str(wire.get("op", "kill"))]
        + [f"{k}={_compact(wire[k])}" for k in ("session", *rest) if k in wire]
    )


def _when(fields: Mapping[str, Sequence[Any]]) -> str:
    if not fields:
        return "every policy"
    return " and ".join(f"{f} = {' or '.join(map(str, v))}" for f, v in sorted(fields.items()))


def _difference(d: Mapping[str, Any]) -> str:
    parts = "; ".join(
        f"{p['path']} is {p['base']} under {d['base']} and {p['policy']} under {d['policy']}"
        for p in d["parts"]
    )
    more = f" (and {plural(d['more'], 'other difference')})" if d["more"] else ""
    where = "what a client sees" if d["seen"] == "client" else "the event log only"
    return f"{where} at its step {d['step']} ({_request(d['request'])}): {parts}{more}"


FORMS: dict[str, Callable[[Any], str]] = {
    "difference": _difference,
    "when": _when,
    "request": _request,
}


def _value(fig: Fig, figures: Figures) -> str:
    value = figures[fig.key]
    if fig.part is not None:
        value = value[fig.part]
    if fig.form is not None:
        return FORMS[fig.form](value)
    if fig.noun is not None:
        return plural(int(value), fig.noun)
    if value is None:
        return "none"
    if isinstance(value, (bool, dict)):
        raise ValueError(f"figure {fig.key} ({value!r}) has no plain rendering")
    if isinstance(value, list):
        return ", ".join(map(str, value)) if value else "none"
    return str(value)


def render(sentence: Sentence, figures: Figures) -> str:
    refs, names = dict(sentence.refs), dict(sentence.names)
    return SLOT.sub(
        lambda m: names[m[1]] if m[1] in names else _value(refs[m[1]], figures),
        sentence.template,
    )
