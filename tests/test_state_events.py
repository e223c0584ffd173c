"""The events replicas share: encoded and decoded exactly, and applied alike everywhere.

Replicas converge because they apply the same events in the same order to pure engines.
These tests hold the two halves of that: ``decode(encode(e)) == e`` for any event, and
the same stream of events — calls, listings, operators' forces and releases, ticks —
applied to two fresh replicas' engines and hubs (through the bytes, as from Redis) leaves
them identical: circuits, their deadlines, turn blocks, and every advisory change with
its sequence number.
"""

from __future__ import annotations

import json
from dataclasses import fields, replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp_breaker_client.shared.verdict import (
    FailureClass,
    FailureOrigin,
    NeutralReason,
    Outcome,
    Verdict,
)

from processor.advisories import admin
from processor.advisories.hub import position_seq
from processor.advisories.service import AdvisoryService
from processor.classify.classifier import Classifier
from processor.classify.events import Dialect, ToolCall, ToolListing
from processor.classify.listing import MAX_NAMESPACE_CHARS, MAX_NAMESPACES
from processor.config import AdvisoriesConfig, BreakerConfig, ClassifyConfig
from processor.engines.breaker import Breaker
from processor.engines.circuit import CircuitKey, Scope, State
from processor.engines.roster import RosterHealth
from processor.errors import BadEvent
from processor.inflight.pipeline import Pipeline
from processor.state.events import (
    _CALL_FIELDS,
    _LISTING_FIELDS,
    Force,
    Release,
    SharedEvent,
    Tick,
    decode,
    encode,
)
from processor.state.replica import _arrived
from processor.state.validate import (
    MAX_FORCE_S,
    MAX_PAYLOAD_BYTES,
    MAX_SPAN_IDS,
    MAX_TIME_NS,
    Bounds,
)

T0_NS = 1_796_000_000_000_000_000
NAMES = st.text(min_size=0, max_size=12)
IDS = st.binary(min_size=8, max_size=8)


@st.composite
def calls(draw: st.DrawFn) -> ToolCall:
    # Failures often, on few keys: the stream must open, reopen and close circuits.
    outcome = draw(st.sampled_from([*Outcome, Outcome.FAILED, Outcome.FAILED]))
    failure = draw(st.sampled_from(list(FailureClass))) if outcome is Outcome.FAILED else None
    neutral = draw(st.sampled_from(list(NeutralReason))) if outcome is Outcome.NEUTRAL else None
    origin = draw(st.none() | st.sampled_from(list(FailureOrigin))) if failure else None
    start = T0_NS + draw(st.integers(0, 3_600_000)) * 1_000_000
    return ToolCall(
        turn=draw(st.sampled_from(["t1", "t2", "t3"])),
        round=draw(st.none() | st.integers(0, 20)),
        server=draw(st.sampled_from(["web", "web", None])),
        tool=draw(st.sampled_from(["search", "fetch"])),
        fingerprint=draw(st.none() | st.sampled_from(["fp1", "fp2"])),
        verdict=Verdict(
            outcome=outcome,
            failure_class=failure,
            neutral_reason=neutral,
            origin=origin,
            error_excerpt=draw(NAMES),
        ),
        start_ns=start,
        end_ns=start + draw(st.integers(0, 30_000)) * 1_000_000,
        trace_id=draw(st.binary(min_size=16, max_size=16)),
        span_ids=tuple(draw(st.lists(IDS, min_size=1, max_size=2))),
        dialect=draw(st.sampled_from(list(Dialect))),
        harness=draw(NAMES),
        tenant=draw(st.sampled_from(["", "acme"])),
    )


