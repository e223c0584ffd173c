"""Pairing, de-duplication, identity and bounds of the Classifier, on a fake clock.

The classifier is pure logic with the time passed in, so every test here drives a
``FakeClock`` by hand and never reads the wall clock. Listings are checked here too: a
harness ``mcp.tools.list`` span becomes a ToolListing whose malformed counts are dropped
and named, never raised on.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from mcp_breaker_client.shared.verdict import FailureClass, Outcome
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span, SpanFlags

from processor.classify.classifier import Classifier
from processor.classify.dialects import MAX_LAYERS
from processor.classify.events import Event, ToolCall
from processor.classify.pairing import SpanFate
from processor.config import ClassifyConfig
from processor.config.classify import DEFAULT_PAIR_WAIT_S
from tests.classify_builders import (
    CLIENT,
    ERROR,
    SERVER,
    as_request,
    calls_in,
    listings_in,
    make_span,
    only_call,
    only_listing,
    span_id,
)

TOOL = "search_docs"


@dataclass
class FakeClock:
    """The time the tests pass to the classifier, moved by hand."""

    now: float = 1_000.0
    classifier: Classifier = field(default_factory=Classifier)

    def classify(self, *spans: Span | ExportTraceServiceRequest) -> list[Event]:
        events: list[Event] = []
        for batch in spans:
            events += self.classifier.classify(as_request(batch), now=self.now)
        return events

    def advance(self, seconds: float) -> list[Event]:
        """Move the clock on and return what the classifier decides by then."""
        self.now += seconds
        return self.classifier.expire(now=self.now)


def clock(**config: Any) -> FakeClock:
    return FakeClock(classifier=Classifier(ClassifyConfig(**config)))


def client_half(
    span: int = 1,
    *,
    request_id: str | None = "4",
    tool: str = TOOL,
    trace: int = 1,
    attributes: Mapping[str, Any] | None = None,
) -> Span:
    """The undecided half of a call: an mcp SDK 2.x client span, status UNSET."""
    base: dict[str, Any] = {"mcp.method.name": "tools/call"}
    if request_id is not None:
        base["jsonrpc.request.id"] = request_id
    return make_span(
        f"MCP send tools/call {tool}",
        {**base, **(attributes or {})},
        kind=CLIENT,
        span=span,
        trace=trace,
    )


def server_half(
    span: int = 2,
    *,
    parent: int | None = 1,
    request_id: str | None = "4",
    tool: str = TOOL,
    trace: int = 1,
    failed: bool = True,
    attributes: Mapping[str, Any] | None = None,
) -> Span:
    """The server half of a call: a semconv server span, failed with tool_error by default."""
    base: dict[str, Any] = {"mcp.method.name": "tools/call", "gen_ai.tool.name": tool}
    if request_id is not None:
        base["jsonrpc.request.id"] = request_id
    if failed:
        base["error.type"] = "tool_error"
    return make_span(
        f"tools/call {tool}",
        {**base, **(attributes or {})},
        kind=SERVER,
        span=span,
        parent=parent,
        trace=trace,
        status=ERROR if failed else 0,
    )


def verdicts(events: list[Event]) -> list[tuple[Outcome, FailureClass | None]]:
    return [(c.outcome, c.failure_class) for c in calls_in(events)]


# --- pairing ------------------------------------------------------------------------------


def test_client_then_server_in_two_requests_are_one_call() -> None:
    """The client half waits; its server half, a request later, completes the call."""
    fake = FakeClock()
    first = fake.classify(client_half())
    fake.now += 0.5
    second = fake.classify(server_half())
    later = fake.advance(3600.0)
    assert first == [] and later == []
    call = only_call(second)
    assert (call.outcome, call.failure_class) == (Outcome.FAILED, FailureClass.TOOL_ERROR)
    assert set(call.span_ids) == {span_id(1), span_id(2)}


def test_server_then_client_in_two_requests_are_one_call() -> None:
    """A server half seen first decides the call; the client half that follows adds none."""
    fake = FakeClock()
    first = fake.classify(server_half())
    fake.now += 0.5
    second = fake.classify(client_half())
    later = fake.advance(3600.0)
    assert (verdicts(first), second, later) == ([(Outcome.FAILED, FailureClass.TOOL_ERROR)], [], [])


def test_a_decided_named_half_is_not_held() -> None:
    """A half that says how the call ended and names its server goes out at once."""
    fake = FakeClock()
    span = server_half(attributes={"mcp.server.name": "docs"})
    assert only_call(fake.classify(span)).server == "docs"
    assert fake.classifier.pending_calls == 0


@pytest.mark.parametrize("wait", [2.0, 0.5, 30.0], ids=lambda w: f"pair_wait_s {w}")
def test_an_undecided_half_is_held_until_pair_wait_s_then_decided_alone(wait: float) -> None:
    """The mcp SDK client half alone is held for pair_wait_s, not less, then is unknown."""
    fake = clock(pair_wait_s=wait)
    assert fake.classify(client_half()) == []
    assert fake.advance(wait * 0.999) == []
    assert fake.classifier.pending_calls == 1
    fake.now = 1_000.0 + wait
    call = only_call(fake.classifier.expire(now=fake.now))
    assert (call.outcome, call.span_ids) == (Outcome.UNKNOWN, (span_id(1),))
    assert fake.classifier.pending_calls == 0


def test_halves_exported_by_two_sdks_batching_every_5_s_pair_by_default() -> None:
    """Agent and server each export through the SDK's batch span processor (5 s by
    default): the server half can come 6 s after the client half, and still completes it."""
    fake = FakeClock()
    assert fake.classify(client_half()) == []
    assert fake.advance(6.0) == []  # nothing decided alone meanwhile
    call = only_call(fake.classify(server_half()))
    assert (call.outcome, call.failure_class) == (Outcome.FAILED, FailureClass.TOOL_ERROR)


def test_a_later_request_decides_a_half_whose_wait_is_over() -> None:
    """classify() also decides the halves whose wait ended, not only expire()."""
    fake = FakeClock()
    assert fake.classify(client_half(1, request_id="1")) == []
    fake.now += DEFAULT_PAIR_WAIT_S + 0.5
    events = fake.classify(make_span("GET /api", span=9))
    assert [c.span_ids for c in calls_in(events)] == [(span_id(1),)]


def test_pairing_by_request_id_when_the_parent_does_not_match() -> None:
    """A server span whose parent is another span pairs by jsonrpc.request.id in the trace."""
    fake = FakeClock()
    fake.classify(client_half(1, request_id="7"))
    call = only_call(fake.classify(server_half(2, parent=99, request_id="7")) + fake.advance(60))
    assert set(call.span_ids) == {span_id(1), span_id(2)}
    assert call.outcome is Outcome.FAILED


@pytest.mark.parametrize(
    "server",
    [
        pytest.param(server_half(2, parent=99, request_id="8"), id="another request id"),
        pytest.param(server_half(2, parent=99, tool="other_tool"), id="another tool"),
        pytest.param(server_half(2, parent=1, trace=2), id="another trace"),
    ],
)
def test_halves_of_different_calls_are_not_paired(server: Span) -> None:
    """Without a matching parent or request id (and tool, and trace), halves stay apart."""
    fake = FakeClock()
    events = fake.classify(client_half(1, request_id="7"), server) + fake.advance(60)
    assert sorted(verdicts(events)) == sorted(
        [(Outcome.UNKNOWN, None), (Outcome.FAILED, FailureClass.TOOL_ERROR)]
    )


def test_two_calls_that_reuse_a_request_id_in_one_trace_are_two_calls() -> None:
    """JSON-RPC ids are per session: two sessions in one turn both send id 1."""
    # A harness that opens a session per call (or reconnects after a failure) sends every
    # tools/call with the same request id; the parent ids tell the calls apart.
    fake = FakeClock()
    events = fake.classify(
        client_half(1, request_id="1"),
        client_half(3, request_id="1"),
        server_half(2, parent=1, request_id="1", failed=True),
        server_half(4, parent=3, request_id="1", failed=False),
    )
    events += fake.advance(60)
    by_span = {c.span_ids: (c.outcome, c.failure_class) for c in calls_in(events)}
    assert by_span == {
        (span_id(1), span_id(2)): (Outcome.FAILED, FailureClass.TOOL_ERROR),
        (span_id(3), span_id(4)): (Outcome.OK, None),
    }


def test_two_server_halves_that_reuse_a_request_id_are_two_calls() -> None:
    """Two decided server halves with one request id, seen first, are both counted."""
    fake = FakeClock()
    events = fake.classify(
        server_half(2, parent=1, request_id="1"), server_half(4, parent=3, request_id="1")
    )
    assert sorted(c.span_ids for c in calls_in(events)) == [(span_id(2),), (span_id(4),)]


def test_a_failed_call_that_reuses_the_request_id_of_an_earlier_call_is_counted() -> None:
    """After one call's server half went out alone, another call with its id is not absorbed."""
    # Call A's server span arrives first and is reported; its client span follows. Then the
    # session is reopened and call B, also request id 1, fails to connect: no server span
    # will ever come, and its client span is all there is to say the tool is down.
    fake = FakeClock()
    events = fake.classify(server_half(2, parent=1, request_id="1", failed=False))
    events += fake.classify(client_half(1, request_id="1"))
    fake.now += 1.0
    events += fake.classify(
        make_span(
            f"MCP send tools/call {TOOL}",
            {
                "mcp.method.name": "tools/call",
                "jsonrpc.request.id": "1",
                "error.type": "ConnectionRefusedError",
            },
            kind=CLIENT,
            span=3,
            status=ERROR,
            message="[Errno 111] Connection refused",
        )
    )
    events += fake.advance(60)
    by_span = {c.span_ids: (c.outcome, c.failure_class) for c in calls_in(events)}
    assert by_span == {
        (span_id(2),): (Outcome.OK, None),
        (span_id(3),): (Outcome.FAILED, FailureClass.TRANSPORT),
    }


