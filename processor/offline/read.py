"""Recorded traces in: files, directories and standard input, cut into OTLP records.

What the Collector's ``file`` exporter writes, and what people keep:

- OTLP/JSON lines: one ``ExportTraceServiceRequest`` per line (``format: json``);
- length-prefixed records: each preceded by its size as 4 bytes, big-endian
  (``format: proto``, and either format with the exporter's own ``compression: zstd``,
  which compresses each record on its own);
- one serialized ``ExportTraceServiceRequest`` per file (an OTLP/HTTP body, a capture);
- any of these compressed whole with gzip or zstd (the exporter's native compression,
  or ``gzip traces.json``).

The layout is told from the bytes, not the file name. Everything streams: one record at a
time is in memory, at most ``max_record_bytes`` after decompression, so a file larger
than memory is fine. A record that cannot be read is reported with its file and line (or
record number) and skipped; the rest of the file is still read.
"""

from __future__ import annotations

import contextlib
import enum
import io
import os
import sys
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

STDIN = "-"
GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
PREFIX_BYTES = 4  # the file exporter's record size: an unsigned 32-bit big-endian integer
# A serialized ExportTraceServiceRequest starts with field 1 (resource_spans), length-
# delimited: tag byte 0x0a. A size prefix cannot start so (it would be over 160 MiB).
REQUEST_TAG = 0x0A
_JSON_SPACE = b" \t\r\n"
_BOM = b"\xef\xbb\xbf"
_SNIFF_BYTES = 64
_CHUNK_BYTES = 1 << 20
_INFLATE_INPUT_BYTES = 16 * 1024  # compressed bytes fed at once: bounds each burst of output


class Layout(enum.StrEnum):
    JSON_LINES = "json_lines"
    LENGTH_PREFIXED = "length_prefixed"
    REQUEST = "request"  # the whole file is one request


class Encoding(enum.StrEnum):
    JSON = "json"
    PROTOBUF = "protobuf"


@dataclass(frozen=True, slots=True)
class Problem:
    """A piece of input that could not be read: where, and what is wrong with it."""

    source: str
    where: str  # "12" (a line), "record 3", "" for the file as a whole
    what: str

    def __str__(self) -> str:
        """``FILE:LINE: what``, ``FILE: record N: what``, or ``FILE: what``."""
        if not self.where:
            return f"{self.source}: {self.what}"
        separator = ":" if self.where.isdigit() else ": "
        return f"{self.source}{separator}{self.where}: {self.what}"


@dataclass(frozen=True, slots=True)
class Record:
    """One encoded OTLP trace export, as found in a file."""

    source: str
    where: str
    encoding: Encoding
    data: bytes


Report = Callable[[Problem], None]
Progress = Callable[[int], None]  # bytes of the file as stored (compressed) read so far


def expand(paths: list[str]) -> tuple[list[str], list[Problem]]:
    """Files to read, in order: each path as given, a directory's files sorted by name
    (recursively, hidden files left out); ``-`` is standard input."""
    found: list[str] = []
    problems: list[Problem] = []
    for path in paths:
        if path == STDIN:
            found.append(path)
        elif os.path.isdir(path):
            inside = sorted(
                str(p)
                for p in Path(path).rglob("*")
                if p.is_file() and not any(part.startswith(".") for part in p.parts[-1:])
            )
            if not inside:
                problems.append(Problem(path, "", "the directory holds no files"))
            found += inside
        elif os.path.exists(path):
            found.append(path)
        else:
            problems.append(Problem(path, "", "no such file or directory"))
    return found, problems


def size_of(path: str) -> int | None:
    if path == STDIN:
        return None
    try:
        return os.path.getsize(path)
    except OSError:
        return None


class _Counting(io.RawIOBase):
    """The stored bytes as they are read, for the progress bar."""

    def __init__(self, raw: BinaryIO, progress: Progress | None) -> None:
        self._raw = raw
        self._progress = progress

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self._raw.read(len(buffer))
        buffer[: len(data)] = data
        if self._progress is not None and data:
            self._progress(len(data))
        return len(data)


