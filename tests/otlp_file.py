"""Recorded traces as the Collector's ``file`` exporter writes them, from the real SDK.

The spans are made by the OpenTelemetry SDK and encoded by its own OTLP encoder
(``opentelemetry-exporter-otlp-proto-common``): one ``ExportTraceServiceRequest`` per
export. They are written in the exporter's layouts (its ``fileexporter`` README and
``file_writer.go``): ``format: json`` is one OTLP/JSON request per line (lowerCamelCase,
hex ids, enums as integers, 64-bit integers as strings); ``format: proto`` and any format
with its own ``compression: zstd`` put each record after its size, 4 bytes big-endian, the
latter compressing each record on its own. (rotel, the collector the hop tests use, ships
no file exporter in its Python wheel.)
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Sequence
from pathlib import Path

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan

from tests.otlp_builders import to_otlp_json


def encode(spans: Sequence[ReadableSpan]) -> ExportTraceServiceRequest:
    return encode_spans(list(spans))


def otlp_json(request: ExportTraceServiceRequest) -> bytes:
    """One line of the file: compact, as the Collector's JSON marshaler writes it."""
    return json.dumps(to_otlp_json(request), separators=(",", ":")).encode()


def write_json_lines(
    path: Path, exports: Sequence[Sequence[ReadableSpan]], *, compression: str = ""
) -> Path:
    """``format: json``; ``compression`` "gzip" or "zstd" compresses the file as a whole."""
    data = b"".join(otlp_json(encode(spans)) + b"\n" for spans in exports)
    path.write_bytes(_compress(data, compression))
    return path


def write_proto_records(
    path: Path, exports: Sequence[Sequence[ReadableSpan]], *, zstd_records: bool = False
) -> Path:
    """``format: proto``; ``zstd_records``: the exporter's own ``compression: zstd``."""
    out = bytearray()
    for spans in exports:
        record = encode(spans).SerializeToString()
        if zstd_records:
            record = _compress(record, "zstd")
        out += len(record).to_bytes(4, "big") + record
    path.write_bytes(bytes(out))
    return path


def write_request(path: Path, spans: Sequence[ReadableSpan]) -> Path:
    """One serialized request: an OTLP/HTTP protobuf body, as captures are kept."""
    path.write_bytes(encode(spans).SerializeToString())
    return path


def _compress(data: bytes, compression: str) -> bytes:
    if compression == "gzip":
        return gzip.compress(data)
    if compression == "zstd":
        import zstandard

        return zstandard.ZstdCompressor().compress(data)
    return data