def test_a_half_arriving_after_its_partner_was_decided_alone_is_not_counted_twice() -> None:
    """The late server half of a call already reported alone adds no second call."""
    fake = FakeClock()
    fake.classify(client_half())
    alone = fake.advance(DEFAULT_PAIR_WAIT_S + 1)
    late = fake.classify(server_half())
    assert [c.span_ids for c in calls_in(alone)] == [(span_id(1),)]
    assert late == []


def test_a_client_half_minutes_after_its_server_half_decided_the_call_adds_none() -> None:
    """An agent's exporter backlog delivers the client half five minutes late: within
    classify.seen_ttl_s, it is known as the call already decided."""
    fake = FakeClock()
    decided = fake.classify(server_half())
    late = fake.advance(300.0) + fake.classify(client_half())
    assert len(calls_in(decided)) == 1
    assert late == [] and fake.classifier.pending_calls == 0


def classify_as(fake: FakeClock, tenant: str, *spans: Span) -> list[Event]:
    """A request sent under ``tenant``'s credentials (the sender's tenant overrides the
    resource's)."""
    return fake.classifier.classify(as_request(list(spans)), now=fake.now, tenant=tenant)


def by_tenant(events: list[Event]) -> dict[str, list[tuple[Outcome, tuple[bytes, ...]]]]:
    told: dict[str, list[tuple[Outcome, tuple[bytes, ...]]]] = {}
    for call in calls_in(events):
        told.setdefault(call.tenant, []).append((call.outcome, call.span_ids))
    return told


