"""A null forwarder: an OTLP/gRPC hop that passes each request's raw bytes on, untouched.

The handler gets the request's bytes (no deserializer), sends those very bytes to the next
hop over one grpc.aio channel (no serializer), waits for its answer and answers the sender
with an empty ``ExportTraceServiceResponse``. Nothing is decoded, queued or retried: it
is the fair floor for a forwarding hop in Python, one receive and one send of grpc.aio per
request. ``bench/naive_hop.py`` is the same server with a transform in between.

    python bench/null_forwarder.py --port 4418 --target 127.0.0.1:4417
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
from collections.abc import Callable

import grpc

SERVICE_NAME = "opentelemetry.proto.collector.trace.v1.TraceService"
EXPORT_METHOD = f"/{SERVICE_NAME}/Export"
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
FORWARD_TIMEOUT_S = 10.0
STOP_GRACE_S = 2.0

Transform = Callable[[bytes], bytes]


async def serve(port: int, target: str, transform: Transform | None = None) -> dict[str, int]:
    forwarded = {"requests": 0, "bytes": 0}
    sizes = [("grpc.max_send_message_length", MAX_MESSAGE_BYTES)]
    sizes.append(("grpc.max_receive_message_length", MAX_MESSAGE_BYTES))
    async with grpc.aio.insecure_channel(target, options=sizes) as channel:
        forward = channel.unary_unary(EXPORT_METHOD)  # bytes in, bytes out

        async def export(payload: bytes, context: grpc.aio.ServicerContext) -> bytes:
            if transform is not None:
                payload = transform(payload)
            await forward(payload, timeout=FORWARD_TIMEOUT_S)  # a failure answers the sender
            forwarded["requests"] += 1
            forwarded["bytes"] += len(payload)
            return b""

        server = grpc.aio.server(options=[*sizes, ("grpc.so_reuseport", 0)])
        handler = grpc.unary_unary_rpc_method_handler(export)  # no (de)serializer
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(SERVICE_NAME, {"Export": handler}),)
        )
        server.add_insecure_port(f"127.0.0.1:{port}")  # raises RuntimeError if taken
        await server.start()
        stopping = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stopping.set)
        await stopping.wait()
        await server.stop(STOP_GRACE_S)
    return forwarded


def main(transform: Transform | None = None, description: str = __doc__) -> None:
    parser = argparse.ArgumentParser(description=description.splitlines()[0])
    parser.add_argument("--port", type=int, required=True, help="port on 127.0.0.1")
    parser.add_argument("--target", required=True, metavar="HOST:PORT", help="the next hop")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(serve(args.port, args.target, transform))), flush=True)


if __name__ == "__main__":
    main()
