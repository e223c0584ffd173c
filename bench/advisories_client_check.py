"""Part 4 of the advisory benchmark: ``check()`` in the client library, as a harness calls it.

A second serve process, whose across-turn circuits do open (at
``ceil(--mirror-turns / 20) + 1`` failures in a row, more than any server of the turn
blocks gets, and never by the failure ratio), and an ``AdvisoryClient`` subscribed to it.
Failing spans, sent as in part 1, leave its mirror holding ``--mirror-turns`` turn blocks
of a tool over 20 servers, 20 blocks of an exact call (a tool error with arguments), and
3 server and 5 tool circuits (each opened by failures in a row within one turn, which
blocks that turn too; a down server's tool opens with it). Then ``--client-checks`` calls
of each kind, alternated, each timed alone with ``perf_counter_ns``: ``client.check`` for
a call a turn block denies, a call in a turn with no advisory (allowed), a call in a turn
that has an exact-call advisory for other arguments (allowed, once the fingerprint of its
arguments is computed), and a call a server circuit denies; the same four on a ``Mirror``
holding the same advisories, called directly, without the client's lock (the time is
read in the call, as the client reads it); and, as the floor, a plain dict lookup of a
tuple key. The timer's own cost is in every figure.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

# Sibling modules: bench/ is on sys.path when these files are run as scripts.
from advisories_figures import SHORT, heading, line, quantiles, row
from advisories_service import CONNECT_TIMEOUT_S, DELIVERY_WAIT_S, start_service, wait
from advisories_spans import (
    ARGUMENTS,
    ERROR,
    HARNESS,
    SERVERS,
    TOOL,
    Event,
    Numbering,
    Sender,
    export_request,
    failed_span,
)
from hop_processes import check_alive
from mcp_breaker_client import AdvisoryClient, ClientConfig, Decision, Mirror

from processor.advisories.v1 import advisories_pb2 as pb

# What else the mirror holds, besides the turn blocks of a tool.
CALL_TURNS = SERVERS  # blocks of an exact call, one per server
CALL_TOOL = "query_table"
TOOL_ERROR = 'query failed: column "customer_ref" does not exist'  # the tool ran: tool_error
CALL_ARGUMENTS = {"table": "orders", "where": "customer_ref = 42", "limit": 50}
CORRECTED_ARGUMENTS = {"table": "orders", "where": "customer_id = 42", "limit": 50}
DOWN_SERVERS = 3  # server circuits: transport failures in a row
FLAKY_TOOLS = 2  # tool circuits: tool errors in a row
FLAKY_TOOL = "search_docs"
FREE_TURN = "bench-check-free-turn"  # a turn nothing was recorded in
SCOPES = {
    pb.SCOPE_TURN_TOOL: "turn_tool",
    pb.SCOPE_TURN_CALL: "turn_call",
    pb.SCOPE_SERVER: "server",
    pb.SCOPE_TOOL: "tool",
}
CHECK_CASES = {
    "turn_block": "denied by a turn block",
    "no_advisory": "no advisory in the turn",
    "exact_call": "exact-call advisory in turn",
    "server_circuit": "denied by a server circuit",
}


def mirror_population(numbering: Numbering, turns: int, failures: int) -> list[Event]:
    """Requests that leave a mirror holding ``turns`` turn blocks of a tool (a transport
    failure each, over SERVERS servers), CALL_TURNS blocks of an exact call (a tool error
    with arguments), DOWN_SERVERS server circuits and FLAKY_TOOLS tool circuits (each
    opened by ``failures`` failures in a row within one turn, in one request; the first
    of them blocks that turn's tool or call too)."""
    events = numbering.events("mirror", turns)
    for i in range(CALL_TURNS):
        turn, server = f"bench-call-turn-{i:05d}", f"bench-mcp-{i % SERVERS:02d}"
        span = failed_span(
            turn,
            server,
            numbering.take(1),
            tool=CALL_TOOL,
            error=TOOL_ERROR,
            arguments=json.dumps(CALL_ARGUMENTS),
        )
        events.append(Event(turn, server, export_request([span])))
    circuits = [(f"bench-down-{i}", TOOL, ERROR) for i in range(DOWN_SERVERS)]
    circuits += [(f"bench-flaky-{i}", FLAKY_TOOL, TOOL_ERROR) for i in range(FLAKY_TOOLS)]
    for server, tool, error in circuits:
        turn, first = f"bench-circuit-turn-{server}", numbering.take(failures)
        now_ns = time.time_ns()
        spans = [
            failed_span(turn, server, first + j, tool=tool, error=error, start_ns=now_ns + j)
            for j in range(failures)
        ]
        events.append(Event(turn, server, export_request(spans)))
    return events


def expected_mirror(turns: int) -> dict[str, int]:
    return {
        "turn_tool": turns + DOWN_SERVERS,
        "turn_call": CALL_TURNS + FLAKY_TOOLS,
        "server": DOWN_SERVERS,
        # A down server's tool opens too: every failure counts against its tool.
        "tool": FLAKY_TOOLS + DOWN_SERVERS,
    }


def by_scope(advisories: Sequence[pb.Advisory]) -> dict[str, int]:
    counts = dict.fromkeys(SCOPES.values(), 0)
    for advisory in advisories:
        scope = SCOPES.get(advisory.scope, "other")
        counts[scope] = counts.get(scope, 0) + 1
    return counts


def time_calls(
    calls: dict[str, Callable[[], Any]], expected: dict[str, Decision], count: int
) -> tuple[dict[str, list[float]], dict[str, int]]:
    """Each call ``count`` times (after a twentieth as many rounds of warm-up), the kinds
    alternated and rotated so that none always goes first: µs per call, the timer's own
    cost included; and how often each call answered other than ``expected``."""
    names = list(calls)
    samples: dict[str, list[float]] = {name: [] for name in names}
    wrong = dict.fromkeys(expected, 0)
    clock = time.perf_counter_ns
    for round_ in range(-max(1, count // 20), count):
        for offset in range(len(names)):
            name = names[(round_ + offset) % len(names)]
            call = calls[name]
            began = clock()
            result = call()
            elapsed = clock() - began
            if round_ >= 0:
                samples[name].append(elapsed / 1e3)
            if name in expected:
                wrong[name] += result.decision is not expected[name]
    return samples, wrong


def check_calls(
    client: AdvisoryClient, mirror: Mirror, turn: str, server: str, tool: str, arguments: Any
) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """One call's check through the client, and on the mirror directly (the client reads
    its clock, then calls Mirror.check under its lock)."""

    def through_client() -> Any:
        return client.check(turn, server, tool, arguments)

    def direct() -> Any:
        return mirror.check(
            turn=turn, server=server, tool=tool, arguments=arguments, now_s=time.time()
        )

    return through_client, direct


def run_client_checks(workdir: Path, args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    """Part 4, against a serve process of its own; its figures, and what it logged."""
    failures = math.ceil(args.mirror_turns / SERVERS) + 1
    breaker = (f"breaker.consecutive_failures={failures}", f"breaker.min_calls={2**31 - 1}")
    with ExitStack() as stack:
        service = start_service(workdir, stack, args, "serve-circuits", breaker)
        sender = Sender(service.otlp)
        stack.callback(sender.close)
        config = ClientConfig(subscriber_name="bench-check-client")
        client = AdvisoryClient(service.advisories, harness=HARNESS, config=config)
        stack.callback(client.close)  # before the service stops (last in, first out)
        if not client.wait_until_synced(CONNECT_TIMEOUT_S):
            raise RuntimeError(f"the check client never synced: {client.failure or 'no stream'}")
        events = mirror_population(Numbering(), args.mirror_turns, failures)
        sender.send(events, 0.0)
        expected = expected_mirror(args.mirror_turns)
        wait(lambda: by_scope(client.advisories()) == expected, "", DELIVERY_WAIT_S)
        advisories = client.advisories()
        mirror = Mirror()  # the same advisories, for Mirror.check without the client
        mirror.replace(*client.position, advisories)

        blocked = events[args.mirror_turns // 2]
        exact = events[args.mirror_turns]  # the first block of an exact call
        arguments, corrected = json.loads(ARGUMENTS), CORRECTED_ARGUMENTS
        cases: dict[str, tuple[str, str, str, Any, Decision]] = {
            "turn_block": (blocked.turn, blocked.server, TOOL, arguments, Decision.DENY),
            "no_advisory": (FREE_TURN, blocked.server, TOOL, arguments, Decision.ALLOW),
            "exact_call": (exact.turn, exact.server, CALL_TOOL, corrected, Decision.ALLOW),
            "server_circuit": (FREE_TURN, "bench-down-0", TOOL, arguments, Decision.DENY),
        }
        table = {("turn_tool", a.turn, a.server, a.tool): a for a in advisories}
        key_turn, key_server = blocked.turn, blocked.server
        calls: dict[str, Callable[[], Any]] = {
            "dict": lambda: table[("turn_tool", key_turn, key_server, TOOL)]
        }
        decisions: dict[str, Decision] = {}
        for case, (turn, server, tool, call_arguments, decision) in cases.items():
            calls[f"client_{case}"], calls[f"mirror_{case}"] = check_calls(
                client, mirror, turn, server, tool, call_arguments
            )
            decisions[f"client_{case}"] = decisions[f"mirror_{case}"] = decision
        samples, wrong = time_calls(calls, decisions, args.client_checks)
        stats = dataclasses.asdict(client.stats)
        check_alive(service.child)
        stack.close()
        log = service.child.output.read_text(errors="replace").strip()
    figures = {
        "calls": args.client_checks,
        "circuit_failures": failures,
        "held": by_scope(advisories),
        "expected": expected,
        "servers": len({a.server for a in advisories}),
        "wrong_answers": wrong,
        "client": stats,
        **{f"{name}_us": quantiles(values) for name, values in samples.items()},
    }
    return figures, log


def report_client_checks(k: dict[str, Any]) -> None:
    heading(f"4. client.check(), {k['calls']} calls each, µs", SHORT)
    row("dict lookup of a tuple key (baseline)", k["dict_us"], SHORT)
    for case, what in CHECK_CASES.items():
        row(f"client.check, {what}", k[f"client_{case}_us"], SHORT)
    for case, what in CHECK_CASES.items():
        row(f"Mirror.check, {what}", k[f"mirror_{case}_us"], SHORT)
    line("Mirror.check", "a Mirror holding the same, called directly: no lock")
    held = k["held"]
    line(
        "the mirror held",
        f"{sum(held.values())} advisories on {k['servers']} servers: {held['turn_tool']} turn "
        f"blocks of a tool, {held['turn_call']} of an exact call, {held['server']} server "
        f"and {held['tool']} tool circuits",
    )
    line(
        "circuits opened by",
        f"{k['circuit_failures']} failures in a row (breaker.consecutive_failures)",
    )
    answers = "as expected" if not any(k["wrong_answers"].values()) else k["wrong_answers"]
    line("answers (DENY, ALLOW, ALLOW, DENY)", answers)