def test_another_tenants_server_half_does_not_complete_a_held_client_half() -> None:
    """A sender under globex's credentials replays acme's trace and span ids as a failed
    server half: acme's call is not failed by it; each tenant's call stands on its own
    spans."""
    fake = FakeClock()
    events = classify_as(fake, "acme", client_half())
    fake.now += 0.5
    events += classify_as(fake, "globex", server_half())
    events += fake.advance(3600.0)
    assert by_tenant(events) == {
        "acme": [(Outcome.UNKNOWN, (span_id(1),))],
        "globex": [(Outcome.FAILED, (span_id(2),))],
    }


def test_another_tenants_client_half_does_not_complete_a_held_server_half() -> None:
    fake = FakeClock()
    events = classify_as(fake, "acme", flagged(server_half(failed=False), REMOTE_PARENT))
    assert events == [] and fake.classifier.pending_calls == 1  # held for its client half
    fake.now += 0.5
    events += classify_as(fake, "globex", client_half())
    assert fake.classifier.pending_calls == 2  # neither took the other
    events += fake.advance(3600.0)
    told = by_tenant(events)
    assert told["acme"] == [(Outcome.OK, (span_id(2),))]
    assert [spans for _, spans in told["globex"]] == [(span_id(1),)]


def test_a_half_under_another_tenant_is_not_absorbed_into_a_decided_call() -> None:
    """acme's call, decided from both halves, absorbs a late copy of its own halves'
    keys; a server half under globex's credentials with those keys is globex's call."""
    fake = FakeClock()
    events = classify_as(fake, "acme", client_half(), server_half())
    fake.now += 1.0
    events += classify_as(fake, "acme", server_half(3))  # the same call's keys: absorbed
    events += classify_as(fake, "globex", server_half(4))
    events += fake.advance(3600.0)
    assert by_tenant(events) == {
        "acme": [(Outcome.FAILED, (span_id(1), span_id(2)))],
        "globex": [(Outcome.FAILED, (span_id(4),))],
    }


# --- de-duplication -----------------------------------------------------------------------

DUPLICATES = [
    pytest.param(
        [make_span("mcp.tool.call", {"mcp.tool.name": "t", "mcp.tool.outcome": "ok"})],
        id="a harness call",
    ),
    pytest.param([server_half()], id="a semconv server span"),
    pytest.param([client_half(), server_half()], id="an mcp SDK client and server pair"),
    pytest.param([make_span("mcp.tools.list", {"mcp.tools.listed": 3})], id="a listing"),
]


@pytest.mark.parametrize("spans", DUPLICATES)
def test_the_same_spans_exported_twice_count_once(spans: list[Span]) -> None:
    """An exporter's retry of the same spans adds no event."""
    fake = FakeClock()
    first = fake.classify(as_request(spans))
    fake.now += 1.0
    second = fake.classify(as_request(spans))
    rest = fake.advance(3600.0)
    assert len(first + second + rest) == 1


def test_the_same_span_twice_in_one_request_counts_once() -> None:
    """A span repeated inside one request is one call."""
    span = server_half()
    assert len(FakeClock().classify(as_request([span, span]))) == 1


# --- bounds -------------------------------------------------------------------------------


def test_more_undecided_halves_than_the_cap_decide_the_oldest_alone() -> None:
    """Past max_pending_calls the oldest halves are decided at once, as unknown."""
    fake = clock(max_pending_calls=3)
    halves = [client_half(n, request_id=None) for n in range(1, 6)]
    events = fake.classify(as_request(halves))
    assert [c.span_ids for c in calls_in(events)] == [(span_id(1),), (span_id(2),)]
    assert verdicts(events) == [(Outcome.UNKNOWN, None)] * 2
    assert fake.classifier.pending_calls == 3


def test_the_cap_counts_calls_not_their_pairing_keys() -> None:
    """Three held halves with request ids fit a cap of three: none is decided early."""
    fake = clock(max_pending_calls=3)
    halves = [client_half(n, request_id=str(n)) for n in range(1, 6)]
    events = fake.classify(as_request(halves))
    assert [c.span_ids for c in calls_in(events)] == [(span_id(1),), (span_id(2),)]
    assert fake.classifier.pending_calls == 3


def test_pending_calls_never_exceed_the_cap() -> None:
    """Fed one undecided half per request, the classifier never holds more than the cap."""
    fake = clock(max_pending_calls=4)
    held = []
    for n in range(1, 30):
        fake.now += 0.01
        fake.classify(client_half(n, request_id=str(n)))
        held.append(fake.classifier.pending_calls)
    assert max(held) <= 4


def test_a_half_decided_by_the_cap_is_not_counted_again_by_its_partner() -> None:
    """When the cap decided a client half alone, its server half adds no second call."""
    fake = clock(max_pending_calls=1)
    early = fake.classify(client_half(1, request_id=None), client_half(3, request_id=None))
    late = fake.classify(server_half(2, parent=1, request_id=None))
    assert [c.span_ids for c in calls_in(early)] == [(span_id(1),)]
    assert late == []


