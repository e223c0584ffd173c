"""A span exported twice goes out annotated the same the second time.

The classifier reads each span once (a second copy is a duplicate, not a second call), so
the pipeline keeps what it wrote on each MCP span and writes it again on a later copy:
through the real Pipeline, then the memory's bounds on a fake clock.
"""

from __future__ import annotations

from dataclasses import replace

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from processor.classify.annotations import AnnotationMemory
from processor.classify.classifier import Classifier
from processor.config import BreakerConfig, ClassifyConfig
from processor.engines.breaker import Breaker
from processor.inflight import enrich
from processor.inflight.pipeline import Pipeline
from tests.classify_builders import make_request
from tests.test_pipeline import SEED_TURN, Clock, attributes_of, call_span, pipeline


def ours(request: ExportTraceServiceRequest) -> list[dict[str, object]]:
    return [
        {key: value for key, value in attributes.items() if key.startswith("mcp.")}
        for attributes in attributes_of(request)
    ]


def test_a_retried_request_leaves_with_the_first_copys_annotations() -> None:
    run, sink, clock = pipeline(BreakerConfig())
    spans = [call_span(i, spec) for i, spec in enumerate(SEED_TURN[:4])]
    first, retry = make_request(*spans), make_request(*spans)
    run(first)
    clock.now += 1.0
    run(retry)
    assert run.classifier.stats.duplicate_spans == 4  # a true duplicate, counted as one
    assert len(sink.decisions) == 4  # and decided once
    annotated = ours(first)
    assert all("mcp.breaker.dead_call" in a for a in annotated)
    assert sum(a["mcp.breaker.dead_call"].bool_value for a in annotated) == 3  # type: ignore[attr-defined]
    assert ours(retry) == annotated


def test_a_copy_whose_annotations_were_forgotten_goes_out_bare() -> None:
    """Past classify.max_annotated_spans the span is still known as a duplicate (counted
    once), but what it was given is not: it goes out as it came, as the docs say."""
    clock = Clock()
    run = Pipeline(
        Classifier(ClassifyConfig(max_annotated_spans=1)), Breaker(BreakerConfig()), clock=clock
    )
    first, second = call_span(0, SEED_TURN[0]), call_span(1, SEED_TURN[1])
    run(make_request(first))
    run(make_request(second))  # takes the one place in the memory
    again = make_request(first)
    run(again)
    assert run.classifier.stats.duplicate_spans == 1
    assert not any(key.startswith("mcp.breaker.") for key in attributes_of(again)[0])


def test_the_memory_is_bounded_in_spans_and_in_age() -> None:
    clock = Clock()
    memory = AnnotationMemory(max_spans=3, ttl_s=10, clock=clock)
    for i in range(5):
        memory.keep((b"t", bytes([i])), {"mcp.breaker.outcome": "ok"})
    assert len(memory) == 3
    assert memory.recall((b"t", bytes([0]))) is None
    assert memory.recall((b"t", bytes([4]))) == {"mcp.breaker.outcome": "ok"}
    clock.now += 10
    assert memory.recall((b"t", bytes([4]))) is None and len(memory) == 0


def test_two_writes_on_one_span_are_both_kept() -> None:
    memory = AnnotationMemory(max_spans=10, ttl_s=10, clock=Clock())
    memory.keep((b"t", b"s"), {"mcp.breaker.outcome": "failed"})
    memory.keep((b"t", b"s"), {"mcp.roster.stale": True})
    assert memory.recall((b"t", b"s")) == {
        "mcp.breaker.outcome": "failed",
        "mcp.roster.stale": True,
    }


def _one_by_one(span: Span, attributes: dict[str, enrich.Value]) -> None:
    """What enrich writes, spelled out: each attribute the span lacks, in order."""
    present = {kv.key for kv in span.attributes}
    for key, value in attributes.items():
        if key in present:
            continue
        item = span.attributes.add(key=key)
        if isinstance(value, bool):
            item.value.bool_value = value
        elif isinstance(value, int):
            item.value.int_value = value
        else:
            item.value.string_value = str(value)


def test_an_annotation_merged_in_writes_what_setting_each_attribute_would() -> None:
    """The shared ``Annotation`` is merged into a span in one call; a span that already
    carries one of its keys keeps its own value and gets the rest, as before."""
    values: dict[str, enrich.Value] = {
        "mcp.breaker.outcome": "failed",
        "mcp.breaker.dead_call": True,
        "mcp.breaker.late_repeats": 2,
        "mcp.breaker.fingerprint": "f1",
    }
    for carried in ((), ("other",), ("mcp.breaker.dead_call",), ("mcp.breaker.outcome",)):
        expected, written = Span(name="x"), Span(name="x")
        for span in (expected, written):
            for key in carried:
                span.attributes.add(key=key).value.string_value = "theirs"
        _one_by_one(expected, values)
        enrich._write(written, enrich.Annotation(values))
        assert written.SerializeToString() == expected.SerializeToString()
        # A plain mapping (two annotations of one span, merged in the memory) as well.
        again = Span(name="x")
        for key in carried:
            again.attributes.add(key=key).value.string_value = "theirs"
        enrich._write(again, dict(values))
        assert again.SerializeToString() == expected.SerializeToString()


def test_calls_decided_alike_share_one_annotation() -> None:
    run, sink, _ = pipeline(BreakerConfig())
    run(make_request(*[call_span(i, spec) for i, spec in enumerate(SEED_TURN[:4])]))
    shapes = {
        id(enrich.decision_attributes(d))
        for d in sink.decisions
        if not d.dead_call and d.call.fingerprint is None
    }
    assert len(shapes) <= 1
    a, b = sink.decisions[0], replace(sink.decisions[0])
    assert enrich.decision_attributes(a) is enrich.decision_attributes(b)
    assert enrich.decision_attributes(a) == enrich._decision_attributes(a)


def test_what_the_classifier_read_stands_in_for_the_keys_only_while_nothing_was_added() -> None:
    """enrich learns which of its keys a span holds from Classifier.read while the span has
    as many attributes as when it was read; after a write, it reads the keys again, so a
    second annotation of the same span never writes a key twice."""
    span = Span(name="x")
    span.attributes.add(key="mcp.breaker.outcome").value.string_value = "theirs"
    read = (1, {"mcp.breaker.outcome": "theirs"})
    first = enrich.Annotation({"mcp.breaker.outcome": "ok", "mcp.breaker.state": "closed"})
    enrich._write(span, first, read)
    second = enrich.Annotation({"mcp.breaker.state": "open", "mcp.roster.stale": True})
    enrich._write(span, second, read)  # stale now: 3 attributes, not 1
    assert [(kv.key, kv.value.string_value or kv.value.bool_value) for kv in span.attributes] == [
        ("mcp.breaker.outcome", "theirs"),
        ("mcp.breaker.state", "closed"),
        ("mcp.roster.stale", True),
    ]
