"""Damaged trace stores, and every command that opens a store tried on each.

The damaged-store half of the harness's own fault-injection suite (issue 17;
``docs/harness-faults.md`` has the figures). Shared by the CI test
(``tests/test_faults_store.py``, a sample of the damages) and the long version
(``benchmarks/faults_store.py``, every damage), so both judge the same way.

A damage is a function that spoils a copy of a good store. Each command is run
in process on a fresh damaged copy, and its outcome is one of:

- ``refused``: exit 2, one line of reason on stderr (after any progress
  lines), not an internal error, and the file byte for byte as it was (no
  write, no WAL file left beside it);
- ``read``: exit 0 or 1 (the command did its job), and ``check`` afterwards
  finds the file no worse than before: a store ``check`` could read is still
  readable. A writer may write into a store whose damage the open-time check
  does not look for (a byte flipped inside a data block, which DuckDB's
  checksum reports when that block is read); those are counted apart
  (``wrote_past``), and ``check`` must still refuse them afterwards, the
  damage still there and no new one;
- anything else is an inconsistency: a traceback, several lines, an internal
  error, a refusal that changed the file, a readable store left unreadable.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from inboxsim.cli import main
from inboxsim.scenarios.load import library_paths

BLOCK = 262_144  # DuckDB's block size (PRAGMA database_size), after 3 headers of 4 KiB
HEADERS = 3 * 4096

Damage = Callable[[Path], None]


def build_good(folder: Path) -> Path:
    """A real store: a small sweep, scenario runs and a conformance batch,
    several blocks long (so that cuts and flips land in data and metadata)."""
    db = folder / "good.duckdb"
    sweep = ["sweep", "--seeds", "30", "--ops", "40", "--jobs", "1", "--db", str(db)]
    assert attempt(sweep)[0] in (0, 1)
    scenarios = [str(p) for p in library_paths()[:6]]
    assert attempt(["run", *scenarios, "--db", str(db)])[0] in (0, 1)
    return db


# --- damages ---------------------------------------------------------------------


def truncate_at(offset: int) -> Damage:
    def damage(path: Path) -> None:
        os.truncate(path, min(offset, path.stat().st_size))

    return damage


def truncate_fraction(fraction: float) -> Damage:
    def damage(path: Path) -> None:
        os.truncate(path, int(path.stat().st_size * fraction))

    return damage


def flip_at(offset: int) -> Damage:
    """One byte inverted (every bit flipped) at ``offset``."""

    def damage(path: Path) -> None:
        with path.open("r+b") as f:
            f.seek(offset)
            byte = f.read(1)
            f.seek(offset)
            f.write(bytes([byte[0] ^ 0xFF]))

    return damage


def flip_in_block(block: int, within: int = 4096) -> Damage:
    """A byte flipped ``within`` bytes into block ``block`` (past its checksum)."""
    return flip_at(HEADERS + block * BLOCK + within)


def foreign(path: Path) -> None:
    """Another program's DuckDB file under the store's name."""
    path.unlink()
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE orders (id INTEGER, total DOUBLE)")
        con.execute("INSERT INTO orders VALUES (1, 9.5)")


def newer_schema(path: Path) -> None:
    with duckdb.connect(str(path)) as con:
        con.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")


def rows_lost(path: Path) -> None:
    """Rows deleted outside inboxsim: the row counts disagree with the last write."""
    with duckdb.connect(str(path)) as con:
        con.execute("DELETE FROM steps WHERE run_id = (SELECT max(run_id) FROM runs)")


def random_bytes(path: Path) -> None:
    path.write_bytes(os.urandom(path.stat().st_size))


def stale_wal(path: Path) -> None:
    """A WAL from another database left beside the store (a copy taken mid-write)."""
    other = path.with_name("other-wal.duckdb")
    with duckdb.connect(str(other)) as con:
        con.execute("PRAGMA disable_checkpoint_on_shutdown")
        con.execute("CREATE TABLE t (x INTEGER)")
        con.execute("INSERT INTO t VALUES (1)")
    wal = Path(str(other) + ".wal")
    if wal.exists():
        shutil.move(wal, str(path) + ".wal")
    other.unlink(missing_ok=True)


def blocks_of(path: Path) -> int:
    return (path.stat().st_size - HEADERS) // BLOCK


def every_damage(good: Path) -> dict[str, Damage]:
    """The long version: cuts across the whole file, a flip in each header and
    every block (three places each), and the whole-file damages."""
    size = good.stat().st_size
    out: dict[str, Damage] = {}
    for offset in (0, 100, 4096, 8192, HEADERS, HEADERS + 1, HEADERS + 4096):
        out[f"truncated to {offset} bytes"] = truncate_at(offset)
    for n in range(1, 20):
        out[f"truncated to {n}/20"] = truncate_fraction(n / 20)
    out["truncated by 1 byte"] = truncate_at(size - 1)
    for header in range(3):
        for within in (8, 40, 200):
            out[f"header {header}: byte {within} flipped"] = flip_at(header * 4096 + within)
    for block in range(blocks_of(good)):
        for within in (4, 4096, BLOCK // 2):
            out[f"block {block}: byte {within} flipped"] = flip_in_block(block, within)
    out.update(WHOLE)
    return out


def sample_damage(good: Path) -> dict[str, Damage]:
    """The CI sample: three cuts, the first header, the first, a middle and the last block."""
    last = blocks_of(good) - 1
    return {
        "truncated to 8192 bytes": truncate_at(8192),
        "truncated to 1/2": truncate_fraction(0.5),
        "truncated by 1 byte": truncate_at(good.stat().st_size - 1),
        "header 0: byte 8 flipped": flip_at(8),
        "block 0: byte 4096 flipped": flip_in_block(0, 4096),
        f"block {last // 2}: byte 4096 flipped": flip_in_block(last // 2, 4096),
        f"block {last}: byte 4096 flipped": flip_in_block(last, 4096),
        **WHOLE,
    }


WHOLE: dict[str, Damage] = {
    "a foreign DuckDB file": foreign,
    "a newer schema (99)": newer_schema,
    "rows lost outside inboxsim": rows_lost,
    "random bytes": random_bytes,
    "a stale WAL beside it": stale_wal,
}


# --- commands ----------------------------------------------------------------------

SCENARIO = str(library_paths()[0])

# name -> argv builder (the damaged store, the good store, a scratch folder);
# every command that opens a store, reader or writer.
COMMANDS: dict[str, Callable[[str, str, Path], list[str]]] = {
    "check": lambda db, good, tmp: ["check", "--db", db],
    "report": lambda db, good, tmp: ["report", "--db", db, "--out", str(tmp / "report")],
    "diff BASE": lambda db, good, tmp: ["diff", db, good],
    "diff NEW": lambda db, good, tmp: ["diff", good, db],
    "diff --rerun": lambda db, good, tmp: ["diff", "--rerun", db],
    "sweep": lambda db, good, tmp: (
        ["sweep", "--seeds", "2", "--ops", "10", "--jobs", "1"] + ["--db", db]
    ),
    "sweep --resume": lambda db, good, tmp: (
        ["sweep", "--seeds", "32", "--ops", "40"] + ["--jobs", "1", "--resume", "--db", db]
    ),
    "run --db": lambda db, good, tmp: ["run", SCENARIO, "--db", db],
    "conformance --db": lambda db, good, tmp: [
        "conformance",
        "--target",
        "model-adapter",
        "--no-library",
        "--seeds",
        "1",
        "--ops",
        "5",
        "--shrink",
        "0",
        "--repro-dir",
        str(tmp / "repros"),
        "--db",
        db,
    ],
    "mutants --db": lambda db, good, tmp: [
        "mutants",
        "--names",
        "volatile-inbox",
        "--seeds",
        "0",
        "--no-shrink",
        "--db",
        db,
    ],
}


def attempt(argv: list[str]) -> tuple[int, list[str]]:
    """Run one command in process: its exit code and its stderr's lines."""
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        code = main(argv)
    return code, [line for line in err.getvalue().splitlines() if line.strip()]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else "-"


