"""Reading recorded traces: every layout the Collector's file exporter writes, compressed or
not, and what is said about input that cannot be read (file, line or record, what)."""

from __future__ import annotations

import gzip
import io
import subprocess
import sys
from pathlib import Path

import pytest
import zstandard
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from processor.offline.read import Encoding, Layout, Problem, expand, open_stream, records, sniff
from tests.otlp_file import encode, otlp_json, write_json_lines, write_proto_records, write_request
from tests.sdk import record_spans

LIMIT = 1 << 20


def exports(n: int = 3) -> list[list]:  # type: ignore[type-arg]
    return [record_spans(4, mcp_every=2) for _ in range(n)]


def sdk_span_ids(spans: list) -> list[bytes]:  # type: ignore[type-arg]
    return [span.context.span_id.to_bytes(8, "big") for span in spans]


def request_span_ids(request: ExportTraceServiceRequest) -> list[bytes]:
    return [s.span_id for r in request.resource_spans for sc in r.scope_spans for s in sc.spans]


def read_all(path: Path | str, limit: int = LIMIT) -> tuple[list, list[Problem]]:  # type: ignore[type-arg]
    problems: list[Problem] = []
    found = list(records(str(path), limit, problems.append))
    return found, problems


def decoded_requests(found: list) -> list[ExportTraceServiceRequest]:  # type: ignore[type-arg]
    from processor.receive.codec import request_from_json

    return [
        request_from_json(r.data)
        if r.encoding is Encoding.JSON
        else ExportTraceServiceRequest.FromString(r.data)
        for r in found
    ]


@pytest.mark.parametrize(
    ("write", "layout"),
    [
        (lambda p, e: write_json_lines(p, e), Layout.JSON_LINES),
        (lambda p, e: write_json_lines(p, e, compression="gzip"), Layout.JSON_LINES),
        (lambda p, e: write_json_lines(p, e, compression="zstd"), Layout.JSON_LINES),
        (lambda p, e: write_proto_records(p, e), Layout.LENGTH_PREFIXED),
        (lambda p, e: write_proto_records(p, e, zstd_records=True), Layout.LENGTH_PREFIXED),
    ],
    ids=[
        "format json",
        "json, gzip as a whole",
        "json, zstd as a whole (native compression)",
        "format proto",
        "proto, each record zstd (the exporter's compression: zstd)",
    ],
)
def test_every_layout_gives_back_every_request(tmp_path: Path, write, layout: Layout) -> None:  # type: ignore[no-untyped-def]
    sent = exports()
    path = write(tmp_path / "traces", sent)
    with open_stream(str(path)) as stream:
        assert sniff(stream, LIMIT) is layout
    found, problems = read_all(path)
    assert problems == []
    assert decoded_requests(found) == [encode(spans) for spans in sent]


def test_a_request_file_and_a_directory_of_them(tmp_path: Path) -> None:
    sent = exports(2)
    (tmp_path / "in").mkdir()
    for n, spans in enumerate(sent):
        write_request(tmp_path / "in" / f"{n}.otlp.bin", spans)
    (tmp_path / "in" / ".hidden").write_bytes(b"not read")
    files, problems = expand([str(tmp_path / "in")])
    assert problems == [] and [Path(f).name for f in files] == ["0.otlp.bin", "1.otlp.bin"]
    found = [r for f in files for r in read_all(f)[0]]
    assert decoded_requests(found) == [encode(spans) for spans in sent]


def test_missing_paths_and_empty_directories_are_named(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    _, problems = expand([str(tmp_path / "nope.json"), str(tmp_path / "empty")])
    assert [str(p) for p in problems] == [
        f"{tmp_path / 'nope.json'}: no such file or directory",
        f"{tmp_path / 'empty'}: the directory holds no files",
    ]


def test_unreadable_lines_are_named_and_the_rest_is_read(tmp_path: Path) -> None:
    good = [otlp_json(encode(spans)) for spans in exports(2)]
    path = tmp_path / "t.json"
    path.write_bytes(good[0] + b"\n\n" + b"x" * 200 + b"\n" + good[1] + b"\n")
    found, problems = read_all(path, limit=150 + max(map(len, good)))
    # Line 2 is empty: no record. Line 3 is garbage, but a line: decoding it fails later.
    assert [r.where for r in found] == ["1", "3", "4"]
    assert problems == []
    found, problems = read_all(path, limit=100)
    assert [str(p) for p in problems] == [
        f"{path}:1: longer than 100 bytes",
        f"{path}:3: longer than 100 bytes",
        f"{path}:4: longer than 100 bytes",
    ]


def test_a_record_size_past_the_limit_stops_the_file_and_says_so(tmp_path: Path) -> None:
    path = write_proto_records(tmp_path / "t.bin", exports(2))
    data = path.read_bytes()
    path.write_bytes(data + (LIMIT + 1).to_bytes(4, "big") + b"\x0a" * 10)
    found, problems = read_all(path)
    assert len(found) == 2
    assert [str(p) for p in problems] == [
        f"{path}: record 3: declares {LIMIT + 1} bytes, over the {LIMIT}-byte limit; "
        "the rest of the file is not read"
    ]


@pytest.mark.parametrize(
    ("tail", "what"),
    [
        (b"\x00\x00", "the file ends inside a size prefix"),
        (b"\x00\x00\x00\x10abc", "the file ends 13 bytes into it"),
        (b"\x00\x00\x00\x08" + b"\x28\xb5\x2f\xfd" + b"junk", "not valid zstd"),
    ],
    ids=["cut in a prefix", "cut in a record", "a record that is not zstd"],
)
def test_a_damaged_record_is_named(tmp_path: Path, tail: bytes, what: str) -> None:
    path = write_proto_records(tmp_path / "t.bin", exports(1))
    path.write_bytes(path.read_bytes() + tail)
    found, problems = read_all(path)
    assert len(found) == 1
    assert len(problems) == 1 and problems[0].where == "record 2"
    assert what in problems[0].what


@pytest.mark.parametrize("compression", ["gzip", "zstd"])
def test_a_compressed_file_cut_short_keeps_what_came_before(
    tmp_path: Path, compression: str
) -> None:
    # Large enough for several zstd blocks: a block cut short is lost whole.
    path = write_json_lines(tmp_path / "t.json", exports(300), compression=compression)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) * 2 // 3])
    found, problems = read_all(path)
    assert 0 < len(found) < 300
    assert [p.what for p in problems] == ["the compressed file ends early: its last record is lost"]


