"""Subscribe and cancel at will: the service's log stays bounded, and says how much it cut.

Against ``mcp-breaker serve`` as a process, whose stderr is the log an operator reads;
the suppressed count is told at the latest when the process exits (SIGTERM here).
"""

from __future__ import annotations

import math
import re
import time

import grpc

from processor.advisories.v1 import advisories_pb2 as pb
from processor.advisories.v1 import advisories_pb2_grpc as pb_grpc
from processor.telemetry import logs
from tests.support import LOOPBACK, start_serve, terminate

CYCLES = 300
SUBSCRIBED = re.compile(r"advisories: cycle-\d+ subscribed \(tenant '', snapshot\)")
NOTE = re.compile(r"\(suppressed (\d+) similar messages in the last \d+ s\)$")
AT_EXIT = re.compile(
    r"suppressed (\d+) similar messages in the last \d+ s: advisories: %s subscribed"
)


def test_300_subscribe_cancel_cycles_write_a_bounded_log_and_a_count() -> None:
    process, ports = start_serve()
    try:
        channel = grpc.insecure_channel(f"{LOOPBACK}:{ports['advisories']}")
        stub = pb_grpc.AdvisoriesStub(channel)
        started = time.monotonic()
        for n in range(CYCLES):
            stream = stub.Subscribe(pb.SubscribeRequest(subscriber_name=f"cycle-{n}"), timeout=30)
            first = next(stream)
            assert first.WhichOneof("kind") == "snapshot"
            stream.cancel()
        windows = 1 + math.ceil((time.monotonic() - started) / logs.REPEAT_WINDOW_S)
        channel.close()
    finally:
        terminate(process)
    _, log = process.communicate()
    lines = log.splitlines()
    told = [line for line in lines if SUBSCRIBED.search(line)]
    noted = [int(m.group(1)) for line in told if (m := NOTE.search(line))]
    at_exit = [int(m.group(1)) for line in lines if (m := AT_EXIT.search(line))]
    assert 0 < len(told) <= logs.REPEATS_PER_WINDOW * windows, len(told)
    assert len(at_exit) == 1, lines[-5:]
    # Every cycle is in the log: as its own line, or in a count.
    assert len(told) + sum(noted) + sum(at_exit) == CYCLES
