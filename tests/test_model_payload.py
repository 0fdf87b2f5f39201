"""The payload text a request admits: the written-out common case
(``model.ops._plain_payload_text``'s path through ``payload_text``) is the
canonical text of the payload, as the generic path encodes it."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from inboxsim.model import Prompt, Synthetic
from inboxsim.model.ops import payload_text
from inboxsim.model.values import canonical_json

texts = st.text() | st.sampled_from(["", "héllo", '"quoted"\\', "line\nbreak", "\ud800", "☃"])
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=6,
)
maybe_tuple = st.none() | st.just(()) | st.lists(json_values, max_size=2).map(tuple)
metadata = st.none() | st.just({}) | st.dictionaries(texts, json_values, max_size=2)


@given(
    text=texts | st.integers(),
    files=maybe_tuple,
    agents=maybe_tuple,
    metadata=metadata,
)
def test_a_prompts_payload_text_is_canonical(
    text: Any, files: Any, agents: Any, metadata: Any
) -> None:
    op = Prompt(1, session="s", text=text, files=files, agents=agents, metadata=metadata)
    assert payload_text(op) == canonical_json(op.payload())


@given(text=texts | st.integers(), description=st.none() | texts | st.integers(), meta=metadata)
def test_a_synthetics_payload_text_is_canonical(text: Any, description: Any, meta: Any) -> None:
    op = Synthetic(1, session="s", text=text, description=description, metadata=meta)
    assert payload_text(op) == canonical_json(op.payload())
