"""Engine cost per MCP event, and memory per tracked turn and per tracked key.

    .venv/bin/python bench/engines.py [--events 20000]

Cost: Breaker.observe over a realistic stream (many turns, a few hundred tools, 20%
failures), in ns per event, next to a baseline measured in the same run: a dict counter
update per event (the cheapest "state per key" Python can do). Memory: tracemalloc's
growth while the breaker tracks N new turns, and N new tool keys, divided by N.
"""

from __future__ import annotations

import argparse
import random
import time
import tracemalloc
from collections.abc import Callable

from mcp_breaker_client.shared.verdict import FailureClass, Outcome, Verdict

from processor.classify.events import Dialect, ToolCall
from processor.config import BreakerConfig
from processor.engines.breaker import Breaker

CLASSES = (FailureClass.TRANSPORT, FailureClass.TOOL_ERROR, FailureClass.PROTOCOL)


def stream(events: int, turns: int, tools: int, seed: int = 7) -> list[ToolCall]:
    rng = random.Random(seed)
    calls = []
    for i in range(events):
        failed = rng.random() < 0.2
        verdict = Verdict(
            outcome=Outcome.FAILED if failed else Outcome.OK,
            failure_class=rng.choice(CLASSES) if failed else None,
            error_excerpt="upstream MCP session is closed" if failed else "",
        )
        tool = rng.randrange(tools)
        start = 1_700_000_000_000_000_000 + i * 2_000_000_000  # a call every 2 s
        calls.append(
            ToolCall(
                turn=f"turn-{rng.randrange(turns)}",
                round=None,
                server=f"server-{tool % 20}",
                tool=f"tool-{tool}",
                fingerprint=f"{rng.randrange(4):032x}",
                verdict=verdict,
                start_ns=start,
                end_ns=start + 500_000_000,
                trace_id=i.to_bytes(16, "big"),
                span_ids=(i.to_bytes(8, "big"),),
                dialect=Dialect.HARNESS,
            )
        )
    return calls


def best_ns_per_event(work: Callable[[], None], events: int, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter_ns()
        work()
        best = min(best, (time.perf_counter_ns() - started) / events)
    return best


def bytes_per(make: Callable[[int], ToolCall], count: int) -> float:
    breaker = Breaker(BreakerConfig(max_turns=10**6, max_circuits=10**6), jitter=lambda: 0.5)
    warm = [make(i) for i in range(count)]
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for call in warm:
        breaker.observe(call)
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return grown / count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    calls = stream(args.events, turns=2_000, tools=300)

    def observe_all() -> None:
        breaker = Breaker(BreakerConfig(), jitter=lambda: 0.5)
        for call in calls:
            breaker.observe(call)

    def count_all() -> None:
        counts: dict[str, int] = {}
        for call in calls:
            counts[call.tool] = counts.get(call.tool, 0) + 1

    engine = best_ns_per_event(observe_all, len(calls), args.rounds)
    baseline = best_ns_per_event(count_all, len(calls), args.rounds)
    base = stream(1, 1, 1)[0]

    def new_turn(i: int) -> ToolCall:
        return _with(base, turn=f"turn-{i}", tool="tool-0")

    def new_tool(i: int) -> ToolCall:
        return _with(base, turn="turn-0", tool=f"tool-{i}")

    print(f"events: {len(calls):,} (2,000 turns, 300 tools, 20% failures)")
    print(f"Breaker.observe            {engine:10,.0f} ns/event")
    print(f"dict counter (baseline)    {baseline:10,.0f} ns/event")
    print(f"ratio                      {engine / baseline:10.1f}x")
    print(f"memory per tracked turn    {bytes_per(new_turn, 5_000):10,.0f} bytes")
    print(
        f"memory per tracked tool    {bytes_per(new_tool, 5_000):10,.0f} bytes "
        "(its circuit and window)"
    )
    return 0


def _with(call: ToolCall, *, turn: str, tool: str) -> ToolCall:
    from dataclasses import replace

    failed = Verdict(
        outcome=Outcome.FAILED, failure_class=FailureClass.TOOL_ERROR, error_excerpt="bad arguments"
    )
    return replace(call, turn=turn, tool=tool, verdict=failed)


if __name__ == "__main__":
    raise SystemExit(main())
