"""Deciding: each call told once, whatever order and requests its spans arrive in.

A call's client and server halves are paired, and the layers of one call (a framework's
span over the SDK's) joined, across requests: a half whose other half could still change
what the call says is held for it, at most ``pair_wait_s``, and a half of a call already
decided is absorbed into it (docs/conventions.md, "Pairing and de-duplication"). The call
then goes out as one event, its server resolved and its turn named. Every map here is
bounded; the Classifier (classifier.py) hands each call of a request in.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable

from cachetools import LRUCache
from mcp_breaker_client.shared.conventions import server_prefix
from mcp_breaker_client.shared.verdict import UNKNOWN_VERDICT, Verdict
from opentelemetry.proto.trace.v1.trace_pb2 import SpanFlags

from processor.classify.events import (
    Event,
    Side,
    ToolCall,
    ToolListing,
    build_tool_call,
    build_tool_listing,
)
from processor.classify.identity import call_fingerprint, call_tool, encodable, root_session
from processor.classify.listing import listing_counts
from processor.classify.pairing import (
    PairingStats,
    PairKey,
    Pending,
    SpanFate,
    either_verdict,
    group_keys,
    keys_of,
    link_keys,
    more_informative,
    same_names,
)
from processor.classify.reading import Kind, Reading, SpanKey
from processor.classify.recent import ExpiringKeys, ExpiringValues
from processor.config import ClassifyConfig

# The span flags that say where a span's parent is: known, and remote (another process).
_REMOTE_PARENT = (
    SpanFlags.SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK | SpanFlags.SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK
)
_LOCAL_PARENT = SpanFlags.SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK  # known, and in this process
# Read off the enums once, for the tests every MCP span meets: on Python 3.11 an enum
# member read off its class costs some 60 ns, a module name 10.
_CLIENT, _SERVER, _UNSPECIFIED = Side.CLIENT, Side.SERVER, Side.UNSPECIFIED
_LISTING = Kind.LISTING


class CallDecider:
    """The calls of the requests classified, from their spans to their events: what is
    held between requests for a call still to be decided, and what is kept of calls told."""

    def __init__(self, config: ClassifyConfig, stats: PairingStats) -> None:
        self.config = config
        self.stats = stats
        self._now = 0.0
        # Undecided halves of calls, oldest first; and the same, by each key they offer.
        self._held: OrderedDict[int, Pending] = OrderedDict()
        self._by_key: dict[PairKey, Pending] = {}
        # Keys of halves still to come for calls already emitted: absorbed, not counted twice,
        # for as long as a span seen before is known (an agent's exporter backlog can deliver
        # a client half minutes after its server half decided the call).
        self._done = ExpiringKeys(
            self.config.max_pending_calls * 2,
            max(self.config.pair_wait_s * 30, self.config.seen_ttl_s),
        )
        # The spans of calls already told, and their parents, by tool: a layer of one of
        # them that comes in a later request (a framework span after the SDK span nested in
        # it, each exported as it ended) is the same call, not another. And client halves
        # held under a parent span, which a layer arriving later takes into its call.
        told = (self.config.max_seen_spans, self.config.seen_ttl_s)
        self._told_spans = ExpiringValues(*told)  # (tenant, trace, span) -> its tool
        self._told_parents = ExpiringValues(*told)  # (tenant, trace, parent) -> the tool
        self._held_by_parent: dict[SpanKey, Pending] = {}
        # The client-side spans of held calls: a layer nested in one, arriving later, joins.
        self._held_spans: dict[SpanKey, Pending] = {}
        # Session id -> server name, per tenant: one tenant's spans cannot name another's.
        self._sessions: LRUCache[tuple[str, str], str] = LRUCache(self.config.max_sessions)
        # Call spans of the request last classified whose call it did not decide: their own
        # verdict, and why, so they go on with what they alone say (enrich.annotate_undecided).
        self.undecided: dict[bytes, tuple[Verdict, SpanFate]] = {}

    @property
    def pending_calls(self) -> int:
        return len(self._held)

    def begin(self, now: float) -> None:
        """A request's calls come next, read at ``now``: ``undecided`` will be about them."""
        self._now = now
        self.undecided = {}

    def expire(self, now: float) -> list[Event]:
        """Calls whose other half did not come within ``pair_wait_s``: decided alone."""
        self._now = now
        return self._decide_alone(lambda p: now - p.arrived >= self.config.pair_wait_s)

    def flush(self) -> list[Event]:
        """Decide every held call now (at shutdown: nothing is left unreported)."""
        return self._decide_alone(lambda p: True)

    def _decide_alone(self, due: Callable[[Pending], bool]) -> list[Event]:
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
            events.append(self._call(pending.reading, verdict, pending.layers))
        return events

    def _note(self, readings: Iterable[Reading], verdict: Verdict, fate: SpanFate) -> None:
        undecided = self.undecided
        for reading in readings:
            undecided[reading.span.span_id] = (verdict, fate)

    def take(self, reading: Reading, layers: tuple[Reading, ...] = ()) -> tuple[Event, ...]:
        """One call (or listing) of this request: its outermost span and the spans of the
        layers nested in it (``Classifier._layered``), decided from the layers that say most.

        Whatever order a call's spans arrive in, and in however many requests, it is one
        call, read the same: one verdict (``_pair_verdict``), one server name (the client
        side's first), one turn. A decided half goes out at once unless a half still to
        come could change what the call says; then it is held for it, at most
        ``pair_wait_s``. A layer of a held call joins it; a half of a call already decided
        is absorbed into it, never counted again.
        """
        side = reading.side
        if reading.kind is _LISTING:
            self._learn_session(reading)
            # The harness's view of a listing is the client's; a server-side listing span
            # (fastmcp lists tools to resolve every call) would count the same roster twice.
            return () if side is _SERVER else (self._listing(reading, layers),)
        arriving = (reading, *layers)  # this request's spans of the call
        verdict, server_verdict = self._verdicts(arriving)
        if side is not _SERVER:
            # Layers nested in this span or in its own layers that came in earlier requests
            # (each span exported as it ends) and wait for their other half: this span
            # tells their call. (Mostly none is held: nothing to look up then.)
            if self._held_by_parent:
                members = [reading, *layers]
                for member in members:  # grows: a layer absorbed may hold one of its own
                    for nested in self._absorb_nested(member.key):
                        verdict = more_informative(verdict, nested.verdict)
                        server_verdict = either_verdict(server_verdict, nested.server_verdict)
                        layers += (nested.reading, *nested.layers)
                        members += (nested.reading, *nested.layers)
            # A layer of a call held for its other half (a framework's span held for its
            # server's name, the SDK's client span under it exported later): it joins it.
            host = self._host(reading)
            if host is not None:
                self.stats.nested_spans += 1
                self._forget(host)
                verdict = more_informative(host.verdict, verdict)
                server_verdict = either_verdict(host.server_verdict, server_verdict)
                layers = (*host.layers, reading, *layers)
                reading = host.reading
        group = (reading, *layers)
        offered, sought = group_keys(group)
        if side is not _SERVER and self._told_already(reading):
            self.stats.nested_spans += 1
            # A server half held for this call's client half, which a layer read in an
            # earlier request already told: the same call, absorbed.
            partner = self._partner(sought)
            if partner is not None:
                self._forget(partner)
            for member in group:
                self._mark_done(keys_of(member)[1])
            self._note(arriving, verdict, SpanFate.ELSEWHERE)
            self._remember_told(group)  # a layer deeper still may come later
            return ()  # another layer of this call, read in an earlier request, told it
        partner = self._partner(sought)
        if partner is not None:
            self._forget(partner)
            # The partner is the other side's half: a server half when this is a client one.
            if side is _SERVER:
                client, layers = partner.reading, (*partner.layers, reading)
                verdict, server_verdict = partner.verdict, verdict
            else:
                client, layers = reading, (*layers, partner.reading, *partner.layers)
                server_verdict = either_verdict(server_verdict, partner.verdict)
            if self._awaits_layer(client, layers):
                self._hold(
                    Pending(
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
            return (self._call(client, merged, layers),)
        # Both halves here (a server half nested in a client layer), or one span that
        # tells the whole call (a harness's, a framework's, with the SDK's span under it or
        # not): decided at once, as most framework runs export no server half at all.
        complete = side is not _SERVER and server_verdict is not None
        if complete:
            if self._awaits_layer(reading, layers):
                pending = Pending(reading, verdict, (), sought, self._now, layers, server_verdict)
                self._hold(pending)
                self._note(arriving, verdict, SpanFate.PENDING)
                return ()
            verdict = self._pair_verdict(verdict, server_verdict)
        elif side is _UNSPECIFIED:
            if self._done.any_of(link_keys(offered), self._now):
                self._note(arriving, verdict, SpanFate.ELSEWHERE)
                return ()  # its server half, decided alone before, told it
        else:
            # Absorbed only by its own links when it has one: request ids restart with
            # every session, so another call may share this one's id (see _pairing_keys).
            if self._done.any_of(link_keys(offered), self._now):
                self._note(arriving, verdict, SpanFate.ELSEWHERE)
                return ()  # the other half already decided this call
            if not (verdict.decisive and self._ready(reading, group)):
                self._hold(Pending(reading, verdict, offered, sought, self._now, layers))
                self._note(arriving, verdict, SpanFate.PENDING)
                return ()
        self._mark_done(sought)
        return (self._call(reading, verdict, layers),)

    def _verdicts(self, readings: tuple[Reading, ...]) -> tuple[Verdict, Verdict | None]:
        """What the client-side spans of a call say, together, and what its server halves
        say (None: no server half among them)."""
        verdict: Verdict | None = None
        server: Verdict | None = None
        for member in readings:
            self._learn_session(member)
            said = member.verdict
            if member.side is _SERVER:
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
        if reading.side is _SERVER:
            return reading.span.flags & _REMOTE_PARENT != _REMOTE_PARENT
        return self._server(reading.tool, group) is not None

    def _awaits_layer(self, client: Reading, layers: tuple[Reading, ...]) -> bool:
        """Whether a call whose both halves are in waits for the span its client half is
        nested in: the call cannot name its server, and that span is in the client's
        process (the span flags say so), where it may be the harness's own span or a
        framework's, which would name the server and the turn. (Such a layer ends after
        the SDK span under it; an exporter that sends each span as it ends, or a batch
        cut between them, delivers it later.)"""
        span = client.span
        return (
            client.side is _CLIENT
            and span.flags & _REMOTE_PARENT == _LOCAL_PARENT
            and bool(span.parent_span_id)
            and self._server(client.tool, (client, *layers)) is None
        )

    def _pair_verdict(self, client: Verdict, server: Verdict | None) -> Verdict:
        """The verdict of a call from its client side's and its server side's: the
        harness's view when it has one (how the call ended for the model), else the
        server's. The same in every order: a decided client half goes out without
        waiting for its server half, which then has nothing to change."""
        if server is None or client.decisive:
            return client
        return more_informative(client, server)

    def _hold(self, pending: Pending) -> None:
        self._held[id(pending)] = pending
        by_key = self._by_key
        for key in pending.offered:
            by_key[key] = pending
        reading = pending.reading
        if reading.side is _SERVER:
            return
        if reading.span.parent_span_id:
            self._held_by_parent[reading.parent_key] = pending
        for member in (reading, *pending.layers):
            if member.side is not _SERVER:
                self._held_spans[member.key] = pending

    def _host(self, reading: Reading) -> Pending | None:
        """The held call whose client-side span is this span's parent, for the same tool."""
        if not reading.span.parent_span_id or not self._held_spans:
            return None
        host = self._held_spans.get(reading.parent_key)
        if host is None or id(host) not in self._held:
            return None
        return host if same_names(host.reading.tool, reading.tool) else None

    def _partner(self, sought: tuple[PairKey, ...]) -> Pending | None:
        """The held half found under the first of ``sought`` that finds one."""
        by_key = self._by_key
        if not by_key:
            return None  # nothing is held: the usual case, where each request is whole
        for key in sought:
            pending = by_key.get(key)
            if pending is not None:
                return pending
        return None

    def _absorb_nested(self, key: SpanKey) -> list[Pending]:
        """A call span arrived (``key``, its key): a client half already held under it,
        from an earlier request, is a layer of the same call; it is taken out of the held
        halves and given to this span's call, its server half's keys with it."""
        nested = self._held_by_parent.pop(key, None)
        if nested is None or id(nested) not in self._held:
            return []
        self.stats.nested_spans += 1
        self._forget(nested)
        return [nested]

    def _told_already(self, reading: Reading) -> bool:
        """Whether a call already told names this span as its parent (a layer nested in
        it came first, decided) or as its child's parent (it is nested in a span told),
        for the same tool: a call made inside a tool of another name is a call of its own."""
        now = self._now
        if reading.span.parent_span_id:
            tool = self._told_spans.get(reading.parent_key, now)
            if isinstance(tool, str) and same_names(tool, reading.tool):
                return True
        tool = self._told_parents.get(reading.key, now)
        return isinstance(tool, str) and same_names(reading.tool, tool)

    def _remember_told(self, group: Iterable[Reading]) -> None:
        spans: list[tuple[SpanKey, str]] = []
        parents: list[tuple[SpanKey, str]] = []
        for member in group:
            if member.side is _SERVER:
                continue
            tool = member.tool
            spans.append((member.key, tool))
            if member.span.parent_span_id:
                parents.append((member.parent_key, tool))
        self._told_spans.set_all(spans, self._now)
        self._told_parents.set_all(parents, self._now)

    def _forget(self, pending: Pending) -> None:
        del self._held[id(pending)]
        for key in pending.offered:
            if self._by_key.get(key) is pending:
                del self._by_key[key]
        reading = pending.reading
        self.undecided.pop(reading.span.span_id, None)  # decided now, after all
        if reading.side is _SERVER:
            return
        parent = reading.parent_key
        if self._held_by_parent.get(parent) is pending:
            del self._held_by_parent[parent]
        held_spans = self._held_spans
        for member in (reading, *pending.layers):
            key = member.key
            if held_spans.get(key) is pending:
                del held_spans[key]

    def _mark_done(self, keys: Iterable[PairKey]) -> None:
        self._done.set_all(keys, self._now)

    def _learn_session(self, reading: Reading) -> None:
        if reading.session_id and reading.server:
            self._sessions[(reading.tenant, reading.session_id)] = reading.server

    def _server(self, tool: str, readings: tuple[Reading, ...]) -> str | None:
        for reading in readings:
            if reading.server:
                return reading.server
        prefix = server_prefix(tool)
        if prefix:
            return prefix
        for reading in readings:
            if reading.session_id:
                known = self._sessions.get((reading.tenant, reading.session_id))
                if known:
                    return known
        return self.config.tool_servers.get(tool)

    def _turn(self, told: tuple[Reading, ...]) -> tuple[str, int | None]:
        """The turn and round the first reading names, else the next that does; the first's
        trace id (hex) when none names a turn."""
        turn: str | None = None
        round_: int | None = None
        turn_keys, round_keys = self.config.turn_keys, self.config.round_keys
        for reading in told:
            attrs = reading.span.attributes
            if not turn:
                for key in turn_keys:
                    value = attrs.get(key)
                    if value:
                        turn = str(value)
                        break
            if round_ is None:
                for key in round_keys:
                    value = attrs.get(key)
                    if isinstance(value, int) and not isinstance(value, bool):
                        round_ = value
                        break
        if not turn:
            turn = root_session(told)
        if turn is not None and len(turn) > self.config.max_name_chars:
            self.stats.cut_names += 1
            turn = turn[: self.config.max_name_chars]
        if turn is not None and not turn.isascii():
            turn = encodable(turn)
        return turn or told[0].span.trace_id.hex(), round_

    def _call(
        self, client: Reading, verdict: Verdict, layers: tuple[Reading, ...] = ()
    ) -> ToolCall:
        """The call ``client`` tells (the harness's view: its times, and its identity where
        it has one), with the spans of its other layers and halves, ``layers``."""
        told = (client, *layers)
        tool = call_tool(told)
        server = self._server(tool, told)
        turn, round_ = self._turn(told)
        print_ = call_fingerprint(server, tool, told)
        span = client.span
        spans = tuple([r.span.span_id for r in told])
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
        turn, round_ = self._turn((reading,))
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
                *(layer.span.span_id for layer in layers if layer.side is not _SERVER),
            ),
            dialect=reading.dialect,
            harness=reading.harness,
            tenant=reading.tenant,
            problems=problems,
            **counts,
        )
