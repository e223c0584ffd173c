"""OTLP's wire names, shared by the receivers and the forwarder (both sides of the hop)."""

SERVICE_NAME = "opentelemetry.proto.collector.trace.v1.TraceService"
EXPORT_METHOD = f"/{SERVICE_NAME}/Export"
TRACES_PATH = "/v1/traces"
PROTOBUF = "application/x-protobuf"
JSON = "application/json"
# Where gRPC carries a google.rpc.Status (with RetryInfo or BadRequest details).
STATUS_DETAILS_KEY = "grpc-status-details-bin"