# --- flush --------------------------------------------------------------------------------


def test_flush_decides_everything_held() -> None:
    """At shutdown every held half is decided, whatever time is left on its wait."""
    fake = FakeClock()
    fake.classify(client_half(1, request_id="1"))
    fake.now += 1.0
    fake.classify(client_half(3, request_id="3"))
    flushed = fake.classifier.flush()
    assert sorted(c.span_ids for c in calls_in(flushed)) == [(span_id(1),), (span_id(3),)]
    assert fake.classifier.pending_calls == 0
    assert fake.classifier.flush() == []


def test_flush_decides_a_half_that_has_just_arrived_whatever_the_clock_reads() -> None:
    """flush() adds pair_wait_s to the clock; float rounding must not leave a half held."""
    # 100.1 + 0.3 - 100.1 == 0.29999999999999716 < 0.3: "now + wait - arrived >= wait"
    # does not hold for about 4 clock readings in 10 with pair_wait_s 0.3.
    fake = clock(pair_wait_s=0.3)
    fake.now = 100.1
    fake.classify(client_half())
    assert len(fake.classifier.flush()) == 1
    assert fake.classifier.pending_calls == 0


# --- identity: which server -----------------------------------------------------------------

SESSION = "50ca6436-5f35-402a-9f2d-5a53fd08019d"


def session_listing(server: str = "capture-tools-server") -> Span:
    """A fastmcp server-side tools/list span: it names the server of its session."""
    return make_span(
        "tools/list",
        {
            "mcp.method.name": "tools/list",
            "fastmcp.server.name": server,
            "fastmcp.component.key": "",
            "mcp.session.id": SESSION,
        },
        kind=SERVER,
        span=50,
    )


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(
            make_span(
                "tools/call get_weather",
                {
                    "mcp.method.name": "tools/call",
                    "gen_ai.tool.name": "get_weather",
                    "mcp.session.id": SESSION,
                },
                kind=CLIENT,
            ),
            id="a semconv client span",
        ),
        pytest.param(
            make_span(
                "mcp.tool.call",
                {
                    "mcp.tool.name": "get_weather",
                    "mcp.tool.outcome": "ok",
                    "mcp.session.id": SESSION,
                },
            ),
            id="a harness call",
        ),
    ],
)
def test_the_server_is_resolved_from_a_session_learned_earlier(call: Span) -> None:
    """A call without a server name, in a session named before, goes to that server."""
    fake = FakeClock()
    assert fake.classify(session_listing()) == []  # a server-side listing is not counted
    fake.now += 1.0
    named = only_call(fake.classify(call))  # named, so decided at once: no wait
    assert (named.tool, named.server) == ("get_weather", "capture-tools-server")


def test_a_listing_in_a_known_session_is_named_too() -> None:
    """A harness listing with a session id but no server name is named by the session."""
    fake = FakeClock()
    fake.classify(session_listing("gitea"))
    listing = make_span("mcp.tools.list", {"mcp.session.id": SESSION, "mcp.tools.listed": 1})
    assert only_listing(fake.classify(listing)).server == "gitea"


def weather_client(attributes: Mapping[str, Any] | None = None) -> Span:
    base = {"mcp.method.name": "tools/call", "gen_ai.tool.name": "get_weather"}
    return make_span("tools/call get_weather", {**base, **(attributes or {})}, kind=CLIENT)


def test_a_configured_tool_server_map_names_the_server() -> None:
    """classify.tool_servers is the last resort: it names the server, so no wait is needed."""
    fake = clock(tool_servers={"get_weather": "weather"})
    call = only_call(fake.classify(weather_client()))
    assert (call.server, call.outcome) == ("weather", Outcome.OK)


def test_a_server_name_on_the_span_wins_over_the_map() -> None:
    """The span's own mcp.server.name comes before the configured map."""
    fake = clock(tool_servers={"get_weather": "weather"})
    call = only_call(fake.classify(weather_client({"mcp.server.name": "meteo"})))
    assert call.server == "meteo"


def test_the_map_does_not_name_other_tools() -> None:
    """A tool the map does not list stays unnamed, and is held for its server half."""
    fake = clock(tool_servers={"get_forecast": "weather"})
    assert fake.classify(weather_client()) == []
    assert only_call(fake.advance(60)).server is None


# --- listings -----------------------------------------------------------------------------


def harness_listing(attributes: Mapping[str, Any], **fields: Any) -> Span:
    return make_span("mcp.tools.list", dict(attributes), **fields)


FULL_LISTING = {
    "mcp.tools.configured": 12,
    "mcp.tools.listed": 11,
    "mcp.tools.reached": 0,
    "mcp.tools.cached": True,
    "mcp.tools.unavailable": 1,
    "mcp.tools.registered": 11,
    "mcp.tools.offered": 86,
    "mcp.namespaces.connected": ["gitea", "github"],
    "mcp.namespaces.attached": ["github"],
    "mcp.turn.id": "1539078028959944794",
    "mcp.turn.round": 9,
    "mcp.server.name": "mcp-beaver",
}


