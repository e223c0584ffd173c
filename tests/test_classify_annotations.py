"""A span exported twice goes out annotated the same the second time.

The classifier reads each span once (a second copy is a duplicate, not a second call), so
the pipeline keeps what it wrote on each MCP span and writes it again on a later copy:
through the real Pipeline, then the memory's bounds on a fake clock.
"""

from __future__ import annotations

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from processor.classify.annotations import AnnotationMemory
from processor.classify.classifier import Classifier
from processor.config import BreakerConfig, ClassifyConfig
from processor.engines.breaker import Breaker
from processor.pipeline import Pipeline
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
