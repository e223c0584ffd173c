"""A naive analysing hop: parse the whole request, mark each MCP span, serialize, forward.

What a straightforward Python processor does: ``ExportTraceServiceRequest.FromString``,
a loop over every span that tests its name (the test mcp-breaker makes first, copied in
``payload.may_be_mcp``), one attribute added to each MCP span (``bench.naive_hop.seen``),
``SerializeToString``, and the bytes sent on as ``bench/null_forwarder.py`` sends them. No
classification, no state: the floor for a hop that decodes and re-encodes what it reads.

    python bench/naive_hop.py --port 4419 --target 127.0.0.1:4417
"""

from __future__ import annotations

from null_forwarder import main  # sibling modules: bench/ is on sys.path as a script
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from payload_roles import NAIVE_ATTRIBUTE, may_be_mcp


def mark_mcp_spans(payload: bytes) -> bytes:
    request = ExportTraceServiceRequest.FromString(payload)
    for resource in request.resource_spans:
        for scope in resource.scope_spans:
            for span in scope.spans:
                if may_be_mcp(span.name, scope.scope.name):
                    mark = span.attributes.add()
                    mark.key = NAIVE_ATTRIBUTE
                    mark.value.bool_value = True
    return request.SerializeToString()


if __name__ == "__main__":
    main(mark_mcp_spans, __doc__)
