"""Spans the next hop refused for good: who sent them, said in the log without flooding it.

When the next hop refuses an export permanently, the forwarder splits it until only the
spans it refuses are left (``queue.py``), so the spans given up all came from the request
that caused it. Its sender is what an SRE needs to find: the peer the request came from,
the tenant its credentials map to, and the ``service.name`` of its resources (read here
from the encoded request without decoding its spans, which may be the bad part).

A sender that keeps sending bad requests is an outsider writing our log, so ``RejectionLog``
writes one error line per sender the first time, then at most one summary per
``summary_interval_s`` for everything refused since, listing the senders (at most
``MAX_SENDERS_LISTED``; a bounded table of senders, the rest counted as "others").
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError, Message

from processor.request.sender import Sender

log = logging.getLogger("processor.forward.queue")  # beside the forwarder's other lines

SUMMARY_INTERVAL_S = 60.0
MAX_SENDERS_REMEMBERED = 1000  # senders told about once already (then only summarised)
MAX_SENDERS_LISTED = 5  # senders named in one summary line, most spans first
MAX_SERVICE_NAMES = 3  # service.name values named per request
MAX_NAME_CHARS = 80  # a service name comes from the sender: cut, and never trusted as text
SERVICE_NAME_KEY = b"service.name"


@dataclass(frozen=True, slots=True)
class Culprit:
    """Who sent spans the next hop refused: what the log and the metric name."""

    service: str  # the service.name values of the request's resources, comma-separated
    peer: str  # the peer's address, without its port (a new port per connection)
    tenant: str  # "" when the sender did not authenticate

    def describe(self) -> str:
        tenant = f", tenant {self.tenant}" if self.tenant else ""
        peer = self.peer or "(unknown peer)"
        return f"service.name {self.service or '(none)'} from {peer}{tenant}"


def culprit(sender: Sender, payload: bytes) -> Culprit:
    return Culprit(service_names(payload), peer_address(sender.peer), sender.tenant or "")


def peer_address(peer: str) -> str:
    """``ipv4:10.1.2.3:51234`` (gRPC) or ``10.1.2.3`` (HTTP) -> ``10.1.2.3``."""
    kind, sep, rest = peer.partition(":")
    if sep and kind in ("ipv4", "ipv6"):
        host, _, port = rest.rpartition(":")
        return (host if port.isdigit() else rest).strip("[]")
    return peer


def _build_resource_view() -> type[Message]:
    """Request -> ResourceSpans -> Resource -> attributes, with strings read as bytes.

    Bytes, so a resource with invalid UTF-8 (perhaps the very reason the next hop refused
    it) still parses; spans are left unparsed, as fields this view does not name."""
    package = "mcp_breaker.internal.resources"
    proto = descriptor_pb2.FileDescriptorProto(
        name="mcp_breaker/internal/resource_view.proto", package=package, syntax="proto3"
    )
    repeated = descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
    optional = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
    bytes_type, message_type = 12, 11
    value = proto.message_type.add(name="Value")
    value.field.add(name="string_value", number=1, label=optional, type=bytes_type)
    for name, fields in (
        ("KeyValue", (("key", 1, None), ("value", 2, "Value"))),
        ("Resource", (("attributes", 1, "KeyValue"),)),
        ("ResourceSpans", (("resource", 1, "Resource"),)),
        ("Request", (("resource_spans", 1, "ResourceSpans"),)),
    ):
        message = proto.message_type.add(name=name)
        for field_name, number, child in fields:
            if child is None:
                message.field.add(name=field_name, number=number, label=optional, type=bytes_type)
            else:
                label = optional if field_name in ("value", "resource") else repeated
                message.field.add(
                    name=field_name,
                    number=number,
                    label=label,
                    type=message_type,
                    type_name=f".{package}.{child}",
                )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{package}.Request"))


_ResourceView = _build_resource_view()


def service_names(payload: bytes) -> str:
    """The distinct ``service.name`` values of an encoded request's resources."""
    try:
        view: Any = _ResourceView.FromString(payload)
    except DecodeError:
        return ""
    names: list[str] = []
    for resource_spans in view.resource_spans:
        for attribute in resource_spans.resource.attributes:
            if attribute.key != SERVICE_NAME_KEY:
                continue
            raw = bytes(attribute.value.string_value)[: MAX_NAME_CHARS * 4]
            name = raw.decode("utf-8", "replace")[:MAX_NAME_CHARS]
            name = "".join(ch if ch.isprintable() else "?" for ch in name)
            if name not in names:
                names.append(name)
    shown = names[:MAX_SERVICE_NAMES]
    more = len(names) - len(shown)
    return ",".join(shown) + (f",+{more} more" if more else "")


