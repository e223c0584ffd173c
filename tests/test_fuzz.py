"""Fuzz: hostile but well-typed OTLP through everything an outsider's request reaches.

    bytes / OTLP-JSON ─▶ stage (decode) ─▶ pipeline (classify ─▶ breaker) ─▶ advisories hub
        ─▶ to_wire of every advisory, GetState, Subscribe, Check; the metrics scrape

wired as ``processor/server.py`` wires them, on a fake arrival clock. What is drawn is
described in tests/fuzz_strategies.py. The invariants:

- no exception escapes but InvalidRequest (undecodable input), and none is swallowed on
  the way either: the stage catches an analysis hook's exception so that the spans still
  go on, which would hide a crash; the fuzz counts it as one;
- every advisory, in force or published as a change, converts to the wire, and GetState,
  Subscribe and Check answer for every tenant afterwards;
- spans forwarded plus spans rejected equal the spans received, and the forwarded bytes
  (and the forwarder's splits of them) hold exactly the spans said.

CI runs a bounded, derandomized number of examples (no database, no wall clock).
``scripts/fuzz`` runs many more: MCP_BREAKER_FUZZ_EXAMPLES sets how many per test, and
then the seed is random (pytest's ``--hypothesis-seed`` fixes it). Each crash found is kept
below as a plain regression test with its smallest input (not as an ``@example`` of the fuzz
tests: a failing example stops Hypothesis before it generates, and the fuzz must go on
searching while a known crash waits for its fix).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pytest
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import InstrumentationScope
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from prometheus_client import CollectorRegistry, generate_latest

from processor.advisories import convert
from processor.advisories.hub import Audience
from processor.advisories.service import AdvisoryService
from processor.advisories.servicer import MAX_NAME_CHARS, AdvisoriesServicer
from processor.advisories.v1 import advisories_pb2 as pb
from processor.classify.classifier import Classifier
from processor.config import ServiceConfig, load_config
from processor.engines.breaker import Breaker
from processor.engines.roster import RosterHealth
from processor.errors import InvalidRequest
from processor.inflight.pipeline import Pipeline
from processor.inflight.stage import (
    Prepared,
    Stage,
    StagePath,
    count_spans_shallow,
    halve_request,
    may_hold_mcp,
    split_request,
)
from processor.inflight.strip import StripAfter
from processor.receive.codec import gunzip_capped, request_from_json
from processor.request.sender import Sender
from processor.request.sparse import ShallowRequest
from processor.telemetry.advisories import AdvisoryCollector
from processor.telemetry.findings import FindingMetrics
from processor.telemetry.stores import StoreCollector
from tests.fuzz_strategies import (
    ISSUE_14_END_NS,
    START_NS,
    START_S,
    Pools,
    RequestSpec,
    ResourceSpec,
    Scenario,
    ScopeSpec,
    SpanSpec,
    corrupt_service_name,
    json_leaves,
    mutated,
    pools,
    raw_payloads,
    request_specs,
    scenarios,
)
from tests.otlp_builders import to_otlp_json

EXAMPLES_VARIABLE = "MCP_BREAKER_FUZZ_EXAMPLES"
LONG_RUN = bool(os.environ.get(EXAMPLES_VARIABLE))


# Finding a failure is quick; shrinking it to the smallest input can take minutes, longer
# than pyproject's 180 s per test. Cut short, Hypothesis reports a confusing FlakyFailure.
FUZZ_TIMEOUT = pytest.mark.timeout(0 if LONG_RUN else 900)


def fuzz_settings(ci_examples: int) -> settings:
    """``ci_examples`` derandomized in CI; MCP_BREAKER_FUZZ_EXAMPLES random ones otherwise."""
    return settings(
        max_examples=int(os.environ[EXAMPLES_VARIABLE]) if LONG_RUN else ci_examples,
        deadline=None,
        derandomize=not LONG_RUN,
        database=None,
        print_blob=True,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.large_base_example,
            HealthCheck.filter_too_much,
        ],
    )


# A breaker that opens on the first failure, and every bound small: eviction everywhere.
SENSITIVE = (
    "breaker.min_calls=1",
    "breaker.consecutive_failures=1",
    "breaker.max_circuits=4",
    "breaker.max_turns=2",
    "breaker.max_blocks_per_turn=2",
    "breaker.reorder_max_calls=3",
    "classify.max_pending_calls=2",
    "classify.max_seen_spans=4",
    "classify.max_annotated_spans=4",
    "roster.max_turns=2",
    "advisories.max_advisories=3",
    "advisories.replay_changes=4",
)
CONFIGS = {False: load_config(environ={}), True: load_config(environ={}, overrides=SENSITIVE)}


# --- the service, wired as processor/server.py wires it -------------------------------------


class Clock:
    """The arrival clock (wall-clock seconds), moved by the scenario, never read from time."""

    def __init__(self, now_s: float = START_S) -> None:
        self.now_s = now_s

    def __call__(self) -> float:
        return self.now_s


class Aborted(Exception):
    """What ``context.abort`` raises in a real servicer: the RPC ends with this status."""

    def __init__(self, code: Any, details: str) -> None:
        super().__init__(f"{code}: {details}")
        self.code = code


class Enough(Exception):
    """Raised by the fake context once the stream has written all a test reads of it
    (a real client would hang up): Subscribe's own clean-up then runs."""