class _Inflating(io.RawIOBase):
    """A gzip or zstd stream, member after member (frame after frame), that says when it
    was cut short: ``truncated``, instead of losing what was decompressed before the cut."""

    def __init__(self, source: io.BufferedIOBase, kind: str) -> None:
        self._source = source
        self._kind = kind
        self._engine = self._new()
        self._fed = False  # the current member has had input
        self._input = b""
        self._output = b""
        self.truncated = False

    def _new(self) -> Any:
        if self._kind == "gzip":
            return zlib.decompressobj(16 + zlib.MAX_WBITS)
        import zstandard

        return zstandard.ZstdDecompressor().decompressobj()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        while not self._output:
            if self._engine.eof:  # the member ended: what follows is the next one, if any
                rest, self._input = self._engine.unused_data + self._input, b""
                if not rest:
                    rest = self._source.read(_INFLATE_INPUT_BYTES)
                if not rest:
                    return 0
                if not rest.startswith(GZIP_MAGIC if self._kind == "gzip" else ZSTD_MAGIC):
                    raise ValueError(f"data after the end of the {self._kind} stream")
                self._engine, self._input, self._fed = self._new(), rest, False
            if not self._input:
                self._input = self._source.read(_INFLATE_INPUT_BYTES)
                if not self._input:
                    self.truncated = self._fed
                    return 0
            chunk, self._input = self._input, b""
            self._fed = True
            try:
                self._output = self._engine.decompress(chunk)
            except zlib.error as error:
                raise ValueError(f"not valid gzip: {error}") from None
            except Exception as error:  # zstandard.ZstdError
                raise ValueError(f"not valid zstd: {_reason(error)}") from None
        n = min(len(buffer), len(self._output))
        buffer[:n] = self._output[:n]
        self._output = self._output[n:]
        return n


@contextlib.contextmanager
def open_stream(path: str, progress: Progress | None = None) -> Iterator[io.BufferedReader[Any]]:
    """The file's content, decompressed when it is gzip or zstd as a whole (raises OSError).

    After reading, ``truncated(stream)`` tells whether a compressed file was cut short.
    """
    with contextlib.ExitStack() as stack:
        if path == STDIN:
            raw: BinaryIO = sys.stdin.buffer
        else:
            raw = stack.enter_context(open(path, "rb"))
        stream = io.BufferedReader(_Counting(raw, progress), _CHUNK_BYTES)
        head = stream.peek(len(ZSTD_MAGIC))[: len(ZSTD_MAGIC)]
        if head.startswith(GZIP_MAGIC) or head.startswith(ZSTD_MAGIC):
            kind = "gzip" if head.startswith(GZIP_MAGIC) else "zstd"
            yield io.BufferedReader(_Inflating(stream, kind), _CHUNK_BYTES)
        else:
            yield stream


def truncated(stream: io.BufferedReader) -> bool:
    raw = stream.raw
    return isinstance(raw, _Inflating) and raw.truncated


def sniff(stream: io.BufferedReader, max_record_bytes: int) -> Layout:
    """Which layout the (decompressed) content has, from its first bytes."""
    head = stream.peek(_SNIFF_BYTES)[:_SNIFF_BYTES]
    text = head.removeprefix(_BOM).lstrip(_JSON_SPACE)
    if text.startswith(b"{") and text[1:].lstrip(_JSON_SPACE)[:1] in (b'"', b"}", b""):
        return Layout.JSON_LINES
    if head[:1] == bytes([REQUEST_TAG]):
        return Layout.REQUEST
    if len(head) >= PREFIX_BYTES and int.from_bytes(head[:PREFIX_BYTES], "big") <= (
        max_record_bytes
    ):
        return Layout.LENGTH_PREFIXED
    return Layout.JSON_LINES  # its lines will say what is wrong with them


