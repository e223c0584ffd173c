"""A large recorded-trace file, fast: the hop benchmark's requests as Collector JSON lines.

    python bench/bulk_traces.py OUT [--spans 1000000] [--malformed-every 200]

The eight ``mixed`` requests of ``payload.py`` (512 spans each, about 15% MCP) are turned
into OTLP/JSON once, as the Collector's file exporter writes them, and each line of the
file is one of them with its trace and span ids and its times rewritten in place (plain
string replacement of fixed-width placeholders: no JSON is encoded per line), one second
of span time per line. Every ``--malformed-every`` lines, one more line that is not a
readable request goes in (cut short, a bad id, not an object), so a reader must skip and
count them; the spans of the good lines come to ``--spans`` rounded up to whole requests.
``--lean`` makes a smaller file of the same shape, for tests: ordinary spans keep two
attributes and one MCP span in three stays (5% of the spans).
OUT ending in ``.zst`` or ``.gz`` is compressed as a whole. Prints what it wrote.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import json
import sys
from pathlib import Path
from typing import IO, Any

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from payload_legacy import build_requests

TRACE_MARK = "@" * 8  # the first 8 hex digits of every trace id: the line number
SPAN_MARK = "~" * 6  # the first 6 hex digits of every span id
SECONDS_MARK = "^" * 10  # the seconds of every time: the line's second
BASE_S = 1_787_011_200  # 2026-08-18 00:00 UTC
MALFORMED = (
    b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"cut sh',
    b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"zz","spanId":"00",'
    b'"name":"tools/call x","startTimeUnixNano":"1","endTimeUnixNano":"2"}]}]}]}',
    b"[1, 2, 3]",
)


def _mark_ids(node: Any) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "traceId" and isinstance(value, str):
                node[key] = TRACE_MARK + base64.b64decode(value).hex()[8:]
            elif key in ("spanId", "parentSpanId") and isinstance(value, str) and value:
                node[key] = SPAN_MARK + base64.b64decode(value).hex()[6:]
            elif key in ("startTimeUnixNano", "endTimeUnixNano") and isinstance(value, str):
                node[key] = SECONDS_MARK + f"{int(value) % 1_000_000_000:09d}"
            else:
                _mark_ids(value)
    elif isinstance(node, list):
        for item in node:
            _mark_ids(item)


def _lean(request: ExportTraceServiceRequest) -> None:
    """Fewer bytes per span: ordinary spans keep two attributes, one MCP span in three stays."""
    for r in request.resource_spans:
        for sc in r.scope_spans:
            kept = []
            mcp = 0
            for s in sc.spans:
                if s.name.startswith("tools/"):
                    mcp += 1
                    if mcp % 3:
                        continue
                else:
                    del s.attributes[2:]
                kept.append(s)
            del sc.spans[:]
            sc.spans.extend(kept)


def templates(*, lean: bool = False) -> list[str]:
    """The payload's requests as JSON lines with placeholders, and times within 1 s."""
    out = []
    for data in build_requests("mixed"):
        request = ExportTraceServiceRequest.FromString(data)
        if lean:
            _lean(request)
        first = min(
            s.start_time_unix_nano
            for r in request.resource_spans
            for sc in r.scope_spans
            for s in sc.spans
        )
        for r in request.resource_spans:  # times from the request's first start
            for sc in r.scope_spans:
                for s in sc.spans:
                    s.start_time_unix_nano -= first
                    s.end_time_unix_nano -= first
                    assert s.end_time_unix_nano < 1_000_000_000
        document = json_format.MessageToDict(request, use_integers_for_enums=True)
        _mark_ids(document)
        out.append(json.dumps(document, separators=(",", ":")))
    return out


def write(
    out: IO[bytes], spans: int, malformed_every: int, *, lean: bool = False
) -> tuple[int, int, int]:
    """Write the file; return (lines of requests, spans in them, malformed lines)."""
    shapes = templates(lean=lean)
    per_line = [text.count('"spanId"') for text in shapes]  # no link in these spans
    lines, written, bad = 0, 0, 0
    while written < spans:
        line = lines
        written += per_line[line % len(shapes)]
        lines += 1
        text = (
            shapes[line % len(shapes)]
            .replace(TRACE_MARK, f"{line:08x}")
            .replace(SPAN_MARK, f"{line:06x}")
            .replace(SECONDS_MARK, str(BASE_S + line))
        )
        out.write(text.encode())
        out.write(b"\n")
        if malformed_every and line % malformed_every == malformed_every - 1:
            out.write(MALFORMED[bad % len(MALFORMED)] + b"\n")
            bad += 1
    return lines, written, bad


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--spans", type=int, default=1_000_000)
    parser.add_argument("--malformed-every", type=int, default=200, metavar="LINES")
    parser.add_argument(
        "--lean", action="store_true", help="ordinary spans with two attributes, 5%% MCP spans"
    )
    args = parser.parse_args()
    if args.out.suffix == ".zst":
        import zstandard

        with (
            open(args.out, "wb") as raw,
            zstandard.ZstdCompressor(level=1).stream_writer(raw) as out,
        ):
            counts = write(out, args.spans, args.malformed_every, lean=args.lean)  # type: ignore[arg-type]
    elif args.out.suffix == ".gz":
        with gzip.open(args.out, "wb", compresslevel=1) as out:
            counts = write(out, args.spans, args.malformed_every, lean=args.lean)
    else:
        with open(args.out, "wb") as out:
            counts = write(out, args.spans, args.malformed_every, lean=args.lean)
    lines, written, bad = counts
    size = args.out.stat().st_size
    print(
        f"{args.out}: {lines:,} requests, {written:,} spans, {bad:,} malformed lines, "
        f"{size / 2**20:,.1f} MiB"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
