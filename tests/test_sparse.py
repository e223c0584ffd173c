"""Reading a request only as far as its MCP spans (processor/request/sparse.py) changes nothing.

The judge is the whole-request path the stage takes for OTLP/JSON: decode everything, run
the analysis, encode everything; and there, the annotations and the stripping read every
key of a span instead of learning from what the classifier read (Classifier.read). The
same requests, hostile ones included (tests/fuzz_strategies.py), go through both; what is
forwarded must decode to the same request, and the analysis must find the same things.
The one difference is stated in sparse.py: a span without a marker is not decoded, so its
ids are not checked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from google.protobuf.message import DecodeError
from hypothesis import given
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from processor.classify.classifier import Classifier
from processor.classify.events import Event
from processor.config import ServiceConfig
from processor.engines.breaker import Breaker
from processor.engines.roster import RosterHealth
from processor.inflight.pipeline import Finding, Pipeline
from processor.inflight.stage import MCP_MARKERS, Prepared, Stage, StagePath
from processor.inflight.strip import StripAfter
from processor.request.sender import Sender
from processor.request.sparse import ShallowRequest, read_sparse, valid_ids
from tests.fuzz_strategies import Scenario, scenarios
from tests.otlp_builders import make_request, make_span
from tests.test_fuzz import CONFIGS, fuzz_settings


@dataclass
class Path:
    stage: Stage
    findings: list[Finding]  # what the pipeline found, in order
    now: list[float]  # the arrival clock (and the wall clock the classifier bounds by)
    errors: list[int]  # one per exception the stage caught in the analysis


class WalkingClassifier(Classifier):
    """Tells nothing of what it read: enrich and strip read every key of every span."""

    def classify(self, *args: Any, **kwargs: Any) -> list[Event]:
        events = super().classify(*args, **kwargs)
        self.read = {}
        return events


def make_path(config: ServiceConfig, tenant_must_match: bool, *, walking: bool = False) -> Path:
    """The stage as serve wires it; ``walking``: without the short cuts that what the
    classifier read of a span allows (Classifier.read)."""
    findings: list[Finding] = []
    now = [1_767_225_600.0]
    errors: list[int] = []
    classifier = (WalkingClassifier if walking else Classifier)(
        config.classify, wall_clock=lambda: now[0]
    )
    pipeline = Pipeline(
        classifier,
        Breaker(config.breaker),
        (findings.append,),
        RosterHealth(config.roster),
        clock=lambda: now[0],
        tenant_must_match=tenant_must_match,
    )
    hook = StripAfter(
        pipeline,
        pipeline.classifier.read_spans,
        config.forward.strip_attributes,
        lambda: pipeline.classifier.read,
    )
    return Path(Stage((hook,), on_hook_error=lambda: errors.append(1)), findings, now, errors)


def without_unread_bad_ids(prepared: Prepared) -> tuple[ExportTraceServiceRequest, int]:
    """The forwarded request without the spans whose ids only a whole decode checks."""
    request = ExportTraceServiceRequest.FromString(prepared.payload)
    removed = 0
    for resource in request.resource_spans:
        for scope in resource.scope_spans:
            keep = [s for s in scope.spans if valid_ids(s.trace_id, s.span_id)]
            removed += len(scope.spans) - len(keep)
            copies = [Span() for _ in keep]
            for copy, span in zip(copies, keep, strict=True):
                copy.CopyFrom(span)
            del scope.spans[:]
            scope.spans.extend(copies)
    return request, removed


@fuzz_settings(ci_examples=120)
@given(scenarios())
def test_the_spliced_request_is_the_decoded_request_re_encoded(scenario: Scenario) -> None:
    config = CONFIGS[scenario.sensitive]
    spliced = make_path(config, scenario.tenant_must_match)
    whole = make_path(config, scenario.tenant_must_match, walking=True)
    for spec in scenario.requests:
        for path in (spliced, whole):
            path.now[0] += spec.advance_s
        payload = spec.build().SerializeToString()
        sender = Sender(peer="ipv4:192.0.2.1:5555", tenant=spec.tenant)
        cut = spliced.stage.from_protobuf(payload, sender)
        if cut.path is StagePath.PASSTHROUGH:  # no marker: neither path reads it
            assert cut.payload == payload
            continue
        try:
            decoded = ExportTraceServiceRequest.FromString(payload)
        except DecodeError:
            # Only read around when the span that does not decode holds no marker; from
            # here on the two paths have seen different traffic.
            return
        assert cut.path is StagePath.PARSED
        full = whole.stage.from_request(decoded, sender)

        forwarded, unread_bad_ids = without_unread_bad_ids(cut)
        assert forwarded == ExportTraceServiceRequest.FromString(full.payload)
        assert cut.span_count - unread_bad_ids == full.span_count
        assert cut.rejected_spans + unread_bad_ids == full.rejected_spans
        assert spliced.findings == whole.findings
        assert spliced.errors == whole.errors == []


def test_a_request_whose_spans_the_analysis_leaves_alone_goes_out_as_it_came() -> None:
    """A marker in a span that is not an MCP span (an HTTP call to /mcp): nothing decoded
    is changed, so not one byte is re-encoded."""
    request = make_request(
        make_span("POST /mcp", 1, kind=Span.SPAN_KIND_CLIENT), make_span("SELECT orders", 2)
    )
    payload = request.SerializeToString()
    path = make_path(CONFIGS[False], tenant_must_match=False)

    prepared = path.stage.from_protobuf(payload)

    assert prepared.path is StagePath.PARSED
    assert prepared.payload == payload
    assert prepared.span_count == 2


def test_only_spans_with_a_marker_are_decoded_and_the_rest_keep_their_bytes() -> None:
    call = make_span("tools/call search", 1, kind=Span.SPAN_KIND_CLIENT)
    others = [make_span(f"GET /api/{n}", n) for n in range(2, 6)]
    payload = make_request(others[0], call, *others[1:]).SerializeToString()

    sparse = read_sparse(payload, MCP_MARKERS)

    assert [[s.spans for s in r.scope_spans] for r in sparse.resource_spans] == [[[call]]]
    assert sparse.span_count == 5
    decoded = sparse.resource_spans[0].scope_spans[0].spans[0]
    decoded.name = "tools/call renamed"
    sparse.edits.changed(decoded)
    out = ExportTraceServiceRequest.FromString(sparse.encode())
    names = [span.name for span in out.resource_spans[0].scope_spans[0].spans]
    assert names == ["GET /api/2", "tools/call renamed", "GET /api/3", "GET /api/4", "GET /api/5"]
    shallow: Any = ShallowRequest.FromString(sparse.encode())  # spans as bytes
    encoded = [bytes(raw) for raw in shallow.children[0].children[0].spans]
    assert encoded[:1] + encoded[2:] == [other.SerializeToString() for other in others]


def test_a_marked_span_that_does_not_decode_leaves_the_request_unread() -> None:
    call = make_span("tools/call search", 1, kind=Span.SPAN_KIND_CLIENT)
    payload = make_request(call).SerializeToString()
    broken = payload.replace(b"search", b"\xff\xfe\xfd\xfc\xfb\xfa")  # same length
    assert broken != payload
    path = make_path(CONFIGS[False], tenant_must_match=False)

    prepared = path.stage.from_protobuf(broken)

    assert prepared.path is StagePath.UNREADABLE
    assert prepared.payload == broken
    assert path.findings == []
