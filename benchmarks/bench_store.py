"""Write throughput of the trace store: the Arrow path versus executemany.

    python benchmarks/bench_store.py [--rows 1000000] [--sample 20000]

Writes ``--rows`` step rows into a fresh on-disk store through
``Store.write`` (pyarrow Table, ``INSERT ... SELECT``, one transaction),
then ``--sample`` rows of the same shape by ``executemany`` into another
(a large sample would take minutes: python-ecosystem.md measured 1.8 k rows/s),
and prints rows per second for each and their ratio. Timings include close()
(the checkpoint). Rows are realistic step texts taken from real runs, repeated.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from inboxsim.model import PRESETS
from inboxsim.sim.run import RunOptions, run_seed
from inboxsim.store.columns import arrow_schemas
from inboxsim.store.store import Store


def step_columns(rows: int) -> dict[str, list]:
    template = [run_seed(s, PRESETS["g4"], RunOptions(ops=100)) for s in range(10)]
    texts = [(st, t) for r in template for st, t in zip(r.trace.steps, r.texts, strict=True)]
    cols: dict[str, list] = {
        k: []
        for k in ("run_id", "idx", "phase", "kind", "decision", "request", "reply", "observed")
    }
    for i in range(rows):
        step, (req, rep, obs) = texts[i % len(texts)]
        cols["run_id"].append(i // 100)
        cols["idx"].append(i % 100)
        cols["phase"].append(step.phase)
        cols["kind"].append(step.kind)
        cols["decision"].append(step.decision)
        cols["request"].append(None if req == "null" else req)
        cols["reply"].append(None if rep == "null" else rep)
        cols["observed"].append(obs)
    return cols


def arrow(path: Path, cols: dict[str, list]) -> float:
    import pyarrow as pa

    started = time.perf_counter()
    table = pa.Table.from_pydict(cols, schema=arrow_schemas()["steps"])
    with Store(path) as store:
        store.write({"steps": table})
    return time.perf_counter() - started


def executemany(path: Path, cols: dict[str, list]) -> float:
    rows = list(zip(*cols.values(), strict=True))
    started = time.perf_counter()
    with Store(path) as store:
        store.con.execute("BEGIN TRANSACTION")
        store.con.executemany("INSERT INTO steps VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
        store.con.execute("COMMIT")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--sample", type=int, default=20_000)
    args = parser.parse_args()
    cols = step_columns(args.rows)
    sample = {k: v[: args.sample] for k, v in cols.items()}
    with tempfile.TemporaryDirectory() as tmp:
        warm = {k: v[:1000] for k, v in cols.items()}
        arrow(Path(tmp) / "warm.duckdb", warm)  # the first Arrow conversion in a process is slow
        t_arrow = arrow(Path(tmp) / "arrow.duckdb", cols)
        t_many = executemany(Path(tmp) / "many.duckdb", sample)
    a, m = args.rows / t_arrow, args.sample / t_many
    print(f"arrow:       {args.rows:>9} rows in {t_arrow:7.2f} s = {a:>12,.0f} rows/s")
    print(f"executemany: {args.sample:>9} rows in {t_many:7.2f} s = {m:>12,.0f} rows/s")
    print(f"ratio: arrow is {a / m:,.0f}x executemany")


if __name__ == "__main__":
    main()