@st.composite
def listings(draw: st.DrawFn) -> ToolListing:
    counts = st.none() | st.integers(0, 50)
    names = st.none() | st.lists(st.sampled_from(["gitea", "github"]), max_size=2).map(tuple)
    start = T0_NS + draw(st.integers(0, 3_600_000)) * 1_000_000
    return ToolListing(
        turn=draw(st.sampled_from(["t1", "t2"])),
        round=draw(st.none() | st.integers(1, 13)),
        server=draw(st.none() | st.just("host")),
        configured=draw(counts),
        listed=draw(counts),
        reached=draw(counts),
        cached=draw(st.none() | st.booleans()),
        offered=draw(counts),
        namespaces_connected=draw(names),
        namespaces_attached=draw(names),
        namespaces_connected_at_s=draw(st.none() | st.just((("gitea", 1_796_000_060.0),))),
        offered_tools=draw(st.none() | st.just(("search",))),
        problems=draw(st.just(()) | st.just(("configured",))),
        start_ns=start,
        end_ns=start + 1_000_000,
        trace_id=draw(st.binary(min_size=16, max_size=16)),
        span_ids=(draw(IDS),),
        dialect=Dialect.HARNESS,
        harness=draw(NAMES),
        tenant="",
    )


KEYS = st.sampled_from(
    [CircuitKey(Scope.SERVER, "web"), CircuitKey(Scope.TOOL, "web/search", "acme")]
)


@st.composite
def forces(draw: st.DrawFn) -> Force:
    """As the admin API makes them: for at most MAX_FORCE_S from when it was asked."""
    at_s = draw(st.floats(1.796e9, 1.7961e9))
    return Force(
        key=draw(KEYS),
        target=draw(st.sampled_from([State.FORCED_OPEN, State.FORCED_CLOSED])),
        until_s=at_s + draw(st.floats(1.0, MAX_FORCE_S)),
        reason=draw(NAMES),
        at_s=at_s,
    )


releases = st.builds(Release, key=KEYS, reason=NAMES, at_s=st.floats(1.796e9, 1.7961e9))
EVENTS = st.one_of(calls(), calls(), calls(), listings(), forces(), releases, st.just(Tick()))


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(event=EVENTS)
def test_an_event_decodes_to_what_was_encoded(event: SharedEvent) -> None:
    assert decode(encode(event)) == event


@pytest.mark.parametrize(
    "data",
    [
        *(b"", b"{}", b"[]", b'{"k":"call"}', b'{"k":"party"}', b"\xff\xfe", b'{"k":"force",'),
        *(b'["call"]', b'["call",' + b"1," * 17 + b"1]", b'["listing",1]', b'["party"]', b"[[]]"),
    ],
    ids=[
        *("empty", "no kind", "empty array", "a call without fields", "unknown", "bytes", "cut"),
        *("call, no fields", "call, a field too many", "short listing", "array of", "nested"),
    ],
)
def test_what_cannot_be_read_is_refused_whole(data: bytes) -> None:
    with pytest.raises(BadEvent):
        decode(data)


# -- what no replica writes: refused whole, whatever the exception its reading would raise --
AT_S = T0_NS / 1e9  # the stream's clock when the entry was appended
CALL = ToolCall(
    turn="t1",
    round=2,
    server="web",
    tool="search",
    fingerprint="f" * 32,
    verdict=Verdict(outcome=Outcome.FAILED, failure_class=FailureClass.TRANSPORT),
    start_ns=T0_NS,
    end_ns=T0_NS + 1_000_000,
    trace_id=bytes(range(16)),
    span_ids=(bytes(range(8)),),
    dialect=Dialect.HARNESS,
)
LISTING = ToolListing(
    turn="t1",
    round=None,
    server="host",
    configured=3,
    namespaces_connected=("gitea",),
    namespaces_connected_at_s=(("gitea", AT_S),),
    tool_snapshot_at_s=AT_S,
    probe_source="client_namespace",
    start_ns=T0_NS,
    end_ns=T0_NS,
    trace_id=bytes(range(16)),
    span_ids=(bytes(range(8)),),
    dialect=Dialect.HARNESS,
)
FORCE = Force(
    key=CircuitKey(Scope.TOOL, "web/search"),
    target=State.FORCED_OPEN,
    until_s=AT_S + 60,
    reason="maintenance",
    at_s=AT_S,
)
SLOT = "@field under test@"  # a field's value, replaced by the raw JSON text under test
DEEP = 200_000


