"""Classification: the spans of a request in, normalized events out.

Pure logic with the clock passed in. The Classifier reads a request's MCP spans (the
tenant and harness their resource names, their times bounded, their names cut), drops a
span it has already seen, and groups the spans each layer of one call tells (a
framework's span over the SDK's) when they come in one request. The CallDecider
(deciding.py) then pairs the client and server halves of each call, in whatever order and
requests they arrive, and resolves which server it went to (docs/conventions.md, "Pairing
and de-duplication"). Every map here is bounded.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator, Mapping

from mcp_breaker_client.shared.verdict import Verdict
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from processor.classify.deciding import CallDecider
from processor.classify.dialects import (
    MAX_LAYERS,
    NAME_PREFIXES,
    NAME_SUFFIXES,
    OPENINFERENCE_SCOPE,
    READ_KEYS,
    READ_PREFIXES,
    read,
)
from processor.classify.events import Event, Side
from processor.classify.identity import encodable
from processor.classify.pairing import PairingStats, SpanFate, same_names
from processor.classify.reading import Reading, SpanKey
from processor.classify.recent import RecentKeys
from processor.classify.spanview import (
    MAX_ATTRIBUTES,
    AttributeValue,
    SpanView,
    Wanted,
    read_attributes,
    view,
)
from processor.config import ClassifyConfig
from processor.engines.turns import NS_PER_S
from processor.request.release import let_go
from processor.request.sparse import RequestSpans

SERVICE_NAME_KEY = "service.name"  # OpenTelemetry resource semantic conventions
# Read off the enums once, for the tests every MCP span meets: on Python 3.11 an enum
# member read off its class costs some 60 ns, a module name 10.
_CLIENT, _SERVER = Side.CLIENT, Side.SERVER


class Classifier:
    def __init__(
        self, config: ClassifyConfig | None = None, wall_clock: Callable[[], float] = time.time
    ) -> None:
        """``wall_clock``: what bounds a span's times from above (classify.max_clock_skew_s).
        It is the real clock even where the arrival clock, passed to ``classify``, is not
        (replays, tests): a sender's clock is compared with the time it really is."""
        self.config = config or ClassifyConfig()
        self._now = 0.0
        self._wall_clock = wall_clock
        self._latest_ns = 0
        self._patterns = tuple(re.compile(p) for p in self.config.hidden_failure_patterns)
        self._resource_wanted = Wanted(
            frozenset({SERVICE_NAME_KEY, self.config.tenant_attribute}), ()
        )
        self._wanted = Wanted(
            READ_KEYS | set(self.config.turn_keys) | set(self.config.round_keys), READ_PREFIXES
        )
        self._seen = RecentKeys(self.config.max_seen_spans, self.config.seen_ttl_s)
        self.spans: dict[bytes, Span] = {}  # the MCP spans of the request last classified
        # Of each of those with at most MAX_ATTRIBUTES attributes: how many it had and the
        # wanted ones, as read. Every key under "mcp." is wanted, so enrich and strip learn
        # from this which of their keys a span holds without reading every key again.
        self.read: dict[bytes, tuple[int, Mapping[str, AttributeValue]]] = {}
        # MCP spans of that request whose id a later one of it has too: not in ``spans``.
        self.shadowed: list[Span] = []
        # The ids of those read before (an exporter's retry): forwarded with what they were
        # given the first time (enrich.restore).
        self.duplicates: list[bytes] = []
        self.stats = PairingStats()
        self._decider = CallDecider(self.config, self.stats)

    @property
    def pending_calls(self) -> int:
        return self._decider.pending_calls

    @property
    def seen_spans(self) -> int:
        return len(self._seen)

    @property
    def undecided(self) -> dict[bytes, tuple[Verdict, SpanFate]]:
        """Call spans of the request last classified whose call it did not decide: their
        own verdict, and why, so they go on with what they alone say
        (enrich.annotate_undecided)."""
        return self._decider.undecided

    def classify(
        self,
        request: RequestSpans,
        now: float,
        *,
        tenant: str | None = None,
        tenant_must_match: bool = False,
    ) -> list[Event]:
        """The events this request completes; ``spans`` then maps its MCP span ids to spans.

        ``tenant``: the sender's tenant from its credentials, which then overrides what
        the spans' resources say (or, with ``tenant_must_match``, a resource naming
        another tenant is left unread). None: the resource attribute names the tenant.
        """
        self._now = now
        self._latest_ns = int((self._wall_clock() + self.config.max_clock_skew_s) * NS_PER_S)
        self.spans = {}
        self.read = {}
        self.shadowed = []
        self._decider.begin(now)
        self.duplicates = []
        events: list[Event] = []
        readings: list[Reading] = []
        # Locals: the loop below runs for every span of the request.
        wanted, patterns, found, kept = self._wanted, self._patterns, self.spans, self.read
        latest_ns = self._latest_ns
        for resource_spans in request.resource_spans:
            resource: dict[str, AttributeValue] | None = None
            tenant_name = harness = ""
            for scope_spans in resource_spans.scope_spans:
                scope: str | None = None
                every_span = scope_spans.scope.name.startswith(OPENINFERENCE_SCOPE)
                for span in scope_spans.spans:
                    name = span.name
                    if not (
                        every_span or name.startswith(NAME_PREFIXES) or name.endswith(NAME_SUFFIXES)
                    ):
                        continue  # may_be_mcp, spelled out
                    if resource is None:
                        resource, claimed = self._resource(resource_spans.resource, tenant)
                        tenant_name = _resource_text(resource, self.config.tenant_attribute)
                        harness = _resource_text(resource, SERVICE_NAME_KEY)
                        if tenant_must_match and claimed not in (None, tenant):
                            self.stats.tenant_mismatches += 1
                            break  # this resource's spans go on unread
                    if scope is None:
                        scope = scope_spans.scope.name
                    span_view = view(span, resource, scope, wanted)
                    end_ns = span_view.end_ns
                    if end_ns > latest_ns or span_view.start_ns > end_ns:
                        self._clamp_times(span_view)  # rare: a clock ahead of ours
                    reading = read(span_view, patterns)
                    if reading is not None:
                        reading.tenant, reading.harness = tenant_name, harness
                        span_id, trace_id = span_view.span_id, span_view.trace_id
                        reading.key = (tenant_name, trace_id, span_id)
                        reading.parent_key = (tenant_name, trace_id, span_view.parent_span_id)
                        self._cut_names(reading)
                        if span_id in found:  # rare: see _unread_shadowed
                            self.shadowed.append(found[span_id])
                        found[span_id] = span
                        count = span_view.attribute_count
                        if count <= MAX_ATTRIBUTES:
                            kept[span_id] = (count, span_view.attributes)
                        readings.append(reading)
        if self.shadowed:
            self._unread_shadowed()
        decider = self._decider
        for root, layers in self._layered(readings):
            events.extend(decider.take(root, layers))
        events.extend(decider.expire(now))
        self.stats.forwarded_pending += sum(
            1 for _, fate in self.undecided.values() if fate is SpanFate.PENDING
        )
        let_go(readings)  # most of them held by nothing else: see let_go
        return events

    def read_spans(self) -> list[Span]:
        """Every MCP span of the request last classified, the shadowed ones too: what the
        stripping goes through."""
        return [*self.spans.values(), *self.shadowed]

    def _unread_shadowed(self) -> None:
        """Two MCP spans of one request with one id (a sender's bug, or a forgery): the
        later took the id's place in ``spans`` (the annotations' map), and the earlier is
        kept apart so that the stripping still finds it. What was read of one cannot tell
        the hooks which keys the other holds (``read`` is by id), so it is dropped: they
        read every key of both."""
        for span in self.shadowed:
            self.read.pop(span.span_id, None)

    def let_go(self) -> None:
        """Done with the request last classified: what the hooks after it read (its spans,
        their attributes, the undecided ones) is let go a slice at a time, in the thread
        that analysed it, rather than all at once when the next request comes."""
        let_go(self.spans)
        let_go(self.shadowed)
        let_go(self.read)
        let_go(self.duplicates)
        let_go(self._decider.undecided)

    def _resource(
        self, resource: Resource, tenant: str | None
    ) -> tuple[dict[str, AttributeValue], str | None]:
        """A resource's attributes, names cut, the tenant the sender's identity gives in
        place of the one it claims; and the tenant it claimed, if any."""
        key = self.config.tenant_attribute
        # Only the names a reading needs: a resource may carry a million attributes.
        attributes = read_attributes(resource.attributes, self._resource_wanted)
        value = attributes.get(key)
        claimed = value if isinstance(value, str) else None
        if tenant is not None:
            attributes[key] = tenant
        for name in (key, SERVICE_NAME_KEY):
            value = attributes.get(name)
            if isinstance(value, str) and len(value) > self.config.max_name_chars:
                self.stats.cut_names += 1
                attributes[name] = value = value[: self.config.max_name_chars]
            if isinstance(value, str) and not value.isascii():
                attributes[name] = encodable(value)
        return attributes, claimed

    def _clamp_times(self, span: SpanView) -> None:
        """No time later than our wall clock plus ``max_clock_skew_s``, and start <= end: a
        sender's clock cannot push a deadline, a window or a wire timestamp into the future.

        Only the future is bounded. Old times are legitimate (a disk queue delivering after
        a restart, an exporter's retries, a replay of recorded traffic), and an old failure
        can only set a deadline that has already passed.
        """
        start_ns, end_ns = span.start_ns, span.end_ns
        end = min(end_ns, self._latest_ns)
        start = min(start_ns, end)
        if start != start_ns or end != end_ns:
            self.stats.clamped_times += 1
            span.start_ns, span.end_ns = start, end

    def _cut_names(self, reading: Reading) -> None:
        """Names as long as classify.max_name_chars at most, and encodable (a name read
        from JSON may hold a lone surrogate, which no wire and no log can carry), before
        anything keeps them."""
        limit = self.config.max_name_chars
        cut = False
        if len(reading.tool) > limit:
            reading.tool, cut = reading.tool[:limit], True
        if reading.server is not None and len(reading.server) > limit:
            reading.server, cut = reading.server[:limit], True
        if reading.session_id is not None and len(reading.session_id) > limit:
            reading.session_id, cut = reading.session_id[:limit], True
        if cut:
            self.stats.cut_names += 1
        if not reading.tool.isascii():
            reading.tool = encodable(reading.tool)
        if reading.server is not None and not reading.server.isascii():
            reading.server = encodable(reading.server)
        if reading.session_id is not None and not reading.session_id.isascii():
            reading.session_id = encodable(reading.session_id)

    def expire(self, now: float) -> list[Event]:
        """Calls whose other half did not come within ``pair_wait_s``: decided alone."""
        return self._decider.expire(now)

    def flush(self) -> list[Event]:
        """Decide every held call now (at shutdown: nothing is left unreported)."""
        return self._decider.flush()

    def _layered(self, readings: list[Reading]) -> Iterator[tuple[Reading, tuple[Reading, ...]]]:
        """The request's readings as calls: each outermost span with the layers nested in
        it, and every span read before (an exporter's retry) left out.

        A framework's tool span, a client library's span under it and the SDK's span under
        that are one call told by each layer (pydantic-ai over fastmcp over the mcp SDK):
        a call span whose parent is a call span of the same tool, on the same side of the
        wire, is a layer of its parent's call, never a call of its own. A call made inside
        a tool of another name (an agent used as a tool) stays a call of its own. A listing
        span nested in a listing span (fastmcp's over the SDK's) is one listing likewise,
        when both come in one request.
        """
        fresh: list[Reading] = []
        # Each span's key, made once: the seen spans are kept by it, and its layers find it.
        by_span: dict[SpanKey, Reading] = {}
        seen, now, server = self._seen.add, self._now, _SERVER
        for reading in readings:
            key = reading.key
            if seen(key, now):
                fresh.append(reading)
                if reading.side is not server:
                    by_span[key] = reading
            else:
                self.stats.duplicate_spans += 1
                self.duplicates.append(reading.span.span_id)
        if len(fresh) < 2 or not by_span:
            yield from ((reading, ()) for reading in fresh)
            return
        outer: dict[int, Reading] = {}  # id(layer) -> the reading it is nested in
        for reading in fresh:
            parent = by_span.get(reading.parent_key)
            if (
                parent is not None
                and parent is not reading
                and parent.kind is reading.kind  # a listing in a listing is one listing too
                # A server half nested in its client half (the request carried its
                # context) is the other half of that call, here in the same request.
                and (reading.side is not _SERVER or parent.side is _CLIENT)
                and same_names(parent.tool, reading.tool)
            ):
                outer[id(reading)] = parent
        if not outer:
            yield from ((reading, ()) for reading in fresh)
            return
        roots: list[Reading] = []
        layers: dict[int, list[Reading]] = {}
        for reading in fresh:
            root = _outermost(reading, outer) if id(reading) in outer else reading
            if root is reading:
                roots.append(reading)
            else:
                layers.setdefault(id(root), []).append(reading)
        for root in roots:
            yield root, tuple(layers.get(id(root), ()))


def _resource_text(resource: Mapping[str, AttributeValue], key: str) -> str:
    value = resource.get(key)
    return value if isinstance(value, str) else ""


def _outermost(reading: Reading, outer: Mapping[int, Reading]) -> Reading:
    """The span ``reading`` is a layer of, following parents; ``reading`` itself when it is
    nested in none, or when the chain runs past MAX_LAYERS (a cycle of parent ids does):
    such a span is a call of its own rather than a chain followed without bound."""
    root, hops = reading, 0
    while id(root) in outer:
        if hops == MAX_LAYERS:
            return reading
        root, hops = outer[id(root)], hops + 1
    return root