def test_a_harness_listing_carries_every_count() -> None:
    """mcp.tools.* counts and mcp.namespaces.* lists land on the ToolListing as given."""
    listing = only_listing(FakeClock().classify(harness_listing(FULL_LISTING)))
    assert {
        "configured": listing.configured,
        "listed": listing.listed,
        "reached": listing.reached,
        "cached": listing.cached,
        "unavailable": listing.unavailable,
        "registered": listing.registered,
        "offered": listing.offered,
        "namespaces_connected": listing.namespaces_connected,
        "namespaces_attached": listing.namespaces_attached,
        "turn": listing.turn,
        "round": listing.round,
        "server": listing.server,
        "problems": listing.problems,
    } == {
        "configured": 12,
        "listed": 11,
        "reached": 0,
        "cached": True,
        "unavailable": 1,
        "registered": 11,
        "offered": 86,
        "namespaces_connected": ("gitea", "github"),
        "namespaces_attached": ("github",),
        "turn": "1539078028959944794",
        "round": 9,
        "server": "mcp-beaver",
        "problems": (),
    }


def test_a_listing_of_an_old_instrument_leaves_the_newer_counts_unset() -> None:
    """configured, listed, reached and cached only: the newer counts are None, not 0."""
    listing = only_listing(
        FakeClock().classify(
            harness_listing(
                {
                    "mcp.tools.configured": 12,
                    "mcp.tools.listed": 0,
                    "mcp.tools.reached": 0,
                    "mcp.tools.cached": True,
                }
            )
        )
    )
    assert (listing.unavailable, listing.registered, listing.offered) == (None, None, None)
    assert (listing.listed, listing.problems) == (0, ())


BAD_COUNTS = [
    pytest.param({"mcp.tools.listed": -1}, "listed", id="a negative count"),
    pytest.param({"mcp.tools.listed": "lots"}, "listed", id="a count written as a string"),
    pytest.param({"mcp.tools.reached": True}, "reached", id="a count written as a bool"),
    pytest.param({"mcp.tools.offered": 86.0}, "offered", id="a count written as a float"),
    pytest.param({"mcp.tools.configured": [12]}, "configured", id="a count written as a list"),
    pytest.param({"mcp.tools.cached": 1}, "cached", id="cached written as an int"),
    pytest.param({"mcp.tools.cached": "true"}, "cached", id="cached written as a string"),
    pytest.param(
        {"mcp.namespaces.connected": "gitea,github"},
        "namespaces_connected",
        id="namespaces written as one string",
    ),
    pytest.param(
        {"mcp.namespaces.attached": ["github", 7]},
        "namespaces_attached",
        id="namespaces holding a number",
    ),
    pytest.param(
        {"mcp.namespaces.attached": {"github": True}},
        "namespaces_attached",
        id="namespaces written as a map",
    ),
]


@pytest.mark.parametrize(("attributes", "field_name"), BAD_COUNTS)
def test_a_bad_count_is_dropped_and_named_never_raised(
    attributes: dict[str, Any], field_name: str
) -> None:
    """A malformed listing attribute leaves its field unset and names the problem."""
    good = {"mcp.tools.configured": 12}
    listing = only_listing(FakeClock().classify(harness_listing({**good, **attributes})))
    assert getattr(listing, field_name) is None
    assert listing.problems, "the malformed attribute must be named"


def test_listed_above_configured_is_flagged() -> None:
    """listed above configured is flagged as a problem (docs/conventions.md: flagged)."""
    listing = only_listing(
        FakeClock().classify(harness_listing({"mcp.tools.configured": 2, "mcp.tools.listed": 5}))
    )
    assert listing.problems
    assert "listed" in listing.problems[0]


def test_one_bad_count_leaves_the_good_ones() -> None:
    """A bad count costs its own field only."""
    listing = only_listing(
        FakeClock().classify(
            harness_listing({**FULL_LISTING, "mcp.tools.reached": -3, "mcp.tools.cached": "y"})
        )
    )
    assert (listing.reached, listing.cached) == (None, None)
    assert (listing.configured, listing.listed, listing.offered) == (12, 11, 86)
    assert len(listing.problems) == 2


def test_a_listing_is_never_a_call() -> None:
    """Listings and calls are told apart: a listing span gives no ToolCall."""
    events = FakeClock().classify(harness_listing(FULL_LISTING))
    assert (calls_in(events), len(listings_in(events))) == ([], 1)


# --- a harness span with the mcp SDK's own spans nested under it ----------------------------


def harness_call(span: int = 10) -> Span:
    """The harness's own ``mcp.tool.call`` span (e.g. the client library's adapter)."""
    return make_span(
        "mcp.tool.call",
        {
            "mcp.tool.name": TOOL,
            "mcp.server.name": "docs",
            "mcp.tool.outcome": "failed",
            "mcp.tool.error": "upstream MCP session is closed",
            "mcp.turn.id": "turn-1",
        },
        kind=CLIENT,
        span=span,
    )


def nested_client_half(span: int = 1, parent: int = 10) -> Span:
    """The mcp SDK's client span, made inside the harness span's context."""
    attributes = {"mcp.method.name": "tools/call", "jsonrpc.request.id": "4"}
    return make_span(
        f"MCP send tools/call {TOOL}", attributes, kind=CLIENT, span=span, parent=parent
    )


