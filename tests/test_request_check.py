"""The model adapter's quick request check (targets/request_check.py): never more
lenient than the protocol's pydantic validation, and it spares the adapter
process the pydantic import on the requests a harness sends."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from inboxsim.model import G4
from inboxsim.sim.run import RunOptions, run_seed
from inboxsim.targets.protocol import REQUEST
from inboxsim.targets.request_check import valid


def _harness_requests() -> list[dict[str, Any]]:
    out = []
    for seed in range(6):
        r = run_seed(seed, G4, RunOptions(ops=40))
        for i, step in enumerate(r.trace.steps):
            if step.request is None:
                continue
            wire = {"rid": i + 1, **step.request.to_wire()}
            if step.crash_at is not None:
                wire["crash_at"] = step.crash_at
            out.append(wire)
    return out


HARNESS = _harness_requests()


def _pydantic_accepts(doc: Any) -> bool:
    try:
        REQUEST.validate_python(doc)
    except ValidationError:
        return False
    return True


def test_every_request_a_run_sends_takes_the_quick_path() -> None:
    assert len({d["op"] for d in HARNESS}) >= 8
    for doc in HARNESS:
        assert valid(doc), doc
        assert _pydantic_accepts(doc)


ODD = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=4),
    st.sampled_from(["steer", "queue", "stop", "tool", "after_admit", "hello", "prompt"]),
    st.lists(st.integers(0, 2), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
)


@settings(max_examples=400, deadline=None)
@given(
    base=st.sampled_from(HARNESS),
    edits=st.lists(
        st.tuples(
            st.sampled_from(["set", "drop", "add"]),
            st.sampled_from(
                [
                    "rid",
                    "op",
                    "now",
                    "session",
                    "text",
                    "input",
                    "delivery",
                    "step_limit",
                    "crash_at",
                    "call",
                    "finish",
                    "metadata",
                    "files",
                    "resume",
                    "child",
                    "extra",
                ]
            ),
            ODD,
        ),
        min_size=1,
        max_size=3,
    ),
)
def test_never_more_lenient_than_pydantic(base: dict[str, Any], edits: list[Any]) -> None:
    doc = dict(base)
    for action, key, value in edits:
        if action == "drop":
            doc.pop(key, None)
        else:
            doc[key] = value
    if valid(doc):
        assert _pydantic_accepts(doc), doc


def test_model_adapter_serves_without_importing_pydantic(tmp_path: Path) -> None:
    # the real process path: python -m ... reading stdin
    code = (
        "import runpy, sys; sys.argv = ['x', '--no-fsync'];\n"
        "try:\n runpy.run_module('inboxsim.targets.model_adapter', run_name='__main__')\n"
        "except SystemExit: pass\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('pydantic', 'typer', 'rich', 'duckdb')), file=sys.stderr)"
    )
    requests = [
        {"rid": 1, "op": "hello", "now": 0, "step_limit": 4},
        {"rid": 2, "op": "create", "now": 1, "session": "s1"},
        {"rid": 3, "op": "prompt", "now": 2, "session": "s1", "text": "hi", "input": "u1"},
        {
            "rid": 4,
            "op": "prompt",
            "now": 3,
            "session": "s1",
            "text": 5,
        },  # invalid: pydantic says why
    ]
    done = subprocess.run(
        [sys.executable, "-c", code],
        input="".join(json.dumps(r) + "\n" for r in requests),
        env={**os.environ, "INBOXSIM_DATA_DIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    replies = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["ok"] for r in replies] == [True, True, True, False], done.stderr
    assert replies[3]["error"]["code"] == "invalid_request"
    assert "text" in replies[3]["error"]["message"]
    # pydantic was imported only for the odd request, after the three good ones
    assert "'pydantic'" in done.stderr.splitlines()[-1]
    quiet = subprocess.run(
        [sys.executable, "-c", code],
        input="".join(json.dumps(r) + "\n" for r in requests[:3]),
        env={**os.environ, "INBOXSIM_DATA_DIR": str(tmp_path / "b")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert quiet.stderr.splitlines()[-1] == "[]", quiet.stderr