class Context:
    """The little of grpc.aio.ServicerContext the advisory servicer uses. A stream's writes
    are kept; ``wanted`` says when to stop it: a snapshot's last part, or a count."""

    def __init__(self, token: str, wanted: Callable[[list[Any]], bool] = lambda _: True):
        self._metadata = (("authorization", f"Bearer {token}"),)
        self.written: list[Any] = []
        self._wanted = wanted

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata

    def peer(self) -> str:
        return "ipv4:127.0.0.1:4242"

    async def abort(self, code: Any, details: str) -> None:
        raise Aborted(code, details)

    async def send_initial_metadata(self, metadata: Any) -> None:
        pass

    async def write(self, message: Any) -> None:
        self.written.append(message)
        if self._wanted(self.written):
            raise Enough


@dataclass
class Rig:
    config: ServiceConfig
    clock: Clock
    stage: Stage
    pipeline: Pipeline
    advisories: AdvisoryService
    findings: FindingMetrics
    registry: CollectorRegistry
    tokens: dict[str, str]  # bearer token -> tenant
    hook_errors: list[BaseException] = field(default_factory=list)
    findings_seen: Counter[str] = field(default_factory=Counter)  # by type: what was reached

    def raise_hook_errors(self) -> None:
        """A crash the stage swallowed (it forwards the spans all the same), raised here
        with its own traceback."""
        if self.hook_errors:
            raise self.hook_errors[0]


def make_rig(
    *, sensitive: bool = False, tenants: Iterable[str] = ("",), tenant_must_match: bool = False
) -> Rig:
    config = CONFIGS[sensitive]
    tokens = {f"token-{n}": tenant for n, tenant in enumerate(dict.fromkeys(tenants))}
    clock = Clock()
    breaker = Breaker(config.breaker)
    classifier = Classifier(config.classify)
    registry = CollectorRegistry()
    findings = FindingMetrics(config.telemetry, breaker, classifier.stats, clock, clock)
    registry.register(findings)
    advisories = AdvisoryService(
        dataclasses.replace(config.advisories, tokens=tokens),
        breaker,
        clock=clock,
        epoch="fuzz",
        tool_servers=config.classify.tool_servers,
        on_operator=findings.count_transitions,
    )
    registry.register(AdvisoryCollector(advisories))
    seen: Counter[str] = Counter()
    pipeline = Pipeline(
        classifier,
        breaker,
        (findings, advisories, lambda finding: seen.update((type(finding).__name__,))),
        RosterHealth(config.roster),
        clock=clock,
        tenant_must_match=tenant_must_match,
    )
    registry.register(StoreCollector(pipeline.store_sizes, lambda: {}))
    hook = StripAfter(
        pipeline,
        pipeline.classifier.read_spans,
        config.forward.strip_attributes,
        lambda: pipeline.classifier.read,
    )
    errors: list[BaseException] = []
    stage = Stage((hook,), on_hook_error=lambda: errors.append(_current_exception()))
    return Rig(config, clock, stage, pipeline, advisories, findings, registry, tokens, errors, seen)


def _current_exception() -> BaseException:
    error = sys.exception()  # on_hook_error is called inside the stage's except block
    assert error is not None
    return error


# --- the invariants ----------------------------------------------------------------------------


def span_count(request: ExportTraceServiceRequest) -> int:
    return sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)


