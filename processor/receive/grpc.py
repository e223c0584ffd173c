"""OTLP/gRPC: ``TraceService/Export`` as a raw-bytes handler.

The handler takes the request's bytes as they arrived (gRPC has already undone gzip and
enforced the receive limit, answering RESOURCE_EXHAUSTED over it), so a request with no
MCP span can be forwarded without ever being decoded.
"""

from __future__ import annotations

import grpc
from google.protobuf import duration_pb2
from google.protobuf.any_pb2 import Any as AnyProto
from google.protobuf.message import Message
from google.rpc import code_pb2, error_details_pb2, status_pb2

from processor.auth.tokens import metadata_bearer_token
from processor.errors import InvalidRequest
from processor.receive.gate import Gate, grpc_common_name
from processor.receive.intake import Intake, IntakeOutcome, Transport
from processor.request.otlp import SERVICE_NAME, STATUS_DETAILS_KEY
from processor.request.sender import Sender


def _status_metadata(code: int, message: str, detail: Message) -> tuple[tuple[str, bytes], ...]:
    status = status_pb2.Status(code=code, message=message)
    packed = AnyProto()
    packed.Pack(detail)
    status.details.append(packed)
    return ((STATUS_DETAILS_KEY, status.SerializeToString()),)


def retry_info_metadata(message: str, retry_after_s: float) -> tuple[tuple[str, bytes], ...]:
    delay = duration_pb2.Duration()
    delay.FromNanoseconds(int(retry_after_s * 1e9))
    return _status_metadata(
        code_pb2.UNAVAILABLE, message, error_details_pb2.RetryInfo(retry_delay=delay)
    )


def bad_request_metadata(message: str) -> tuple[tuple[str, bytes], ...]:
    detail = error_details_pb2.BadRequest()
    detail.field_violations.add(field="", description=message)
    return _status_metadata(code_pb2.INVALID_ARGUMENT, message, detail)


# What a sender refused for too many exports in progress is told to wait: they finish in
# milliseconds, or within the forwarder's own bounds.
BUSY_RETRY_AFTER_S = 1.0
BUSY_MESSAGE = (
    "mcp-breaker has as many exports in progress as it may "
    "(receivers.grpc.max_concurrent_rpcs); retry later"
)


def trace_service_handler(
    intake: Intake, gate: Gate | None = None, max_in_progress: int | None = None
) -> grpc.GenericRpcHandler:
    """``max_in_progress``: exports handled at once; one more is told to retry
    (UNAVAILABLE with RetryInfo). gRPC's own limit, a backstop above it, would answer
    RESOURCE_EXHAUSTED without a delay, which OTLP exporters may take as final."""
    in_progress = 0

    async def export(payload: bytes, context: grpc.aio.ServicerContext) -> bytes:
        nonlocal in_progress
        if max_in_progress is not None and in_progress >= max_in_progress:
            intake.count_busy(Transport.GRPC)
            await context.abort(
                grpc.StatusCode.UNAVAILABLE,
                BUSY_MESSAGE,
                trailing_metadata=retry_info_metadata(BUSY_MESSAGE, BUSY_RETRY_AFTER_S),
            )
        in_progress += 1
        try:
            return await _export(payload, context)
        finally:
            in_progress -= 1

    async def _export(payload: bytes, context: grpc.aio.ServicerContext) -> bytes:
        peer = str(context.peer() or "")
        if gate is None or gate.open:
            sender = Sender(peer=peer)
        else:
            admitted = gate.admit(
                peer,
                metadata_bearer_token(context.invocation_metadata()),
                grpc_common_name(context.auth_context()),
            )
            if not isinstance(admitted, Sender):
                intake.count_unauthenticated(Transport.GRPC)
                await context.abort(grpc.StatusCode.UNAUTHENTICATED, admitted)
                raise AssertionError("abort() raises")  # for type checkers
            sender = admitted
        try:
            result = await intake.accept_protobuf(payload, Transport.GRPC, sender)
        except InvalidRequest as error:
            intake.count_invalid(Transport.GRPC)
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                str(error),
                trailing_metadata=bad_request_metadata(str(error)),
            )
            raise  # abort() raises; this line only tells readers and type checkers so
        if result.outcome is IntakeOutcome.REFUSED:
            message = "mcp-breaker cannot take more spans now; retry later"
            await context.abort(
                grpc.StatusCode.UNAVAILABLE,
                message,
                trailing_metadata=retry_info_metadata(message, result.retry_after_s),
            )
        return bytes(result.response.SerializeToString())

    handler = grpc.unary_unary_rpc_method_handler(export)  # no (de)serializer: raw bytes
    return grpc.method_handlers_generic_handler(SERVICE_NAME, {"Export": handler})
