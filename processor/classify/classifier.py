"""Classification: the spans of a request in, normalized events out.

Pure logic with the clock passed in. It pairs the client and server spans of one call
(matched by parent/child ids across processes, or by JSON-RPC request id) and the layers
of one call (a framework's span over the SDK's), in whatever order and requests they
arrive: a half whose other half could still change what the call says is held for it, at
most ``pair_wait_s``, and a half of a call already decided is absorbed into it
(docs/conventions.md, "Pairing and de-duplication"). It drops a span it has already seen,
and resolves which server a call went to. Every map here is bounded.
"""

from __future__ import annotations

import enum
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from cachetools import LRUCache
from mcp_breaker_client.shared.conventions import server_prefix
from mcp_breaker_client.shared.fingerprint import fingerprint
from mcp_breaker_client.shared.outcome import judge
from mcp_breaker_client.shared.verdict import UNKNOWN_VERDICT, FailureClass, Outcome, Verdict
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span, SpanFlags

from processor.classify.dialects import (
    MAX_LAYERS,
    MCP_DIALECTS,
    NAME_PREFIXES,
    NAME_SUFFIXES,
    OPENINFERENCE_SCOPE,
    READ_KEYS,
    READ_PREFIXES,
    read,
)
from processor.classify.events import (
    Event,
    Side,
    ToolCall,
    ToolListing,
    build_tool_call,
    build_tool_listing,
)
from processor.classify.listing import listing_counts
from processor.classify.reading import Kind, Reading
from processor.classify.recent import ExpiringKeys, ExpiringValues, RecentKeys
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
from processor.request.sparse import RequestSpans

SERVICE_NAME_KEY = "service.name"  # OpenTelemetry resource semantic conventions

# The span flags that say where a span's parent is: known, and remote (another process).
_REMOTE_PARENT = (
    SpanFlags.SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK | SpanFlags.SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK
)
_LOCAL_PARENT = SpanFlags.SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK  # known, and in this process
_RANK = {Outcome.NEUTRAL: 3, Outcome.FAILED: 3, Outcome.OK: 1, Outcome.UNKNOWN: 0}


def more_informative(a: Verdict, b: Verdict) -> Verdict:
    """The verdict of a pair: a failure beats a success beats silence; a specific class
    beats the generic ``tool_error``."""
    if _RANK[a.outcome] != _RANK[b.outcome]:
        return a if _RANK[a.outcome] > _RANK[b.outcome] else b
    if a.failure_class is FailureClass.TOOL_ERROR and b.failure_class not in (
        None,
        a.failure_class,
    ):
        return b
    return a


PairKey = tuple[object, ...]


@dataclass(slots=True)
class PairingStats:
    """Running counts of what pairing could not do, read by the metrics at scrape time."""

    unpaired: int = 0  # a half decided alone: its other half did not come in time
    pending_overflow: int = 0  # a half decided early: too many calls were held
    duplicate_spans: int = 0  # a span exported twice, dropped the second time
    malformed_listings: int = 0  # a listing with counts present but unreadable
    nested_spans: int = 0  # an SDK client span under a harness call span: counted once
    # A half held for its other half when its request was forwarded: the span went on with
    # its own outcome only; the call's decision reaches the metrics and advisories later.
    forwarded_pending: int = 0
    # A span whose times lay outside the arrival clock's bounds (classify.max_clock_skew_s,
    # max_span_age_s): read with its times moved inside them.
    clamped_times: int = 0
    # A name (tool, server, turn, session, tenant, harness) longer than classify.max_name_chars.
    cut_names: int = 0
    # With authenticated intake and span_tenant: match, a resource that named another
    # tenant than its sender's credentials: its spans were forwarded, not analysed.
    tenant_mismatches: int = 0


class SpanFate(enum.Enum):
    """What became of a call span whose call was not decided in its own request."""

    PENDING = "pending"  # held for its other half: forwarded before the call's decision
    ELSEWHERE = "elsewhere"  # its call is told by another span (its other half, a parent)