def check_forwarded(prepared: Prepared, received: int, payload: bytes | None = None) -> None:
    """Spans forwarded plus rejected are the spans received; the bytes hold what is said."""
    assert prepared.span_count + prepared.rejected_spans == received
    if prepared.path is not StagePath.PARSED:  # forwarded as received
        assert payload is not None and prepared.payload == payload
        assert prepared.rejected_spans == 0
    else:
        check_analysed(prepared, payload)
    # What the forwarder does with the bytes: counts, splits and halves them unparsed.
    assert count_spans_shallow(prepared.payload) == prepared.span_count
    pieces = split_request(prepared.payload, 512)
    assert sum(n for _, n in pieces) == prepared.span_count
    for piece, n in pieces:
        assert count_spans_shallow(piece) == n
    assert sum(n for _, n in halve_request(prepared.payload)) == prepared.span_count


def check_analysed(prepared: Prepared, payload: bytes | None) -> None:
    """What "parsed" promises (docs/delivery.md): every resource, scope and span that holds
    a marker decodes (what made the request a candidate was read, not guessed at; one that
    does not decode makes it unreadable), and a request that decoded whole still does.
    Spans without a marker keep their bytes, and are the next hop's to judge."""
    whole = True  # OTLP/JSON: the codec decoded it whole
    if payload is not None:
        try:
            ExportTraceServiceRequest.FromString(payload)
        except DecodeError:
            whole = False
    if whole:
        assert span_count(ExportTraceServiceRequest.FromString(prepared.payload)) == (
            prepared.span_count
        )
    shallow: Any = ShallowRequest.FromString(prepared.payload)
    for resource in shallow.children:
        if may_hold_mcp(resource.resource):
            Resource.FromString(resource.resource)
        for scope in resource.children:
            if may_hold_mcp(scope.scope):
                InstrumentationScope.FromString(scope.scope)
            for span in scope.spans:
                if may_hold_mcp(span):
                    Span.FromString(span)


def ingest(rig: Rig, spec: RequestSpec) -> None:
    rig.clock.now_s += spec.advance_s
    request = spec.build()
    sender = Sender(peer="ipv4:192.0.2.1:5555", tenant=spec.tenant)
    if spec.route == "json":  # OTLP/HTTP with JSON: decoded by the codec, then the stage
        body = json.dumps(to_otlp_json(request)).encode()
        prepared = rig.stage.from_request(request_from_json(body), sender)
        check_forwarded(prepared, spec.span_count)
    else:  # gRPC and OTLP/HTTP protobuf
        payload = request.SerializeToString()
        prepared = rig.stage.from_protobuf(payload, sender)
        check_forwarded(prepared, spec.span_count, payload)


def every_advisory_to_wire(rig: Rig) -> None:
    hub = rig.advisories.hub
    now = rig.clock()
    for advisory in hub.in_force():
        convert.to_wire(advisory)
        convert.to_wire(advisory, now)
    for tenant in set(rig.tokens.values()):  # the changes a resuming subscriber is sent
        for _, advisory in hub.since(hub.epoch, 0, Audience(tenant=tenant)) or ():
            convert.to_wire(advisory)


def snapshot_done(written: list[Any]) -> bool:
    return written[-1].HasField("snapshot") and not written[-1].snapshot.more


async def subscribe(
    servicer: AdvisoriesServicer, request: Any, token: str, changes: int | None
) -> None:
    """A Subscribe stream read up to its snapshot's last part, or ``changes`` changes (a
    resume), or a heartbeat (a resume with nothing missed)."""
    if changes is None:
        context = Context(token, lambda w: snapshot_done(w) or w[-1].HasField("heartbeat"))
    else:
        context = Context(token, lambda w: len(w) >= changes)
    grpc_context: Any = context
    with contextlib.suppress(Enough):
        await servicer.Subscribe(request, grpc_context)
    assert context.written, "Subscribe wrote nothing"


async def read_as_harnesses(rig: Rig) -> None:
    """GetState, Subscribe (snapshot, and resumed), and Check, for every tenant."""
    servicer = AdvisoriesServicer(rig.advisories)
    hub = rig.advisories.hub
    for token, tenant in rig.tokens.items():
        context: Any = Context(token)
        state = await servicer.GetState(pb.GetStateRequest(), context)
        in_force = hub.snapshot(Audience(tenant=tenant))
        assert len(state.advisories) + state.not_shown == len(in_force)

        await subscribe(servicer, pb.SubscribeRequest(subscriber_name="fuzz"), token, None)
        after = max(0, hub.seq - 3)
        missed = hub.since(hub.epoch, after, Audience(tenant=tenant))
        resume = pb.SubscribeRequest(resume_epoch=hub.epoch, resume_after_seq=after)
        await subscribe(servicer, resume, token, len(missed) if missed else None)

        for advisory in in_force[:4]:
            check = pb.CheckRequest(
                turn=advisory.turn[:MAX_NAME_CHARS],
                server=advisory.server[:MAX_NAME_CHARS],
                tool=advisory.tool[:MAX_NAME_CHARS],
                fingerprint=advisory.fingerprint[:MAX_NAME_CHARS],
                harness=advisory.harness[:MAX_NAME_CHARS],
            )
            await servicer.Check(check, context)
            check.fingerprint = ""
            check.arguments_json = '{"q": 1}'
            await servicer.Check(check, context)


