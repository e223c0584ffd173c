"""Redaction against corpora of secret shapes it was not written case by case for.

``tests/fixtures/redaction/`` holds error texts that each carry one secret (``secrets-*``)
and error texts that must come back as written (``survivors-*``): command lines, prose with
verbs of setting, XML, YAML and config files, key names in other languages or with accents,
prose in ten languages, and the shapes public secret-scanning rule sets (gitleaks,
detect-secrets) describe, with made-up values. Each corpus was split in two by a hash of the
text before the rules were written: the rules were tuned on ``*-tune``, and ``*-held`` is
reported and held to a floor here (docs/security.md quotes the figure).

Then both corpora go through the running service, as a harness's failing calls exported by
the OpenTelemetry SDK: no secret may come back from GetState, Subscribe, Check or
``mcp-breaker status``, and every survivor phrase must.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from mcp_breaker_client.shared.redact import DEFAULT_MAX_CHARS, ELLIPSIS, REDACTED, redact
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from processor.advisories.status import Layout, status
from processor.advisories.v1 import advisories_pb2 as pb
from tests.sdk import export_grpc
from tests.support import LOOPBACK, wait_until
from tests.test_advisories_service import WAIT_S, Client, advisories_of, port_of, running

CORPUS = Path(__file__).parent / "fixtures" / "redaction"
# The held-back half's share caught may not fall below this: 83 of 83 when measured
# (81 of 83 at first: a bug the half showed, "error: pässword=x", and a corpus entry that
# named the key instead of the secret; both fixed, see docs/security.md).
HELD_BACK_FLOOR = 0.95
# Secrets of the tuning half the rules do not catch, said here so that the rest must be:
# a password that only its position names (htpasswd's third argument).
KNOWN_MISSES = frozenset({"htpw"})
NS = 1_000_000_000


def load(name: str) -> list[dict[str, str]]:
    with (CORPUS / name).open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


SECRETS_TUNE = load("secrets-tune.jsonl")
SECRETS_HELD = load("secrets-held.jsonl")
SURVIVORS = [case["text"] for case in load("survivors-tune.jsonl") + load("survivors-held.jsonl")]


def caught(case: dict[str, str]) -> bool:
    return case["secret"] not in redact(case["text"])


@pytest.mark.parametrize(
    "case",
    [case for case in SECRETS_TUNE if case["secret"] not in KNOWN_MISSES],
    ids=lambda case: f"{case['kind']}:{case['secret'][:16]}",
)
def test_every_secret_of_the_tuning_half_is_gone(case: dict[str, str]) -> None:
    """The half the rules were written against: each secret is gone, and marked."""
    result = redact(case["text"])
    assert case["secret"] not in result
    assert REDACTED in result


def test_the_held_back_half_is_caught_above_its_floor() -> None:
    """The half no rule was written for: the share caught, printed, above the floor."""
    found = sum(caught(case) for case in SECRETS_HELD)
    share = found / len(SECRETS_HELD)
    words = [case for case in SECRETS_HELD if case["kind"] != "scanner"]
    print(
        f"\nheld-back secrets caught: {found} of {len(SECRETS_HELD)} ({share:.1%}); "
        f"not by a key prefix: {sum(map(caught, words))} of {len(words)}"
    )
    assert len(SECRETS_HELD) >= 80
    assert share >= HELD_BACK_FLOOR


@pytest.mark.parametrize("text", SURVIVORS)
def test_ordinary_error_texts_of_both_halves_come_back_as_written(text: str) -> None:
    """In any of the languages, "password incorrect" and its kind stay readable."""
    assert redact(text) == text


ADVERSARIAL = [
    "-p " * 200_000,
    "sshpass " + "-p " * 100_000,
    "docker " + "x " * 100_000 + "login -p x1",
    "-u a:" * 100_000,
    "--password " * 100_000,
    "<password>" * 100_000 + "x",
    "<a " + "b" * 500_000,
    "name: " * 100_000 + "value: x",
    "pässword=" * 100_000,
    "mot de passe " * 50_000,
    "密码是" * 100_000,
    "password was reset to " * 30_000,
    "changed from " * 50_000,
    "aB3" * 300_000,
    "a=" * 300_000,
]


@pytest.mark.parametrize("text", ADVERSARIAL, ids=lambda text: repr(text[:16]))
def test_long_adversarial_inputs_come_back_capped(text: str) -> None:
    """Inputs built to make the new patterns work hard: each is read to its scan limit
    only, and comes back within the cap, stable under a second pass."""
    result = redact(text)
    assert len(result) <= DEFAULT_MAX_CHARS
    assert result.endswith(ELLIPSIS)
    assert redact(result) == result


# --- through the running service ------------------------------------------------------


def failing_calls(errors: list[str]) -> list[ReadableSpan]:
    """One failed ``mcp.tool.call`` span per error, each its own server, tool and turn, so
    each opens a turn block whose cause is that error."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "corpus-harness"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("tests.redact_corpus", "1")
    now_ns = time.time_ns()
    for index, error in enumerate(errors):
        span = tracer.start_span("mcp.tool.call", kind=SpanKind.CLIENT, start_time=now_ns - NS)
        span.set_attributes(
            {
                "mcp.tool.name": f"corpus_tool_{index}",
                "mcp.server.name": f"corpus_server_{index}",
                "mcp.tool.outcome": "failed",
                "mcp.tool.failure_class": "transport",
                "mcp.tool.error": error,
                "mcp.turn.id": f"corpus-turn-{index}",
            }
        )
        span.end(end_time=now_ns)
    provider.shutdown()
    return list(memory.get_finished_spans())


