"""The C allocator's thresholds, set once at start-up for the traffic a hop sees.

Every request is a few hundred KiB of bytes, copied several times on its way through
(received, its scopes read, encoded again, queued, sent), and each copy is a buffer that
Python asks of the C allocator (its own allocator takes only objects up to 512 bytes).
glibc's defaults suit a program whose large buffers are rare: a block above its mmap
threshold is mapped afresh from the kernel and unmapped when freed, and free memory at
the top of the heap past its trim threshold is given back to the kernel. Both thresholds
start at 128 KiB and grow with the largest block freed, so a request's buffers keep
crossing them: here, copying a request's 195 KiB of scopes into Python took 77 µs with the
defaults against 5 with the thresholds below, nearly all of it page faults on memory the
kernel had just been given back (bench/classify.py's payloads, a scratch timing).

Set explicitly, the thresholds stop moving. The price is memory: freed memory stays in
the process instead of going back to the kernel, up to ``TRIM_THRESHOLD_BYTES`` at the top
of each of glibc's heaps (the main one, and one per thread that allocates, up to eight
per core), and a freed request below ``MMAP_THRESHOLD_BYTES`` is a hole in a heap rather
than a mapping given back. The queue and the stores are bounded by their own settings;
this is what they leave free, not a bound. Only glibc takes these parameters; elsewhere
(musl, macOS) nothing is changed.
"""

from __future__ import annotations

import ctypes
import logging

log = logging.getLogger(__name__)

# Blocks below this come from the heap, above it from a mapping of their own: glibc's
# largest (64-bit), above every request the receivers take (4 MiB gRPC, 20 MiB HTTP).
MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024
# Free memory at the top of the heap kept for the next requests rather than given back.
TRIM_THRESHOLD_BYTES = 64 * 1024 * 1024
# glibc's malloc.h: the parameter numbers mallopt takes.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def tune_allocator() -> bool:
    """Set the thresholds; whether the C library took them (glibc does)."""
    try:
        # The C library this process already runs on (no search for it on disk).
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # no mallopt: not glibc
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    taken = [
        mallopt(parameter, value) == 1
        for parameter, value in (
            (_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES),
            (_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES),
        )
    ]
    if not all(taken):  # musl's mallopt, for one, takes nothing
        log.debug("the C library did not take the allocator's thresholds")
    return all(taken)