@pytest.mark.parametrize(
    "order",
    [
        ("harness", "sdk", "server"),
        ("sdk", "harness", "server"),
        ("sdk", "server", "harness"),
        # The limit: a server half decided before its SDK client half links it to the
        # harness span is a call of its own (the harness's span told the call already).
        ("harness", "server", "sdk"),
    ],
)
def test_sdk_spans_nested_under_a_harness_span_are_the_same_call(order: tuple[str, ...]) -> None:
    """From exporters that do not say where a span's parent is (span flags unset): each
    decided half goes out at once. The SDK's own exporters say it: see "order-free
    pairing" below, where every order is the same call."""
    spans = {"harness": harness_call(), "sdk": nested_client_half(), "server": server_half()}
    fake = FakeClock()
    events: list[Event] = []
    for name in order:
        events += fake.classify(spans[name])
        fake.now += 0.1
    events += fake.advance(3600.0)
    calls = calls_in(events)
    if order == ("harness", "server", "sdk"):
        assert len(calls) == 2  # documented in docs/conventions.md
        return
    (call,) = calls
    if order[-1] == "harness":
        # The SDK's half and its server half paired and told the call; the harness span,
        # its parent, arriving last is the same call, absorbed.
        assert call.dialect.value == "mcp_sdk" and span_id(10) not in call.span_ids
        return
    # Told by the harness's span; every layer of the call carries its decision.
    assert call.dialect.value == "harness" and call.span_ids[0] == span_id(10)
    assert set(call.span_ids) <= {span_id(10), span_id(1)}
    assert (call.outcome, call.failure_class) == (Outcome.FAILED, FailureClass.TRANSPORT)


def framework_span(span: int = 3, *, tool: str = TOOL, result: str | None = None) -> Span:
    """An agent framework's execute_tool span (GenAI conventions), with the result body."""
    attributes: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool}
    if result is not None:
        attributes["gen_ai.tool.call.result"] = result
    return make_span(f"execute_tool {tool}", attributes, span=span)


HIDDEN_BODY = '{"content": [{"type": "text", "text": "{\\"ok\\": false}"}], "isError": false}'


@pytest.mark.parametrize(
    "order", [(0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)], ids=str
)
def test_a_framework_span_over_both_halves_in_one_request_is_one_call(
    order: tuple[int, int, int],
) -> None:
    """framework > SDK client > server, in any order within one request: one call of the
    three spans, decided at once, and the framework's result body says it failed hidden."""
    spans = [
        framework_span(result=HIDDEN_BODY),
        client_half(1, attributes={}),
        server_half(2, failed=False),
    ]
    spans[1].parent_span_id = spans[0].span_id
    fake = FakeClock()
    call = only_call(fake.classify([spans[i] for i in order]))  # one request
    assert set(call.span_ids) == {span_id(1), span_id(2), span_id(3)}
    assert (call.outcome, call.failure_class) == (Outcome.FAILED, FailureClass.HIDDEN)
    assert fake.classifier.pending_calls == 0


def test_a_server_half_decided_before_its_framework_call_arrives_counts_it_once() -> None:
    """The server half came alone and named its server (so it went out at once); the
    framework's span with the SDK client span under it, later, is the same call."""
    fake = FakeClock()
    first = fake.classify(server_half(2, attributes={"mcp.server.name": "docs"}))
    client = client_half(1)
    framework = framework_span()
    client.parent_span_id = framework.span_id
    fake.now += 0.5
    second = fake.classify([framework, client])  # one request, as one process exports them
    assert len(first) == 1 and second == [] and fake.advance(3600.0) == []


def test_a_cycle_of_parent_ids_and_a_chain_past_max_layers_lose_no_span() -> None:
    """A sender's parent ids may form a cycle, or nest one tool deeper than MAX_LAYERS:
    every span is still read, as one call's span or as a layer of a call already told."""

    def accounted(fake: FakeClock, spans: list[Span]) -> list[ToolCall]:
        calls = calls_in(fake.classify(spans))
        told = {s for c in calls for s in c.span_ids}
        elsewhere = {
            s for s, (_, fate) in fake.classifier.undecided.items() if fate is SpanFate.ELSEWHERE
        }
        assert told | elsewhere == {span.span_id for span in spans}
        assert not told & elsewhere
        return calls

    first, second = framework_span(1), framework_span(2)
    first.parent_span_id, second.parent_span_id = second.span_id, first.span_id
    assert len(accounted(FakeClock(), [first, second])) == 1

    chain = [framework_span(n) for n in range(1, MAX_LAYERS + 4)]
    for inner, outer in zip(chain[1:], chain, strict=False):
        inner.parent_span_id = outer.span_id
    (call,) = accounted(FakeClock(), chain)
    assert len(call.span_ids) == MAX_LAYERS + 1  # the outermost and the layers it follows


# --- order-free pairing: every arrival order, one call, read the same -----------------------
#
# The OpenTelemetry SDKs' OTLP exporters say in each span's flags whether its parent is in
# the same process (a harness's span over the SDK's client span) or came over the wire (a
# server span, its parent the caller's span). These tests set the flags as they do.

LOCAL_PARENT = SpanFlags.SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK
REMOTE_PARENT = LOCAL_PARENT | SpanFlags.SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK
HARNESS_ARGUMENTS = '{"query": "pricing"}'


def flagged(span: Span, flags: int) -> Span:
    span.flags = flags
    return span


def billing_harness_call(span: int = 10, *, outcome: str = "failed") -> Span:
    """The client library's ``mcp.tool.call`` span: it names the server, the turn and the
    arguments, and says how the call ended for the model."""
    attributes = {
        "mcp.tool.name": TOOL,
        "mcp.server.name": "billing",
        "mcp.tool.outcome": outcome,
        "mcp.tool.arguments": HARNESS_ARGUMENTS,
        "mcp.turn.id": "turn-1",
    }
    if outcome == "failed":
        attributes["mcp.tool.error"] = "billing backend unreachable"
        attributes["mcp.tool.failure_class"] = "tool_error"
    return make_span("mcp.tool.call", attributes, kind=CLIENT, span=span)


