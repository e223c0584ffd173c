"""The byte prefilter (stage.may_hold_mcp) answers exactly as two plain scans would."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from processor.inflight.stage import MCP_MARKERS, may_hold_mcp
from processor.request import sparse


def plain_scan(payload: bytes) -> bool:
    return any(marker in payload for marker in MCP_MARKERS)


def test_the_simd_search_is_the_one_in_use() -> None:
    assert sparse._Text is not None  # stringzilla is a dependency: the fast path runs here


@settings(max_examples=500)
@given(
    st.binary(max_size=4096),
    st.sampled_from(
        [b"", b"mcp", b"tools/", b"mc", b"tool", b"too", b"ai.toolCall", b"MCP", b"m\x00cp"]
    ),
    st.integers(min_value=0, max_value=4096),
)
def test_it_agrees_with_a_plain_scan_wherever_a_marker_sits(
    noise: bytes, inserted: bytes, at: int
) -> None:
    payload = noise[:at] + inserted + noise[at:]
    assert may_hold_mcp(payload) == plain_scan(payload)


def test_markers_at_the_edges_and_in_large_requests() -> None:
    big = bytes(range(256)).replace(b"m", b"n").replace(b"t", b"u") * 4096  # 1 MiB, no marker
    assert not may_hold_mcp(big)
    assert may_hold_mcp(b"mcp" + big)
    assert may_hold_mcp(big + b"tools/")
    assert may_hold_mcp(big[:500_000] + b"mcp" + big[500_000:])
    assert not may_hold_mcp(b"")
    assert not may_hold_mcp(big + b"too")
    # Every agent framework's tool span: the GenAI conventions', OpenInference's, the AI SDK's.
    for marker in (b"execute_tool x", b"gen_ai.tool.name", b"tool.name", b"ai.toolCall"):
        assert may_hold_mcp(big + marker), marker