@dataclass(slots=True)
class _Pending:
    reading: Reading
    verdict: Verdict
    offered: tuple[PairKey, ...]  # the keys this half is found by
    sought: tuple[PairKey, ...]  # the keys its other half would be found by
    arrived: float
    layers: tuple[Reading, ...] = ()  # the spans of other layers of the same call
    # A call whose both halves are in, held for the layer its client half is nested in
    # (which may name its server): what its server half said. ``verdict`` is then what
    # its client side said.
    server_verdict: Verdict | None = None


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
        # Undecided halves of calls, oldest first; and the same, by each key they offer.
        self._held: OrderedDict[int, _Pending] = OrderedDict()
        self._by_key: dict[PairKey, _Pending] = {}
        # Keys of halves still to come for calls already emitted: absorbed, not counted twice,
        # for as long as a span seen before is known (an agent's exporter backlog can deliver
        # a client half minutes after its server half decided the call).
        self._done = ExpiringKeys(
            self.config.max_pending_calls * 2,
            max(self.config.pair_wait_s * 30, self.config.seen_ttl_s),
        )
        self._seen = RecentKeys(self.config.max_seen_spans, self.config.seen_ttl_s)
        # The spans of calls already told, and their parents, by tool: a layer of one of
        # them that comes in a later request (a framework span after the SDK span nested in
        # it, each exported as it ended) is the same call, not another. And client halves
        # held under a parent span, which a layer arriving later takes into its call.
        told = (self.config.max_seen_spans, self.config.seen_ttl_s)
        self._told_spans = ExpiringValues(*told)  # (tenant, trace, span) -> its tool
        self._told_parents = ExpiringValues(*told)  # (tenant, trace, parent) -> the tool
        self._held_by_parent: dict[tuple[str, bytes, bytes], _Pending] = {}
        # The client-side spans of held calls: a layer nested in one, arriving later, joins.
        self._held_spans: dict[tuple[str, bytes, bytes], _Pending] = {}
        # Session id -> server name, per tenant: one tenant's spans cannot name another's.
        self._sessions: LRUCache[tuple[str, str], str] = LRUCache(self.config.max_sessions)
        self.spans: dict[bytes, Span] = {}  # the MCP spans of the request last classified
        # Of each of those with at most MAX_ATTRIBUTES attributes: how many it had and the
        # wanted ones, as read. Every key under "mcp." is wanted, so enrich and strip learn
        # from this which of their keys a span holds without reading every key again.
        self.read: dict[bytes, tuple[int, Mapping[str, AttributeValue]]] = {}
        # The ids of those read before (an exporter's retry): forwarded with what they were
        # given the first time (enrich.restore).
        self.duplicates: list[bytes] = []
        # Call spans of that request whose call it did not decide: their own verdict, and
        # why, so they go on with what they alone say (enrich.annotate_undecided).
        self.undecided: dict[bytes, tuple[Verdict, SpanFate]] = {}
        self.stats = PairingStats()

    @property
    def pending_calls(self) -> int:
        return len(self._held)

    @property
    def seen_spans(self) -> int:
        return len(self._seen)

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
        self.undecided = {}
        self.duplicates = []
        events: list[Event] = []
        readings: list[Reading] = []
        # Locals: the loop below runs for every span of the request.
        wanted, patterns, found = self._wanted, self._patterns, self.spans
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
                    if end_ns > self._latest_ns or span_view.start_ns > end_ns:
                        self._clamp_times(span_view)  # rare: a clock ahead of ours
                    reading = read(span_view, patterns)
                    if reading is not None:
                        reading.tenant, reading.harness = tenant_name, harness
                        self._cut_names(reading)
                        found[span_view.span_id] = span
                        count = span_view.attribute_count
                        if count <= MAX_ATTRIBUTES:
                            self.read[span_view.span_id] = (count, span_view.attributes)
                        readings.append(reading)
        for root, layers in self._layered(readings):
            events.extend(self._take(root, layers))
        events.extend(self.expire(now))
        self.stats.forwarded_pending += sum(
            1 for _, fate in self.undecided.values() if fate is SpanFate.PENDING
        )
        return events

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
        self._now = now
        return self._decide_alone(lambda p: now - p.arrived >= self.config.pair_wait_s)

    def flush(self) -> list[Event]:
        """Decide every held call now (at shutdown: nothing is left unreported)."""
        return self._decide_alone(lambda p: True)

    def _decide_alone(self, due: Callable[[_Pending], bool]) -> list[Event]:
        events: list[Event] = []
        while self._held:
            pending = next(iter(self._held.values()))
            crowded = len(self._held) > self.config.max_pending_calls
            if not crowded and not due(pending):
                break
            if crowded:
                self.stats.pending_overflow += 1
            elif pending.server_verdict is None:
                self.stats.unpaired += 1
            self._forget(pending)
            self._mark_done(pending.sought)
            verdict = self._pair_verdict(pending.verdict, pending.server_verdict)
            events.append(self._call(pending.reading, None, verdict, pending.layers))
        return events

    def _note(self, readings: Iterable[Reading], verdict: Verdict, fate: SpanFate) -> None:
        undecided = self.undecided
        for reading in readings:
            undecided[reading.span.span_id] = (verdict, fate)

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
        for reading in readings:
            span = reading.span
            if self._seen.add((reading.tenant, span.trace_id, span.span_id), self._now):
                fresh.append(reading)
            else:
                self.stats.duplicate_spans += 1
                self.duplicates.append(span.span_id)
        if len(fresh) < 2:
            yield from ((reading, ()) for reading in fresh)
            return
        by_span = {
            (r.tenant, r.span.trace_id, r.span.span_id): r
            for r in fresh
            if r.side is not Side.SERVER
        }
        outer: dict[int, Reading] = {}  # id(layer) -> the reading it is nested in
        for reading in fresh:
            span = reading.span
            parent = by_span.get((reading.tenant, span.trace_id, span.parent_span_id))
            if (
                parent is not None
                and parent is not reading
                and parent.kind is reading.kind  # a listing in a listing is one listing too
                # A server half nested in its client half (the request carried its
                # context) is the other half of that call, here in the same request.
                and (reading.side is not Side.SERVER or parent.side is Side.CLIENT)
                and _same_names(parent.tool, reading.tool)
            ):
                outer[id(reading)] = parent
        if not outer:
            yield from ((reading, ()) for reading in fresh)
            return
        roots: list[Reading] = []
        layers: dict[int, list[Reading]] = {}
        for reading in fresh:
            root = _outermost(reading, outer)
            if root is reading:
                roots.append(reading)
            else:
                layers.setdefault(id(root), []).append(reading)
        for root in roots:
            yield root, tuple(layers.get(id(root), ()))

    def _take(self, reading: Reading, layers: tuple[Reading, ...] = ()) -> tuple[Event, ...]:
        """One call (or listing) of this request: its outermost span and the spans of the
        layers nested in it (``_layered``), decided from the layers that say most.

        Whatever order a call's spans arrive in, and in however many requests, it is one
        call, read the same: one verdict (``_pair_verdict``), one server name (the client
        side's first), one turn. A decided half goes out at once unless a half still to
        come could change what the call says; then it is held for it, at most
        ``pair_wait_s``. A layer of a held call joins it; a half of a call already decided
        is absorbed into it, never counted again.
        """
        side = reading.side
        if reading.kind is Kind.LISTING:
            self._learn_session(reading)
            # The harness's view of a listing is the client's; a server-side listing span
            # (fastmcp lists tools to resolve every call) would count the same roster twice.
            return () if side is Side.SERVER else (self._listing(reading, layers),)
        arriving = (reading, *layers)  # this request's spans of the call
        verdict, server_verdict = self._verdicts(arriving)
        if side is not Side.SERVER:
            # Layers nested in this span or in its own layers that came in earlier requests
            # (each span exported as it ends) and wait for their other half: this span
            # tells their call.
            tenant, trace_id = reading.tenant, reading.span.trace_id
            members = [reading, *layers]
            for member in members:  # grows: a layer absorbed may hold one of its own
                for nested in self._absorb_nested(tenant, trace_id, member.span.span_id):
                    verdict = more_informative(verdict, nested.verdict)
                    server_verdict = _either(server_verdict, nested.server_verdict)
                    layers += (nested.reading, *nested.layers)
                    members += (nested.reading, *nested.layers)
            # A layer of a call held for its other half (a framework's span held for its
            # server's name, the SDK's client span under it exported later): it joins it.
            host = self._host(reading)
            if host is not None:
                self.stats.nested_spans += 1
                self._forget(host)
                verdict = more_informative(host.verdict, verdict)
                server_verdict = _either(host.server_verdict, server_verdict)
                layers = (*host.layers, reading, *layers)
                reading = host.reading
        group = (reading, *layers)
        offered, sought = _group_keys(group)
        if side is not Side.SERVER and self._told_already(reading):
            self.stats.nested_spans += 1
            # A server half held for this call's client half, which a layer read in an
            # earlier request already told: the same call, absorbed.
            partner = self._partner(sought)
            if partner is not None:
                self._forget(partner)
            for member in group:
                self._mark_done(_keys_of(member)[1])
            self._note(arriving, verdict, SpanFate.ELSEWHERE)
            self._remember_told(group)  # a layer deeper still may come later
            return ()  # another layer of this call, read in an earlier request, told it
        partner = self._partner(sought)
        if partner is not None:
            self._forget(partner)
            # The partner is the other side's half: a server half when this is a client one.
            if side is Side.SERVER:
                client, layers = partner.reading, (*partner.layers, reading)
                verdict, server_verdict = partner.verdict, verdict
            else:
                client, layers = reading, (*layers, partner.reading, *partner.layers)
                server_verdict = _either(server_verdict, partner.verdict)
            if self._awaits_layer(client, layers):
                self._hold(
                    _Pending(
                        client,
                        verdict,
                        (),
                        (*sought, *partner.sought),
                        self._now,
                        layers,
                        server_verdict,
                    )
                )
                self._note(arriving, verdict, SpanFate.PENDING)
                return ()
            merged = self._pair_verdict(verdict, server_verdict)
            return (self._call(client, None, merged, layers),)
        # Both halves here (a server half nested in a client layer), or one span that
        # tells the whole call (a harness's, a framework's, with the SDK's span under it or
        # not): decided at once, as most framework runs export no server half at all.
        complete = side is not Side.SERVER and server_verdict is not None
        if complete:
            if self._awaits_layer(reading, layers):
                pending = _Pending(reading, verdict, (), sought, self._now, layers, server_verdict)
                self._hold(pending)
                self._note(arriving, verdict, SpanFate.PENDING)
                return ()
            verdict = self._pair_verdict(verdict, server_verdict)
        elif side is Side.UNSPECIFIED:
            if self._done.any_of(_links(offered), self._now):
                self._note(arriving, verdict, SpanFate.ELSEWHERE)
                return ()  # its server half, decided alone before, told it
        else:
            # Absorbed only by its own links when it has one: request ids restart with
            # every session, so another call may share this one's id (see _pairing_keys).
            if self._done.any_of(_links(offered), self._now):
                self._note(arriving, verdict, SpanFate.ELSEWHERE)
                return ()  # the other half already decided this call
            if not (verdict.decisive and self._ready(reading, group)):
                self._hold(_Pending(reading, verdict, offered, sought, self._now, layers))
                self._note(arriving, verdict, SpanFate.PENDING)
                return ()
        self._mark_done(sought)
        return (self._call(reading, None, verdict, layers),)

    def _verdicts(self, readings: tuple[Reading, ...]) -> tuple[Verdict, Verdict | None]:
        """What the client-side spans of a call say, together, and what its server halves
        say (None: no server half among them)."""
        verdict: Verdict | None = None
        server: Verdict | None = None
        for member in readings:
            self._learn_session(member)
            said = judge(member.signals)
            if member.side is Side.SERVER:
                server = said if server is None else more_informative(server, said)
            else:
                verdict = said if verdict is None else more_informative(verdict, said)
        if verdict is None:  # a server half alone
            return server or UNKNOWN_VERDICT, None
        return verdict, server

    def _ready(self, reading: Reading, group: tuple[Reading, ...]) -> bool:
        """Whether a decided half may go out before its other half comes: nothing that
        half could say would change the call.

        Not a client half that cannot name its server: its server half may (fastmcp names
        itself there). Not a server half whose request came with its caller's trace
        context: that process records spans, and its half is the harness's view (the turn,
        the arguments, the server's name as the harness knows it, how the call ended for
        the model), which ``_pair_verdict`` and ``_call`` prefer.
        """
        if reading.side is Side.SERVER:
            return reading.span.flags & _REMOTE_PARENT != _REMOTE_PARENT
        return self._server(reading.tool, *group) is not None

    def _awaits_layer(self, client: Reading, layers: tuple[Reading, ...]) -> bool:
        """Whether a call whose both halves are in waits for the span its client half is
        nested in: the call cannot name its server, and that span is in the client's
        process (the span flags say so), where it may be the harness's own span or a
        framework's, which would name the server and the turn. (Such a layer ends after
        the SDK span under it; an exporter that sends each span as it ends, or a batch
        cut between them, delivers it later.)"""
        span = client.span
        return (
            client.side is Side.CLIENT
            and span.flags & _REMOTE_PARENT == _LOCAL_PARENT
            and bool(span.parent_span_id)
            and self._server(client.tool, client, *layers) is None
        )

    def _pair_verdict(self, client: Verdict, server: Verdict | None) -> Verdict:
        """The verdict of a call from its client side's and its server side's: the
        harness's view when it has one (how the call ended for the model), else the
        server's. The same in every order: a decided client half goes out without
        waiting for its server half, which then has nothing to change."""
        if server is None or client.decisive:
            return client
        return more_informative(client, server)

    def _hold(self, pending: _Pending) -> None:
        self._held[id(pending)] = pending
        by_key = self._by_key
        for key in pending.offered:
            by_key[key] = pending
        reading = pending.reading
        if reading.side is Side.SERVER:
            return
        tenant, span = reading.tenant, reading.span
        if span.parent_span_id:
            self._held_by_parent[(tenant, span.trace_id, span.parent_span_id)] = pending
        for member in (reading, *pending.layers):
            if member.side is not Side.SERVER:
                self._held_spans[(tenant, member.span.trace_id, member.span.span_id)] = pending

    def _host(self, reading: Reading) -> _Pending | None:
        """The held call whose client-side span is this span's parent, for the same tool."""
        span = reading.span
        if not span.parent_span_id or not self._held_spans:
            return None
        host = self._held_spans.get((reading.tenant, span.trace_id, span.parent_span_id))
        if host is None or id(host) not in self._held:
            return None
        return host if _same_names(host.reading.tool, reading.tool) else None

    def _partner(self, sought: tuple[PairKey, ...]) -> _Pending | None:
        """The held half found under the first of ``sought`` that finds one."""
        by_key = self._by_key
        for key in sought:
            pending = by_key.get(key)
            if pending is not None:
                return pending
        return None

    def _absorb_nested(self, tenant: str, trace_id: bytes, span_id: bytes) -> list[_Pending]:
        """A call span arrived: a client half already held under it, from an earlier
        request, is a layer of the same call; it is taken out of the held halves and given
        to this span's call, its server half's keys with it."""
        nested = self._held_by_parent.pop((tenant, trace_id, span_id), None)
        if nested is None or id(nested) not in self._held:
            return []
        self.stats.nested_spans += 1
        self._forget(nested)
        return [nested]

    def _told_already(self, reading: Reading) -> bool:
        """Whether a call already told names this span as its parent (a layer nested in
        it came first, decided) or as its child's parent (it is nested in a span told),
        for the same tool: a call made inside a tool of another name is a call of its own."""
        span, tenant, now = reading.span, reading.tenant, self._now
        if span.parent_span_id:
            tool = self._told_spans.get((tenant, span.trace_id, span.parent_span_id), now)
            if isinstance(tool, str) and _same_names(tool, reading.tool):
                return True
        tool = self._told_parents.get((tenant, span.trace_id, span.span_id), now)
        return isinstance(tool, str) and _same_names(reading.tool, tool)

    def _remember_told(self, group: Iterable[Reading | None]) -> None:
        now = self._now
        for member in group:
            if member is None or member.side is Side.SERVER:
                continue
            span, tenant, tool = member.span, member.tenant, member.tool
            self._told_spans.set((tenant, span.trace_id, span.span_id), tool, now)
            if span.parent_span_id:
                self._told_parents.set((tenant, span.trace_id, span.parent_span_id), tool, now)

    def _forget(self, pending: _Pending) -> None:
        del self._held[id(pending)]
        for key in pending.offered:
            if self._by_key.get(key) is pending:
                del self._by_key[key]
        reading = pending.reading
        self.undecided.pop(reading.span.span_id, None)  # decided now, after all
        if reading.side is Side.SERVER:
            return
        tenant, span = reading.tenant, reading.span
        parent = (tenant, span.trace_id, span.parent_span_id)
        if self._held_by_parent.get(parent) is pending:
            del self._held_by_parent[parent]
        held_spans = self._held_spans
        for member in (reading, *pending.layers):
            key = (tenant, member.span.trace_id, member.span.span_id)
            if held_spans.get(key) is pending:
                del held_spans[key]

    def _mark_done(self, keys: Iterable[PairKey]) -> None:
        for key in keys:
            self._done.set(key, self._now)

    def _learn_session(self, reading: Reading) -> None:
        if reading.session_id and reading.server:
            self._sessions[(reading.tenant, reading.session_id)] = reading.server

    def _server(self, tool: str, *readings: Reading | None) -> str | None:
        for reading in readings:
            if reading is not None and reading.server:
                return reading.server
        prefix = server_prefix(tool)
        if prefix:
            return prefix
        for reading in readings:
            if reading is not None and reading.session_id:
                known = self._sessions.get((reading.tenant, reading.session_id))
                if known:
                    return known
        return self.config.tool_servers.get(tool)

    def _turn(self, first: Reading, *others: Reading | None) -> tuple[str, int | None]:
        """The turn and round the first reading names, else the next that does; the first's
        trace id (hex) when none names a turn."""
        turn: str | None = None
        round_: int | None = None
        for reading in (first, *others):
            if reading is None:
                continue
            attrs = reading.span.attributes
            if not turn:
                for key in self.config.turn_keys:
                    value = attrs.get(key)
                    if value:
                        turn = str(value)
                        break
            if round_ is None:
                for key in self.config.round_keys:
                    value = attrs.get(key)
                    if isinstance(value, int) and not isinstance(value, bool):
                        round_ = value
                        break
        if not turn:
            turn = _root_session(first, *others)
        if turn is not None and len(turn) > self.config.max_name_chars:
            self.stats.cut_names += 1
            turn = turn[: self.config.max_name_chars]
        if turn is not None and not turn.isascii():
            turn = encodable(turn)
        return turn or first.span.trace_id.hex(), round_

    def _call(
        self,
        reading: Reading,
        partner: Reading | None,
        verdict: Verdict,
        layers: tuple[Reading, ...] = (),
    ) -> ToolCall:
        # The client's view is the harness's: its times, and its identity where it has one.
        other: Reading | None
        if partner is not None and partner.side is Side.CLIENT:
            client, other = partner, reading
        else:
            client, other = reading, partner
        told = (client, other, *layers)
        tool = _tool(told)
        server = self._server(tool, *told)
        turn, round_ = self._turn(client, other, *layers)
        print_ = _fingerprint(server, tool, told)
        span = client.span
        spans = tuple(r.span.span_id for r in told if r is not None)
        self._remember_told(told)
        return build_tool_call(
            turn=turn,
            round=round_,
            server=server,
            tool=tool,
            fingerprint=print_,
            verdict=verdict,
            start_ns=span.start_ns,
            end_ns=span.end_ns,
            trace_id=span.trace_id,
            span_ids=spans,
            dialect=client.dialect,
            harness=client.harness,
            tenant=client.tenant,
            arrived_s=self._now,
        )

    def _listing(self, reading: Reading, layers: tuple[Reading, ...] = ()) -> ToolListing:
        turn, round_ = self._turn(reading)
        counts, problems = listing_counts(reading.counts)
        if problems:
            self.stats.malformed_listings += 1
        return build_tool_listing(
            turn=turn,
            round=round_,
            server=reading.server or self._sessions.get((reading.tenant, reading.session_id or "")),
            start_ns=reading.span.start_ns,
            end_ns=reading.span.end_ns,
            trace_id=reading.span.trace_id,
            # Its client layers' spans too (a server's listing span is read, not annotated).
            span_ids=(
                reading.span.span_id,
                *(layer.span.span_id for layer in layers if layer.side is not Side.SERVER),
            ),
            dialect=reading.dialect,
            harness=reading.harness,
            tenant=reading.tenant,
            problems=problems,
            **counts,
        )