def records(
    path: str, max_record_bytes: int, report: Report, progress: Progress | None = None
) -> Iterator[Record]:
    """Every record of one file, in file order; what cannot be read goes to ``report``."""
    try:
        with open_stream(path, progress) as stream:
            layout = sniff(stream, max_record_bytes)
            if layout is Layout.JSON_LINES:
                yield from _lines(path, stream, max_record_bytes, report)
            elif layout is Layout.LENGTH_PREFIXED:
                yield from _prefixed(path, stream, max_record_bytes, report)
            else:
                yield from _whole(path, stream, max_record_bytes, report)
            if truncated(stream):
                report(Problem(path, "", "the compressed file ends early: its last record is lost"))
    except OSError as error:
        report(Problem(path, "", error.strerror or _reason(error)))
    except ValueError as error:
        # A compressed stream that is corrupt: what came before it is kept.
        report(Problem(path, "", f"cannot read on: {_reason(error)}"))


def _lines(path: str, stream: io.BufferedReader, limit: int, report: Report) -> Iterator[Record]:
    number = 0
    while True:
        line = stream.readline(limit + 1)
        if not line:
            return
        number += 1
        if len(line) > limit and not line.endswith(b"\n"):
            report(Problem(path, str(number), f"longer than {limit} bytes"))
            while line and not line.endswith(b"\n"):  # skip to the next line
                line = stream.readline(_CHUNK_BYTES)
            continue
        if line.strip(_JSON_SPACE):
            yield Record(path, str(number), Encoding.JSON, line)


def _prefixed(path: str, stream: io.BufferedReader, limit: int, report: Report) -> Iterator[Record]:
    number = 0
    while True:
        prefix = stream.read(PREFIX_BYTES)
        if not prefix:
            return
        number += 1
        where = f"record {number}"
        if len(prefix) < PREFIX_BYTES:
            report(Problem(path, where, "the file ends inside a size prefix"))
            return
        size = int.from_bytes(prefix, "big")
        if size > limit:
            # Nothing says where the next record starts: the rest of the file is lost.
            report(
                Problem(
                    path,
                    where,
                    f"declares {size} bytes, over the {limit}-byte limit; "
                    "the rest of the file is not read",
                )
            )
            return
        data = stream.read(size)
        if len(data) < size:
            report(Problem(path, where, f"the file ends {size - len(data)} bytes into it"))
            return
        if data.startswith(ZSTD_MAGIC):
            try:
                data = _unzstd(data, limit)
            except ValueError as error:
                report(Problem(path, where, str(error)))
                continue
        yield Record(path, where, _encoding(data), data)


def _whole(path: str, stream: io.BufferedReader, limit: int, report: Report) -> Iterator[Record]:
    data = stream.read(limit + 1)
    if len(data) > limit:
        report(Problem(path, "", f"one request larger than {limit} bytes: not read"))
        return
    yield Record(path, "", Encoding.PROTOBUF, data)


def _encoding(data: bytes) -> Encoding:
    return Encoding.JSON if data.lstrip(_JSON_SPACE)[:1] == b"{" else Encoding.PROTOBUF


def _unzstd(data: bytes, limit: int) -> bytes:
    """One record the file exporter compressed on its own, at most ``limit`` bytes out."""
    import zstandard

    engine = zstandard.ZstdDecompressor().decompressobj()
    out = bytearray()
    try:
        for at in range(0, len(data), _INFLATE_INPUT_BYTES):
            out += engine.decompress(data[at : at + _INFLATE_INPUT_BYTES])
            if len(out) > limit:
                raise ValueError(f"decompresses to more than {limit} bytes")
    except zstandard.ZstdError as error:
        raise ValueError(f"not valid zstd: {_reason(error)}") from None
    if not engine.eof:
        raise ValueError("not valid zstd: the record ends inside its frame")
    return bytes(out)


def _reason(error: BaseException) -> str:
    text = str(error).splitlines()[0] if str(error) else type(error).__name__
    return text[:200]
