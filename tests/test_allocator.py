"""The C allocator's thresholds (processor/allocator.py): a request's buffers stop costing
page faults once they are set.

Each pattern runs in a fresh interpreter (the thresholds are the process's, and so is the
state of its heap), and the faults are the kernel's count, not a time: the same figures on
a busy machine as on a quiet one.
"""

from __future__ import annotations

import os
import subprocess
import sys

# A request's scopes copied into Python and let go, again and again (the sizes of one of
# bench/payload.py's mixed requests): the minor page faults this costs, printed.
PATTERN = """
import os, resource, sys
if sys.argv[1] == "tuned":
    from processor.allocator import tune_allocator
    assert tune_allocator()
source = os.urandom(128 * 1024)
sizes = [5 * 1024, 10 * 1024, 26 * 1024, 58 * 1024, 95 * 1024]
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(500):
    held = [source[i : i + n] for i, n in enumerate(sizes)]
    del held
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def run(code: str, *arguments: str) -> str:
    """``code`` in a fresh interpreter, without the variables that set glibc's thresholds
    from outside (they would make the defaults measured here not the defaults)."""
    env = {
        k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES" and not k.startswith("MALLOC_")
    }
    done = subprocess.run(
        [sys.executable, "-c", code, *arguments],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return done.stdout.strip()


def test_the_c_library_here_takes_the_thresholds() -> None:
    # glibc, as on every Linux image the chart runs.
    taken = run("from processor.allocator import tune_allocator; print(tune_allocator())")
    assert taken == "True"


def test_buffers_of_a_request_stop_faulting_once_the_thresholds_are_set() -> None:
    default, tuned = int(run(PATTERN, "default")), int(run(PATTERN, "tuned"))
    assert default > 2_000  # the defaults give memory back and fault it in again
    assert tuned < default / 10
