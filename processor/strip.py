"""Remove payload attributes from MCP spans before they are forwarded.

``StripAfter`` wraps the pipeline's stage hook (``server.py`` does, when
``forward.strip_attributes`` is not empty): the pipeline runs first, so everything
mcp-breaker reads from a span — the arguments for the fingerprint, the result for a
failure hidden under ``isError: false`` — has been read before it goes; then the listed
keys are removed from the request's MCP spans, as the Collector's attributes processor
would with ``action: delete``.

Which spans: those the pipeline read as MCP tool calls or listings (it hands them over, so
the request is not walked a second time: reading every span's name again would cost about
half a parse). Should the analysis fail, the stripping must not fail with it: then every
span whose name marks it as a possible MCP span is stripped (a superset), and the error
goes on to the stage, which counts and logs it.

Every MCP span is on the parsed path (the stage's byte markers are written by every MCP
dialect), so no MCP span leaves unstripped through the pass-through path; spans that are
not MCP spans are forwarded as they came.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from opentelemetry.proto.trace.v1.trace_pb2 import Span

from processor.classify.dialects import may_be_mcp
from processor.sender import Sender
from processor.sparse import RequestSpans
from processor.stage import SpanHook


def strip_spans(spans: Iterable[Span], keys: frozenset[str]) -> None:
    for span in spans:
        attributes = span.attributes
        doomed = [i for i, kv in enumerate(attributes) if kv.key in keys]
        for index in reversed(doomed):
            del attributes[index]


def mcp_named_spans(request: RequestSpans) -> Iterable[Span]:
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                if may_be_mcp(span.name):
                    yield span


class StripAfter:
    """A stage hook: ``analyse``, then drop ``keys`` from the MCP spans it found."""

    def __init__(
        self,
        analyse: SpanHook,
        found: Callable[[], Iterable[Span]],
        keys: Iterable[str],
    ) -> None:
        """``found`` gives the MCP spans of the request ``analyse`` last read."""
        self._analyse = analyse
        self._found = found
        self.keys = frozenset(keys)

    def __call__(self, request: RequestSpans, sender: Sender) -> None:
        try:
            self._analyse(request, sender)
            spans = list(self._found())
        except Exception:
            strip_spans(mcp_named_spans(request), self.keys)
            raise
        strip_spans(spans, self.keys)