def read_everything(rig: Rig) -> None:
    every_advisory_to_wire(rig)
    asyncio.run(read_as_harnesses(rig))
    rig.findings.prepare_scrape()
    generate_latest(rig.registry)


def run_scenario(scenario: Scenario) -> Rig:
    rig = make_rig(
        sensitive=scenario.sensitive,
        tenants=scenario.pools.tenants,
        tenant_must_match=scenario.tenant_must_match,
    )
    for spec in scenario.requests:
        ingest(rig, spec)
        rig.raise_hook_errors()
    rig.clock.now_s += scenario.final_advance_s
    rig.pipeline.tick()  # what server.py's ticker does: a raise here would end the ticker
    rig.advisories.expire()
    if scenario.flush:
        rig.pipeline.flush()  # at shutdown
    read_everything(rig)
    return rig


def decode_anyhow(rig: Rig, payload: bytes) -> None:
    """Bytes from an outsider through every decoder: only InvalidRequest may come out."""
    try:
        opened = rig.stage.open(payload)
    except InvalidRequest:
        pass
    else:
        prepared = rig.stage.prepare(opened)
        check_forwarded(prepared, opened.span_count, payload)
    try:
        request = request_from_json(payload)
    except InvalidRequest:
        pass
    else:
        received = span_count(request)  # before the stage: it removes invalid spans in place
        check_forwarded(rig.stage.from_request(request), received)
    with contextlib.suppress(InvalidRequest):  # RequestTooLarge is one
        gunzip_capped(payload, 64 * 1024)
    rig.raise_hook_errors()


# --- regressions: crashes the fuzz found, each as the smallest input that shows it -----------

ONE_TRACE = (0x3C00).to_bytes(16, "big")
ONE_SPAN = (0x3C00).to_bytes(8, "big")


def scenario_of(
    *spans: SpanSpec, sensitive: bool = False, final_advance_s: float = 0.0
) -> Scenario:
    """One protobuf request of these spans, from one resource and scope, no tenant;
    ``final_advance_s``: the clock then moves on (past classify.pair_wait_s: held calls
    are decided by the ticker)."""
    request = RequestSpec(
        resources=(ResourceSpec({}, (ScopeSpec("", spans),)),),
        route="protobuf",
        advance_s=0.0,
        tenant=None,
    )
    pools = Pools(
        tools=("t",),
        servers=("s",),
        turns=("u",),
        tenants=("",),
        harnesses=("h",),
        trace_ids=(ONE_TRACE,),
        span_ids=tuple(s.span_id for s in spans),
    )
    return Scenario(
        pools=pools, requests=(request,), sensitive=sensitive, final_advance_s=final_advance_s
    )


def harness_call(n: int, start_ns: int, end_ns: int, **changes: Any) -> SpanSpec:
    """A harness tool call to tool ``t`` that failed (by default: ``outcome`` failed)."""
    span = SpanSpec(
        name="mcp.tool.call",
        attributes={"mcp.tool.name": "t", "mcp.tool.outcome": "failed"},
        trace_id=ONE_TRACE,
        span_id=(0x3C00 + n).to_bytes(8, "big"),
        parent_span_id=b"",
        kind=0,
        start_ns=start_ns,
        end_ns=end_ns,
        status_code=0,
        status_message="",
        exceptions=(),
    )
    return dataclasses.replace(span, **changes)


def failing_calls(*end_ns: int, sensitive: bool = False) -> Scenario:
    """Failed calls to tool ``t`` made at the arrival clock's time, ending at these times."""
    calls = (harness_call(n, START_NS, end) for n, end in enumerate(end_ns))
    return scenario_of(*calls, sensitive=sensitive)