def texts_of(advisory: pb.Advisory) -> str:
    return f"{advisory.cause}\n{advisory.message}"


SENTINEL = "sentinel: upstream MCP session is closed"


def test_no_secret_of_either_corpus_comes_back_from_the_advisory_api() -> None:
    """Every secret goes in as a failing call's error; GetState, Subscribe, Check and
    ``mcp-breaker status`` (table, wide and JSON) say what failed and never the secret.
    (A text the classifier reads as a neutral outcome, "permission denied", opens nothing;
    a sentinel sent last says when the rest have been read.)"""
    cases = [case for case in SECRETS_TUNE + SECRETS_HELD if case["secret"] not in KNOWN_MISSES]
    errors = [case["text"] for case in cases] + SURVIVORS
    with running() as service:
        spans = failing_calls([*errors, SENTINEL])
        for part in (spans[:-1], spans[-1:]):
            assert export_grpc(service.grpc_endpoint, part) is SpanExportResult.SUCCESS
        sentinel_tool = f"corpus_tool_{len(errors)}"
        hub = advisories_of(service).hub
        client = Client(port_of(service))
        try:
            wait_until(
                lambda: (
                    any(a.tool == sentinel_tool for a in client.state().advisories)
                    or len(hub) > len(errors)
                ),
                WAIT_S,
                "the sentinel's turn block",
            )
            stream = client.subscribe()
            wait_until(
                lambda: any(
                    m.WhichOneof("kind") == "snapshot" and not m.snapshot.more
                    for m in stream.messages
                ),
                WAIT_S,
                "the whole snapshot",
            )
            snapshot = [
                advisory
                for message in stream.messages
                if message.WhichOneof("kind") == "snapshot"
                for advisory in message.snapshot.advisories
            ]
            stream.cancel()
            by_tool = {advisory.tool: advisory for advisory in snapshot}
            state = client.state()
            checks = {
                index: client.check(
                    turn=f"corpus-turn-{index}",
                    server=f"corpus_server_{index}",
                    tool=f"corpus_tool_{index}",
                )
                for index in range(len(errors))
                if f"corpus_tool_{index}" in by_tool
            }
            target = f"{LOOPBACK}:{port_of(service)}"
            printed = "\n".join(
                status(target, token=None, ca_file=None, layout=layout, width=400)
                for layout in Layout
            )
        finally:
            client.close()

    # Nearly every text opened its block: the assertions below are about them.
    assert sentinel_tool in by_tool
    assert len(checks) >= 0.9 * len(errors)
    everything = "\n".join(
        [texts_of(advisory) for advisory in snapshot]
        + [texts_of(advisory) for advisory in state.advisories]
        + [texts_of(check.advisory) for check in checks.values()]
        + [printed]
    )
    for case in cases:
        assert case["secret"] not in everything, case["text"]
    for index, check in checks.items():
        assert check.verdict == pb.VERDICT_DENY, errors[index]
    for index, phrase in enumerate(SURVIVORS, start=len(cases)):
        if index in checks:
            assert phrase in by_tool[f"corpus_tool_{index}"].message
            assert phrase in checks[index].advisory.message
