"""The service's own lines at start and at stop, for the person running it: where it
listens and how securely, what state it keeps and where spans go, and at shutdown what
could not be delivered.
"""

from __future__ import annotations

import logging

from processor.advisories.model import Advisory
from processor.advisories.service import AdvisoryService
from processor.config import ReceiverAuth, ServiceConfig
from processor.forward.queue import DrainReport, Forwarder
from processor.state.replica import SharedState

log = logging.getLogger("processor.server")  # where these lines always were (docs/quickstart.md)


def log_started(
    config: ServiceConfig,
    ports: dict[str, int],
    *,
    shared: SharedState | None,
    advisories: AdvisoryService | None,
    forwarder: Forwarder | None,
) -> None:
    receiver_ports = {
        name: port for name, port in ports.items() if name in ("otlp_grpc", "otlp_http")
    }
    receivers = config.receivers
    security = "TLS" if receivers.tls.cert_file else "plaintext"
    log.info(
        "mcp-breaker receiving %s (%s, authentication: %s)",
        ", ".join(f"{name} on port {port}" for name, port in receiver_ports.items()),
        "mutual TLS" if receivers.tls.client_ca_file else security,
        receivers.auth.value,
    )
    if receivers.auth is ReceiverAuth.NONE:
        log.warning(
            "receivers: no authentication (receivers.auth: none): anyone who reaches "
            "port %s can steer the breaker, for any tenant a span names "
            "(docs/security.md)",
            " or ".join(str(port) for port in receiver_ports.values()),
        )
    if shared is None:
        log.info(
            "breaker state in memory (state.backend: memory): it starts empty, and a "
            "restart forgets open circuits and turn blocks; state.backend: redis keeps "
            "them (docs/scaling.md)"
        )
    if "telemetry" in ports:
        log.info("metrics, /healthz and /readyz on port %d", ports["telemetry"])
    if "advisories" in ports:
        tls = config.advisories.tls
        security = "mutual TLS" if tls.client_ca_file else "TLS" if tls.cert_file else "plaintext"
        log.info("advisories on port %d (%s)", ports["advisories"], security)
        if advisories is not None and advisories.auth.open:
            log.warning(
                "advisories: no tokens configured (advisories.tokens): any client that "
                "reaches port %d can subscribe; admin calls are refused",
                ports["advisories"],
            )
    if forwarder is not None:
        forward = config.forward
        log.info(
            "forwarding to %s over %s%s (queue: %d spans, %d bytes, in %s, %d consumers)",
            forwarder.target,
            forward.protocol.value,
            " with TLS" if forward.tls else "",
            forward.queue.max_spans,
            forward.queue.max_bytes,
            forwarder.storage,
            forward.queue.consumers,
        )
        if forwarder.recovered_batches:
            log.warning(
                "disk queue: %s were left undelivered by the last run; sending them first",
                spans_in_requests(forwarder.recovered_spans, forwarder.recovered_batches),
            )
        stripped = config.forward.strip_attributes
        if stripped:
            log.info(
                "removing %s from MCP spans before they are forwarded (forward.strip_attributes)",
                ", ".join(stripped),
            )
    else:
        log.warning(
            "no next hop configured (forward.endpoint is empty): spans are analysed "
            "and then released, not forwarded"
        )
    # Last, once every port listens: the line a person (or a script) waits for.
    log.info(
        "ready: spans accepted on %s; breaker state %s; next hop %s",
        " and ".join(f"port {port}" for port in receiver_ports.values()) or "no port",
        "in memory" if shared is None else "shared on Redis",
        forwarder.target if forwarder is not None else "none",
    )


def log_forgotten(in_force: list[Advisory]) -> None:
    refusing = [a for a in in_force if a.blocking]
    if refusing:
        log.info(
            "stopping with %d advisories refusing calls (%s): breaker state is in memory, "
            "so the next start will not know of them, and their tools will be called "
            "again until they fail again (state.backend: redis keeps them)",
            len(refusing),
            ", ".join(sorted({a.id for a in refusing})[:5])
            + (", ..." if len(refusing) > 5 else ""),
        )


def log_drained(
    report: DrainReport, forwarder: Forwarder, grace: float, *, opened: bool, exits_with: int
) -> None:
    """What the drain at shutdown delivered; ``opened``: start() completed, ``exits_with``:
    the status the process ends with when spans are lost."""
    if report.undelivered_spans:
        log.error(
            "shutdown: %s could not be delivered to %s within %gs, and are lost (exit status %d)",
            spans_in_requests(report.undelivered_spans, report.undelivered_batches),
            forwarder.target,
            grace,
            exits_with,
        )
    elif report.kept_spans:
        log.warning(
            "shutdown: %s could not be delivered to %s within %gs; they stay in the "
            "disk queue (%s) and go out at the next start",
            spans_in_requests(report.kept_spans, report.kept_batches),
            forwarder.target,
            grace,
            forwarder.storage,
        )
    elif opened or report.delivered_spans:
        # Said only of a service that took spans: after a failed start, "every
        # accepted span was delivered" would claim work that never happened.
        log.info("shutdown: every accepted span was delivered to %s", forwarder.target)


def spans_in_requests(spans: int, requests: int) -> str:
    """``42 spans in 2 requests``, ``1 span in 1 request``: as a person writes it."""
    return f"{_counted(spans, 'span')} in {_counted(requests, 'request')}"


def _counted(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"