# Issue 14: a failing call whose end time (past int64 nanoseconds, yet a valid uint64) opens
# a circuit: its half-open expiry, from the call's end, overflows int64 expires_unix_nano in
# convert.to_wire (a ValueError raised in the advisory broadcast, swallowed by the stage;
# the advisory stays in force, and every later GetState, Subscribe and Check raises too).
# With the defaults, three failures open the circuit; with SENSITIVE, one.
ISSUE_14 = failing_calls(ISSUE_14_END_NS, sensitive=True)
ISSUE_14_DEFAULTS = failing_calls(START_NS + 1_000_000, START_NS + 2_000_000, ISSUE_14_END_NS)
# Found by this fuzz before the fix (at cb85787), its like with the defaults and a single
# span: a failure (an exception event) near the top of int64 nanoseconds opens a turn block
# that expires turn_idle_s (3600 s) later, past int64: the same ValueError in to_wire
# (convert.py:38), from Broadcaster.send.
TURN_BLOCK_NEAR_INT64_MAX = scenario_of(
    harness_call(
        0,
        9_223_368_426_854_775_429,  # 2**63 ns less 3,610 s
        9_223_368_436_854_775_429,
        attributes={},
        kind=1,
        exceptions=(("upstream MCP session is closed", ""),),
    )
)

# Found by this fuzz: a tool listing whose mcp.namespaces.connected_at holds a JSON integer
# beyond a float's range. float(at) raises OverflowError in listing._connected_at
# (processor/classify/listing.py:95); the whole request goes unanalysed (the stage forwards
# it unread), and its other spans, already marked seen, are never counted, not even on retry.
LISTING_CONNECTED_AT_HUGE_INT = scenario_of(
    harness_call(
        0,
        START_NS,
        START_NS + 1_000_000,
        name="mcp.tools.list",
        attributes={"mcp.namespaces.connected_at": '{"a": 1' + "0" * 309 + "}"},
    )
)


def surrogate_tool(*, sensitive: bool = False) -> Scenario:
    """A failed Traceloop tool call whose tool name, read from the JSON of
    traceloop.entity.input, is a lone surrogate (the JSON escape \\ud800): valid JSON, valid
    protobuf, but no UTF-8 string. A client half: decided by the ticker after the pair wait."""
    span = harness_call(
        0,
        START_NS,
        START_NS + 1_000_000,
        name="x.tool",
        attributes={
            "mcp.session.id": "s",  # an MCP marker, so the stage parses the request
            "traceloop.span.kind": "tool",
            "traceloop.entity.input": '{"tool_name": "\\ud800", "arguments": {}}',
            "traceloop.entity.output": '{"isError": true}',
        },
        status_code=2,
    )
    return scenario_of(span, sensitive=sensitive, final_advance_s=3.0)


# Found by this fuzz: the surrogate name reaches every place a name is encoded. With the
# defaults the turn block's advisory fails convert.to_wire (convert.py:38, UnicodeEncodeError)
# in Broadcaster.send, inside pipeline.tick(): in server.py the ticker task dies, and the
# advisory, kept in force, fails every GetState, Subscribe and Check after it.
SURROGATE_TOOL_TURN_BLOCK = surrogate_tool()
# ... and a circuit that opens on it fails first in circuit.jitter_of (circuit.py:153,
# str.encode() of the key): the breaker's own state is left half-moved.
SURROGATE_TOOL_CIRCUIT = surrogate_tool(sensitive=True)

REGRESSIONS: dict[str, Scenario] = {
    "issue-14-one-failure": ISSUE_14,
    "issue-14-defaults": ISSUE_14_DEFAULTS,
    "turn-block-near-int64-max": TURN_BLOCK_NEAR_INT64_MAX,
    "listing-connected-at-huge-int": LISTING_CONNECTED_AT_HUGE_INT,
    "surrogate-tool-turn-block": SURROGATE_TOOL_TURN_BLOCK,
    "surrogate-tool-circuit": SURROGATE_TOOL_CIRCUIT,
}


@pytest.mark.parametrize("scenario", REGRESSIONS.values(), ids=REGRESSIONS.keys())
def test_regression(scenario: Scenario) -> None:
    run_scenario(scenario)


@pytest.mark.parametrize("scenario", REGRESSIONS.values(), ids=REGRESSIONS.keys())
def test_readers_answer_after(scenario: Scenario) -> None:
    """What issue 14 reported: after such spans, GetState, Subscribe, Check (and the metrics
    scrape) must still answer, whatever the spans' own analysis did."""
    rig = make_rig(sensitive=scenario.sensitive)
    for spec in scenario.requests:
        ingest(rig, spec)  # an analysis that fails is swallowed here, as in the service
    rig.clock.now_s += scenario.final_advance_s
    with contextlib.suppress(Exception):  # test_regression says why, if it raises
        rig.pipeline.tick()
    read_everything(rig)


