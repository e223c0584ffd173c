"""What the analysis adds to the spans of a request read sparsely, kept as encoded bytes
until the request is encoded.

A span of a sparse request came as bytes and goes out as bytes. Its annotation is a few
attributes, alike for most calls, encoded once per shape (``enrich.Annotation``), and an
encoded message takes more entries of a repeated field by concatenation: a span's bytes
followed by encoded attribute entries decode as that span with those attributes appended
(the protobuf encoding's rule for repeated fields, which every decoder follows). So the
decoded span is neither merged into nor encoded again: a span nothing changed in place
goes out as the bytes it came in, its annotations' bytes after them. Merging an annotation
into the decoded span and encoding the span again cost some 900 ns per MCP span here,
appending the bytes some 30 (README, "Where the stage's instructions go").

One owner for a span's bytes and its edits, so that what one hook adds is seen by the
hooks after it: ``keys_added`` (enrich never writes a key a span holds), ``leave_out``
(a key ``forward.strip_attributes`` removes does not come back in an annotation). A hook
that changes a decoded span in place says so (``changed``), and that span is encoded again
as it then is, its annotations after it.
"""

from __future__ import annotations

from collections.abc import Set
from typing import Any, Protocol


class Encoded(Protocol):
    """Attributes to add, as a mapping, and ``carrier``: a span holding only them, encoded
    (``enrich.Annotation``)."""

    carrier: bytes

    def keys(self) -> Set[str]: ...

    def without(self, keys: Set[str]) -> Encoded:
        """The same attributes but those under ``keys``."""
        ...


class SpanEdits:
    """The edits of one request's decoded spans, by span object (each decoded once, and
    held by the request until it is encoded)."""

    __slots__ = ("_added", "_changed", "_kept", "_left_out")

    def __init__(self) -> None:
        # One annotation, or those added in turn: most spans are given one, and a list
        # each would be one more object per span for the garbage collector to count.
        self._added: dict[int, Encoded | tuple[Encoded, ...]] = {}
        self._changed: set[int] = set()
        self._left_out: frozenset[str] = frozenset()
        self._kept: dict[int, bytes] = {}  # an annotation's bytes without the keys left out

    def __bool__(self) -> bool:
        """Whether any span was edited: if not, the request goes out as it came."""
        return bool(self._added or self._changed)

    def add(self, span: Any, attributes: Encoded) -> None:
        """Append ``attributes`` to ``span`` as it is encoded (after any added before)."""
        key = id(span)
        earlier = self._added.get(key)
        if earlier is None:
            self._added[key] = attributes
        elif isinstance(earlier, tuple):
            self._added[key] = (*earlier, attributes)
        else:
            self._added[key] = (earlier, attributes)

    def keys_added(self, span: Any) -> Set[str]:
        added = self._added.get(id(span))
        if added is None:
            return frozenset()
        if not isinstance(added, tuple):
            return added.keys()
        return frozenset().union(*(attributes.keys() for attributes in added))

    def changed(self, span: Any) -> None:
        """``span`` was changed in place: encoded again, not forwarded as its bytes came."""
        self._changed.add(id(span))

    def leave_out(self, keys: Set[str]) -> None:
        """No attribute added under one of ``keys`` is encoded (the stripped keys)."""
        self._left_out = self._left_out | keys
        self._kept.clear()

    def encode(self, span: Any, came: bytes) -> bytes:
        """The span as it goes out; ``came``, its bytes as received, is returned itself
        when nothing changed it (one call per span: this runs for every MCP span)."""
        key = id(span)
        body = span.SerializeToString() if key in self._changed else came
        added = self._added.get(key)
        if added is None:
            return body
        if not isinstance(added, tuple):
            return body + self._encoded(added)
        return body + b"".join(self._encoded(attributes) for attributes in added)

    def _encoded(self, attributes: Encoded) -> bytes:
        left_out = self._left_out
        if not left_out:
            return attributes.carrier
        # Once per shape of annotation and request: most spans share a few of them.
        kept = self._kept.get(id(attributes))
        if kept is None:
            if left_out.isdisjoint(attributes.keys()):
                kept = attributes.carrier
            else:
                kept = attributes.without(left_out).carrier
            self._kept[id(attributes)] = kept
        return kept

    def clear(self) -> None:
        """Done with the request (its spans are let go)."""
        self._added.clear()
        self._changed.clear()
        self._kept.clear()