def _one_reason(err: list[str]) -> bool:
    """Progress lines, then one line of reason (harness-contract.md): no
    traceback, no internal error."""
    reasons = [line for line in err if line.startswith("inboxsim: error: ")]
    return (
        len(reasons) == 1
        and err[-1] == reasons[0]
        and "internal error" not in reasons[0]
        and not any("Traceback" in line for line in err)
    )


def _check_refuses(db: Path) -> bool:
    return attempt(["check", "--db", str(db)])[0] == 2


@dataclass
class Tally:
    """The figures of a run of the suite."""

    stores: int = 0
    commands: set[str] = field(default_factory=set)
    tried: int = 0
    refused: int = 0
    read: int = 0
    wrote_past: int = 0  # writers that wrote past damage the open check does not look for
    inconsistencies: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (
            f"{self.stores} damaged stores x {len(self.commands)} commands = {self.tried} tries: "
            f"{self.refused} refused, {self.read} read ({self.wrote_past} wrote past a flipped "
            f"data byte), {len(self.inconsistencies)} inconsistencies"
        )


WRITERS = ("sweep", "sweep --resume", "run --db", "conformance --db", "mutants --db")


def judge(
    tally: Tally, label: str, damage: Damage, good: Path, tmp: Path, commands: list[str]
) -> None:
    """Try ``commands`` on fresh copies of ``good`` spoilt by ``damage``."""
    tally.stores += 1
    reference = tmp / "reference.duckdb"
    fresh_copy(good, reference, damage)
    refused_before = _check_refuses(reference)
    for name in commands:
        tally.commands.add(name)
        tally.tried += 1
        db = tmp / "damaged.duckdb"
        fresh_copy(good, db, damage)
        before, wal_before = _digest(db), _digest(Path(str(db) + ".wal"))
        code, err = attempt(COMMANDS[name](str(db), str(good), tmp))
        where = f"{label} / {name}"
        if code == 2:
            tally.refused += 1
            if not _one_reason(err):
                tally.inconsistencies.append(f"{where}: not one clear line: {err}")
            elif _digest(db) != before or _digest(Path(str(db) + ".wal")) != wal_before:
                tally.inconsistencies.append(f"{where}: refused, but the file changed: {err[0]}")
        elif code in (0, 1):
            tally.read += 1
            if name not in WRITERS and _digest(db) != before:
                tally.inconsistencies.append(f"{where}: a reader changed the file")
            refused_after = _check_refuses(db)
            if refused_after and not refused_before:
                tally.inconsistencies.append(f"{where}: a readable store left unreadable")
            elif refused_before and name in WRITERS and _digest(db) != before:
                tally.wrote_past += 1
                if not refused_after:
                    tally.inconsistencies.append(f"{where}: the damage check found went away")
        else:
            tally.inconsistencies.append(f"{where}: exit {code}: {err}")


def fresh_copy(good: Path, path: Path, damage: Damage) -> None:
    """``good`` copied to ``path`` (no WAL beside it) and spoilt by ``damage``."""
    for stale in (path, Path(str(path) + ".wal")):
        stale.unlink(missing_ok=True)
    shutil.copy(good, path)
    damage(path)