def _resource_text(resource: Mapping[str, AttributeValue], key: str) -> str:
    value = resource.get(key)
    return value if isinstance(value, str) else ""


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def encodable(name: str) -> str:
    """``name`` with each lone surrogate replaced by U+FFFD: valid UTF-8 everywhere."""
    return _LONE_SURROGATE.sub("\ufffd", name)


def _fingerprint(server: str | None, tool: str, told: Iterable[Reading | None]) -> str | None:
    """From the arguments a span of the call recorded, the client's first; else from a
    digest of them; None when none recorded any."""
    readings = [r for r in told if r is not None]
    for reading in readings:
        if reading.has_arguments:
            return fingerprint(server, tool, reading.arguments)
    for reading in readings:
        if reading.arguments_digest:
            return fingerprint(server, tool, {"args_hash": reading.arguments_digest})
    return None


def _root_session(*told: Reading | None) -> str | None:
    """Where a framework exports each tool call as the root of a trace of its own, the
    conversation it names (``gen_ai.conversation.id``, OpenInference's ``session.id``)
    stands for the turn; an MCP session id does not, as one session outlives many turns."""
    for reading in told:
        if (
            reading is not None
            and reading.session_id
            and reading.dialect not in MCP_DIALECTS
            and not reading.span.parent_span_id
        ):
            return reading.session_id
    return None


