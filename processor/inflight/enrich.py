"""Write the verdicts back onto the spans they were read from, as ``mcp.breaker.*``.

Every call span that is forwarded says at least how its call ended as far as the span
itself tells (``mcp.breaker.outcome``, and ``failure_class`` when it failed). The
breaker's decision — dead call, state, rule, the failure it repeats — is added when the
call is decided in the span's own request. A call decided later (its other half comes in
another request, or never) goes out with ``mcp.breaker.pending = true`` instead, and its
decision reaches the metrics and the advisories all the same. An attribute the span
already carries is never overwritten.

What is written on a span is remembered (``AnnotationMemory``), so a later copy of the same
span (an exporter's retry) goes out with the same attributes (``restore``).

Most calls are decided alike (ok, closed, not dead, enforced), so the attributes of each
shape of decision are built once (``_Shapes``) as an ``Annotation``: the mapping, and a
span carrying it, encoded. In a request read sparsely those bytes are appended to the
span's own as the request is encoded (``processor/request/edits.py``: the decoded span is
neither changed nor encoded again); in one decoded whole they are merged into the span in
one call (setting the attributes one by one from Python costs several times more).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Set
from typing import Any

from mcp_breaker_client.shared.verdict import Verdict
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from processor.classify.annotations import AnnotationMemory
from processor.classify.pairing import SpanFate
from processor.engines.breaker import CallDecision
from processor.engines.roster import RosterFinding
from processor.request.edits import SpanEdits

PREFIX = "mcp.breaker."
ROSTER_PREFIX = "mcp.roster."


Value = str | bool | int


class Annotation(dict[str, Value]):
    """Attributes to write on a span, and ``carrier``: a span holding only them, in order,
    encoded, to append to a span's bytes (``SpanEdits``) or merge into a decoded span that
    has none of them yet (parsed onto its end: a repeated field's entries are appended, in
    order). Shared by every span given the same attributes (``_Shapes``), so never changed
    once built."""

    __slots__ = ("carrier",)

    def __init__(self, values: Mapping[str, Value]) -> None:
        super().__init__(values)
        carrier = Span()
        _add_each(carrier, self.items())
        # Encoded once: merging a message encodes it again every time (some 20-30% of the
        # merge), merging its bytes only parses them.
        self.carrier = carrier.SerializeToString()

    def without(self, keys: Set[str]) -> Annotation:
        """These attributes but those under ``keys`` (the keys a later hook strips)."""
        return Annotation({k: v for k, v in self.items() if k not in keys})


class _Shapes:
    """The annotation of each shape of finding, built once. Bounded: a shape carries
    values a sender chooses (fingerprints, tool names), so when full it starts over."""

    def __init__(self, max_shapes: int) -> None:
        self._max_shapes = max_shapes
        self._built: dict[Hashable, Annotation] = {}

    def get(
        self, shape: Hashable, build: Callable[..., dict[str, Value]], *arguments: Any
    ) -> Annotation:
        """The annotation of ``shape``, built as ``build(*arguments)`` the first time. (The
        arguments, not a closure over them: every decision asks, and most find it built.)"""
        annotation = self._built.get(shape)
        if annotation is None:
            if len(self._built) >= self._max_shapes:
                self._built.clear()
            annotation = self._built[shape] = Annotation(build(*arguments))
        return annotation


MAX_SHAPES = 4096
_decisions = _Shapes(MAX_SHAPES)
_undecided = _Shapes(MAX_SHAPES)
_listings = _Shapes(MAX_SHAPES)


def verdict_values(verdict: Verdict) -> dict[str, Value]:
    """What a verdict says, whether the breaker has decided the call yet or not. (Read
    from these four fields alone: they are what the shapes below are keyed by.)"""
    values: dict[str, Value] = {"outcome": verdict.outcome.value}
    if verdict.failure_class is not None:
        values["failure_class"] = verdict.failure_class.value
    if verdict.origin is not None:
        values["failure_origin"] = verdict.origin.value
    if verdict.neutral_reason is not None:
        values["neutral_reason"] = verdict.neutral_reason.value
    return values


def decision_attributes(decision: CallDecision) -> Annotation:
    call = decision.call
    verdict = call.verdict
    # Everything the attributes are built from (the excerpt is not written).
    shape = (
        verdict.outcome,
        verdict.failure_class,
        verdict.origin,
        verdict.neutral_reason,
        decision.state,
        decision.dead_call,
        decision.enforced,
        call.fingerprint,
        decision.rule,
        decision.repeat_of,
        len(decision.revised),
        decision.stale_roster,
    )
    return _decisions.get(shape, _decision_attributes, decision)


def _decision_attributes(decision: CallDecision) -> dict[str, Value]:
    call = decision.call
    values = verdict_values(call.verdict)
    values.update(state=decision.state, dead_call=decision.dead_call, enforced=decision.enforced)
    if call.fingerprint:
        values["fingerprint"] = call.fingerprint
    if decision.rule is not None:
        values["rule"] = decision.rule.value
    if decision.repeat_of:
        values["repeat_of"] = decision.repeat_of.hex()
    if decision.revised:
        # Calls already forwarded that this failure made dead calls: their spans say
        # dead_call false; the metrics and this count say what span time says.
        values["late_repeats"] = len(decision.revised)
    attributes = {PREFIX + key: value for key, value in values.items()}
    if decision.stale_roster:
        attributes[ROSTER_PREFIX + "stale"] = True
    return attributes


def undecided_attributes(verdict: Verdict, fate: SpanFate) -> Annotation:
    shape = (verdict.outcome, verdict.failure_class, verdict.origin, verdict.neutral_reason, fate)
    return _undecided.get(shape, _undecided_attributes, verdict, fate)


def _undecided_attributes(verdict: Verdict, fate: SpanFate) -> dict[str, Value]:
    values = verdict_values(verdict)
    if fate is SpanFate.PENDING:
        values["pending"] = True
    return {PREFIX + key: value for key, value in values.items()}


def roster_attributes(finding: RosterFinding) -> Annotation:
    values = _roster_values(finding)
    # The values are few and plain: they are their own shape.
    return _listings.get(tuple(values.items()), _prefixed, ROSTER_PREFIX, values)


def _roster_values(finding: RosterFinding) -> dict[str, Value]:
    values: dict[str, Value] = {"state": finding.state.value}
    if finding.missing_attributes:
        values["missing_attributes"] = ",".join(finding.missing_attributes)
    collapse = finding.collapse
    if collapse is not None:
        values["collapse"] = collapse.recovered_round is None
        values["collapse_rounds"] = f"{collapse.from_round}-{collapse.to_round}"
    health = finding.namespaces
    if health is not None:
        values["attachment"] = health.attachment.value
        if health.missing:
            values["missing_namespaces"] = ",".join(health.missing)
        values["startup_race"] = health.startup_race
    if finding.stale_tools:
        values["stale_tools"] = ",".join(finding.stale_tools)
    return values


def _prefixed(prefix: str, values: Mapping[str, Value]) -> dict[str, Value]:
    return {prefix + key: value for key, value in values.items()}


Read = Mapping[bytes, tuple[int, Mapping[str, object]]]
"""Of a span, by id: how many attributes it had and the wanted ones, as the classifier read
them (``Classifier.read``). Every key under "mcp." is wanted, the prefixes written here
included, so a span that still has as many attributes holds none of ours but those."""


def annotate(
    spans: Mapping[bytes, Span],
    decision: CallDecision,
    memory: AnnotationMemory | None = None,
    read: Read | None = None,
    edits: SpanEdits | None = None,
) -> int:
    """Add the decision's attributes to each of its spans present here; return how many.
    ``edits``: those of the sparse request the spans are from, where the attributes are
    appended as bytes; without, they are written into the decoded spans."""
    attributes = decision_attributes(decision)
    return _add(spans, decision.call.span_ids, attributes, memory, read, edits)


def annotate_listing(
    spans: Mapping[bytes, Span],
    finding: RosterFinding,
    memory: AnnotationMemory | None = None,
    read: Read | None = None,
    edits: SpanEdits | None = None,
) -> int:
    attributes = roster_attributes(finding)
    return _add(spans, finding.listing.span_ids, attributes, memory, read, edits)


def annotate_undecided(
    spans: Mapping[bytes, Span],
    undecided: Mapping[bytes, tuple[Verdict, SpanFate]],
    memory: AnnotationMemory | None = None,
    read: Read | None = None,
    edits: SpanEdits | None = None,
) -> int:
    """Each call span whose call was not decided in its request: its own verdict."""
    return sum(
        _add(spans, (span_id,), undecided_attributes(verdict, fate), memory, read, edits)
        for span_id, (verdict, fate) in undecided.items()
    )


def restore(spans: Iterable[Span], memory: AnnotationMemory, edits: SpanEdits | None = None) -> int:
    """Spans seen before (an exporter's retry): what their first copy was given; how many."""
    restored = 0
    for span in spans:
        kept = memory.recall((span.trace_id, span.span_id))
        if kept is not None:
            _write(span, kept, None, edits)
            restored += 1
    return restored


def _add(
    spans: Mapping[bytes, Span],
    span_ids: tuple[bytes, ...],
    attributes: Annotation,
    memory: AnnotationMemory | None,
    read: Read | None = None,
    edits: SpanEdits | None = None,
) -> int:
    annotated = 0
    for span_id in span_ids:
        span = spans.get(span_id)
        if span is None:
            continue
        _write(span, attributes, read.get(span_id) if read is not None else None, edits)
        if memory is not None:
            memory.keep((span.trace_id, span_id), attributes)
        annotated += 1
    return annotated


def _write(
    span: Span,
    attributes: Mapping[str, object],
    read: tuple[int, Mapping[str, object]] | None = None,
    edits: SpanEdits | None = None,
) -> None:
    """Add what the span does not hold yet. Which keys it holds: from what the classifier
    read of it (``read``) while nothing has been written into it since, else by reading
    every key; and those ``edits`` holds for it."""
    present: Set[str]
    if read is not None and read[0] == len(span.attributes):
        present = read[1].keys()
    else:
        present = {kv.key for kv in span.attributes}
    if edits is not None:
        added = edits.keys_added(span)
        if added:
            present = present | added
    if not (isinstance(attributes, Annotation) and present.isdisjoint(attributes)):
        # Rare: the span holds some of these keys already (from a hop before this one, or
        # given twice), or the attributes are two annotations' combined (the memory's).
        missing = {k: v for k, v in attributes.items() if k not in present}
        if not missing:
            return
        attributes = Annotation(missing)  # type: ignore[arg-type]  # values as written
    if edits is None:
        span.MergeFromString(attributes.carrier)  # appends them all, in order, in one call
    else:
        edits.add(span, attributes)


def _add_each(span: Span, attributes: Iterable[tuple[str, object]]) -> None:
    for key, value in attributes:
        # Set in place: building an AnyValue to copy in costs as much again.
        item = span.attributes.add(key=key)
        if isinstance(value, bool):
            item.value.bool_value = value
        elif isinstance(value, int):
            item.value.int_value = value
        else:
            item.value.string_value = str(value)
