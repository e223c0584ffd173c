"""Classification cost per span, in process, against the parsed path it rides on.

For the ``mixed`` payload (15% MCP spans) and the ``plain`` one (no MCP span, but parsed
anyway, as when a marker shows up by chance), in one run:

    parse+serialize  what the parsed path costs without analysis (the baseline)
    stage            Stage.from_protobuf with the analysis hooked in: classify, breaker,
                     annotate, then strip the payload attributes (what serve runs)
    classify         Classifier.classify alone, on an already decoded request
    strip            the forward.strip_attributes hook alone (its default keys), likewise

Reported in ns per span (all spans), ns per MCP span, and as the stage's ratio to the
baseline. Best of several rounds: the machine is noisy, and the minimum is the least
disturbed measurement.

    .venv/bin/python bench/classify.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from payload import SPANS_PER_REQUEST, build_requests

from processor.classify.classifier import Classifier
from processor.config import BreakerConfig
from processor.config.model import DEFAULT_STRIP_ATTRIBUTES
from processor.engines.breaker import Breaker
from processor.pipeline import Pipeline
from processor.stage import Stage
from processor.strip import StripAfter, strip_spans

CLOCK_STEP_S = 0.001  # the fake clock advances per request, as arrivals would
REQUESTS = 16  # distinct pre-encoded requests per payload variant


def best_ns(work: Callable[[], object], rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter_ns()
        work()
        best = min(best, time.perf_counter_ns() - started)
    return best


def mcp_spans(payload: bytes) -> int:
    request = ExportTraceServiceRequest.FromString(payload)
    return sum(
        1
        for r in request.resource_spans
        for s in r.scope_spans
        for span in s.spans
        if span.name.startswith("tools/")
    )


def measure(variant: str, rounds: int) -> dict[str, float]:
    payloads = build_requests(variant, count=REQUESTS)
    n = len(payloads)
    ticks = iter(range(10**9))

    def now() -> float:
        return next(ticks) * CLOCK_STEP_S

    def fresh_stage() -> Stage:
        # A new classifier per round: each span is new to it, as in real traffic (a
        # classifier that saw the span before only checks that and moves on).
        pipeline = Pipeline(Classifier(), Breaker(BreakerConfig()), clock=now)
        hook = StripAfter(
            pipeline, lambda: pipeline.classifier.spans.values(), DEFAULT_STRIP_ATTRIBUTES
        )
        return Stage((hook,), markers=(b"",))  # always parse

    def baseline() -> None:
        for payload in payloads:
            ExportTraceServiceRequest.FromString(payload).SerializeToString()

    def staged() -> None:
        stage = fresh_stage()
        for payload in payloads:
            stage.from_protobuf(payload)

    def classify_only() -> float:
        # Decoded before the clock starts: a fresh request, as the stage hands it over.
        requests = [ExportTraceServiceRequest.FromString(p) for p in payloads]
        classifier = Classifier()
        started = time.perf_counter_ns()
        for request in requests:
            classifier.classify(request, now())
        return time.perf_counter_ns() - started

    def strip_only() -> float:
        # The MCP spans as the classifier hands them over, found before the clock starts.
        classifier = Classifier()
        found = []
        for payload in payloads:
            request = ExportTraceServiceRequest.FromString(payload)
            classifier.classify(request, now())
            found.append(list(classifier.spans.values()))
        keys = frozenset(DEFAULT_STRIP_ATTRIBUTES)
        started = time.perf_counter_ns()
        for spans in found:
            strip_spans(spans, keys)
        return time.perf_counter_ns() - started

    results = {
        "baseline_ns": best_ns(baseline, rounds) / n,
        "stage_ns": best_ns(staged, rounds) / n,
        "classify_ns": min(classify_only() for _ in range(rounds)) / n,
        "strip_ns": min(strip_only() for _ in range(rounds)) / n,
    }
    mcp = sum(mcp_spans(p) for p in payloads) / n
    per_span = {k.replace("_ns", "_ns_per_span"): v / SPANS_PER_REQUEST for k, v in results.items()}
    per_span["classify_ns_per_mcp_span"] = results["classify_ns"] / mcp if mcp else float("nan")
    per_span["stage_over_baseline"] = results["stage_ns"] / results["baseline_ns"]
    per_span["strip_over_baseline"] = results["strip_ns"] / results["baseline_ns"]
    per_span["mcp_spans_per_request"] = mcp
    return per_span


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="best of this many rounds")
    args = parser.parse_args()
    rows = {variant: measure(variant, args.rounds) for variant in ("plain", "mixed")}
    labels = [
        ("mcp_spans_per_request", "MCP spans per 512-span request", "{:.0f}"),
        ("baseline_ns_per_span", "parse + serialize, ns/span (baseline)", "{:,.0f}"),
        ("stage_ns_per_span", "stage with the analysis, ns/span", "{:,.0f}"),
        ("stage_over_baseline", "stage / baseline", "{:.2f}"),
        ("classify_ns_per_span", "classify alone, ns/span (all spans)", "{:,.0f}"),
        ("classify_ns_per_mcp_span", "classify alone, ns per MCP span", "{:,.0f}"),
        ("strip_ns_per_span", "strip_attributes alone, ns/span (all spans)", "{:,.0f}"),
        ("strip_over_baseline", "strip_attributes / baseline", "{:.3f}"),
    ]
    print(f"{'':44}{'plain (parsed)':>18}{'mixed (15% MCP)':>18}")
    for key, label, form in labels:
        cells = "".join(form.format(rows[v][key]).rjust(18) for v in ("plain", "mixed"))
        print(label.ljust(44) + cells)
    return 0


if __name__ == "__main__":
    sys.exit(main())
