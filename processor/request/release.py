"""Letting go of a large request's objects a slice at a time.

Freeing a container frees everything only it holds in one bytecode, with the interpreter
lock held: 10,000 decoded spans take some 10 ms, their readings 7 more. A request that
large is analysed in a worker thread so that the event loop goes on meanwhile, and the
loop can take the lock only between bytecodes. Emptied in slices, the same objects are
freed in steps of well under a millisecond, between which the loop runs
(bench/loop_stall.py measures what the loop waits).
"""

from __future__ import annotations

from typing import Any

# Objects freed per step: a slice of spans and their readings takes about half a
# millisecond here, a tenth of the interpreter's switch interval.
RELEASE_SLICE = 512


def let_go(container: list[Any] | dict[Any, Any]) -> None:
    """Empty ``container`` a slice at a time (from its end: nothing moves)."""
    if isinstance(container, dict):
        while container:
            for _ in range(min(RELEASE_SLICE, len(container))):
                container.popitem()
        return
    while container:
        del container[-RELEASE_SLICE:]
