"""The merge key's bisimulation check (tests/test_canon.py) at bounds too big
for CI: every path to the depth, every path of every merged class compared.

    python -m benchmarks.deep_bisimulation g4:1:3 g5:1:3   # policy:sessions:depth

Measured (2-core machine, two searches beside it): g4:1:3 holds in 173 s,
g5:1:3 in 272 s. A failure raises the test's AssertionError with the two
futures that differ.
"""

from __future__ import annotations

import argparse
import time

from tests import test_canon


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("specs", nargs="+", help="policy:sessions:depth, e.g. g4:1:3")
    args = parser.parse_args()
    test_canon.MEMBERS = 10**9  # every path of every merged class, not the first few
    for spec in args.specs:
        name, sessions, depth = spec.split(":")
        started = time.perf_counter()
        test_canon.test_paths_with_one_key_have_the_same_futures(name, int(sessions), int(depth))
        print(f"{spec}: bisimulation holds ({time.perf_counter() - started:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
