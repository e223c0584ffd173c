"""Each agent framework, run for real with its scripted test model, through the service.

The scenario is tests/live/frameworks_common.py: one agent run, 6 calls against a real MCP
server over stdio (1 ok, 3 transport failures, 2 hidden ones, 3 dead repeats). The
framework's own OpenTelemetry output is exported by the real SDK over OTLP/gRPC to the
running service, which forwards it to a real gRPC next hop; what is checked is what a user
sees there and on /metrics. The recorded captures of the same runs are read by the fast
suite (tests/test_classify_frameworks.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from tests.live import harness
from tests.live.frameworks_common import DEAD_TOOL, EXPECTED, HIDDEN_TOOL, PLAN
from tests.support import CaptureCollector, ServiceThread, make_config, wait_until

pytestmark = [pytest.mark.live, pytest.mark.timeout(900), pytest.mark.usefixtures("live_venvs")]

# The Vercel AI SDK's clients are Node programs, run by client_vercel_ai*.py.
FRAMEWORKS = ("pydantic_ai", "openai_agents", "strands", "langgraph", "vercel_ai6", "vercel_ai7")
# The name of the framework's own span of a call: the one that tells it whole.
OUTER_SPAN = {
    "pydantic_ai": "execute_tool {}",
    "openai_agents": "{}",  # OpenInference names its TOOL span after the tool
    "strands": "execute_tool {}",
    "langgraph": "{}",
    "vercel_ai6": "ai.toolCall",
    "vercel_ai7": "execute_tool {}",
}
SERVER = {"vercel_ai7": "billing"}  # from the result's _meta; the others record none
TOOL_CALLS = "mcp_breaker_tool_calls_total"
DEAD_CALLS = "mcp_breaker_dead_calls_total"
HIDDEN = "mcp_breaker_hidden_failures_total"


@pytest.fixture
def service(next_hop: CaptureCollector) -> Iterator[ServiceThread]:
    running = ServiceThread(make_config(f"forward.endpoint={next_hop.endpoint}"))
    yield running
    running.stop()


def annotated(next_hop: CaptureCollector, trace_id: str) -> list[dict[str, Any]]:
    """The forwarded spans of the run that the service annotated, in start order."""
    spans = sorted(
        (s for s in next_hop.spans() if s.trace_id.hex() == trace_id),
        key=lambda s: s.start_time_unix_nano,
    )
    found = []
    for span in spans:
        attributes = {kv.key: kv.value for kv in span.attributes}
        if "mcp.breaker.outcome" in attributes:
            found.append({"name": span.name, **attributes})
    return found


@pytest.mark.parametrize("stack", FRAMEWORKS)
def test_the_framework_run_reads_as_its_model_saw_it(
    stack: str, service: ServiceThread, next_hop: CaptureCollector
) -> None:
    server = SERVER.get(stack, "")
    result = harness.run_framework(stack, service.grpc_endpoint)
    (trace_id,) = result["trace_ids"]
    assert len(result["calls"]) == len(PLAN)  # the framework made every call of the plan

    expected = Counter(
        (tool, o, f or "") for (tool, _), (o, f, _) in zip(PLAN, EXPECTED, strict=True)
    )

    def counted() -> Counter[tuple[str, str, str]]:
        return Counter(
            {
                (tool, o, f): int(
                    service.metric(TOOL_CALLS, server=server, tool=tool, outcome=o, failure_class=f)
                )
                for tool, o, f in expected
            }
        )

    # Each call once, however many layers its spans have: no more, and no other series.
    wait_until(lambda: counted() == expected, timeout_s=30, what=f"the calls {expected}")
    assert service.metric(HIDDEN, server=server, tool=HIDDEN_TOOL) == 2
    dead = sum(
        service.metric(DEAD_CALLS, server=server, tool=tool, rule=rule, mode="enforced")
        for tool in (DEAD_TOOL, HIDDEN_TOOL)
        for rule in ("turn_tool", "turn_call")
    )
    assert dead == sum(repeat for _, _, repeat in EXPECTED)

    names = {OUTER_SPAN[stack].format(tool) for tool, _ in PLAN}

    def outer() -> list[dict[str, Any]]:
        return [a for a in annotated(next_hop, trace_id) if a["name"] in names]

    wait_until(lambda: len(outer()) >= len(PLAN), timeout_s=30, what="the annotated spans")
    spans = outer()
    assert [s["name"] for s in spans] == [OUTER_SPAN[stack].format(t) for t, _ in PLAN]
    assert [s["mcp.breaker.outcome"].string_value for s in spans] == [o for o, _, _ in EXPECTED]
    dead_flags = [s["mcp.breaker.dead_call"].bool_value for s in spans]
    assert dead_flags == [repeat for _, _, repeat in EXPECTED]
