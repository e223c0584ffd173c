"""Classification: the spans of a request in, normalized events out.

Pure logic with the clock passed in. It pairs the client and server spans of one call
(matched by parent/child ids across processes, or by JSON-RPC request id), holding an
undecided half for at most ``pair_wait_s``; it drops a span it has already seen; and it
resolves which server a call went to. Every map here is bounded.
"""

from __future__ import annotations

import enum
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from cachetools import LRUCache
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from processor.classify.dialects import (
    MAX_LAYERS,
    MCP_DIALECTS,
    NAME_PREFIXES,
    NAME_SUFFIXES,
    OPENINFERENCE_SCOPE,
    READ_KEYS,
    READ_PREFIXES,
    Kind,
    Reading,
    read,
)
from processor.classify.events import (
    Event,
    FailureClass,
    Outcome,
    Side,
    ToolCall,
    ToolListing,
    Verdict,
    build_tool_call,
    build_tool_listing,
)
from processor.classify.fingerprint import fingerprint
from processor.classify.listing import listing_counts
from processor.classify.outcome import judge
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
from processor.sparse import RequestSpans

SERVICE_NAME_KEY = "service.name"  # OpenTelemetry resource semantic conventions
SERVER_SEPARATOR = "__"  # "playwright__browser_navigate": the server__tool convention

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
            else:
                self.stats.unpaired += 1
            self._forget(pending)
            self._mark_done(pending.sought)
            self.undecided.pop(pending.reading.span.span_id, None)
            events.append(self._call(pending.reading, None, pending.verdict, pending.layers))
        return events

    def _note(self, reading: Reading, verdict: Verdict, fate: SpanFate) -> None:
        self.undecided[reading.span.span_id] = (verdict, fate)

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
        layers nested in it (``_layered``), decided from the layer that says most."""
        span = reading.span
        tenant = reading.tenant
        trace_id, span_id, parent_id = span.trace_id, span.span_id, span.parent_span_id
        self._learn_session(reading)
        side = reading.side
        if reading.kind is Kind.LISTING:
            # The harness's view of a listing is the client's; a server-side listing span
            # (fastmcp lists tools to resolve every call) would count the same roster twice.
            return () if side is Side.SERVER else (self._listing(reading, layers),)
        verdict = judge(reading.signals)
        for layer in layers:
            self._learn_session(layer)
            verdict = more_informative(verdict, judge(layer.signals))
        if side is not Side.SERVER:
            # Layers nested in this span or in its own layers that came in earlier requests
            # (each span exported as it ends) and wait for their other half: this span
            # tells their call.
            members = [reading, *layers]
            for member in members:  # grows: a layer absorbed may hold one of its own
                for nested in self._absorb_nested(tenant, trace_id, member.span.span_id):
                    verdict = more_informative(verdict, nested.verdict)
                    layers += (nested.reading, *nested.layers)
                    members += (nested.reading, *nested.layers)
        group = (reading, *layers)
        if side is not Side.SERVER and self._told_already(reading):
            self.stats.nested_spans += 1
            for member in group:
                self._mark_done(_keys_of(member)[1])
                self._note(member, verdict, SpanFate.ELSEWHERE)
            self._remember_told(group)  # a layer deeper still may come later
            return ()  # another layer of this call, read in an earlier request, told it
        offered, sought = _group_keys(group)
        partner = self._partner(sought)
        if partner is not None:
            self._forget(partner)
            self.undecided.pop(partner.reading.span.span_id, None)  # decided now, after all
            merged = more_informative(verdict, partner.verdict)
            return (self._call(reading, partner.reading, merged, layers + partner.layers),)
        # Both halves here (a server half nested in a client layer), or one span that
        # tells the whole call (a harness's, a framework's): decided at once.
        complete = side is not Side.SERVER and any(m.side is Side.SERVER for m in layers)
        if side is Side.UNSPECIFIED or complete:
            if not complete and offered and self._done.any_of(offered[:1], self._now):
                for member in group:  # its server half, decided alone before, told it
                    self._note(member, verdict, SpanFate.ELSEWHERE)
                return ()
            self._mark_done(sought)
            return (self._call(reading, None, verdict, layers),)
        # Absorbed only by its own link when it has one: request ids restart with every
        # session, so another call may share this one's id (see _pairing_keys).
        link = span_id if side is Side.CLIENT else parent_id
        absorbing = offered[:1] if link else offered
        if self._done.any_of(absorbing, self._now):
            for member in group:
                self._note(member, verdict, SpanFate.ELSEWHERE)
            return ()  # the other half already decided this call
        # A decided half goes out at once, unless it is a client half that cannot name its
        # server: its server half (fastmcp names itself there) is worth a short wait.
        named = side is Side.SERVER or self._server(reading.tool, *group) is not None
        if verdict.decisive and named:
            self._mark_done(sought)
            return (self._call(reading, None, verdict, layers),)
        pending = _Pending(reading, verdict, offered, sought, self._now, layers)
        for member in group:
            self._note(member, verdict, SpanFate.PENDING)
        self._held[id(pending)] = pending
        for key in offered:
            self._by_key[key] = pending
        if side is Side.CLIENT and parent_id:
            self._held_by_parent[(tenant, trace_id, parent_id)] = pending
        return ()

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
        self.undecided.pop(nested.reading.span.span_id, None)
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
        span = pending.reading.span
        parent = (pending.reading.tenant, span.trace_id, span.parent_span_id)
        if self._held_by_parent.get(parent) is pending:
            del self._held_by_parent[parent]

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


def server_prefix(tool: str) -> str | None:
    """``playwright`` for ``playwright__browser_navigate``: the server__tool convention."""
    prefix, separator, _ = tool.partition(SERVER_SEPARATOR)
    return prefix if separator and prefix else None


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
    span = reading.span
    link = span.span_id if reading.side is Side.CLIENT else span.parent_span_id
    return _pairing_keys(reading, link, reading.tenant)


def _group_keys(
    group: tuple[Reading, ...],
) -> tuple[tuple[PairKey, ...], tuple[PairKey, ...]]:
    """The pairing keys of a call's layers: a server half pairs with whichever client
    layer carried its request (the innermost, usually the SDK's)."""
    if len(group) == 1:
        return _keys_of(group[0]) if group[0].side is not Side.UNSPECIFIED else ((), ())
    offered: list[PairKey] = []
    sought: list[PairKey] = []
    for member in group:
        if member.side is Side.UNSPECIFIED:
            continue
        mine, theirs = _keys_of(member)
        offered += mine
        sought += theirs
    return tuple(offered), tuple(sought)


def _pairing_keys(
    reading: Reading, link: bytes, tenant: str
) -> tuple[tuple[PairKey, ...], tuple[PairKey, ...]]:
    """The keys under which this reading's half of its call is found, and those under
    which its other half is.

    Each key names the side it belongs to, so two client halves that happen to share a
    request id are never taken for a pair.
    """
    side = reading.side
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
