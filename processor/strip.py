"""Remove payload attributes from MCP spans before they are forwarded.

A stage hook run after the pipeline (``server.py`` puts it there), so everything
mcp-breaker reads from a span — the arguments for the fingerprint, the result for a
failure hidden under ``isError: false`` — has been read before it goes. It removes the
keys of ``forward.strip_attributes`` from every span whose name marks it as a possible MCP
span (the names the classifier reads), as the Collector's attributes processor would with
``action: delete``. It does not depend on the analysis having succeeded: a request whose
analysis failed is still stripped before it is forwarded.

Every MCP span is on the parsed path (the stage's byte markers are written by every MCP
dialect), so no MCP span leaves unstripped through the pass-through path; spans that are
not MCP spans are forwarded as they came.
"""

from __future__ import annotations

from collections.abc import Iterable

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from processor.classify.dialects import may_be_mcp


class AttributeStripper:
    """A stage hook: drops ``keys`` from the attributes of the request's MCP spans."""

    def __init__(self, keys: Iterable[str]) -> None:
        self.keys = frozenset(keys)

    def __call__(self, request: ExportTraceServiceRequest) -> None:
        keys = self.keys
        for resource_spans in request.resource_spans:
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    if not may_be_mcp(span.name):
                        continue
                    attributes = span.attributes
                    doomed = [i for i, kv in enumerate(attributes) if kv.key in keys]
                    for index in reversed(doomed):
                        del attributes[index]
