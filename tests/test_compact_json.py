"""compact_encoder writes what the standard library's encoder writes with its options, and
the fingerprint's canonical JSON is built on it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp_breaker_client.shared.compact_json import compact_encoder
from mcp_breaker_client.shared.fingerprint import _normalize, canonical_json

SAMPLES = [
    None,
    "text",
    "\ud800 lone",
    3,
    2.0,
    float("nan"),
    [1, 2.5, {"b": 1, "a": [True, None]}],
    {"z": {"y": "é"}, "a": 1e300, "7": "seven"},
]
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


def standard(value: Any, sort_keys: bool) -> str:
    return json.dumps(value, sort_keys=sort_keys, separators=(",", ":"), ensure_ascii=False)


@pytest.mark.parametrize("sort_keys", [True, False])
@pytest.mark.parametrize("value", SAMPLES)
def test_it_writes_what_json_dumps_writes(value: Any, sort_keys: bool) -> None:
    assert compact_encoder(sort_keys=sort_keys)(value) == standard(value, sort_keys)


@settings(max_examples=300, deadline=None, database=None)
@given(JSON_VALUES, st.booleans())
def test_it_writes_what_json_dumps_writes_for_any_json_value(value: Any, sort_keys: bool) -> None:
    assert compact_encoder(sort_keys=sort_keys)(value) == standard(value, sort_keys)


@pytest.mark.parametrize("value", [*SAMPLES, {7: "a key that is not text", "b": [2.0]}])
def test_the_canonical_json_is_the_sorted_compact_json_of_the_normalized_value(value: Any) -> None:
    assert canonical_json(value) == standard(_normalize(value, 0), sort_keys=True)
