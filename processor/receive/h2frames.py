"""What a port gate reads of HTTP/2 as it passes: frame boundaries and the client's resets.

Only the 9-byte frame headers are read, never a payload, and only on a plaintext
connection: a TLS one is passed through unread (its first byte is not the preface's).
A client that resets streams faster than ``ResetBudget`` allows is abusing the
connection (HTTP/2 rapid reset, CVE-2023-44487): each reset stream still cost gRPC a
call, and the peer gives nothing back for it. Pure: no I/O, the clock passed in.
"""

from __future__ import annotations

import enum
import struct

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
FRAME_HEADER_BYTES = 9
RST_STREAM = 0x3
GOAWAY = 0x7
ENHANCE_YOUR_CALM = 0xB  # RFC 9113 section 7: "the peer might be generating excessive load"


class Reading(enum.Enum):
    PREFACE = "preface"  # the client's first bytes, not all seen yet
    FRAMES = "frames"
    OPAQUE = "opaque"  # not cleartext HTTP/2 (TLS): passed through unread


class FrameScanner:
    """Follows one direction of a connection frame by frame, by the headers only."""

    __slots__ = ("_header", "_left", "_preface_seen", "reading", "resets")

    def __init__(self, *, expect_preface: bool) -> None:
        self.reading = Reading.PREFACE if expect_preface else Reading.FRAMES
        self.resets = 0  # RST_STREAM frames seen
        self._preface_seen = 0
        self._header = b""  # a frame header split over reads
        self._left = 0  # payload bytes of the current frame still to come

    @property
    def at_boundary(self) -> bool:
        """Nothing of a frame is pending: a frame written now would not split one."""
        return self.reading is Reading.FRAMES and not self._left and not self._header

    def to_boundary(self) -> int:
        """Bytes to read before the next boundary, or before the current frame's length
        is known (its header still split)."""
        if self._header:
            return FRAME_HEADER_BYTES - len(self._header)
        return self._left or FRAME_HEADER_BYTES

    def feed(self, data: bytes) -> int:
        """Reads ``data``; returns how many RST_STREAM frames began in it."""
        view = memoryview(data)
        if self.reading is Reading.PREFACE:
            view = self._preface(view)
        if self.reading is not Reading.FRAMES:
            return 0
        before = self.resets
        at, end = 0, len(view)
        while at < end:
            if self._left:
                step = min(self._left, end - at)
                self._left -= step
                at += step
                continue
            need = FRAME_HEADER_BYTES - len(self._header)
            self._header += bytes(view[at : at + need])
            at += need
            if len(self._header) < FRAME_HEADER_BYTES:
                break
            length_high, length_low, kind = struct.unpack_from(">BHB", self._header)
            self._left = (length_high << 16) | length_low
            self._header = b""
            if kind == RST_STREAM:
                self.resets += 1
        return self.resets - before

    def _preface(self, view: memoryview) -> memoryview:
        expected = PREFACE[self._preface_seen :]
        head = bytes(view[: len(expected)])
        if not expected.startswith(head):
            self.reading = Reading.OPAQUE
            return view
        self._preface_seen += len(head)
        if self._preface_seen == len(PREFACE):
            self.reading = Reading.FRAMES
        return view[len(head) :]


class ResetBudget:
    """A token bucket of stream resets: ``burst`` at once, refilled at ``per_s``.

    gRPC exporters reset a stream only when an export times out or is cancelled, a few
    a minute at worst; rapid reset sends thousands a second."""

    __slots__ = ("_at", "_tokens", "burst", "per_s")

    def __init__(self, burst: float, per_s: float, now: float) -> None:
        self.burst = burst
        self.per_s = per_s
        self._tokens = burst
        self._at = now

    def spend(self, resets: int, now: float) -> bool:
        """False once the resets outrun the budget: the connection is abusing."""
        self._tokens = min(self.burst, self._tokens + (now - self._at) * self.per_s)
        self._at = now
        self._tokens -= resets
        return self._tokens >= 0


def goaway_frame(error_code: int, debug: bytes = b"") -> bytes:
    """A GOAWAY for the whole connection. The gate does not know the last stream gRPC
    took, so it names the highest; it closes the connection right after, and whatever
    was unanswered on it fails for its sender (UNAVAILABLE: retried)."""
    payload = struct.pack(">II", 0x7FFFFFFF, error_code) + debug
    length = len(payload)
    return struct.pack(">BHBBI", length >> 16, length & 0xFFFF, GOAWAY, 0, 0) + payload
