"""What a lockstep run reports when the target and the model part:
:class:`Divergence` (the first difference, the steps that led there, both
sides' values side by side) and :class:`NotLinearizable` (a concurrent group
no order of the model explains), with their text rendering
(:func:`side_by_side`, :func:`request_line`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass(eq=False)
class Divergence(Exception):
    """The first difference between the model and the target.

    ``step`` is the lockstep step index (0 = the first request), ``request`` the
    request (``None`` for a kill), ``where`` the compared part that differs
    (``reply``, ``retry receipt``, ``pending s1``, ``transcript s1``, ``calls``),
    ``model``/``target`` the normalized values, ``model_raw``/``target_raw``
    what each side gave (reply and observation as JSON), ``history`` the
    requests that led there (one line each).
    """

    step: int
    request: dict[str, Any] | None
    where: str
    model: Any
    target: Any
    model_raw: dict[str, Any] = field(default_factory=dict)
    target_raw: dict[str, Any] = field(default_factory=dict)
    history: tuple[str, ...] = ()
    target_name: str = "target"
    model_name: str = "model"
    # each side's whole views after the step (pending, transcript, open calls), raw
    model_views: dict[str, Any] = field(default_factory=dict)
    target_views: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.render()

    @property
    def summary(self) -> str:
        what = request_line(self.request)
        return f"divergence at step {self.step} ({what}): {self.where} differs"

    def render(self, history: int = 8) -> str:
        """Readable text: the steps that led here, then model and target side by side."""
        lines = [self.summary]
        if self.history:
            shown = self.history[-history:]
            lines.append("steps that led there:")
            if len(self.history) > len(shown):
                lines.append(f"  … {len(self.history) - len(shown)} earlier steps")
            lines.extend("  " + h for h in shown)
        lines.append(f"{self.where}, normalized:")
        lines.extend(side_by_side(self.model, self.target, self.model_name, self.target_name))
        lines.append("raw (reply and observation of this step):")
        lines.extend(
            side_by_side(self.model_raw, self.target_raw, self.model_name, self.target_name)
        )
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "request": self.request,
            "where": self.where,
            "model": self.model,
            "target": self.target,
            "model_raw": self.model_raw,
            "target_raw": self.target_raw,
            "history": list(self.history),
            "model_name": self.model_name,
            "target_name": self.target_name,
            "model_views": self.model_views,
            "target_views": self.target_views,
        }


class NotLinearizable(Divergence):
    """A concurrent group no order of the model explains: the group, the
    orders tried and why each failed (``linearize``'s explanation)."""

    def __init__(
        self,
        group: Any,
        verdict: Any,
        step: int,
        history: tuple[str, ...],
        target_name: str,
        model_name: str,
    ) -> None:
        requests = [r.op.to_wire() for r in group.requests]
        super().__init__(
            step,
            {"op": "group", "requests": requests},
            "group not linearizable",
            None,
            None,
            history=history,
            target_name=target_name,
            model_name=model_name,
        )
        self.explanation = verdict.explain(group)

    def render(self, history: int = 8) -> str:
        lines = [self.summary]
        if self.history:
            lines.append("steps that led there:")
            lines.extend("  " + h for h in self.history[-history:])
        lines.append(self.explanation)
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "explanation": self.explanation}


def _pretty(value: Any, indent: str = "", width: int = 56) -> list[str]:
    """JSON over lines, a value that fits in ``width`` characters on one line."""
    flat = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    rows = (
        isinstance(value, list)
        and len(value) > 1
        and all(isinstance(v, (dict, list)) for v in value)
    )  # a list of rows: one per line, so that the marks point at the row
    if (len(flat) <= width and not rows) or not isinstance(value, (dict, list)) or not value:
        return [indent + flat]
    inner = indent + "  "
    if isinstance(value, dict):
        items: list[list[str]] = []
        for k in sorted(value):
            sub = _pretty(value[k], inner, width)
            key = json.dumps(k, ensure_ascii=False) + ": "
            items.append([inner + key + sub[0].lstrip(), *sub[1:]])
        open_, close = "{", "}"
    else:
        items = [_pretty(v, inner, width) for v in value]
        open_, close = "[", "]"
    out = [indent + open_]
    for i, item in enumerate(items):
        out.extend(item[:-1])
        out.append(item[-1] + ("," if i < len(items) - 1 else ""))
    out.append(indent + close)
    return out


def side_by_side(left: Any, right: Any, left_name: str, right_name: str) -> list[str]:
    """Two JSON renderings in columns; ``!`` marks the lines that differ."""
    a, b = _pretty(left), _pretty(right)
    width = max([len(left_name), *map(len, a)]) + 2
    out = [f"    {left_name.ljust(width)}| {right_name}"]
    for i in range(max(len(a), len(b))):
        x = a[i] if i < len(a) else ""
        y = b[i] if i < len(b) else ""
        mark = "  " if x == y else "! "
        out.append(f"  {mark}{x.ljust(width)}| {y}")
    return out


def request_line(request: dict[str, Any] | None) -> str:
    if request is None:
        return "kill"
    return " ".join(
        f"{k}={json.dumps(v, ensure_ascii=False)}" if k != "op" else str(v)
        for k, v in request.items()
    )
