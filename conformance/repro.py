"""A conformance failure shrunk through the same adapter to a minimal repro
file: :func:`attach_repro` (a scenario, a seed, or a concurrent seed as a
group file) writes what it found into the failure's :class:`.report.Item`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..model import Policy
from ..search.repro import shrink_conformance, shrink_conformance_scenario
from .group_repro import shrink_concurrent_seed
from .report import Item


def attach_repro(
    item: Item,
    what: Any,
    argv: list[str],
    policy: Policy,
    ops: int,
    timeout: float,
    base: Path,
    name: str,
    out: Path,
    seconds: float,
    runs: int,
    concurrency: int = 1,
    group_kills: bool = True,
) -> None:
    """Shrink one failure through the adapter; the file's path and how it was
    checked go into the item (a shrink that fails is said, never raised). A
    concurrent seed becomes a group scenario file (``group_repro.py``)."""
    try:
        if isinstance(what, int) and concurrency > 1:
            repro = shrink_concurrent_seed(
                what,
                argv,
                policy,
                ops=ops,
                concurrency=concurrency,
                workdir=base / f"group-repro-{what}",
                out=out,
                timeout=timeout,
                name=name,
                seconds=seconds,
                runs=runs,
                group_kills=group_kills,
            )
            if repro is None:
                item.detail += "\n(no minimal repro: the failure did not recur as a group file)"
                return
        elif isinstance(what, int):
            repro = shrink_conformance(
                what,
                argv,
                policy,
                ops=ops,
                timeout=timeout,
                time_limit=seconds,
                max_runs=runs,
                workdir=base,
                name=name,
                out=out,
            )
        else:
            repro = shrink_conformance_scenario(
                what,
                argv,
                policy,
                timeout=timeout,
                time_limit=seconds,
                max_runs=runs,
                workdir=base,
                name=name,
                out=out,
            )
    except Exception as exc:  # noqa: BLE001 - the verdict stands without its repro
        item.detail += f"\n(no minimal repro: shrinking failed: {type(exc).__name__}: {exc})"
        return
    if repro is None or repro.path is None:
        item.detail += "\n(no minimal repro: the failure did not recur when run again)"
        return
    item.repro_file = repro.path
    item.failure["repro"] = {
        "path": repro.path,
        "key": repro.key,
        "text": repro.text,
        "steps": repro.steps,
        "original_steps": repro.original_steps,
        "verified": repro.verified,
        "standalone": repro.standalone,
        "model_passes": repro.model_passes,
        "divergence": repro.divergence,
    }
    item.detail += (
        f"\nminimal repro: {repro.path} ({repro.steps} steps, from {repro.original_steps}; "
        f"{repro.key}; fails in lockstep: {'yes' if repro.verified else 'NO'}; "
        f"fails alone: {'yes' if repro.standalone else 'no'}; "
        f"passes on the model: {'yes' if repro.model_passes else 'NO'})"
    )
