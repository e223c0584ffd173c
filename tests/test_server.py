"""processor/server.py's process settings (the service itself is exercised end to end by
the receiver, delivery and security tests)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from processor.server import GC_MIDDLE_THRESHOLD, GC_OLD_THRESHOLD, GC_YOUNG_THRESHOLD
from tests.sdk import export_grpc
from tests.support import start_serve
from tests.test_seed_replay import harness_calls


def test_garbage_collection_is_tuned_for_a_long_lived_service() -> None:
    # In a process of its own: freezing the test runner's objects would outlive the test.
    probe = (
        "import gc\n"
        "from processor.server import tune_garbage_collection\n"
        "tune_garbage_collection()\n"
        "print(*gc.get_threshold(), gc.get_freeze_count() > 0)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    *thresholds, frozen = done.stdout.split()
    assert tuple(map(int, thresholds)) == (
        GC_YOUNG_THRESHOLD,
        GC_MIDDLE_THRESHOLD,
        GC_OLD_THRESHOLD,
    )
    # Full collections (60-80 ms with the stores full) no more often than at 10,000/10/10.
    assert GC_YOUNG_THRESHOLD * GC_MIDDLE_THRESHOLD * GC_OLD_THRESHOLD >= 10_000 * 10 * 10
    assert frozen == "True"


def test_memory_state_is_said_at_start_and_what_it_forgets_at_stop() -> None:
    """A restart with in-memory state is not a recovery: the operator is told so."""
    process, ports = start_serve("--set", "forward.endpoint=")
    try:
        now_ns = time.time_ns()
        turns = [(f"turn-{i}", [(1, now_ns - (30 - i) * 10**9)]) for i in range(3)]
        for turn, starts in turns:
            spans = harness_calls(turn, starts)
            assert export_grpc(f"127.0.0.1:{ports['grpc']}", spans).name == "SUCCESS"
    finally:
        process.send_signal(signal.SIGTERM)
        _, log = process.communicate(timeout=60)
    assert "breaker state in memory (state.backend: memory): it starts empty" in log
    assert "stopping with " in log and "advisories refusing calls" in log
    assert "the next start will not know of them" in log
