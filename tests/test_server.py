"""processor/server.py's process settings (the service itself is exercised end to end by
the receiver, delivery and security tests)."""

from __future__ import annotations

import subprocess
import sys

from processor.server import GC_YOUNG_THRESHOLD


def test_garbage_collection_is_tuned_for_a_long_lived_service() -> None:
    # In a process of its own: freezing the test runner's objects would outlive the test.
    probe = (
        "import gc\n"
        "from processor.server import tune_garbage_collection\n"
        "before = gc.get_threshold()\n"
        "tune_garbage_collection()\n"
        "print(before[0], gc.get_threshold()[0], gc.get_threshold()[1:] == before[1:], "
        "gc.get_freeze_count() > 0)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    default, tuned, older_kept, frozen = done.stdout.split()
    assert int(default) < GC_YOUNG_THRESHOLD == int(tuned)
    assert older_kept == "True"
    assert frozen == "True"
