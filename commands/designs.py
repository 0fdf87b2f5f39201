"""``inboxsim designs``: the design-exploration report, each policy swept and
explored, written as designs.html, .md and .json with its figures."""

from __future__ import annotations

from pathlib import Path

from ..designs import study as ds
from ..designs.report import report_files
from ..errors import HarnessError
from .output import echo, emit_json, progress, write_file


def designs(
    *,
    files: list[str] | None,
    policies: str | None,
    seeds: int,
    ops: int,
    depth: int,
    sessions: int,
    jobs: int,
    out: str,
    as_json: bool,
) -> int:
    specs = ds.resolve(policies, files or ())
    if not specs:
        raise HarnessError("no policies to study")
    doc, figures = ds.build(specs, seeds, depth, sessions, ops, jobs, progress=progress)
    folder = Path(out)
    failure = f"cannot write the report to {out}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise HarnessError(f"{failure}: {exc.strerror}") from None
    named = ("designs.html", "designs.md", "designs.json")
    for name, data in report_files(doc, figures).items():
        write_file(folder / name, data, failure)
    paths = [folder / name for name in named]
    if as_json:
        emit_json(
            {
                "files": [str(p) for p in paths],
                "questions": doc["questions"],
                "seconds": doc["seconds"],
            }
        )
        return 0
    for q in doc["questions"]:
        echo(f"{q['title']}\n  {q['verdict']}")
    echo(f"written: {', '.join(str(p) for p in paths)} ({doc['seconds']} s)")
    return 0
