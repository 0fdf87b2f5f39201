"""Reading scenario files, with errors a person can act on.

Every problem becomes one :class:`~inboxsim.errors.HarnessError` line that
names the file, the line (when it can be found) and the field path, and says
what was expected: ``steer.toml:14: step 3 (op): unknown op 'promt'; expected
one of ...``. tomllib reports its own line and column; pydantic reports a
``loc`` (``("step", 2, "op")``), which is turned back into a field path and,
by scanning the text, a line.
"""

from __future__ import annotations

import fnmatch
import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..errors import HarnessError
from ..model import PRESETS, Policy, PolicyError
from ..policy_file import load_policy
from .schema import Scenario, StepSpec


@dataclass(frozen=True, slots=True)
class LoadedScenario:
    """A validated scenario and where it came from."""

    scenario: Scenario
    origin: str  # the file's path, or a label for text that came from elsewhere

    @property
    def name(self) -> str:
        return self.scenario.name


def load_scenario(path: str | Path) -> LoadedScenario:
    """Read and validate one scenario file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise HarnessError(f"cannot read scenario file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise HarnessError(f"{path}: scenario file is not UTF-8 text") from None
    return load_text(text, str(path))


def load_text(text: str, origin: str = "<scenario>") -> LoadedScenario:
    """Validate scenario TOML ``text``; ``origin`` names it in errors."""
    try:
        table = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # tomllib's message already ends with "(at line L, column C)".
        raise HarnessError(f"{origin}: not valid TOML: {exc}") from None
    try:
        scenario = Scenario.model_validate(table)
    except ValidationError as exc:
        raise HarnessError(_describe(exc, text, origin)) from None
    _check_policy(scenario.policy, origin)
    return LoadedScenario(scenario, origin)


def _check_policy(name: str, origin: str) -> None:
    if name in PRESETS:
        return
    try:
        resolve_policy(name, origin)
    except HarnessError as exc:
        raise HarnessError(f"{origin}: policy: {exc}") from None


def resolve_policy(name: str, origin: str | None = None) -> Policy:
    """A preset, or a policy file (relative to the scenario file's folder
    when the scenario names one)."""
    candidate = name
    if name not in PRESETS and origin is not None and not Path(name).is_absolute():
        beside = Path(origin).parent / name
        if beside.exists():
            candidate = str(beside)
    try:
        return load_policy(candidate)
    except PolicyError as exc:
        raise HarnessError(str(exc)) from None


def _describe(exc: ValidationError, text: str, origin: str) -> str:
    """One validation error as ``origin:line: field: what was expected``; with
    several, every missing and every unknown field by name (with its line
    when it has one), then the first other error."""
    errors = exc.errors()
    if len(errors) == 1:
        return _describe_one(errors[0], text, origin)
    fields: dict[str, list[str]] = {"missing": [], "extra_forbidden": []}
    others: list[Any] = []
    for error in errors:
        loc = tuple(error["loc"])
        if error["type"] in fields:
            line = _line_of(text, loc) if error["type"] == "extra_forbidden" else None
            fields[error["type"]].append(_field_path(loc) + (f" (line {line})" if line else ""))
        else:
            others.append(error)
    parts = []
    labels = {"missing": "missing required field", "extra_forbidden": "unknown field"}
    for kind, label in labels.items():
        if fields[kind]:
            plural = "s" if len(fields[kind]) > 1 else ""
            parts.append(f"{label}{plural}: {', '.join(fields[kind])}")
    if fields["extra_forbidden"]:
        parts[-1] += " (not part of the scenario format)"
    if others:
        path, line, message = _located(others[0], text)
        at = f" (line {line})" if line else ""
        more = f" (and {len(others) - 1} more)" if len(others) > 1 else ""
        parts.append(f"{path}{at}: {message}{more}")
    return f"{origin}: " + "; ".join(parts)


def _describe_one(error: Any, text: str, origin: str) -> str:
    """One validation error as ``origin:line: field: what was expected``."""
    path, line, message = _located(error, text)
    where = f"{origin}:{line}" if line else origin
    return f"{where}: {path}: {message}"


def _located(error: Any, text: str) -> tuple[str, int | None, str]:
    """An error's field path, its line in ``text`` (when found) and what was expected."""
    loc = tuple(error["loc"])
    if error["type"] == "value_error" and loc and loc[-1] != "op":
        # A whole-step check (e.g. "op 'prompt' has no field 'child'"): point
        # at the first key it names, or at the op.
        named = re.findall(r"'([A-Za-z_]+)'", str(error["msg"]))
        keys = [k for k in named if k in _KEYS] or (
            ["op"] if re.search(r"\bop\b", str(error["msg"])) else []
        )
        if keys and loc[0] == "step":
            loc = (*loc, keys[0])
    return _field_path(loc), _line_of(text, loc), _message(error)


