"""Classification of spans made live by the real MCP SDKs, through the running service.

Each stack's client and tool server run in their own processes and venvs and export over
real OTLP/gRPC to the service; the service classifies what arrives, and the normalized
events are compared with what the client itself observed for each call.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator

import pytest
from mcp_breaker_client.shared.verdict import FailureClass, Outcome

from processor.classify.events import Dialect, Event, ToolCall, ToolListing
from tests.live import harness
from tests.live.capture_common import CALLS
from tests.support import ServiceThread, make_config, wait_until

pytestmark = [pytest.mark.live, pytest.mark.timeout(900), pytest.mark.usefixtures("live_venvs")]

OK = (Outcome.OK, None)
TOOL_ERROR = (Outcome.FAILED, FailureClass.TOOL_ERROR)
TRANSPORT = (Outcome.FAILED, FailureClass.TRANSPORT)
UNKNOWN_TOOL = (Outcome.FAILED, FailureClass.UNKNOWN_TOOL)
HIDDEN = (Outcome.FAILED, FailureClass.HIDDEN)

# What each stack's spans can tell (docs/conventions.md, "What each dialect can and cannot
# tell"): without a result body the hidden failure reads as ok; the mcp SDK 2.x server
# span does not say "unknown tool".
EXPECTED = {
    "mcp2": {
        "ok_tool": OK,
        "raising_tool": TOOL_ERROR,
        "refusing_tool": OK,
        "protocol_error_tool": TRANSPORT,
        "no_such_tool": TOOL_ERROR,
    },
    "fastmcp3": {
        "ok_tool": OK,
        "raising_tool": TOOL_ERROR,
        "refusing_tool": OK,
        "protocol_error_tool": TRANSPORT,
        "no_such_tool": UNKNOWN_TOOL,
    },
    "traceloop": {
        "ok_tool": OK,
        "raising_tool": TOOL_ERROR,
        "refusing_tool": HIDDEN,
        "protocol_error_tool": TRANSPORT,
        "no_such_tool": UNKNOWN_TOOL,
    },
    "logfire": {
        "ok_tool": OK,
        "raising_tool": TOOL_ERROR,
        "refusing_tool": HIDDEN,
        "protocol_error_tool": TRANSPORT,
        "no_such_tool": UNKNOWN_TOOL,
    },
}
DIALECT = {
    "mcp2": Dialect.MCP_SDK,
    "fastmcp3": Dialect.FASTMCP,
    "traceloop": Dialect.TRACELOOP,
    "logfire": Dialect.LOGFIRE,
}
HAS_ARGUMENTS = {"traceloop", "logfire"}


class Recorder:
    def __init__(self) -> None:
        self.events: list[Event] = []
        self._lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        with self._lock:
            self.events.append(event)

    def calls(self, trace_id: str) -> list[ToolCall]:
        with self._lock:
            return [
                e for e in self.events if isinstance(e, ToolCall) and e.trace_id.hex() == trace_id
            ]


@pytest.fixture
def service() -> Iterator[tuple[ServiceThread, Recorder]]:
    recorder = Recorder()
    service = ServiceThread(make_config(), event_sinks=[recorder])
    yield service, recorder
    service.stop()


@pytest.mark.parametrize("stack", harness.STACKS)
def test_live_spans_classify_to_what_the_client_saw(
    stack: str, service: tuple[ServiceThread, Recorder]
) -> None:
    running, recorder = service
    result = harness.run_capture(stack, running.grpc_endpoint, turn_id=f"turn-{stack}")
    trace_id = result["trace_id"]
    wait_until(
        lambda: len(recorder.calls(trace_id)) >= len(CALLS),
        timeout_s=30,
        what=f"{len(CALLS)} classified calls",
    )
    calls = recorder.calls(trace_id)
    assert Counter(c.tool for c in calls) == Counter(name for name, _ in CALLS)
    for call in calls:
        assert (call.outcome, call.failure_class) == EXPECTED[stack][call.tool], call
        assert call.dialect is DIALECT[stack]
        assert call.turn == trace_id  # the turn id sits on the agent's span, not the call's
    observed = {c["call"]: c for c in result["calls"]}
    for call in calls:  # the client's own view agrees wherever it is explicit
        seen = observed[call.tool]
        if seen.get("raised") or seen.get("isError"):
            assert call.outcome is Outcome.FAILED
    raising = [c for c in calls if c.tool == "raising_tool"]
    if stack in HAS_ARGUMENTS:
        assert raising[0].fingerprint and raising[0].fingerprint == raising[1].fingerprint
        others = {c.fingerprint for c in calls if c.tool != "raising_tool"}
        assert raising[0].fingerprint not in others
    else:
        assert all(c.fingerprint is None for c in calls)
    for call in calls:
        assert "secret/file.txt" not in call.verdict.error_excerpt
    if stack == "fastmcp3":
        assert {c.server for c in calls} == {"live-tools-server"}


@pytest.mark.parametrize("stack", harness.STACKS)
def test_live_listing_is_one_event(stack: str, service: tuple[ServiceThread, Recorder]) -> None:
    running, recorder = service
    result = harness.run_capture(stack, running.grpc_endpoint)
    wait_until(lambda: len(recorder.calls(result["trace_id"])) >= len(CALLS), timeout_s=30)
    listings = [e for e in recorder.events if isinstance(e, ToolListing)]
    assert len(listings) == 1, listings


def test_a_client_that_records_results_reads_the_hidden_failure(
    service: tuple[ServiceThread, Recorder],
) -> None:
    """The real mcp SDK 2.x and its server, with a harness that records each call's
    result envelope on its own semconv client span (the opt-in gen_ai.tool.call.result),
    and no server-side spans: the typed failure under isError false reads hidden."""
    running, recorder = service
    result = harness.run_capture(
        "mcp2", running.grpc_endpoint, turn_id="turn-results", client="mcp2_results"
    )
    trace_id = result["trace_id"]
    wait_until(
        lambda: len(recorder.calls(trace_id)) >= len(CALLS),
        timeout_s=30,
        what=f"{len(CALLS)} classified calls",
    )
    calls = recorder.calls(trace_id)
    verdicts = {c.tool: (c.outcome, c.failure_class) for c in calls}
    assert verdicts["refusing_tool"] == HIDDEN
    assert verdicts["ok_tool"] == OK
    assert verdicts["raising_tool"] == TOOL_ERROR
    assert {c.dialect for c in calls} == {Dialect.SEMCONV}
    refusal = next(c for c in calls if c.tool == "refusing_tool")
    assert refusal.verdict.error_excerpt == (
        "PolicyRefusalFailure (policy_denied): refusing to modify prod-db"
    )
    observed = {c["call"]: c for c in result["calls"]}
    assert observed["refusing_tool"]["isError"] is False  # what the client itself saw
