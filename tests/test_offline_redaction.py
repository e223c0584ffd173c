"""``mcp-breaker analyze`` keeps recorded secrets out of its reports.

A trace's tool errors are written by tool servers for their own operators, and its raw
arguments are whatever the model sent: both can hold credentials and private paths. The
report quotes errors only as the classifier redacted them and names arguments only by
fingerprint, in every format: text, JSON and HTML.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode

from processor.offline.command import EXIT_OK
from tests.offline_support import analyze
from tests.otlp_file import write_json_lines
from tests.sdk import RESOURCE

SERVER, TOOL = "vault", "read_secret"
START_NS = 1_787_011_200 * 10**9  # 2026-08-18T00:00:00Z
# What a tool server wrote for its operators: a password, a bearer key and a private path.
ERROR = (
    "login failed: password=hunter2xyz; retried with Authorization: Bearer "
    "sk-abcdefghijklmnopqrstuv; could not read /home/alice/.ssh/id_rsa"
)
# What the model sent: a credential of its own, in the raw arguments.
ARGUMENTS = json.dumps({"path": "kv/prod/db", "api_key": "argsecret-q7x9k2m4p8"})
SECRETS = (
    "hunter2xyz",
    "sk-abcdefghijklmnopqrstuv",
    "abcdefghijklmnopqrstuv",
    "/home/alice",
    "alice",
    "id_rsa",
    ".ssh",
    "argsecret-q7x9k2m4p8",
    "q7x9k2m4p8",
)


def failing_calls() -> list[ReadableSpan]:
    """Three turns of three failing calls each, every one with the secrets above: enough
    for the circuits to open, so the calls after are dead calls the report lists."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=RESOURCE)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("redaction.harness")
    for turn in range(3):
        for call in range(3):
            began = START_NS + (turn * 600 + call * 10) * 10**9
            span = tracer.start_span("mcp.tool.call", kind=SpanKind.CLIENT, start_time=began)
            span.set_attributes(
                {
                    "mcp.tool.name": TOOL,
                    "mcp.server.name": SERVER,
                    "mcp.tool.outcome": "failed",
                    "mcp.tool.arguments": ARGUMENTS,
                    "mcp.tool.error": ERROR,
                    "mcp.turn.id": f"turn-{turn}",
                    "mcp.turn.round": call + 1,
                }
            )
            span.set_status(Status(StatusCode.ERROR, ERROR))
            span.record_exception(PermissionError(ERROR))
            span.end(end_time=began + 2 * 10**9)
    provider.shutdown()
    return list(memory.get_finished_spans())


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("redaction")
    return write_json_lines(folder / "traces.json", [failing_calls()])


def test_the_trace_does_hold_the_secrets(trace: Path) -> None:
    recorded = trace.read_text(encoding="utf-8")
    for secret in SECRETS:
        assert secret in recorded  # so their absence below is the report's doing


@pytest.mark.parametrize("form", ["text", "json", "html"])
def test_no_recorded_secret_reaches_the_report(trace: Path, tmp_path: Path, form: str) -> None:
    output = tmp_path / f"report.{form}"
    result = analyze(str(trace), "--format", form, "--output", str(output))
    assert result.returncode == EXIT_OK, result.stderr
    report = output.read_text(encoding="utf-8")
    # The errors are quoted, redacted: what failed and why stays, the secrets go. (The text
    # report wraps its lines, so words are compared as they run.)
    words = " ".join(report.split())
    assert "login failed: password=[REDACTED]" in words
    assert "Authorization: Bearer [REDACTED]" in words
    for secret in SECRETS:
        assert secret not in report, f"{secret!r} in the {form} report"
        assert secret not in result.stdout + result.stderr