def with_field(event: SharedEvent, name: str, raw: str) -> bytes:
    """``event`` as a replica encodes it, with field ``name`` written as ``raw`` JSON text
    (text json.dumps cannot write: 1e400, a 5000-digit number, a lone surrogate)."""
    document = json.loads(encode(event))
    if isinstance(document, list):
        names = _CALL_FIELDS if document[0] == "call" else (*_LISTING_FIELDS, "trace", "spans")
        document[1 + names.index(name)] = SLOT
    else:
        document[name] = SLOT
    text = json.dumps(document)
    assert text.count(f'"{SLOT}"') == 1
    return text.replace(f'"{SLOT}"', raw).encode()


def test_an_event_as_written_is_read_at_the_streams_clock() -> None:
    """The baseline of the cases below: each event, untouched, is read; a call arrives at
    the stream's time (the reorder window compares arrivals)."""
    assert decode(encode(CALL), at_s=AT_S) == replace(CALL, arrived_s=AT_S)
    for event in (LISTING, FORCE):
        assert decode(encode(event), at_s=AT_S) == event


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        *(("start", "1" + "0" * 30), ("end", "1" + "0" * 30), ("start", "9" * 5000)),
        *(("start", "Infinity"), ("start", "-Infinity"), ("start", "NaN"), ("end", "1e400")),
        *(("start", "-1"), ("start", "1.796e18"), ("start", "true"), ("start", '"1"')),
        *(("start", "null"), ("round", str(2**63)), ("round", "1.5"), ("round", "false")),
        *(("tool", '"' + "x" * 257 + '"'), ("tool", "7"), ("tool", "null"), ("tool", "[]")),
        *(("turn", '{"a": 1}'), ("server", r'"\ud800"'), ("harness", '"' + "h" * 10**5 + '"')),
        *(("tenant", "[[]]"), ("fp", "0"), ("excerpt", '"' + "e" * 2049 + '"')),
        *(("outcome", '["failed"]'), ("outcome", '"bursting"'), ("dialect", "null")),
        *(("trace", '"zz"'), ("trace", '"' + "0" * 34 + '"'), ("spans", '"00"')),
        *(("spans", '["0011"]'), ("spans", "[" + ",".join(['"' + "0" * 16 + '"'] * 33) + "]")),
        ("class", '"gremlins"'),
    ],
)
def test_a_call_with_a_field_no_replica_writes_is_refused(name: str, raw: str) -> None:
    with pytest.raises(BadEvent):
        decode(with_field(CALL, name, raw), at_s=AT_S)


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        *(("configured", "-1"), ("configured", "1e400"), ("cached", '"yes"')),
        *(("tool_snapshot_at_s", "Infinity"), ("tool_snapshot_at_s", "1e400")),
        *(("namespaces_connected_at_s", '[["gitea", NaN]]'), ("namespaces_connected", "[1]")),
        *(("namespaces_connected_at_s", '[["gitea"]]'), ("namespaces_attached", '"gitea"')),
        *(
            ("namespaces_required", json.dumps(["n"] * 257)),
            ("offered_tools", '["' + "o" * 129 + '"]'),
        ),
        *(("probe_source", '"rumour"'), ("problems", json.dumps(["p"] * 65)), ("end_ns", "1e30")),
        ("start_ns", str(10**30)),
    ],
)
def test_a_listing_with_a_field_no_replica_writes_is_refused(name: str, raw: str) -> None:
    with pytest.raises(BadEvent):
        decode(with_field(LISTING, name, raw), at_s=AT_S)


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        *(("until", "1e30"), ("until", "Infinity"), ("until", str(AT_S + MAX_FORCE_S + 1))),
        *(("until", '"soon"'), ("at", str(AT_S + 3600)), ("at", "NaN"), ("at", "-5")),
        *(("reason", '"' + "r" * 2049 + '"'), ("reason", "null"), ("name", "{}")),
        *(("scope", '"galaxy"'), ("target", '"open"'), ("target", "[]"), ("tenant", "1")),
    ],
)
def test_a_force_no_operator_could_make_is_refused(name: str, raw: str) -> None:
    with pytest.raises(BadEvent):
        decode(with_field(FORCE, name, raw), at_s=AT_S)


