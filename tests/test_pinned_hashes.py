"""Pinned trace hashes: what a seed means does not change by accident.

``pinned_hashes.json`` holds the trace hash of every seed of ``range(seeds)``
under every policy preset (``inboxsim policies``), each run as a sweep runs
it (``run_seed``, every invariant judged, ``ops`` workload actions), with a
fixed harness version string (the version is part of the trace header, so
part of the hash; ``run(version=...)``). A change that moves a hash changes
what some seed means: if that is deliberate, re-pin and say why in
``CHANGELOG.md``::

    python scripts/pin_hashes.py

A hash is kept as its first ``digits`` hex digits (64 bits: a changed trace
goes unnoticed with probability 2**-64), which keeps the file small.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from inboxsim.model import PRESETS
from inboxsim.sim.run import RunOptions, run_seed

PINNED = Path(__file__).resolve().parent / "pinned_hashes.json"
VERSION = "pinned"  # not a release: the pins outlive version bumps
OPS = 30
SEEDS = 250
DIGITS = 16


def hashes(policy: str, seeds: int, ops: int, version: str, digits: int) -> list[str]:
    """The (shortened) trace hashes of seeds ``0 .. seeds - 1`` under ``policy``."""
    options = RunOptions(ops=ops)
    return [
        run_seed(seed, PRESETS[policy], options, version=version).trace_hash[:digits]
        for seed in range(seeds)
    ]


def _pinned() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(PINNED.read_text(encoding="utf-8"))
    return doc


def test_every_preset_is_pinned() -> None:
    doc = _pinned()
    assert sorted(doc["hashes"]) == sorted(PRESETS), "a preset was added or removed: re-pin"
    assert all(len(h) == doc["seeds"] for h in doc["hashes"].values())


@pytest.mark.parametrize("policy", sorted(PRESETS))
def test_trace_hashes_match_the_pins(policy: str) -> None:
    doc = _pinned()
    pinned = doc["hashes"].get(policy)
    assert pinned is not None, f"{policy} is not pinned: python scripts/pin_hashes.py"
    got = hashes(policy, doc["seeds"], doc["ops"], doc["version"], doc["digits"])
    moved = [seed for seed, (a, b) in enumerate(zip(got, pinned, strict=True)) if a != b]
    assert not moved, (
        f"{len(moved)} of {doc['seeds']} seeds of {policy} changed meaning (first: "
        f"{moved[:10]}; inboxsim replay SEED --policy {policy} --ops {doc['ops']}). If that is "
        "deliberate, re-pin with `python scripts/pin_hashes.py` and say why in CHANGELOG.md."
    )


def main(argv: list[str] | None = None) -> int:
    """Write the pins (the documented command is ``scripts/pin_hashes.py``)."""
    args = sys.argv[1:] if argv is None else argv
    out = Path(args[0]) if args else PINNED
    doc = {
        "about": "trace hashes per seed and preset; tests/test_pinned_hashes.py says how",
        "version": VERSION,
        "ops": OPS,
        "seeds": SEEDS,
        "digits": DIGITS,
        "hashes": {p: hashes(p, SEEDS, OPS, VERSION, DIGITS) for p in sorted(PRESETS)},
    }
    out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(f"pinned {len(PRESETS)} presets x {SEEDS} seeds ({OPS} ops) in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
