"""How the interpreter is set while a large request is worked on in a thread.

A large request is opened, decoded and analysed in a worker thread so that the event loop
serves everyone else meanwhile (receive/intake.py, receive/http.py), and one larger than
the next hop takes is cut into pieces in one (forward/queue.py). The thread and the loop
share one interpreter lock, and two of the interpreter's settings decide how long the loop
waits for it. Both are process-wide, so each is changed by the first thread that needs it and
put back by the last (a count, under a lock: several requests may be in threads at once).

- ``SWITCH_SOONER``: the switch interval, how long a thread running Python keeps the lock
  from another that waits for it.
- ``FULL_COLLECTIONS_DEFERRED``: no full collection of the cycle collector starts. A full
  collection walks every object in the process holding the lock, the request's too: one
  that starts while 54,522 MCP spans are read walked them all, 176 ms, and every probe and
  sender waited (bench/loop_stall.py). Deferred, it comes once the request is let go, over
  the heap without it (27-39 ms there). Young and middle collections go on as before, so
  what the request leaves as garbage is still collected; only a cycle that has lived long
  waits. Never for longer than ``MAX_DEFERRAL_S`` at a stretch: under a steady stream of
  large requests from several senders there is always one in a thread, and the deferral
  then lapses once that long has passed, until none is.
"""

from __future__ import annotations

import gc
import sys
import threading
import time
from collections.abc import Callable

# How long a thread running Python may keep the interpreter lock from another that waits
# for it (CPython's default is 5 ms), while a request is worked on in a thread: the loop
# waits up to that long each time it wakes, several times for one probe answered. The
# worst /healthz during a 10,000-span analysis was 35-56 ms at the default, 23-36 ms at
# this (bench/loop_stall.py).
ANALYSIS_SWITCH_S = 0.0005
# The collector's old-generation threshold while full collections are deferred: middle
# collections between full ones, more than a request could make.
DEFERRED_OLD_THRESHOLD = 1_000_000_000
MAX_DEFERRAL_S = 10.0  # then full collections may run again, until the next deferral


class _SwitchSooner:
    """The switch interval at ``ANALYSIS_SWITCH_S`` while any request is in a thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._analyses = 0
        self._before = sys.getswitchinterval()

    def __enter__(self) -> None:
        with self._lock:
            if not self._analyses:
                self._before = sys.getswitchinterval()
                sys.setswitchinterval(min(self._before, ANALYSIS_SWITCH_S))
            self._analyses += 1

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._analyses -= 1
            if not self._analyses:
                sys.setswitchinterval(self._before)


class _FullCollectionsDeferred:
    """No full collection while any request is in a thread, for ``MAX_DEFERRAL_S`` at most;
    the collector's thresholds as they were once none is (or the time is up)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._clock = clock
        self._holders = 0
        self._deferring = False
        self._since = 0.0
        self._thresholds = gc.get_threshold()

    def __enter__(self) -> None:
        with self._lock:
            if not self._holders:
                self._thresholds = gc.get_threshold()
                young, middle = self._thresholds[0], self._thresholds[1]
                gc.set_threshold(young, middle, DEFERRED_OLD_THRESHOLD)
                self._deferring, self._since = True, self._clock()
            self._holders += 1

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._holders -= 1
            lapsed = self._clock() - self._since >= MAX_DEFERRAL_S
            if self._deferring and (not self._holders or lapsed):
                gc.set_threshold(*self._thresholds)
                self._deferring = False


class _OffTheLoop:
    """Both, as a request opened, decoded or analysed in a thread wants them."""

    def __enter__(self) -> None:
        SWITCH_SOONER.__enter__()
        FULL_COLLECTIONS_DEFERRED.__enter__()

    def __exit__(self, *exc: object) -> None:
        FULL_COLLECTIONS_DEFERRED.__exit__()
        SWITCH_SOONER.__exit__()


SWITCH_SOONER = _SwitchSooner()
FULL_COLLECTIONS_DEFERRED = _FullCollectionsDeferred()
OFF_THE_LOOP = _OffTheLoop()