def test_times_are_bounded_by_the_streams_clock_with_the_receivers_allowance_twice() -> None:
    """An honest replica's span times are at most its clock plus classify.max_clock_skew_s;
    a reader allows that again for the replica's clock against Redis's."""
    allowance_ns = int(2 * Bounds().clock_skew_s * 1e9)
    latest = replace(CALL, end_ns=T0_NS + allowance_ns)
    assert decode(encode(latest), at_s=AT_S) == replace(latest, arrived_s=AT_S)
    with pytest.raises(BadEvent, match="later than the stream's clock"):
        decode(encode(replace(latest, end_ns=latest.end_ns + 1_000_000)), at_s=AT_S)
    # Where the stream's clock is not known (an override read at start), a time must still
    # be one whose deadlines the wire can carry.
    far = replace(CALL, end_ns=MAX_TIME_NS)
    assert decode(encode(far)) == far
    with pytest.raises(BadEvent):
        decode(encode(replace(CALL, end_ns=MAX_TIME_NS + 1)))


def test_names_are_bounded_as_the_receiver_bounds_them() -> None:
    config = replace(ClassifyConfig(), max_name_chars=300)
    long_tool = replace(CALL, tool="t" * 300)
    with pytest.raises(BadEvent):
        decode(encode(long_tool), at_s=AT_S)  # over the default classify.max_name_chars
    read = decode(encode(long_tool), at_s=AT_S, bounds=Bounds.of(config))
    assert read == replace(long_tool, arrived_s=AT_S)


@pytest.mark.parametrize("opening", ["[", '{"k":'])
def test_json_nested_too_deep_is_refused_before_it_is_parsed(opening: str) -> None:
    data = ("[" + opening * DEEP).encode()
    with pytest.raises(BadEvent, match="nested deeper"):
        decode(data)


def test_brackets_inside_a_string_are_not_nesting() -> None:
    bracketed = replace(CALL, verdict=replace(CALL.verdict, error_excerpt='["[{' * 500))
    assert decode(encode(bracketed), at_s=AT_S) == replace(bracketed, arrived_s=AT_S)


def test_an_entry_larger_than_any_replica_writes_is_refused_before_it_is_parsed() -> None:
    data = b'["call","' + b"x" * MAX_PAYLOAD_BYTES + b'"]'
    with pytest.raises(BadEvent, match="bytes"):
        decode(data)


def test_the_largest_listing_a_replica_writes_is_read() -> None:
    """Every bound at once, names of control characters (JSON's longest escapes): within
    MAX_PAYLOAD_BYTES, so no honest entry is refused for its size."""
    names = tuple(f"{i:03}" + "\x01" * (MAX_NAMESPACE_CHARS - 3) for i in range(MAX_NAMESPACES))
    largest = replace(
        LISTING,
        turn="t" * Bounds().name_chars,
        namespaces_connected=names,
        namespaces_attached=names,
        namespaces_required=names,
        offered_tools=names,
        namespaces_connected_at_s=tuple((name, AT_S + 0.123456789) for name in names),
        problems=tuple("p" * 200 for _ in range(12)),
        span_ids=tuple(bytes([i]) * 8 for i in range(MAX_SPAN_IDS)),
    )
    encoded = encode(largest)
    assert len(encoded) <= MAX_PAYLOAD_BYTES
    assert decode(encoded, at_s=AT_S) == largest


def test_the_force_bound_is_the_admin_apis() -> None:
    assert MAX_FORCE_S == admin.MAX_FORCE_S


@settings(max_examples=100, deadline=None, derandomize=True, database=None)
@given(event=st.one_of(calls(), listings()))
def test_calls_and_listings_go_as_arrays_and_are_read_as_objects_too(
    event: ToolCall | ToolListing,
) -> None:
    """The stream carries calls and listings as arrays; one written as an object (by a
    replica from before the arrays) is read all the same."""
    encoded = encode(event)
    assert encoded.startswith(b'["call",' if isinstance(event, ToolCall) else b'["listing",')
    items = json.loads(encoded)
    names = _CALL_FIELDS if isinstance(event, ToolCall) else (*_LISTING_FIELDS, "trace")
    if isinstance(event, ToolListing):
        names = (*names, "spans", "dialect")
    as_object = {"k": items[0], **dict(zip(names, items[1:], strict=True))}
    assert decode(json.dumps(as_object).encode()) == event


