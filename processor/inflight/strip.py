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

from processor.classify.dialects import READ_KEYS, READ_PREFIXES, may_be_mcp
from processor.inflight.enrich import PREFIX, ROSTER_PREFIX, Read
from processor.inflight.stage import SpanHook
from processor.request.edits import SpanEdits
from processor.request.sender import Sender
from processor.request.sparse import RequestSpans, SparseRequest


def strip_spans(
    spans: Iterable[Span],
    keys: frozenset[str],
    read: Read | None = None,
    edits: SpanEdits | None = None,
) -> None:
    """``read``: what the classifier read of each span (``Classifier.read``), which tells
    that a span holds none of ``keys`` without reading its every key, when each of them is
    one the classifier reads and none is one the annotations write (``knowable``).
    ``edits``: those of the sparse request the spans are from, told of each span changed
    and of the keys no annotation may bring back."""
    if edits is not None:
        edits.leave_out(keys)
    for span in spans:
        if read is not None:
            seen = read.get(span.span_id)
            if seen is not None and seen[1].keys().isdisjoint(keys):
                continue
        attributes = span.attributes
        doomed = [i for i, kv in enumerate(attributes) if kv.key in keys]
        for index in reversed(doomed):
            del attributes[index]
        if doomed and edits is not None:
            edits.changed(span)


def mcp_named_spans(request: RequestSpans) -> Iterable[Span]:
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            scope = scope_spans.scope.name
            for span in scope_spans.spans:
                if may_be_mcp(span.name, scope):
                    yield span


def knowable(keys: Iterable[str]) -> bool:
    """Whether what the classifier read of a span tells if it holds any of ``keys``: each
    is a key the classifier reads, and none is written by the annotations after it read."""
    return all(
        (key in READ_KEYS or key.startswith(READ_PREFIXES))
        and not key.startswith((PREFIX, ROSTER_PREFIX))
        for key in keys
    )


class StripAfter:
    """A stage hook: ``analyse``, then drop ``keys`` from the MCP spans it found."""

    def __init__(
        self,
        analyse: SpanHook,
        found: Callable[[], Iterable[Span]],
        keys: Iterable[str],
        read: Callable[[], Read] | None = None,
    ) -> None:
        """``found`` gives the MCP spans of the request ``analyse`` last read; ``read``,
        what it read of them (``Classifier.read``), spares reading every key of a span
        that holds none of ``keys``, where that can be known."""
        self._analyse = analyse
        self._found = found
        self.keys = frozenset(keys)
        self._read = read if knowable(self.keys) else None

    def __call__(self, request: RequestSpans, sender: Sender) -> None:
        edits = request.edits if isinstance(request, SparseRequest) else None
        try:
            self._analyse(request, sender)
            spans = list(self._found())
            read = self._read() if self._read is not None else None
        except Exception:
            strip_spans(mcp_named_spans(request), self.keys, None, edits)
            raise
        strip_spans(spans, self.keys, read, edits)
