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
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from processor.advisories.hub import position_seq
from processor.advisories.service import AdvisoryService
from processor.classify.classifier import Classifier
from processor.classify.events import (
    Dialect,
    FailureClass,
    FailureOrigin,
    NeutralReason,
    Outcome,
    ToolCall,
    ToolListing,
    Verdict,
)
from processor.config import AdvisoriesConfig, BreakerConfig
from processor.engines.breaker import Breaker
from processor.engines.circuit import CircuitKey, Scope, State
from processor.engines.roster import RosterHealth
from processor.errors import BadEvent
from processor.pipeline import Pipeline
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
forces = st.builds(
    Force,
    key=KEYS,
    target=st.sampled_from([State.FORCED_OPEN, State.FORCED_CLOSED]),
    until_s=st.floats(1.796e9, 1.797e9),
    reason=NAMES,
    at_s=st.floats(1.796e9, 1.7961e9),
)
releases = st.builds(Release, key=KEYS, reason=NAMES, at_s=st.floats(1.796e9, 1.7961e9))
EVENTS = st.one_of(calls(), calls(), calls(), listings(), forces, releases, st.just(Tick()))


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
