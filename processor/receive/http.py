"""OTLP/HTTP: ``POST /v1/traces`` in protobuf or JSON, answered in the request's encoding.

Status codes follow the OTLP spec and the Collector's mapping: 200 (with partial success
when spans were rejected), 400 with a ``google.rpc.Status`` body for bad data, 413 over
the body limit, 415 for an unknown content type or encoding, 503 with ``Retry-After``
when the forwarder cannot take more, or when the receiver already holds as many request
bytes as it may (``receivers.http.max_inflight_bytes``, ``budget.py``).
"""

from __future__ import annotations

import asyncio
import logging
import math

from aiohttp import web
from google.protobuf.message import Message
from google.rpc import code_pb2, status_pb2

from processor.auth.tokens import bearer_token
from processor.config.receivers import DEFAULT_HTTP_MAX_INFLIGHT_BYTES
from processor.errors import InvalidRequest, RequestTooLarge
from processor.offloop import OFF_THE_LOOP
from processor.receive.budget import Budget, Reservation
from processor.receive.codec import gunzip_capped, message_to_json, request_from_json
from processor.receive.gate import Gate, ssl_common_name
from processor.receive.intake import Intake, IntakeOutcome, Transport
from processor.request.otlp import JSON, PROTOBUF, TRACES_PATH
from processor.request.sender import Sender

log = logging.getLogger(__name__)

# Bodies larger than this are decoded in a worker thread: protobuf's JSON mapping is Python
# code, about a second for 100,000 spans, and on the event loop every other sender and the
# health probes would wait that long. (The thread shares the GIL, so the loop is slowed,
# not stopped.) Smaller ones are cheaper to decode than to hand over.
OFFLOAD_BYTES = 256 * 1024

# What an OTLP/JSON body costs against the budget, per byte: json.loads makes a Python
# object of every value (a dict, a str, an int, each tens of bytes) and ParseDict a message
# from them, while the body is still held. Measured through this receiver, an 18 MiB body
# raised peak RSS by about 270 MB (15 times its size; 6 to 15 times by the shape of its
# spans), where a protobuf body costs about twice its size (read into a bytearray, then
# copied to bytes) and counts once. 8 = 15 / 2 keeps the budget's unit "protobuf bytes".
JSON_DECODE_WEIGHT = 8
# What a request refused by the budget is told to wait: the requests holding it finish
# within their read timeout, most within milliseconds.
BUSY_RETRY_AFTER_S = 1
BUSY_MESSAGE = (
    "mcp-breaker is reading as many request bytes as it may at once "
    "(receivers.http.max_inflight_bytes); retry later"
)
BUDGET = web.AppKey("budget", Budget)  # the app's budget, for the tests and the curious


class _OverBudget(Exception):
    """The request's body, once read, would take the budget over: answered 503."""


def _weight(content_type: str) -> int:
    return JSON_DECODE_WEIGHT if content_type == JSON else 1


def _reserve(
    budget: Budget, declared: int | None, gzipped: bool, weight: int, max_body_bytes: int
) -> Reservation | None:
    """Before the body is read: its bytes and, when they are what is decoded, their cost.

    A body of unknown length (chunked) reserves the largest allowed; a gzip body its
    compressed bytes only: its inflated size is reserved as it is inflated (``_inflate``).
    """
    if declared is None:
        return budget.try_reserve(max_body_bytes)
    return budget.try_reserve(declared if gzipped else declared * weight)