def call_spans(*, sdk: bool, outcome: str = "failed") -> dict[str, Span]:
    """One call: the harness's span, the SDK's client span under it (when the harness
    records it) and the mcp SDK server's span, which names no server; its parent is the
    span that sent the request."""
    spans = {"harness": billing_harness_call(outcome=outcome)}
    if sdk:
        spans["sdk"] = flagged(nested_client_half(1, parent=10), LOCAL_PARENT)
    parent = 1 if sdk else 10
    spans["server"] = flagged(
        server_half(2, parent=parent, failed=outcome == "failed"), REMOTE_PARENT
    )
    return spans


def told(events: list[Event]) -> list[tuple[str | None, str, Outcome, FailureClass | None]]:
    return [(c.server, c.turn, c.outcome, c.failure_class) for c in calls_in(events)]


HARNESS_VIEW = [("billing", "turn-1", Outcome.FAILED, FailureClass.TOOL_ERROR)]


def arrivals(names: tuple[str, ...]) -> list[tuple[tuple[str, ...], ...]]:
    """Every order of ``names``, and every way of cutting each order into requests."""
    found = []
    for order in itertools.permutations(names):
        for cuts in itertools.product((False, True), repeat=len(order) - 1):
            requests, current = [], [order[0]]
            for name, cut in zip(order[1:], cuts, strict=True):
                if cut:
                    requests.append(tuple(current))
                    current = []
                current.append(name)
            requests.append(tuple(current))
            found.append(tuple(requests))
    return found


@pytest.mark.parametrize("sdk", [False, True], ids=["harness and server", "with SDK span"])
def test_every_arrival_order_and_split_is_one_call_with_the_harness_view(sdk: bool) -> None:
    """Server first (a prompt server exporter) or client first, in one request or many:
    one call, named and turned as the harness names it, its verdict the harness's."""
    names = ("harness", "sdk", "server") if sdk else ("harness", "server")
    for requests in arrivals(names):
        spans = call_spans(sdk=sdk)
        fake = FakeClock()
        events: list[Event] = []
        for request in requests:
            events += fake.classify(as_request([spans[name] for name in request]))
            fake.now += 0.2
        events += fake.advance(3600.0)
        assert told(events) == HARNESS_VIEW, requests
        (call,) = calls_in(events)
        assert call.fingerprint is not None, requests  # from the harness's arguments
        assert fake.classifier.pending_calls == 0
        assert fake.classifier.stats.unpaired == 0, requests


def test_a_server_half_whose_caller_records_spans_waits_for_its_client_half() -> None:
    """The server's half came first (its exporter sends each span as it ends, before the
    reply): its request carried the caller's trace context, so it is held; the harness's
    span, from a batch seconds later, completes the call instead of adding one."""
    spans = call_spans(sdk=False)
    fake = FakeClock()
    assert fake.classify(spans["server"]) == []
    assert fake.classifier.pending_calls == 1
    fake.now += 5.0  # the harness's batch span processor's delay
    call = only_call(fake.classify(spans["harness"]))
    assert (call.server, call.turn) == ("billing", "turn-1")
    assert set(call.span_ids) == {span_id(10), span_id(2)}


def test_a_server_half_with_no_remote_caller_goes_out_at_once() -> None:
    """No caller's context came with its request (a parent in its own process, or an
    exporter that does not say): nothing else will tell its call, which is decided now."""
    fake = FakeClock()
    local = flagged(server_half(2, parent=7), LOCAL_PARENT)
    assert verdicts(fake.classify(local)) == [(Outcome.FAILED, FailureClass.TOOL_ERROR)]
    assert fake.classifier.pending_calls == 0


def test_a_held_server_half_whose_client_never_comes_is_decided_alone_with_its_verdict() -> None:
    """A caller that propagates context but exports its spans elsewhere: after pair_wait_s
    the server's half tells the call, as it would have at once."""
    fake = FakeClock()
    server = flagged(server_half(2, parent=10), REMOTE_PARENT)
    assert fake.classify(server) == []
    assert fake.advance(DEFAULT_PAIR_WAIT_S * 0.99) == []
    late = fake.advance(DEFAULT_PAIR_WAIT_S * 0.02)
    assert verdicts(late) == [(Outcome.FAILED, FailureClass.TOOL_ERROR)]
    assert fake.classifier.stats.unpaired == 1


def test_a_half_after_its_call_was_decided_alone_is_absorbed_not_counted() -> None:
    """The harness's span comes after the pairing window, when the server's half was
    decided alone (no server named): it adds no second call. The decision already
    published stands (the breaker and the metrics took it); the late span goes on marked
    as told by its call elsewhere."""
    spans = call_spans(sdk=False)
    fake = FakeClock()
    fake.classify(spans["server"])
    alone = fake.advance(DEFAULT_PAIR_WAIT_S + 1)
    assert told(alone) == [(None, alone[0].turn, Outcome.FAILED, FailureClass.TOOL_ERROR)]
    fake.now += 60.0
    assert fake.classify(spans["harness"]) == []
    assert fake.classifier.undecided[span_id(10)][1] is SpanFate.ELSEWHERE
    assert fake.advance(3600.0) == []


def test_a_late_server_half_after_the_harness_decided_refines_nothing_and_adds_nothing() -> None:
    """The harness's span went out at once (it names its server and says how the call
    ended); the server's half, from a batch later, says otherwise (ok). The harness's view
    is the call's verdict in every order, so the late half has nothing to change."""
    harness = billing_harness_call(outcome="failed")
    server = flagged(server_half(2, parent=10, failed=False), REMOTE_PARENT)
    for first, second in ((harness, server), (server, harness)):
        fake = FakeClock()
        events = fake.classify(first)
        fake.now += 3.0
        events += fake.classify(second) + fake.advance(3600.0)
        assert told(events) == HARNESS_VIEW


