"""Files between the protocol and OpenCode 1.18.33's prompt file part.

A protocol file is opaque JSON; the adapter maps the shape a scenario uses,
``{path, mime?, name?, description?}``, onto 1.18.33's file part
``{uri, name?, description?}`` (``uri`` required; 400 without it). Probed on
the real server (docs/opencode.md, "Files"): it takes any string as the URI
and keeps it verbatim, reads no file at admission, and sets its own ``mime``
from the extension (``.ts`` is ``video/mp2t``), ignoring a given one. So
``path`` becomes a ``file://`` URI in the served project folder, the
protocol's ``mime`` rides in its query (which OpenCode's own MIME guess
ignores), and a receipt or an admitted event maps the recorded URI back: the
file round-trips through OpenCode's record, and OpenCode's retry identity
(which compares the recorded part) judges all of it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

from failures import Refused

FILE_KEYS = ("path", "mime", "name", "description")


def file_to_opencode(part: Any, project: Path) -> dict[str, str]:
    """A protocol file as 1.18.33's file part (``unsupported`` if not mappable)."""
    if (
        not isinstance(part, dict)
        or not part.get("path")
        or set(part) - set(FILE_KEYS)
        or not all(isinstance(v, str) for v in part.values())
    ):
        raise Refused(
            "unsupported",
            f"the OpenCode adapter maps files of the shape {{path, mime?, name?, description?}}"
            f" (strings) onto 1.18.33's {{uri, name?, description?}}, not {part!r}",
        )
    uri = (project / part["path"]).as_uri()
    if "mime" in part:
        uri += "?" + urlencode({"mime": part["mime"]})
    out = {"uri": uri}
    out.update((k, part[k]) for k in ("name", "description") if k in part)
    return out


def file_from_opencode(part: dict[str, Any], project: Path) -> dict[str, Any]:
    """The protocol file a recorded OpenCode file part stands for (a part the
    adapter did not write, as OpenCode recorded it)."""
    split = urlsplit(str(part.get("uri", "")))
    if split.scheme != "file":
        return dict(part)
    path = Path(unquote(split.path))
    out: dict[str, Any] = {
        "path": str(path.relative_to(project)) if path.is_relative_to(project) else str(path)
    }
    mime = parse_qs(split.query).get("mime")
    if mime:
        out["mime"] = mime[0]
    out.update((k, part[k]) for k in ("name", "description") if k in part)
    return out