# Bytes an outsider sends that raised something else than InvalidRequest.
BYTES_REGRESSIONS = {
    # Found by this fuzz: an OTLP/JSON object key that is a lone surrogate escape. protobuf's
    # json_format.ParseDict raises SystemError (from upb's fields_by_name.get) out of
    # codec.request_from_json (codec.py:63), which catches only ParseError: the HTTP
    # receiver answers 500 with a traceback in the log instead of 400.
    "json-surrogate-key": b'{"\\udc00": 1}',
    # Issue 29, found by this fuzz: a request whose markers sit only in a service.name with
    # a corrupt length (185 bytes). The stage read its spans (none an MCP span), never its
    # resource, and labelled it "parsed": a request that does not decode, forwarded as it
    # came, counted as analysed. check_forwarded refused it.
    "mcp-marker-in-a-corrupt-service-name": corrupt_service_name(),
    # Found by this fuzz in CI: a varint where the request's first resource spans belong
    # (b"\x08 "), before a sound resource whose scope is "fastmcp". The request does not
    # decode whole, but every part that holds a marker does: "parsed", with the rest left
    # to the next hop (check_analysed; the old check demanded a whole decode of it).
    "varint-before-a-fastmcp-scope": (
        b"\x08 \n\x11\n\x0f\n\ttenant.id\x12\x02\n\x00\x12\x0b\n\t\n\x07fastmcp"
    ),
}


@pytest.mark.parametrize("payload", BYTES_REGRESSIONS.values(), ids=BYTES_REGRESSIONS.keys())
def test_bytes_regression(payload: bytes) -> None:
    decode_anyhow(make_rig(), payload)


# --- the fuzz ------------------------------------------------------------------------------


@FUZZ_TIMEOUT
@fuzz_settings(ci_examples=200)
@given(scenarios())
def test_hostile_requests(scenario: Scenario) -> None:
    run_scenario(scenario)


@FUZZ_TIMEOUT
@fuzz_settings(ci_examples=2000)
@given(raw_payloads())
@example(b"\xff\xff\xff\xff this is not protobuf mcp")
@example(b"\x0a\x80\x80\x80\x80\x10mcp")  # a length far past the end
def test_raw_bytes(payload: bytes) -> None:
    decode_anyhow(make_rig(), payload)


@FUZZ_TIMEOUT
@fuzz_settings(ci_examples=150)
@given(st.data())
def test_mutated_encodings(data: st.DataObject) -> None:
    p: Pools = data.draw(pools(), label="pools")
    spec: RequestSpec = data.draw(request_specs(p), label="request")
    request = spec.build()
    rig = make_rig(tenants=p.tenants)
    # Protobuf: byte-level edits of a valid encoding.
    decode_anyhow(rig, data.draw(mutated(request.SerializeToString()), label="protobuf"))
    # OTLP/JSON: a valid document with random leaves, then byte-level edits of its text.
    document = json_leaves(to_otlp_json(request), data.draw)
    body = json.dumps(document).encode()
    decode_anyhow(rig, body)
    decode_anyhow(rig, data.draw(mutated(body), label="json"))
    read_everything(rig)


def test_strategies_reach_every_path() -> None:
    """The fuzz is only as good as what it reaches: check that its inputs make advisories,
    listings and both stage paths, and that the JSON route decodes (a guard against a
    strategy that silently stops producing MCP spans)."""
    reached: Counter[str] = Counter()
    wanted = ("advisories", "ToolCall", "ToolListing", "CallDecision", "RosterFinding")

    @settings(max_examples=40, deadline=None, derandomize=True, database=None)
    @given(scenarios())
    def probe(scenario: Scenario) -> None:
        scenario = dataclasses.replace(scenario, sensitive=True)
        try:
            rig = run_scenario(scenario)
        except Exception:
            return  # the crashes are the other tests' business
        reached["advisories"] += rig.advisories.stats.changes
        reached.update(rig.findings_seen)
        for spec in scenario.requests:
            reached[spec.route] += 1
            reached[rig.stage.open(spec.build().SerializeToString()).path.value] += 1

    probe()
    missing = [k for k in (*wanted, "json", "parsed", "passthrough") if not reached[k]]
    assert not missing, reached
