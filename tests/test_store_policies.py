"""Schema v3 keeps each policy's fields: a custom TOML policy is judged and
replayed from the store after its file is gone, and v2 files migrate (preset
names get their fields; an unknown custom name stays NULL and says so)."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from inboxsim.cli import main
from inboxsim.model import G4, PRESETS
from inboxsim.model.policy import PolicyError
from inboxsim.policy_file import load_policy
from inboxsim.reports.check import check_store
from inboxsim.sim.run import RunOptions, run_decisions, run_seed
from inboxsim.store.policies import current_policy, policy_from_fields, policy_record
from inboxsim.store.schema import SCHEMA_VERSION
from inboxsim.store.store import Store, open_store, write_results
from tests.store_versions import v2_copy

OPTIONS = RunOptions(ops=40)

# G2's behaviour under another name: judging or replaying it as g4 (or as the
# preset g2, whose name it does not carry) would change replies and verdicts.
CUSTOM = """\
name = "mine"
visible_time = "admission"
steer_batch_cap = 100
synthetic_delivery = "none"
"""


def test_policy_record_round_trips_every_field() -> None:
    for policy in PRESETS.values():
        digest, name, preset, text = policy_record(policy)
        assert (name, preset) == (policy.name, policy.name)
        assert policy_from_fields(text, "t") == policy
        assert policy_record(policy_from_fields(text, "t"))[0] == digest
    custom = PRESETS["g2"].__class__(**{**json.loads(policy_record(G4)[3]), "name": "g2"})
    assert policy_record(custom)[2] is None  # named g2, but not the preset g2
    with pytest.raises(PolicyError, match="unknown policy field 'colour'"):
        policy_from_fields('{"name": "x", "colour": "red"}', "the stored policy 'x'")


def test_custom_policy_survives_its_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    toml = tmp_path / "mine.toml"
    toml.write_text(CUSTOM, encoding="utf-8")
    db = str(tmp_path / "custom.duckdb")
    args = ["sweep", "--seeds", "12", "--ops", "60", "--jobs", "1", "--policy", str(toml)]
    assert main([*args, "--db", db, "--json"]) == 1  # g2's behaviour breaks invariants
    swept = json.loads(capsys.readouterr().out)
    assert swept["verdicts"]["failed"] > 0
    policy = load_policy(str(toml))
    toml.unlink()

    with open_store(db) as s:
        rows = s.con.execute("SELECT policy_hash, name, preset, fields FROM policies").fetchall()
        assert rows == [policy_record(policy)]
        assert s.con.execute("SELECT DISTINCT policy, policy_hash FROM runs").fetchall() == [
            ("mine", rows[0][0])
        ]
        decisions = s.con.execute("SELECT decisions, trace_hash FROM runs").fetchall()
    # The stored fields matter: replayed under g4, the same decisions make other traces.
    swept_options = RunOptions(ops=60)
    assert all(run_decisions(d, policy, swept_options).trace_hash == h for d, h in decisions)
    assert any(run_decisions(d, G4, swept_options).trace_hash != h for d, h in decisions), (
        "the custom policy behaves as g4: the test would not notice a wrong rebuild"
    )

    assert main(["check", "--db", db, "--json"]) == 0
    checked = json.loads(capsys.readouterr().out)
    assert checked["runs"] == 12 and not checked["skipped"] and not checked["changed"]
    assert not checked["hash_mismatches"]
    assert main(["diff", "--rerun", db, "--json"]) == 0
    rerun = json.loads(capsys.readouterr().out)
    assert rerun["runs"] == 12 and not rerun["skipped"] and not rerun["changed"]


def _stores(tmp_path: Path) -> tuple[str, str]:
    """A v3 store with g2 runs and runs of a custom policy, and its v2 copy."""
    custom = load_policy(_toml(tmp_path))
    path = str(tmp_path / "v3.duckdb")
    with Store(path) as s:
        write_results(
            s, [run_seed(n, PRESETS["g2"], OPTIONS) for n in range(4)], 0, 0, PRESETS["g2"]
        )
        write_results(s, [run_seed(n, custom, OPTIONS) for n in range(3)], 4, 1, custom)
    v2 = str(tmp_path / "v2.duckdb")
    v2_copy(path, v2)
    return path, v2


def _toml(tmp_path: Path) -> str:
    path = tmp_path / "mine.toml"
    path.write_text(CUSTOM, encoding="utf-8")
    return str(path)


def test_migration_from_v2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, v2 = _stores(tmp_path)
    with duckdb.connect(v2, read_only=True) as con:
        assert con.execute("SELECT value FROM meta").fetchone() == ("2",)
    with Store(v2) as s:  # a writer migrates in place
        assert s.schema_version() == SCHEMA_VERSION == 5
        by_policy = dict(s.con.execute("SELECT DISTINCT policy, policy_hash FROM runs").fetchall())
        assert by_policy == {"g2": policy_record(PRESETS["g2"])[0], "mine": None}
        assert s.con.execute("SELECT name, preset FROM policies").fetchall() == [("g2", "g2")]
        tables = {r[0] for r in s.con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        assert {"policies", "scenario_runs", "mutants"} <= tables
        # Every other column of every row is as v2 had it.
        cols = "* EXCLUDE (policy_hash)"
        migrated = s.con.execute(f"SELECT {cols} FROM runs ORDER BY run_id").fetchall()
        assert s.con.execute("SELECT count(*) FROM invariant_exercise").fetchone()[0] > 0
    with open_store(path) as s:
        assert s.con.execute(f"SELECT {cols} FROM runs ORDER BY run_id").fetchall() == migrated
    # check: the g2 runs are judged; the custom ones are skipped, saying why.
    with open_store(v2) as s:
        judged, skipped = check_store(s.con)
    assert len(judged) == 4 and not any(j.changed for j in judged)
    assert len(skipped) == 3
    assert "'mine' is not a preset and the store keeps no fields" in skipped[0].reason
    assert main(["check", "--db", v2]) == 0
    out = capsys.readouterr().out
    assert "skipped 3 run(s), e.g. run 4: policy 'mine' is not a preset" in out
    assert main(["diff", "--rerun", v2, "--json"]) == 0
    rerun = json.loads(capsys.readouterr().out)
    assert rerun["runs"] == 4 and [s["run_id"] for s in rerun["skipped"]] == [4, 5, 6]
    # Appending to the migrated file stores the custom policy's fields from now on.
    with Store(v2) as s:
        custom = load_policy(_toml(tmp_path))
        write_results(s, [run_seed(9, custom, OPTIONS)], *s.next_ids(), custom)
        assert s.con.execute("SELECT count(*) FROM policies").fetchone() == (2,)


def test_replay_uses_current_preset_but_stored_custom() -> None:
    g2_hash, _, _, g2_fields = policy_record(PRESETS["g2"])
    # A preset whose stored fields differ from today's (the preset changed):
    # the rerun replays today's preset, so the change shows up as a diff.
    old = json.loads(g2_fields)
    old["steer_batch_cap"] = 7
    stored = {g2_hash: ("g2", json.dumps(old)), "c1": (None, json.dumps(old | {"name": "g2"}))}
    assert current_policy("g2", g2_hash, stored) is PRESETS["g2"]
    # A custom policy named like a preset is not that preset: its stored fields win.
    assert current_policy("g2", "c1", stored).steer_batch_cap == 7
    with pytest.raises(PolicyError, match="not a preset and the store keeps no fields"):
        current_policy("mine", None, stored)
