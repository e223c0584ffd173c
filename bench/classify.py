"""What an MCP span costs in process, stage by stage, against the hops it is compared with.

Fresh requests of the hop benchmark's payloads (bench/payload.py: ``mixed``, 15% MCP
spans, and ``harness``, an agent's own traffic) go through the stage as ``serve`` wires it,
built up one part at a time; each row adds one part to the row above, so the difference
between rows is that part's cost:

    read       the stage with no analysis: a request with a marker is read as far as
               its MCP spans (processor/request/sparse.py), they are encoded again in place
    classify   + Classifier.classify (dialect readers, verdicts, pairing)
    pipeline   + the engines (breaker, roster) and the annotations (Pipeline, no sinks)
    sinks      + the metrics and the advisories, as Service wires them
    strip      + forward.strip_attributes (its default keys): what serve runs

Then ``steady``: serve's stage once its memory is full, as it is after a few minutes in
service. Fresh requests go through one Service until the classifier remembers as many
spans as it may (classify.max_seen_spans; every other bound fills sooner on these
payloads), and only then are requests timed: each span now also evicts what it displaces,
and what is kept is as large as it gets, so that every map looked up is out of the CPU's
caches and the garbage collector walks what each call leaves behind. Its share is given:
the time of its collections, from ``gc.callbacks``. Every round counts (not the best of
them, which would be one the collector skipped), each four times a fresh round's requests.
And what the full stage keeps: the memory tracemalloc saw it take while it filled (every
memory of spans, calls and sessions, the engines' turns and circuits, the metrics' series),
in all and per MCP span remembered; traced only then, not while rounds are timed.

Two in-process baselines in the same run: decoding and encoding the whole request
(``parse+serialize``), and the naive hop's work (parse, add one attribute to each MCP
span, serialize). Each round builds everything anew, so every span is new to it (no
duplicates, nothing absorbed); CPU time, best of several rounds, with the garbage
collector tuned as serve tunes it (server.tune_garbage_collection). The run checks its work:
every MCP span of every request classified, none a duplicate, no analysis error.

    .venv/bin/python bench/classify.py [--rounds 5] [--requests 64] [--seen-spans N]
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import sys
import time
import tracemalloc
from collections.abc import Callable

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from payload import Fresh, build_templates
from payload_spans import SPANS_PER_REQUEST

from processor.classify.classifier import Classifier
from processor.classify.dialects import may_be_mcp
from processor.config import ServiceConfig
from processor.config.classify import DEFAULT_MAX_SEEN_SPANS
from processor.engines.breaker import Breaker
from processor.inflight.pipeline import Pipeline
from processor.inflight.stage import Stage
from processor.request.sender import Sender
from processor.request.sparse import RequestSpans
from processor.server import Service, tune_garbage_collection

VARIANTS = ("mixed", "harness")
STAGE_ERRORS = "mcp_breaker_stage_errors_total"  # serve's count of analyses that failed
STAGES = ("read", "classify", "pipeline", "sinks", "strip")
CLOCK_STEP_S = 0.001  # the arrival clock advances per request, as arrivals would


class Run:
    """One round of one stage: what it did, for the checks."""

    def __init__(self) -> None:
        self.mcp_spans = 0
        self.duplicates = 0
        self.errors = 0
        self.count_errors: Callable[[], int] | None = None  # errors counted elsewhere

    def count(self, classifier: Classifier) -> None:
        """What the classifier found in the request it last read."""
        self.mcp_spans += len(classifier.spans)
        self.duplicates += len(classifier.duplicates)


def build(stage_name: str, run: Run) -> Callable[[bytes], object]:
    """What the row runs per request: bytes in, through the stage."""
    ticks = iter(range(10**9))
    start = time.time()

    def now() -> float:
        return start + next(ticks) * CLOCK_STEP_S

    def on_error() -> None:
        run.errors += 1

    if stage_name == "read":
        return Stage((), on_hook_error=on_error).from_protobuf
    if stage_name == "classify":
        classifier = Classifier()

        def classify(request: RequestSpans, sender: Sender) -> None:
            classifier.classify(request, now())
            run.count(classifier)

        return Stage((classify,), on_hook_error=on_error).from_protobuf
    if stage_name == "pipeline":
        pipeline = Pipeline(Classifier(), Breaker(ServiceConfig().breaker), clock=now)

        def analyse(request: RequestSpans, sender: Sender) -> None:
            pipeline(request, sender)
            run.count(pipeline.classifier)

        return Stage((analyse,), on_hook_error=on_error).from_protobuf
    config = ServiceConfig()
    if stage_name == "sinks":
        config = dataclasses.replace(
            config, forward=dataclasses.replace(config.forward, strip_attributes=())
        )
    service = Service(config)  # its own arrival clock: the wall clock, as serve's

    def serve(payload: bytes) -> None:
        service.stage.from_protobuf(payload)
        run.count(service.pipeline.classifier)

    # Read once the timed part is over: a registry read per request is not serve's work.
    run.count_errors = lambda: int(service.registry.get_sample_value(STAGE_ERRORS) or 0)
    return serve


def cpu_ns(work: Callable[[], object]) -> int:
    started = time.process_time_ns()
    work()
    return time.process_time_ns() - started


def measure(variant: str, rounds: int, requests: int) -> dict[str, float]:
    templates = build_templates(variant)
    fresh = Fresh(templates)
    best: dict[str, float] = {}
    expected_mcp = 0
    for _ in range(rounds):
        payloads = [fresh.render(templates[i % len(templates)]) for i in range(requests)]
        expected_mcp = sum(_mcp_spans(p) for p in payloads)

        def baseline(payloads: list[bytes] = payloads) -> None:
            for payload in payloads:
                ExportTraceServiceRequest.FromString(payload).SerializeToString()

        def naive(payloads: list[bytes] = payloads) -> None:
            for payload in payloads:
                request = ExportTraceServiceRequest.FromString(payload)
                for resource in request.resource_spans:
                    for scope in resource.scope_spans:
                        for span in scope.spans:
                            if may_be_mcp(span.name):
                                added = span.attributes.add(key="mcp.breaker.seen")
                                added.value.bool_value = True
                request.SerializeToString()

        timings = {"parse+serialize": cpu_ns(baseline), "naive": cpu_ns(naive)}
        for name in STAGES:
            run = Run()
            process = build(name, run)
            timings[name] = cpu_ns(lambda process=process, payloads=payloads: [
                process(p) for p in payloads
            ])  # fmt: skip
            if run.count_errors is not None:
                run.errors = run.count_errors()
            if name != "read":
                problems = _check(name, run, expected_mcp)
                if problems:
                    raise SystemExit(f"{variant}/{name}: " + "; ".join(problems))
        for name, value in timings.items():
            best[name] = min(best.get(name, float("inf")), value)
    spans = requests * SPANS_PER_REQUEST
    per_mcp = spans / expected_mcp
    row: dict[str, float] = {f"{k}_ns_per_span": v / spans for k, v in best.items()}
    row["mcp_spans_per_request"] = expected_mcp / requests
    previous = 0.0
    for name in STAGES:
        row[f"{name}_ns_per_mcp_span"] = (best[name] - previous) / spans * per_mcp
        previous = best[name]
    row["serve_over_naive"] = best["strip"] / best["naive"]
    row["classify_alone_ns_per_mcp_span"] = row["classify_ns_per_mcp_span"]
    return row


class CollectorTime:
    """CPU the garbage collector's collections take, while attached, and the longest one
    (it holds the interpreter lock throughout: the event loop waits it out)."""

    def __init__(self) -> None:
        self.ns = 0
        self.longest_ns = 0
        self._started = 0

    def __enter__(self) -> CollectorTime:
        gc.callbacks.append(self._observe)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._observe)

    def _observe(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.process_time_ns()
        else:
            took = time.process_time_ns() - self._started
            self.ns += took
            self.longest_ns = max(self.longest_ns, took)


def steady(variant: str, rounds: int, requests: int, seen_spans: int) -> dict[str, float]:
    """serve's stage with its memory full (see the module's docstring)."""
    templates = build_templates(variant)
    fresh = Fresh(templates)
    config = ServiceConfig()
    config = dataclasses.replace(
        config, classify=dataclasses.replace(config.classify, max_seen_spans=seen_spans)
    )
    service = Service(config)
    classifier = service.pipeline.classifier

    def batch() -> list[bytes]:
        return [fresh.render(templates[i % len(templates)]) for i in range(requests)]

    # What the stage keeps once full, traced as it fills (and not while it is timed), after
    # one request: what the first one builds once (caches, metric series) is not per span.
    service.stage.from_protobuf(batch()[0])
    gc.collect()
    tracemalloc.start()
    empty = tracemalloc.get_traced_memory()[0]
    while classifier.seen_spans < seen_spans:
        for payload in batch():
            service.stage.from_protobuf(payload)
    gc.collect()
    kept_bytes = tracemalloc.get_traced_memory()[0] - empty
    tracemalloc.stop()
    if kept_bytes <= 0:
        raise SystemExit(f"{variant}/steady: the full memory traced {kept_bytes} bytes")
    # Every round added up, not the best: the collector's work comes every so many
    # requests, and the best round would be one it skipped.
    spent_ns = collector_ns = longest_ns = mcp_spans = 0
    for _ in range(rounds):
        payloads = batch()
        expected_mcp = sum(_mcp_spans(p) for p in payloads)
        run = Run()
        with CollectorTime() as collector:
            started = time.process_time_ns()
            for payload in payloads:
                service.stage.from_protobuf(payload)
                run.count(classifier)
            spent_ns += time.process_time_ns() - started
        collector_ns += collector.ns
        longest_ns = max(longest_ns, collector.longest_ns)
        mcp_spans += expected_mcp
        run.errors = int(service.registry.get_sample_value(STAGE_ERRORS) or 0)
        problems = _check("steady", run, expected_mcp)
        if problems:
            raise SystemExit(f"{variant}/steady: " + "; ".join(problems))
    spans = rounds * requests * SPANS_PER_REQUEST
    return {
        "steady_ns_per_span": spent_ns / spans,
        "steady_ns_per_mcp_span": spent_ns / mcp_spans,
        "steady_collector_share": collector_ns / spent_ns,
        "steady_longest_collection_ms": longest_ns / 1e6,
        "kept_bytes_per_mcp_span": kept_bytes / classifier.seen_spans,
        "kept_mib": kept_bytes / 2**20,
    }


def _mcp_spans(payload: bytes) -> int:
    request = ExportTraceServiceRequest.FromString(payload)
    return sum(
        1
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
        if may_be_mcp(span.name)
    )


def _check(name: str, run: Run, expected_mcp: int) -> list[str]:
    problems = []
    if run.mcp_spans != expected_mcp:
        problems.append(f"{run.mcp_spans} MCP spans classified of {expected_mcp}")
    if run.duplicates:
        problems.append(f"{run.duplicates} duplicates")
    if run.errors:
        problems.append(f"{run.errors} analysis errors")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="best of this many rounds")
    parser.add_argument("--requests", type=int, default=64, help="fresh requests per round")
    parser.add_argument(
        "--seen-spans",
        type=int,
        default=DEFAULT_MAX_SEEN_SPANS,
        help="classify.max_seen_spans for the steady row: its memory is full at this many",
    )
    args = parser.parse_args()
    tune_garbage_collection()  # as serve runs
    rows = {variant: measure(variant, args.rounds, args.requests) for variant in VARIANTS}
    for variant in VARIANTS:
        # Four times the requests of a fresh round: enough for the collector to come.
        steady_requests = 4 * args.requests
        rows[variant].update(steady(variant, args.rounds, steady_requests, args.seen_spans))
        rows[variant]["steady_over_fresh"] = (
            rows[variant]["steady_ns_per_span"] / rows[variant]["strip_ns_per_span"]
        )
    labels = [
        ("mcp_spans_per_request", "MCP spans per 512-span request", "{:.0f}"),
        ("parse+serialize_ns_per_span", "parse + serialize, ns/span", "{:,.0f}"),
        ("naive_ns_per_span", "naive hop's work, ns/span", "{:,.0f}"),
        ("strip_ns_per_span", "serve's stage, ns/span", "{:,.0f}"),
        ("serve_over_naive", "serve's stage / naive hop's work", "{:.2f}"),
        *((f"{name}_ns_per_mcp_span", f"  {name}, ns per MCP span", "{:,.0f}") for name in STAGES),
        ("classify_alone_ns_per_mcp_span", "classify alone, ns per MCP span", "{:,.0f}"),
        ("steady_ns_per_span", "steady: serve's stage, memory full, ns/span", "{:,.0f}"),
        ("steady_ns_per_mcp_span", "  the same, ns per MCP span", "{:,.0f}"),
        ("steady_over_fresh", "  steady / fresh (serve's stage row)", "{:.2f}"),
        ("steady_collector_share", "  of it, garbage collection", "{:.0%}"),
        ("steady_longest_collection_ms", "  the longest collection, ms", "{:.1f}"),
        ("kept_mib", "what the full stage keeps, MiB", "{:,.1f}"),
        ("kept_bytes_per_mcp_span", "  bytes per MCP span remembered", "{:,.0f}"),
    ]
    print(f"{'':44}" + "".join(f"{v:>18}" for v in VARIANTS))
    for key, label, form in labels:
        cells = "".join(form.format(rows[v][key]).rjust(18) for v in VARIANTS)
        print(label.ljust(44) + cells)
    print("\nchecks: every MCP span classified, no duplicate, no analysis error")
    return 0


if __name__ == "__main__":
    sys.exit(main())