def _tool(told: Iterable[Reading | None]) -> str:
    """The call's tool as the MCP layer names it (a framework may prefix it with its
    toolset's name), else as the first span that names one does."""
    readings = [r for r in told if r is not None and r.tool]
    for reading in readings:
        if reading.dialect in MCP_DIALECTS:
            return reading.tool
    return readings[0].tool if readings else ""


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


_PREFIX_SEPARATORS = frozenset("_-./:")


def _same_names(a: str, b: str) -> bool:
    """Whether two spans can name the tool of one call: equal, either the other with a
    prefix ending in a separator (a toolset's: "billing_x", "x"), or either nameless."""
    if not a or not b or a == b:
        return True
    longer, shorter = (a, b) if len(a) > len(b) else (b, a)
    return longer.endswith(shorter) and longer[-len(shorter) - 1] in _PREFIX_SEPARATORS


def _keys_of(reading: Reading) -> tuple[tuple[PairKey, ...], tuple[PairKey, ...]]:
    """A span on no side of the wire (a harness's, a framework's) is on the client's: a
    server half whose request it sent (no SDK span recorded between) names it as parent."""
    span = reading.span
    if reading.side is Side.SERVER:
        return _pairing_keys(reading, Side.SERVER, span.parent_span_id)
    return _pairing_keys(reading, Side.CLIENT, span.span_id)


