"""``mcp-breaker serve`` with a full validity check on the pass-through path: a road not
taken, measured by ``bench/delivery.py`` (the ``strict`` variant), not a mode of the service.

The service checks a pass-through request's framing only (``processor.inflight.stage.
check_passthrough``, one function). This wrapper replaces that function with one that also
decodes the whole request, the cheapest complete check there is here: upb, in C, refuses a
string that is not UTF-8 and nesting deeper than 100 messages, as a strict next hop would.

    python bench/strict_serve.py serve --set ...
"""

from __future__ import annotations

import sys

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from processor.cli import main
from processor.errors import InvalidRequest
from processor.inflight import stage

framing_only = stage.check_passthrough


def check_whole_request(payload: bytes) -> int:
    count = framing_only(payload)
    try:
        ExportTraceServiceRequest.FromString(payload)
    except DecodeError:
        raise InvalidRequest("request body is not a valid ExportTraceServiceRequest") from None
    return count


stage.check_passthrough = check_whole_request

if __name__ == "__main__":
    sys.exit(main())