@dataclass(slots=True)
class _Since:
    """What was refused since the last line, per sender."""

    reported: float
    spans: dict[Culprit, int] = field(default_factory=dict)
    requests: int = 0
    other_spans: int = 0  # from senders past the table's bound
    whole_spans: int = 0  # given up before they could be split to one span


class RejectionLog:
    def __init__(
        self,
        target: str,
        *,
        clock: Callable[[], float],
        summary_interval_s: float = SUMMARY_INTERVAL_S,
        logger: logging.Logger = log,
    ) -> None:
        self._target = target
        self._clock = clock
        self._interval_s = summary_interval_s
        self._log = logger
        self._told: dict[Culprit, None] = {}  # insertion-ordered, bounded
        self._since = _Since(reported=clock())

    def isolating(self, spans: int, requests: int, error: str) -> None:
        """An export was refused for good: it is split to find the spans refused."""
        self._log.info(
            "next hop %s refused an export of %d spans from %d requests (%s): sending "
            "them apart so that only the spans it refuses are given up",
            self._target,
            spans,
            requests,
            error,
        )

    def refused(self, who: Culprit, spans: int, error: str, *, whole: bool) -> None:
        """``spans`` from ``who`` given up; ``whole``: the isolation budget ran out before
        they could be split further, so valid spans may be among them."""
        if who not in self._told:
            if len(self._told) >= MAX_SENDERS_REMEMBERED:
                del self._told[next(iter(self._told))]
            self._told[who] = None
            self._log.error(
                "next hop %s refused %d span(s) for good, sent by %s: %s; given up "
                "(counted in mcp_breaker_exporter_rejected_spans_total)%s",
                self._target,
                spans,
                who.describe(),
                error,
                "; the export could not be split further within its budget" if whole else "",
            )
        else:
            since = self._since
            since.requests += 1
            since.whole_spans += spans if whole else 0
            if who in since.spans or len(since.spans) < MAX_SENDERS_REMEMBERED:
                since.spans[who] = since.spans.get(who, 0) + spans
            else:
                since.other_spans += spans
        if self._clock() - self._since.reported >= self._interval_s:
            self.close()

    def close(self) -> None:
        """Say what the last summary has not said yet (at shutdown, or when due)."""
        since, now = self._since, self._clock()
        self._since = _Since(reported=now)
        if not since.requests:
            return
        worst = sorted(since.spans.items(), key=lambda item: -item[1])
        listed = "; ".join(f"{who.describe()}: {n}" for who, n in worst[:MAX_SENDERS_LISTED])
        rest = sum(n for _, n in worst[MAX_SENDERS_LISTED:]) + since.other_spans
        if rest:
            listed += f"; others: {rest}"
        whole = (
            f" ({since.whole_spans} of them in exports that could not be split further "
            "within their budget)"
            if since.whole_spans
            else ""
        )
        self._log.error(
            "next hop %s refused %d more span(s) in %d request(s) for good since the last "
            "line: %s%s",
            self._target,
            sum(since.spans.values()) + since.other_spans,
            since.requests,
            listed,
            whole,
        )
