"""Part 3 of the advisory benchmark: the unary ``Advisories/Check`` RPC.

Sequential calls from one client (a blocked call: DENY; an unknown turn: ALLOW) next to a
baseline, the gRPC health Check on the OTLP port, alternated, in the same run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc

# Sibling modules: bench/ is on sys.path when these files are run as scripts.
from advisories_figures import SHORT, heading, quantiles, row, timed
from advisories_service import CALL_TIMEOUT_S, Service
from advisories_spans import TOOL, Event
from grpc_health.v1 import health_pb2, health_pb2_grpc

from processor.advisories.v1 import advisories_pb2 as pb
from processor.advisories.v1 import advisories_pb2_grpc as pb_grpc


def run_checks(service: Service, blocked: Event, count: int) -> dict[str, Any]:
    advisory_channel = grpc.insecure_channel(service.advisories)
    otlp_channel = grpc.insecure_channel(service.otlp)
    try:
        check = pb_grpc.AdvisoriesStub(advisory_channel).Check  # type: ignore[no-untyped-call]
        health = health_pb2_grpc.HealthStub(otlp_channel).Check
        deny = pb.CheckRequest(turn=blocked.turn, server=blocked.server, tool=TOOL)
        allow = pb.CheckRequest(turn="bench-check-turn", server="bench-check", tool=TOOL)
        calls: dict[str, Callable[[], Any]] = {
            "health": lambda: health(health_pb2.HealthCheckRequest(), timeout=CALL_TIMEOUT_S),
            "deny": lambda: check(deny, timeout=CALL_TIMEOUT_S),
            "allow": lambda: check(allow, timeout=CALL_TIMEOUT_S),
        }
        expected = {
            "health": health_pb2.HealthCheckResponse.SERVING,
            "deny": pb.VERDICT_DENY,
            "allow": pb.VERDICT_ALLOW,
        }
        latencies: dict[str, list[float]] = {name: [] for name in calls}
        wrong: dict[str, int] = dict.fromkeys(calls, 0)
        names = list(calls)
        for round_ in range(-max(1, count // 20), count):  # the first rounds warm up
            for offset in range(len(names)):  # rotated, so no kind always goes first
                name = names[(round_ + offset) % len(names)]
                elapsed, response = timed(calls[name])
                answer = response.status if name == "health" else response.verdict
                wrong[name] += answer != expected[name]
                if round_ >= 0:
                    latencies[name].append(elapsed)
        return {
            "calls": count,
            "wrong_answers": wrong,
            **{f"{name}_ms": quantiles(values) for name, values in latencies.items()},
        }
    finally:
        advisory_channel.close()
        otlp_channel.close()


def report_checks(c: dict[str, Any]) -> None:
    heading(f"3. Check RPC, sequential, {c['calls']} calls each, ms", SHORT)
    row("grpc.health.v1 Check, OTLP port (baseline)", c["health_ms"], SHORT)
    row("Advisories/Check, a blocked call (DENY)", c["deny_ms"], SHORT)
    row("Advisories/Check, an unknown turn (ALLOW)", c["allow_ms"], SHORT)