@pytest.mark.parametrize(
    ("client", "server", "expected"),
    [
        pytest.param("ok", True, (Outcome.OK, None), id="the harness says ok, the server failed"),
        pytest.param(
            "failed", False, (Outcome.FAILED, FailureClass.TOOL_ERROR), id="and the reverse"
        ),
    ],
)
def test_the_call_verdict_is_the_harness_view_whichever_half_arrives_first(
    client: str, server: bool, expected: tuple[Outcome, FailureClass | None]
) -> None:
    harness = billing_harness_call(outcome=client)
    server_span = flagged(server_half(2, parent=10, failed=server), REMOTE_PARENT)
    seen = set()
    for order in ((harness, server_span), (server_span, harness)):
        fake = FakeClock()
        events = fake.classify(order[0]) + fake.classify(order[1]) + fake.advance(3600.0)
        seen.add(tuple(verdicts(events)))
    assert seen == {(expected,)}


def test_an_undecided_sdk_client_half_takes_the_server_half_verdict() -> None:
    """The SDK leaves its client span UNSET: the server's half says how the call ended,
    whichever comes first."""
    for order in (("sdk", "server"), ("server", "sdk")):
        client = client_half(1)
        server = flagged(server_half(2, parent=1), REMOTE_PARENT)
        spans = {"sdk": client, "server": server}
        fake = FakeClock()
        events = fake.classify(spans[order[0]]) + fake.classify(spans[order[1]])
        assert verdicts(events + fake.advance(3600.0)) == [
            (Outcome.FAILED, FailureClass.TOOL_ERROR)
        ]


def test_a_paired_call_no_span_names_waits_for_the_layer_over_its_client_half() -> None:
    """The SDK's client span and the server's span paired before the harness's span over
    them came (a prompt exporter sent the SDK span as it ended, the harness's a moment
    later): the call names no server yet, so it waits for that layer, which names it."""
    spans = call_spans(sdk=True)
    fake = FakeClock()
    assert fake.classify(spans["server"]) + fake.classify(spans["sdk"]) == []
    assert fake.classifier.pending_calls == 1
    assert told(fake.classify(spans["harness"])) == HARNESS_VIEW
    assert fake.classifier.stats.unpaired == 0


def test_a_paired_call_with_nothing_over_it_is_decided_after_the_wait_as_paired() -> None:
    """No layer comes (the SDK span's parent is the agent's turn span): the pair is
    decided after pair_wait_s, as one call, and not counted as unpaired."""
    fake = FakeClock()
    sdk = flagged(client_half(1, attributes={}), LOCAL_PARENT)
    sdk.parent_span_id = span_id(99)
    server = flagged(server_half(2, parent=1), REMOTE_PARENT)
    assert fake.classify(sdk, server) == []
    call = only_call(fake.advance(DEFAULT_PAIR_WAIT_S))
    assert set(call.span_ids) == {span_id(1), span_id(2)}
    assert (call.outcome, fake.classifier.stats.unpaired) == (Outcome.FAILED, 0)


def framework_call(*, server_name: str | None = None) -> dict[str, Span]:
    """framework > SDK client > server: the framework's span reads the result body (a
    hidden failure the server's half calls ok); the server names itself or not."""
    framework = framework_span(3, result=HIDDEN_BODY)
    sdk = flagged(client_half(1, attributes={}), LOCAL_PARENT)
    sdk.parent_span_id = framework.span_id
    named = {"fastmcp.server.name": server_name} if server_name else {}
    server = flagged(server_half(2, parent=1, failed=False, attributes=named), REMOTE_PARENT)
    return {"framework": framework, "sdk": sdk, "server": server}


def test_a_framework_layer_over_a_call_is_the_same_call_read_the_same_in_any_order() -> None:
    """Each span in its own request, in every order: one call, with the framework's
    verdict; the pair of SDK and server spans that names no server waits for it."""
    seen = set()
    for order in itertools.permutations(("framework", "sdk", "server")):
        spans = framework_call()
        fake = FakeClock()
        events: list[Event] = []
        for name in order:
            events += fake.classify(spans[name])
            fake.now += 0.2
        events += fake.advance(3600.0)
        (call,) = calls_in(events)
        seen.add((call.server, call.outcome, call.failure_class))
    assert seen == {(None, Outcome.FAILED, FailureClass.HIDDEN)}


def test_the_limit_a_named_pair_decided_before_the_framework_layer_keeps_its_verdict() -> None:
    """The limit (docs/conventions.md): a server that names itself, paired with the SDK's
    client span before the framework's span over them came, tells the call then (it has
    its name; waiting for every layer would hold every SDK call for pair_wait_s). The
    framework's span, later, is absorbed: counted once, its hidden failure not applied."""
    spans = framework_call(server_name="docs")
    fake = FakeClock()
    events = fake.classify(spans["sdk"]) + fake.classify(spans["server"])
    assert told(events) == [("docs", events[0].turn, Outcome.OK, None)]
    assert fake.classify(spans["framework"]) + fake.advance(3600.0) == []
    # Exported together, as one process's batch does, the framework's span is read.
    fake = FakeClock()
    spans = framework_call(server_name="docs")
    events = fake.classify(spans["server"])
    events += fake.classify(as_request([spans["sdk"], spans["framework"]]))
    assert verdicts(events) == [(Outcome.FAILED, FailureClass.HIDDEN)]
