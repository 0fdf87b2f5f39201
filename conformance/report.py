"""What a conformance check finds: :class:`Item` (one row of the matrix: a
scenario, a seed, an invariant or a hello feature, with its verdict, detail,
repro command and the failure as data) and :class:`ConformanceReport` (the
items of one check, their counts, the exit code and the human summary)."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..search.divergence import Divergence
from ..search.shrink import failure_key
from ..store.schema import FAILING, VERDICTS

SHRINKABLE = frozenset({"diverged", "violated"})  # failures shrunk to a repro file
SEED_ROWS = 50  # more seeds than this: the summary lists only those that did not hold


@dataclass
class Item:
    """One row of the conformance matrix."""

    kind: str  # "scenario", "seed", "invariant", "feature"
    item: str
    verdict: str
    detail: str = ""
    repro: str = ""
    seconds: float = 0.0
    repro_file: str = ""  # a minimal repro scenario, shrunk through the same adapter
    steps: int = 0  # requests the run made (a seed's; for ops/s)
    # a failure as data: its key (what the report groups by), the divergence
    # (Divergence.to_dict) or violations, and the minimal repro's (``repro``)
    failure: dict[str, Any] = field(default_factory=dict)
    # Whether the run's adapter answered hello, and if it never did, why
    # (adapter.never_ready): what conformance's ReadyWatch counts.
    ready: bool = False
    never_ready: str = ""

    @property
    def failed(self) -> bool:
        return self.verdict in FAILING

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "item": self.item,
            "verdict": self.verdict,
            "detail": self.detail,
            "repro": self.repro,
            "repro_file": self.repro_file,
            "seconds": round(self.seconds, 3),
            "steps": self.steps,
            "failure": self.failure,
        }


def divergence_failure(div: Divergence) -> dict[str, Any]:
    """An :attr:`Item.failure` for a divergence."""

    return {"key": failure_key(div), "divergence": div.to_dict()}


def violation_failure(violations: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """An :attr:`Item.failure` for invariant violations ((invariant, message), first first)."""
    return {
        "key": f"violated:{violations[0][0]}" if violations else "violated",
        "violations": [list(v) for v in violations],
    }


@dataclass
class ConformanceReport:
    target: str
    command: list[str]
    policy: str
    items: list[Item] = field(default_factory=list)
    seconds: float = 0.0
    # Over the seeds that ran to their end: steps, kills (SIGKILL, between
    # requests or with a group in flight: the latter also counted apart) and
    # failpoint crashes (the adapter died at a ``crash_at``).
    totals: dict[str, int] = field(
        default_factory=lambda: {
            "steps": 0,
            "kills": 0,
            "mid_group_kills": 0,
            "failpoint_crashes": 0,
        }
    )

    @property
    def failures(self) -> list[Item]:
        return [i for i in self.items if i.failed]

    @property
    def passed(self) -> bool:
        return not self.failures

    @property
    def exit_code(self) -> int:
        return 0 if self.passed else 1

    def of(self, kind: str) -> list[Item]:
        return [i for i in self.items if i.kind == kind]

    def counts(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for i in self.items:
            row = out.setdefault(i.kind, dict.fromkeys(VERDICTS, 0))
            row[i.verdict] = row.get(i.verdict, 0) + 1
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "command": self.command,
            "policy": self.policy,
            "passed": self.passed,
            "exit_code": self.exit_code,
            "counts": self.counts(),
            "items": [i.to_dict() for i in self.items],
            "totals": dict(self.totals),
            "seconds": round(self.seconds, 3),
        }

    def lines(self) -> list[str]:
        """The human summary: the matrix, then each failure in full."""
        out = [f"conformance of {self.target} against the model (policy {self.policy})", ""]
        width = max([len(i.item) for i in self.items] + [10])
        for kind in ("scenario", "seed", "invariant", "feature"):
            rows = self.of(kind)
            if not rows:
                continue
            out.append(f"{kind:<{width + 4}}verdict")
            quiet = 0
            for i in rows:
                if kind == "seed" and len(rows) > SEED_ROWS and i.verdict == "held":
                    quiet += 1  # a long sweep: list what did not hold, count the rest
                    continue
                note = ""
                if i.verdict == "not testable" or (i.failed and kind == "invariant"):
                    note = "  (" + i.detail.splitlines()[0][:100] + ")" if i.detail else ""
                if i.repro_file:
                    note += f"  repro file {i.repro_file}"
                out.append(f"  {i.item:<{width}}  {i.verdict}{note}")
            if quiet:
                out.append(f"  ({quiet} more seeds held)")
            out.append("")
        counts = self.counts()
        out.append(
            "totals: "
            + "; ".join(
                f"{kind}s " + ", ".join(f"{n} {v}" for v, n in row.items() if n)
                for kind, row in counts.items()
            )
        )
        if self.of("seed"):
            t = self.totals
            out.append(
                f"seeded runs: {t['steps']} steps, {t['kills']} kills "
                f"({t['mid_group_kills']} mid-group), "
                f"{t['failpoint_crashes']} failpoint crashes"
            )
        failures = [i for i in self.failures if i.kind in ("scenario", "seed")]
        for i in failures:
            out += ["", f"=== {i.kind} {i.item}: {i.verdict}", i.detail]
            if i.repro:
                out.append(f"repro: {i.repro}")
            if i.repro_file:
                out.append(f"minimal repro scenario: {i.repro_file}")
                out.append(
                    "  rerun it alone: "
                    + shlex.join(
                        ["inboxsim", "run", i.repro_file, "--adapter", shlex.join(self.command)]
                    )
                )
        out.append("")
        out.append(f"{'PASSED' if self.passed else 'FAILED'} in {self.seconds:.1f} s")
        return out