def _inflate(body: bytes, reservation: Reservation, weight: int, max_body_bytes: int) -> bytes:
    """Gunzip within what the budget has left, and reserve what was inflated.

    Synchronous, with no await from the room's check to the reservation: nothing else can
    take the room in between. Alone in flight, only ``max_body_bytes`` limits it.
    """
    if not reservation.resize(len(body)):  # never grows: the body is read within its reservation
        raise _OverBudget
    cap = min(max_body_bytes, reservation.room_bytes // weight)
    try:
        inflated = gunzip_capped(body, cap)
    except RequestTooLarge:
        if cap < max_body_bytes:
            raise _OverBudget from None
        raise
    # The compressed body stays held too (aiohttp keeps what request.read() returned).
    if not reservation.resize(len(body) + weight * len(inflated)):
        raise _OverBudget  # cannot happen: inflated fits the room by the cap above
    return inflated


def _reply(message: Message, status: int, content_type: str, **headers: str) -> web.Response:
    body = message_to_json(message) if content_type == JSON else bytes(message.SerializeToString())
    return web.Response(body=body, status=status, content_type=content_type, headers=headers)


def _status(
    code: int, text: str, http_status: int, content_type: str, **headers: str
) -> web.Response:
    return _reply(status_pb2.Status(code=code, message=text), http_status, content_type, **headers)


def _sender(request: web.Request, gate: Gate | None) -> Sender | str:
    peer = request.remote or ""
    if gate is None or gate.open:
        return Sender(peer=peer)
    transport = request.transport
    peercert = transport.get_extra_info("peercert") if transport is not None else None
    token = bearer_token(request.headers.get("Authorization"))
    return gate.admit(peer, token, ssl_common_name(peercert))


def make_app(
    intake: Intake,
    max_body_bytes: int,
    *,
    gate: Gate | None = None,
    read_timeout_s: float | None = None,
    max_inflight_bytes: int = DEFAULT_HTTP_MAX_INFLIGHT_BYTES,
) -> web.Application:
    """``read_timeout_s``: the body must arrive within it, or the answer is 408.

    ``max_inflight_bytes``: the budget of every request being read and decoded at once; a
    request it cannot take is answered 503 with Retry-After before its body is read.
    """
    budget = Budget(max_inflight_bytes)

    def busy(reply_type: str) -> web.Response:
        intake.count_busy(Transport.HTTP)
        return _status(
            code_pb2.UNAVAILABLE,
            BUSY_MESSAGE,
            503,
            reply_type,
            **{"Retry-After": str(BUSY_RETRY_AFTER_S)},
        )

    async def export(request: web.Request) -> web.Response:
        content_type = request.content_type
        reply_type = JSON if content_type == JSON else PROTOBUF
        sender = _sender(request, gate)
        if not isinstance(sender, Sender):
            intake.count_unauthenticated(Transport.HTTP)
            return _status(
                code_pb2.UNAUTHENTICATED,
                sender,
                401,
                reply_type,
                **{"WWW-Authenticate": 'Bearer realm="mcp-breaker"'},
            )
        if content_type not in (PROTOBUF, JSON):
            intake.count_invalid(Transport.HTTP)
            return _status(
                code_pb2.INVALID_ARGUMENT,
                f"unsupported content type {content_type[:80]!r}; use {PROTOBUF} or {JSON}",
                415,
                reply_type,
            )
        encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
        if encoding not in ("gzip", "identity", ""):
            intake.count_invalid(Transport.HTTP)
            return _status(
                code_pb2.INVALID_ARGUMENT,
                f"unsupported content encoding {encoding[:40]!r}; use gzip or none",
                415,
                reply_type,
            )
        declared = request.content_length
        gzipped = encoding == "gzip"
        weight = _weight(content_type)
        reservation: Reservation | None = None
        try:
            if (declared or 0) > max_body_bytes:
                raise RequestTooLarge(max_body_bytes)
            reservation = _reserve(budget, declared, gzipped, weight, max_body_bytes)
            if reservation is None:
                log.debug("OTLP/HTTP: %s refused: the in-flight budget is taken", sender.peer)
                return busy(reply_type)
            body = await asyncio.wait_for(request.read(), read_timeout_s)
            if gzipped:
                body = _inflate(body, reservation, weight, max_body_bytes)
            elif not reservation.resize(weight * len(body)):  # may grow only when chunked
                raise _OverBudget
            if content_type == JSON:
                if len(body) > OFFLOAD_BYTES:
                    with OFF_THE_LOOP:  # protobuf's ParseDict is Python: the loop gets turns
                        decoded = await asyncio.to_thread(request_from_json, body)
                else:
                    decoded = request_from_json(body)
                result = await intake.accept_request(decoded, Transport.HTTP, sender)
            else:
                result = await intake.accept_protobuf(body, Transport.HTTP, sender)
        except _OverBudget:
            log.debug("OTLP/HTTP: %s refused: its body would take the budget over", sender.peer)
            return busy(reply_type)
        except (RequestTooLarge, web.HTTPRequestEntityTooLarge):
            intake.count_invalid(Transport.HTTP)
            return _status(
                code_pb2.RESOURCE_EXHAUSTED,
                f"request body exceeds the {max_body_bytes}-byte limit",
                413,
                reply_type,
            )
        except InvalidRequest as error:
            intake.count_invalid(Transport.HTTP)
            return _status(code_pb2.INVALID_ARGUMENT, str(error), 400, reply_type)
        except TimeoutError:
            intake.count_invalid(Transport.HTTP)
            return _status(
                code_pb2.DEADLINE_EXCEEDED,
                f"the request body did not arrive within {read_timeout_s:g}s",
                408,
                reply_type,
                Connection="close",
            )
        except ConnectionError:
            # The sender went away mid-body: nothing was taken, and nobody is left to read
            # an answer. Raised on, aiohttp would log a traceback for every disconnect.
            intake.count_invalid(Transport.HTTP)
            log.debug("OTLP/HTTP: %s disconnected before its request body arrived", sender.peer)
            return web.Response(status=400, headers={"Connection": "close"})
        finally:
            if reservation is not None:
                reservation.release()
        if result.outcome is IntakeOutcome.REFUSED:
            return _status(
                code_pb2.UNAVAILABLE,
                "mcp-breaker cannot take more spans now; retry later",
                503,
                reply_type,
                **{"Retry-After": str(max(1, math.ceil(result.retry_after_s)))},
            )
        return _reply(result.response, 200, reply_type)

    # aiohttp enforces the raw body size; decompressed size is checked in gunzip_capped.
    app = web.Application(client_max_size=max_body_bytes)
    app[BUDGET] = budget
    app.router.add_post(TRACES_PATH, export)
    return app