def test_a_call_never_carries_raw_arguments() -> None:
    """Only what the engines consume goes to Redis: a fingerprint, a redacted excerpt."""
    call = ToolCall(
        turn="t",
        round=None,
        server="web",
        tool="search",
        fingerprint="f" * 32,
        verdict=Verdict(outcome=Outcome.OK),
        start_ns=T0_NS,
        end_ns=T0_NS,
        trace_id=bytes(16),
        span_ids=(bytes(8),),
        dialect=Dialect.HARNESS,
    )
    assert set(decode(encode(call)).__dataclass_fields__) == set(call.__dataclass_fields__)
    assert b"arguments" not in encode(call)


class Replica:
    """A replica's engines and hub, fed from the stream as ``SharedState`` feeds them."""

    def __init__(self) -> None:
        config = replace(BreakerConfig(), consecutive_failures=2, min_calls=2)
        self.breaker = Breaker(config)  # the default, deterministic jitter
        self.pipeline = Pipeline(Classifier(), self.breaker, roster=RosterHealth())
        self.advisories = AdvisoryService(AdvisoriesConfig(), self.breaker, clock=lambda: 0.0)
        self.advisories.restart("shared-epoch", seq=position_seq(0))
        self.changes: list[tuple[int, str, str]] = []
        self.advisories.broadcaster.send = lambda changes, stats: self.changes.extend(  # type: ignore[method-assign]
            (seq, a.id, a.state) for seq, a in changes
        )

    def apply(self, position: int, data: bytes, at_s: float) -> None:
        event = decode(data)
        if isinstance(event, Tick):
            self.advisories.expire(position=position, now_s=at_s)
        elif isinstance(event, Force | Release):
            self.advisories.apply_operator(event, position=position)
        else:
            if isinstance(event, ToolCall):
                event = replace(event, arrived_s=at_s)
            finding = self.pipeline.apply(event)
            self.advisories.observe(finding, position=position, now_s=at_s)

    def state(self) -> object:
        circuits = sorted(
            (
                c.key,
                c.state,
                c.open_until_s,
                tuple(c.window),
                c.consecutive_failures,
                c.forced_until_s,
            )
            for c in self.breaker.circuits.values()
        )
        hub = self.advisories.hub
        advisories = sorted((a.id, a.state, a.expires_s, a.message) for a in hub.in_force())
        return circuits, len(self.breaker.turns), advisories, hub.seq, self.changes


@settings(max_examples=120, deadline=None, derandomize=True, database=None)
@given(stream=st.lists(EVENTS, max_size=60))
def test_the_same_stream_applied_on_two_fresh_replicas_gives_identical_state(
    stream: list[SharedEvent],
) -> None:
    encoded = [encode(event) for event in stream]
    first, second = Replica(), Replica()
    for replica in (first, second):
        for position, data in enumerate(encoded, start=1):
            replica.apply(position, data, at_s=1_796_000_000.0 + position)
    assert first.state() == second.state()
    assert all(seq > position_seq(0) for seq, _, _ in first.changes)


def test_an_own_event_arrives_at_the_streams_time_with_every_other_field_kept() -> None:
    """replica._arrived builds the call anew rather than through dataclasses.replace (a
    third of the cost): every field must come across, those with defaults too."""
    every_field = replace(CALL, harness="agent", tenant="team-a", arrived_s=1.0)
    assert _arrived(every_field, AT_S) == replace(every_field, arrived_s=AT_S)
    assert _arrived(LISTING, AT_S) is LISTING
    assert {f.name for f in fields(ToolCall)} == {
        *("turn", "round", "server", "tool", "fingerprint", "verdict", "start_ns", "end_ns"),
        *("trace_id", "span_ids", "dialect", "harness", "tenant", "arrived_s"),
    }, "a new field of ToolCall must be copied by replica._arrived too"