_KEYS = set(StepSpec.model_fields) | set(Scenario.model_fields)


def _field_path(loc: tuple[Any, ...]) -> str:
    """``("step", 2, "expect_calls", 0, "kind")`` -> ``step 3 (expect_calls[0].kind)``."""
    if not loc:
        return "scenario"
    if loc[0] == "step" and len(loc) >= 2 and isinstance(loc[1], int):
        rest = _dotted(loc[2:])
        return f"step {loc[1] + 1}" + (f" ({rest})" if rest else "")
    return _dotted(loc)


def _dotted(parts: tuple[Any, ...]) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (("." if out else "") + str(part))
    return out


def _message(error: Any) -> str:
    kind, msg = error["type"], error["msg"]
    if kind == "missing":
        return "missing required field"
    if kind == "extra_forbidden":
        return "unknown field (not part of the scenario format)"
    if kind == "value_error":
        return str(msg).removeprefix("Value error, ")
    got = error.get("input")
    shown = "" if isinstance(got, (dict, list)) else f", got {got!r}"
    return f"{msg}{shown}"


def _line_of(text: str, loc: tuple[Any, ...]) -> int | None:
    """Best-effort line of a loc: the N-th ``[[step]]`` header, then the key
    inside that table; or a top-level key."""
    lines = text.splitlines()
    start, end = 0, len(lines)
    keys = list(loc)
    if keys and keys[0] == "step" and len(keys) >= 2 and isinstance(keys[1], int):
        headers = [i for i, ln in enumerate(lines) if re.match(r"\s*\[\[\s*step\s*\]\]", ln)]
        if keys[1] >= len(headers):
            return None
        start = headers[keys[1]]
        following = [i for i, ln in enumerate(lines) if i > start and re.match(r"\s*\[", ln)]
        end = following[0] if following else len(lines)
        keys = keys[2:]
        key = next((k for k in keys if isinstance(k, str)), None)
        if key is None:
            return start + 1
    else:
        key = next((k for k in keys if isinstance(k, str)), None)
        if key is None:
            return None
        first_table = next((i for i, ln in enumerate(lines) if re.match(r"\s*\[", ln)), len(lines))
        end = first_table
    pattern = re.compile(rf"\s*\"?{re.escape(key)}\"?\s*=")
    for i in range(start, end):
        if pattern.match(lines[i]):
            return i + 1
    return start + 1 if start else None


# --- the named library --------------------------------------------------------
#
# The library is a folder of topic folders (admission, retry, promotion, ...),
# each holding scenario files named after their scenarios. A selector names
# a scenario, a topic folder, or a glob over "topic/name" (``retry/*``,
# ``*barrier*``): ``run`` and ``conformance --scenario`` take them.


def library_root() -> Path:
    return Path(str(resources.files("inboxsim.scenarios").joinpath("library")))


def library_paths() -> list[Path]:
    """The library's scenario files, sorted by topic folder, then name."""
    return sorted(library_root().rglob("*.toml"))


def load_library() -> list[LoadedScenario]:
    return [load_scenario(p) for p in library_paths()]


def library_key(path: Path) -> str:
    """A library file's "topic/name" (its path in the library, no suffix)."""
    return path.relative_to(library_root()).with_suffix("").as_posix()


def select_library(selectors: Sequence[str]) -> list[Path]:
    """The library files that the selectors name, in library order, each once:
    a scenario name, a topic folder, or a glob over "topic/name" or name."""
    paths = library_paths()
    keys = {p: library_key(p) for p in paths}
    chosen: set[Path] = set()
    for selector in selectors:
        pattern = selector.strip("/")
        hits = [
            p
            for p, key in keys.items()
            if pattern in (key, p.stem)
            or key.startswith(pattern + "/")
            or fnmatch.fnmatchcase(key, pattern)
            or fnmatch.fnmatchcase(p.stem, pattern)
        ]
        if not hits:
            topics = sorted({key.partition("/")[0] for key in keys.values() if "/" in key})
            raise HarnessError(
                f"no library scenario matches {selector!r}: give a scenario name, a topic "
                f"folder ({', '.join(topics)}) or a glob such as 'retry/*'"
            )
        chosen.update(hits)
    return [p for p in paths if p in chosen]