def _group_keys(
    group: tuple[Reading, ...],
) -> tuple[tuple[PairKey, ...], tuple[PairKey, ...]]:
    """The pairing keys of a call's layers: a server half pairs with whichever client
    layer carried its request (the innermost, usually the SDK's)."""
    if len(group) == 1:
        return _keys_of(group[0])
    offered: list[PairKey] = []
    sought: list[PairKey] = []
    for member in group:
        mine, theirs = _keys_of(member)
        offered += mine
        sought += theirs
    return tuple(offered), tuple(sought)


def _pairing_keys(
    reading: Reading, side: Side, link: bytes
) -> tuple[tuple[PairKey, ...], tuple[PairKey, ...]]:
    """The keys under which this reading's half of its call is found, and those under
    which its other half is.

    Each key names the side it belongs to, so two client halves that happen to share a
    request id are never taken for a pair.
    """
    other = Side.SERVER if side is Side.CLIENT else Side.CLIENT
    trace_id, request_id = reading.span.trace_id, reading.request_id
    if request_id is None:
        if not link:
            return (), ()
        return (("span", side, trace_id, link),), (("span", other, trace_id, link),)
    by_request = ("request", side, trace_id, request_id, reading.tool)
    other_by_request = ("request", other, trace_id, request_id, reading.tool)
    if not link:
        return (by_request,), (other_by_request,)
    return (
        (("span", side, trace_id, link), by_request),
        (("span", other, trace_id, link), other_by_request),
    )


def _links(offered: tuple[PairKey, ...]) -> tuple[PairKey, ...]:
    """The keys a call is absorbed by: its spans' links where it has any (request ids
    restart with every session, so another call may share this one's), else its keys."""
    links = tuple(key for key in offered if key[0] == "span")
    return links or offered


def _either(a: Verdict | None, b: Verdict | None) -> Verdict | None:
    """What two spans of one side say together, either possibly silent (None)."""
    if a is None:
        return b
    return a if b is None else more_informative(a, b)
