"""mcp-breaker: an OTLP hop that reads MCP tool calls in flight.

The package is laid out as the pipeline runs::

    receive/   OTLP/gRPC and OTLP/HTTP receivers: decode, limits, status codes
    stage.py   between decode and forward: the raw-bytes prefilter and the span stage
    forward/   bounded queue, retry policy and senders to the next hop
    telemetry/ self-metrics, /metrics, /healthz, /readyz
    server.py  wires the parts together and owns start-up and shutdown
    config/    one frozen dataclass per component, loaded from YAML, env and flags
"""

__version__ = "0.1.0"
