"""The in-flight pipeline: the stage hook that reads MCP spans as they pass through the
hop — classify, decide, annotate, and tell the consumers. (The offline report over
recorded traces, ``mcp-breaker analyze``, lives in ``processor/offline/`` and drives this
same pipeline.)

    classify (pure) -> breaker (pure) -> annotate the request's spans -> sinks

The classifier and the breaker take the time as an argument (span time for the breaker);
this is where the arrival clock is read. Consumers (metrics, advisories, tests) are plain
callables, so the order of the pipeline is written down here and in ``server.py``.

A large request is read in a worker thread (``Stage.prepare_in_thread``). The classifier
then works there, and periodic expiry waits for the next tick; what is shared beyond the
request (the breaker, the roster, the consumers, the shared state) is told on the event
loop, a few events at a time (``stage.engine_steps``), in the same order as in place.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from mcp_breaker_client.shared.verdict import FailureClass

from processor.classify.annotations import AnnotationMemory
from processor.classify.classifier import Classifier
from processor.classify.events import Event, ToolListing
from processor.engines.breaker import Breaker, CallDecision
from processor.engines.roster import RosterFinding, RosterHealth
from processor.engines.turns import NS_PER_S
from processor.inflight.enrich import annotate, annotate_listing, annotate_undecided, restore
from processor.inflight.stage import engine_steps, run_in_place
from processor.request.edits import SpanEdits
from processor.request.sender import UNKNOWN_SENDER, Sender
from processor.request.sparse import RequestSpans, SparseRequest
from processor.telemetry.logs import SENDER_DRIVEN

log = logging.getLogger(__name__)
_UNKNOWN_TOOL = FailureClass.UNKNOWN_TOOL
# A request's events told to the engines and consumers in one step on the loop, when it is
# read off the loop: some 30 µs each here, so the loop is held about a millisecond a step.
EVENTS_PER_STEP = 32

Finding = Event | CallDecision | RosterFinding
Sink = Callable[[Finding], None]


Share = Callable[[Event, "CallDecision | RosterFinding"], None]
"""Hands an event this process's engines consumed, and what they made of it, to the
shared state (``processor/state/``), which replicates the event to the other replicas."""


class Pipeline:
    def __init__(
        self,
        classifier: Classifier,
        breaker: Breaker,
        sinks: Sequence[Sink] = (),
        roster: RosterHealth | None = None,
        clock: Callable[[], float] = time.time,
        share: Share | None = None,
        tenant_must_match: bool = False,
    ) -> None:
        """``clock``: the arrival clock, in wall-clock seconds, so that arrival times mean
        the same on every replica (the reorder window compares them).
        ``tenant_must_match``: a sender with credentials may not name another tenant in a
        span's resource (receivers.span_tenant: match); such spans go on unread."""
        self.classifier = classifier
        self.breaker = breaker
        self.roster = roster if roster is not None else RosterHealth()
        self._sinks = tuple(sinks)
        self._clock = clock
        self.share = share
        self._tenant_must_match = tenant_must_match
        config = classifier.config
        # What each MCP span was given, so its later copy (an exporter's retry) gets it too.
        self.annotations = AnnotationMemory(config.max_annotated_spans, config.seen_ttl_s, clock)
        # Held while a request is read: by a worker thread, the classifier and the memory
        # of annotations are its own until it is done (a tick on the loop passes meanwhile).
        self._reading = threading.Lock()

    def __call__(self, request: RequestSpans, sender: Sender = UNKNOWN_SENDER) -> None:
        with self._reading:
            # A sparse request's spans are annotated through its edits (appended as bytes
            # as it is encoded); a request decoded whole, in its spans.
            edits = request.edits if isinstance(request, SparseRequest) else None
            classifier = self.classifier
            events = classifier.classify(
                request,
                self._clock(),
                tenant=sender.tenant,
                tenant_must_match=self._tenant_must_match,
            )
            # In span time within the request: the order spans sit in a request decides
            # nothing.
            events.sort(key=_start_ns)
            run = engine_steps.get()
            if run is run_in_place:
                self._publish(events, annotate_spans=True, edits=edits)
            else:
                for start in range(0, len(events), EVENTS_PER_STEP):
                    step = events[start : start + EVENTS_PER_STEP]
                    run(functools.partial(self._publish, step, annotate_spans=True, edits=edits))
            annotate_undecided(
                classifier.spans, classifier.undecided, self.annotations, classifier.read, edits
            )
            spans = classifier.spans
            duplicates = (spans[span_id] for span_id in classifier.duplicates)
            restore(duplicates, self.annotations, edits)

    def let_go(self) -> None:
        """Done with the request last read (``Classifier.let_go``)."""
        with self._reading:
            self.classifier.let_go()

    def store_sizes(self) -> dict[str, tuple[int, int]]:
        """What each bounded store holds, and its cap, in entries: store -> (held, cap)."""
        classify, breaker = self.classifier.config, self.breaker.config
        return {
            "pending_calls": (self.classifier.pending_calls, classify.max_pending_calls),
            "seen_spans": (self.classifier.seen_spans, classify.max_seen_spans),
            "annotated_spans": (len(self.annotations), classify.max_annotated_spans),
            "circuits": (len(self.breaker.circuits), breaker.max_circuits),
            "turns": (len(self.breaker.turns), breaker.max_turns),
            "reorder_calls": (len(self.breaker.reorder), breaker.reorder_max_calls),
            "roster_turns": (len(self.roster), self.roster.config.max_turns),
        }

    def tick(self) -> None:
        """Decide the calls whose other half did not come in time; called periodically, on
        the loop. Passed while a worker thread reads a request: its classification expires
        what is due itself, and the loop must not wait for a thread that waits for it."""
        if not self._reading.acquire(blocking=False):
            return
        try:
            self._publish(self.classifier.expire(self._clock()), annotate_spans=False)
        finally:
            self._reading.release()

    def flush(self) -> None:
        """Decide every held call now (at shutdown, once the receivers have stopped)."""
        if not self._reading.acquire(blocking=False):
            # A request read past the receivers' grace: the calls it holds are not reported.
            log.warning("a request is still being analysed: held calls not flushed")
            return
        try:
            self._publish(self.classifier.flush(), annotate_spans=False)
        finally:
            self._reading.release()

    def apply(self, event: Event) -> CallDecision | RosterFinding:
        """What the engines make of an event: a call's decision or a listing's finding.
        Also how another replica's events reach this one's engines (no span to annotate,
        no sink: they are counted where they were received)."""
        if isinstance(event, ToolListing):
            return self._roster_finding(event)
        decision = self.breaker.observe(event)
        # As event.failure_class, without the property, and the member read once (on
        # Python 3.11 reading one off its enum costs some 60 ns): every call passes here.
        if event.verdict.failure_class is _UNKNOWN_TOOL and self.roster.offered_in_turn(
            event.turn, event.tool, event.end_ns / NS_PER_S
        ):
            decision = replace(decision, stale_roster=True)
        return decision

    def _publish(
        self, events: list[Event], *, annotate_spans: bool, edits: SpanEdits | None = None
    ) -> None:
        # Every MCP span passes here: what the loop reads is looked up once, and the sinks
        # are called in place (as ``_emit`` would, a call less for each finding).
        sinks, share, log_decision = self._sinks, self.share, self._log
        spans, read, memory = self.classifier.spans, self.classifier.read, self.annotations
        for event in events:
            for sink in sinks:
                sink(event)
            finding = self.apply(event)
            if share is not None:
                share(event, finding)
            if isinstance(finding, RosterFinding):
                self._listing(finding, annotate_spans, edits)
                continue
            if annotate_spans:
                annotate(spans, finding, memory, read, edits)
            log_decision(finding)
            for sink in sinks:
                sink(finding)
            for revised in finding.revised:  # their spans have gone on: counted, not written
                log_decision(revised)
                for sink in sinks:
                    sink(revised)

    def _roster_finding(self, listing: ToolListing) -> RosterFinding:
        finding = self.roster.observe(listing)
        if not listing.offered_tools:  # most listings name no tools: none can be stale
            return finding
        stale = tuple(
            tool
            for tool in listing.offered_tools
            if self.breaker.blocking(listing.server, tool, listing.tenant)
        )
        return replace(finding, stale_tools=stale) if stale else finding

    def _listing(
        self, finding: RosterFinding, annotate_spans: bool, edits: SpanEdits | None
    ) -> None:
        if annotate_spans:
            classifier = self.classifier
            spans, read = classifier.spans, classifier.read
            annotate_listing(spans, finding, self.annotations, read, edits)
        if finding.collapse is not None:
            collapse = finding.collapse
            log.info(
                "roster %s in turn %s: rounds %d-%d offered no tools (%d before)",
                "recovered" if collapse.recovered_round else "collapsed",
                collapse.turn,
                collapse.from_round,
                collapse.to_round,
                collapse.offered_before,
                extra=SENDER_DRIVEN,
            )
        self._emit(finding)

    def _emit(self, finding: Finding) -> None:
        for sink in self._sinks:
            sink(finding)

    @staticmethod
    def _log(decision: CallDecision) -> None:
        for transition in decision.transitions:
            log.info(
                "circuit %s %s: %s -> %s (%s)",
                transition.key.scope.value,
                transition.key.name,
                transition.source.value,
                transition.target.value,
                transition.trigger.value,
                extra=SENDER_DRIVEN,
            )
        call = decision.call
        if decision.dead_call:
            log.info(
                "dead call to %s/%s in turn %s (%s%s%s)",
                call.server or "?",
                call.tool,
                call.turn,
                decision.rule.value if decision.rule else "",
                "" if decision.enforced else ", shadow",
                ", found when a late span arrived" if decision.late else "",
                extra=SENDER_DRIVEN,
            )
        elif log.isEnabledFor(logging.DEBUG):
            log.debug(
                "tool call %s/%s in turn %s: %s%s (%s)",
                call.server or "?",
                call.tool,
                call.turn,
                call.outcome.value,
                f"/{call.failure_class.value}" if call.failure_class else "",
                call.dialect.value,
            )


def _start_ns(event: Event) -> int:
    return event.start_ns
