"""The harness's own fault injection, damaged-store half: damaged stores
(truncated at several offsets, a flipped byte in a header and in blocks, a
foreign DuckDB file, a newer schema, rows lost outside inboxsim, random bytes,
a stale WAL) given to every command that opens a store. Each refuses with
exit 2 and one line, leaving the file as it was, or reads it and leaves it no
worse (tests/store_damage.py says exactly how each outcome is judged). The
long version, every cut and every block: ``benchmarks/faults_store.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from inboxsim.errors import HarnessError
from inboxsim.reports.store import Store

from . import store_damage as sd


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sd.build_good(tmp_path_factory.mktemp("good"))


# The sample's labels depend on the good store's block count; these are the
# damages every good store has (the middle and last blocks are added below).
FIXED = [
    "truncated to 8192 bytes",
    "truncated to 1/2",
    "truncated by 1 byte",
    "header 0: byte 8 flipped",
    "block 0: byte 4096 flipped",
    "middle block flipped",
    "last block flipped",
    *sd.WHOLE,
]


def _damage(good: Path, label: str) -> sd.Damage:
    sample = sd.sample_damage(good)
    last = sd.blocks_of(good) - 1
    if label == "middle block flipped":
        return sample[f"block {last // 2}: byte 4096 flipped"]
    if label == "last block flipped":
        return sample[f"block {last}: byte 4096 flipped"]
    return sample[label]


@pytest.mark.parametrize("label", FIXED)
def test_every_command_refuses_or_reads_a_damaged_store(
    good: Path, tmp_path: Path, label: str
) -> None:
    tally = sd.Tally()
    sd.judge(tally, label, _damage(good, label), good, tmp_path, list(sd.COMMANDS))
    assert tally.inconsistencies == []
    assert tally.tried == len(sd.COMMANDS) and tally.refused + tally.read == tally.tried
    if label.startswith("truncated") or label in sd.WHOLE:
        # Damage the open-time check finds: every command refuses, writers included.
        assert tally.refused == tally.tried, tally.line()


def test_the_issue_reproduction_truncated_store_is_refused_by_a_writer(
    good: Path, tmp_path: Path
) -> None:
    """``truncate -s 1800000`` of a sweep's store, then ``sweep --seeds 200``:
    was exit 0 "verdict: held", leaving a file no command could read."""
    cut = tmp_path / "z.duckdb"
    cut.write_bytes(good.read_bytes()[:1_800_000])
    code, err = sd.attempt(["sweep", "--seeds", "200", "--jobs", "1", "--db", str(cut)])
    assert code == 2 and len(err) == 1, err
    assert err[0] == (
        f"inboxsim: error: the database {cut} is truncated (1800000 bytes where its header "
        f"counts {good.stat().st_size}): restore it or use another --db"
    )
    assert cut.stat().st_size == 1_800_000


def test_a_store_open_in_process_refuses_the_same(good: Path, tmp_path: Path) -> None:
    """Store() itself (what a library user opens) refuses the open-time damages."""
    for label in ("truncated to 1/2", *sd.WHOLE):
        db = tmp_path / "d.duckdb"
        sd.fresh_copy(good, db, _damage(good, label))
        with pytest.raises(HarnessError):
            Store(db).close()
