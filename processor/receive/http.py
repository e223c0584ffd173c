"""OTLP/HTTP: ``POST /v1/traces`` in protobuf or JSON, answered in the request's encoding.

Status codes follow the OTLP spec and the Collector's mapping: 200 (with partial success
when spans were rejected), 400 with a ``google.rpc.Status`` body for bad data, 413 over
the body limit, 415 for an unknown content type or encoding, 503 with ``Retry-After``
when the forwarder cannot take more.
"""

from __future__ import annotations

import asyncio
import logging
import math

from aiohttp import web
from google.protobuf.message import Message
from google.rpc import code_pb2, status_pb2

from processor.errors import InvalidRequest, RequestTooLarge
from processor.otlp import JSON, PROTOBUF, TRACES_PATH
from processor.receive.codec import gunzip_capped, message_to_json, request_from_json
from processor.receive.gate import Gate, ssl_common_name
from processor.receive.intake import Intake, IntakeOutcome, Transport
from processor.sender import Sender
from processor.tokens import bearer_token

log = logging.getLogger(__name__)

# Bodies larger than this are decoded in a worker thread: protobuf's JSON mapping is Python
# code, about a second for 100,000 spans, and on the event loop every other sender and the
# health probes would wait that long. (The thread shares the GIL, so the loop is slowed,
# not stopped.) Smaller ones are cheaper to decode than to hand over.
OFFLOAD_BYTES = 256 * 1024


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
) -> web.Application:
    """``read_timeout_s``: the body must arrive within it, or the answer is 408."""

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
        try:
            if (request.content_length or 0) > max_body_bytes:
                raise RequestTooLarge(max_body_bytes)
            body = await asyncio.wait_for(request.read(), read_timeout_s)
            if encoding == "gzip":
                body = gunzip_capped(body, max_body_bytes)
            if content_type == JSON:
                decoded = (
                    await asyncio.to_thread(request_from_json, body)
                    if len(body) > OFFLOAD_BYTES
                    else request_from_json(body)
                )
                result = await intake.accept_request(decoded, Transport.HTTP, sender)
            else:
                result = await intake.accept_protobuf(body, Transport.HTTP, sender)
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
    app.router.add_post(TRACES_PATH, export)
    return app