def test_a_corrupt_compressed_file_keeps_what_came_before(tmp_path: Path) -> None:
    sent = exports(600)
    path = write_json_lines(tmp_path / "t.json", sent, compression="gzip")
    data = bytearray(path.read_bytes())
    assert len(data) > 4 * 16 * 1024  # several of the reader's input chunks
    data[len(data) // 2 : len(data) // 2 + 64] = b"\x00" * 64
    path.write_bytes(bytes(data))
    found, problems = read_all(path)
    assert len(problems) == 1 and problems[0].what.startswith("cannot read on: not valid gzip")
    # Deflate may turn the damage into some bytes of garbage before gzip notices, so the
    # records read are: an intact prefix of what was written, then perhaps garbage.
    expected = [sdk_span_ids(spans) for spans in sent]
    intact = 0
    for record in found:
        try:
            (request,) = decoded_requests([record])
        except Exception:
            break
        if request_span_ids(request) != expected[intact]:
            break
        intact += 1
    assert 0 < intact < 600


def test_a_file_that_cannot_be_opened(tmp_path: Path) -> None:
    found, problems = read_all(tmp_path / "gone.json")
    assert (
        found == [] and str(problems[0]) == f"{tmp_path / 'gone.json'}: No such file or directory"
    )


def test_a_one_request_file_over_the_limit(tmp_path: Path) -> None:
    path = write_request(tmp_path / "t.bin", record_spans(40))
    found, problems = read_all(path, limit=100)
    assert found == [] and "one request larger than 100 bytes" in str(problems[0])


def test_sniffing_tells_json_from_protobuf_by_the_bytes() -> None:
    def layout(data: bytes) -> Layout:
        return sniff(io.BufferedReader(io.BytesIO(data)), LIMIT)  # type: ignore[arg-type]

    request = encode(record_spans(2)).SerializeToString()
    assert layout(b'\n\n  {"resourceSpans": []}\n') is Layout.JSON_LINES
    assert layout(b"\xef\xbb\xbf{}\n") is Layout.JSON_LINES
    assert layout(request) is Layout.REQUEST
    assert layout(len(request).to_bytes(4, "big") + request) is Layout.LENGTH_PREFIXED
    assert layout(b"garbage first\n{}") is Layout.JSON_LINES  # its lines will say what is wrong


def test_standard_input(tmp_path: Path) -> None:
    sent = exports(2)
    data = gzip.compress(b"".join(otlp_json(encode(s)) + b"\n" for s in sent))
    script = (
        "import sys; from processor.offline.read import records; "
        "print(sum(1 for _ in records('-', 1 << 20, print)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], input=data, capture_output=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == b"2"


@pytest.mark.parametrize(
    "compress",
    [gzip.compress, zstandard.ZstdCompressor().compress],
    ids=["gzip members", "zstd frames"],
)
def test_compressed_pieces_one_after_the_other_are_one_stream(tmp_path: Path, compress) -> None:  # type: ignore[no-untyped-def]
    lines = [otlp_json(encode(s)) + b"\n" for s in exports(3)]
    path = tmp_path / "t.json.z"
    path.write_bytes(b"".join(compress(line) for line in lines))
    found, problems = read_all(path)
    assert problems == [] and len(found) == 3


def test_bytes_after_a_compressed_stream_are_named(tmp_path: Path) -> None:
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(otlp_json(encode(record_spans(2))) + b"\n") + b"trailing")
    found, problems = read_all(path)
    assert len(found) == 1
    assert [p.what for p in problems] == ["cannot read on: data after the end of the gzip stream"]
