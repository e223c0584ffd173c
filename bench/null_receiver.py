"""A null OTLP/gRPC trace receiver: takes every export and does nothing with it.

The handler gets the request's raw bytes (no deserializer) and answers with an empty
``ExportTraceServiceResponse``, which encodes to no bytes at all. It is the floor of what
any Python hop can do: the cost of grpc.aio itself. It prints nothing per request; on
SIGTERM or SIGINT it prints one JSON line with what it received, so that a benchmark can
check that the spans it sent arrived.

    python bench/null_receiver.py --port 4417
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal

import grpc

SERVICE_NAME = "opentelemetry.proto.collector.trace.v1.TraceService"
# Well over any request the benchmark sends; the null receiver must never be the one to refuse.
MAX_RECEIVE_BYTES = 64 * 1024 * 1024
STOP_GRACE_S = 2.0


async def serve(port: int) -> dict[str, int]:
    received = {"requests": 0, "bytes": 0}

    async def export(payload: bytes, context: grpc.aio.ServicerContext) -> bytes:
        received["requests"] += 1
        received["bytes"] += len(payload)
        return b""

    server = grpc.aio.server(
        options=[
            ("grpc.max_receive_message_length", MAX_RECEIVE_BYTES),
            # A stale receiver on the same port must make this one fail, not share traffic.
            ("grpc.so_reuseport", 0),
        ]
    )
    handler = grpc.unary_unary_rpc_method_handler(export)  # no (de)serializer: raw bytes
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(SERVICE_NAME, {"Export": handler}),)
    )
    server.add_insecure_port(f"127.0.0.1:{port}")  # raises RuntimeError if the port is taken
    await server.start()

    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    await stopping.wait()
    await server.stop(STOP_GRACE_S)
    return received


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=4417, help="port on 127.0.0.1")
    args = parser.parse_args()
    received = asyncio.run(serve(args.port))
    print(json.dumps(received), flush=True)


if __name__ == "__main__":
    main()
