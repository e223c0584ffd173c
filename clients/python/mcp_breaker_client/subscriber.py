"""``AdvisoryClient``: a harness's subscription to mcp-breaker's advisories, kept in a mirror.

    service ──Subscribe stream──▶ reader thread ──▶ Mirror ◀── check()   (local, µs)
    service ◀──────── Check ──────────────────────────────── check_remote()   (probes)

A background thread holds one ``Subscribe`` stream open and applies what it says to a
``Mirror`` (snapshot, then changes). ``check`` answers from the mirror without touching the
network, so it can run before every tool call; ``check_remote`` asks the service's
``Check`` (for a half-open circuit's probe permit) with a short deadline and, when the
service cannot answer, *fails open*: the call is allowed. mcp-breaker must never be the
reason a working tool cannot be called.

The stream, as ``docs/advisories.md`` asks of a subscriber:

- **Resume**: after a broken stream the thread subscribes again with the last epoch and
  seq it received; the service sends exactly the changes missed, or a snapshot with
  ``resync`` set (it restarted, or no longer holds them), which replaces the mirror.
- **Cut off** (``RESOURCE_EXHAUSTED`` after the stream delivered: the subscriber fell
  behind): subscribe again at once *without* resuming, for a fresh snapshot; replaying the
  backlog it could not keep up with would only cut it off again.
- **Silence**: no message (heartbeats come every ``advisories.heartbeat_s``, 5 s by
  default) for ``idle_timeout_s`` means the stream is dead though the socket may not know
  it; a watchdog thread cancels it and the reader reconnects.
- **Backoff**: between attempts, exponential with jitter (``ReconnectPolicy``), reset once
  a stream delivers; gRPC's own reconnect backoff is held to the same ceiling.
- **Stop** on ``UNAUTHENTICATED``, ``PERMISSION_DENIED``, ``INVALID_ARGUMENT`` or
  ``UNIMPLEMENTED``: retrying cannot help until a person changes the token or the
  configuration. ``failure`` says why; the mirror keeps what it had (and expires it).

While disconnected, ``check`` keeps answering from the mirror as it stood, with expiry
applied, and ``synced`` is False. Nothing here grows with the number of changes: the
mirror holds what is in force (bounded by the service and by ``max_advisories``), and the
counters in ``stats`` are plain integers.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import grpc

from mcp_breaker_client.calls import call_fingerprint, resolve_server
from mcp_breaker_client.channel import TlsConfig, bearer_metadata, open_channel
from mcp_breaker_client.mirror import DEFAULT_MAX_ADVISORIES, CheckResult, Decision, Mirror
from mcp_breaker_client.v1 import advisories_pb2 as pb
from mcp_breaker_client.v1 import advisories_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)

# After these, subscribing again cannot help until a person changes something.
PERMANENT_CODES = frozenset(
    {
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.UNIMPLEMENTED,
    }
)
_MAX_BACKOFF_EXPONENT = 64  # beyond it the delay is max_s anyway; keeps the power finite


@dataclass(frozen=True, slots=True, kw_only=True)
class ReconnectPolicy:
    """Delays between subscribe attempts: ``initial_s * multiplier**attempt`` up to
    ``max_s``, each spread over [d*(1-r), d*(1+r)] so harnesses that lost the service
    together do not come back together."""

    initial_s: float = 0.2
    max_s: float = 30.0
    multiplier: float = 2.0
    randomization: float = 0.5

    def __post_init__(self) -> None:
        if not 0 < self.initial_s <= self.max_s:
            raise ValueError("ReconnectPolicy: need 0 < initial_s <= max_s")
        if self.multiplier < 1 or not 0 <= self.randomization < 1:
            raise ValueError("ReconnectPolicy: need multiplier >= 1 and 0 <= randomization < 1")

    def delay_s(self, attempt: int, jitter: float) -> float:
        """The wait after failed attempt ``attempt`` (0-based); ``jitter`` is in [0, 1)."""
        exponent = min(attempt, _MAX_BACKOFF_EXPONENT)
        base = min(self.initial_s * self.multiplier**exponent, self.max_s)
        spread = self.randomization * base
        return base - spread + 2 * spread * jitter


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientConfig:
    reconnect: ReconnectPolicy = field(default_factory=ReconnectPolicy)
    # Three of the service's heartbeat intervals (advisories.heartbeat_s, 5 s by default).
    idle_timeout_s: float = 15.0
    # check_remote runs just before a tool call: a slow answer is worse than none.
    check_timeout_s: float = 1.0
    max_advisories: int = DEFAULT_MAX_ADVISORIES
    subscriber_name: str = ""  # for the service's logs; empty: the harness name

    def __post_init__(self) -> None:
        if self.idle_timeout_s <= 0 or self.check_timeout_s <= 0 or self.max_advisories < 1:
            raise ValueError("ClientConfig: timeouts and max_advisories must be positive")


@dataclass(slots=True)
class SubscriberStats:
    connects: int = 0  # streams opened
    snapshots: int = 0
    resyncs: int = 0  # snapshots answering a resume the service could not honour
    resumed: int = 0  # streams that resumed with exactly the changes missed
    changes: int = 0
    heartbeats: int = 0
    broken: int = 0  # streams that ended with an error (any code)
    cut_off: int = 0  # ended with RESOURCE_EXHAUSTED after delivering: fell behind
    stalled: int = 0  # cancelled by the watchdog: silent for idle_timeout_s
    remote_checks: int = 0
    remote_checks_failed_open: int = 0  # the service did not answer: allowed


class AdvisoryClient:
    """Subscribes to the advisory port at ``target`` (host:port) until ``close()``."""

    def __init__(
        self,
        target: str,
        *,
        token: str | None = None,
        tls: TlsConfig | None = None,
        harness: str = "",
        servers: Iterable[str] = (),
        config: ClientConfig | None = None,
        clock: Callable[[], float] = time.time,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.target = target
        self.harness = harness
        self.servers = tuple(servers)
        self.config = config or ClientConfig()
        self.stats = SubscriberStats()
        self._clock = clock  # wall-clock Unix seconds: advisories expire in wall time
        self._jitter = jitter
        self._metadata = bearer_metadata(token)
        reconnect = self.config.reconnect
        # gRPC's own reconnect backoff (1 s growing to 120 s by default) would otherwise
        # keep a channel idle long after the service is back. (Not its minimum: that is
        # the connect timeout, and a TLS handshake may need its default 20 s.)
        self._channel = open_channel(
            target,
            tls,
            [
                ("grpc.initial_reconnect_backoff_ms", int(reconnect.initial_s * 1000)),
                ("grpc.max_reconnect_backoff_ms", int(reconnect.max_s * 1000)),
            ],
        )
        self._stub = pb_grpc.AdvisoriesStub(self._channel)  # type: ignore[no-untyped-call]
        self._mirror = Mirror(max_advisories=self.config.max_advisories)
        # One lock for the mirror, the stream in flight and the state below; the condition
        # wakes wait_until_synced.
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._call: Any = None  # the Subscribe call in flight, to cancel it
        self._last_message_at = time.monotonic()
        self._synced = False
        self._failure = ""
        self._stopping = threading.Event()
        name = self.config.subscriber_name or harness or "harness"
        self._name = name
        self._reader = threading.Thread(
            target=self._run, name=f"mcp-breaker-advisories[{name}]", daemon=True
        )
        self._watchdog = threading.Thread(
            target=self._watch, name=f"mcp-breaker-advisories-watchdog[{name}]", daemon=True
        )
        self._reader.start()
        self._watchdog.start()

    # -- what a harness calls ------------------------------------------------------------------
    def roster_collapse(self, turn: str) -> pb.Advisory | None:
        """A roster-collapse advisory for the turn: re-list the tools before the next model
        request (its ``message`` says so); None when the turn's roster is fine."""
        now_s = self._clock()
        with self._lock:
            return self._mirror.roster_collapse(turn, now_s)

    def check(
        self,
        turn: str,
        server: str | None,
        tool: str,
        arguments: Any = None,
        *,
        fingerprint: str | None = None,
    ) -> CheckResult:
        """May this call go now? From the local mirror; no network."""
        now_s = self._clock()
        with self._lock:
            return self._mirror.check(
                turn=turn,
                server=server,
                tool=tool,
                arguments=arguments,
                fingerprint=fingerprint,
                now_s=now_s,
            )

    def check_remote(
        self,
        turn: str,
        server: str | None,
        tool: str,
        arguments: Any = None,
        *,
        fingerprint: str | None = None,
        timeout_s: float | None = None,
    ) -> CheckResult:
        """Ask the service's ``Check`` (for a probe permit); ALLOW when it cannot answer.

        Blocking, for at most ``timeout_s`` (``config.check_timeout_s``): async code should
        run it in a worker thread, as ``BreakerSession`` does.
        """
        if self._stopping.is_set():
            return CheckResult(decision=Decision.ALLOW, answered=False)  # closed: no channel
        server = resolve_server(server, tool)
        if fingerprint is None:
            fingerprint = call_fingerprint(server, tool, arguments)
        request = pb.CheckRequest(
            turn=turn, server=server, tool=tool, fingerprint=fingerprint or "", harness=self.harness
        )
        try:
            response = self._stub.Check(
                request,
                metadata=self._metadata,
                timeout=timeout_s or self.config.check_timeout_s,
            )
        except grpc.RpcError as error:
            with self._lock:
                self.stats.remote_checks += 1
                self.stats.remote_checks_failed_open += 1
            log.warning(
                "advisories: Check at %s failed (%s); allowing the call",
                self.target,
                _code_name(error),
            )
            return CheckResult(decision=Decision.ALLOW, answered=False)
        with self._lock:
            self.stats.remote_checks += 1
        return from_check_response(response)

    @property
    def synced(self) -> bool:
        """A stream is up and has delivered: the mirror is as current as the service."""
        with self._lock:
            return self._synced

    @property
    def failure(self) -> str:
        """Why the client stopped subscribing for good (a bad token, ...); "" otherwise."""
        with self._lock:
            return self._failure

    def wait_until_synced(self, timeout_s: float) -> bool:
        """Wait for a live stream (at most ``timeout_s``); False if none came or the client
        stopped for good."""
        with self._changed:
            self._changed.wait_for(
                lambda: self._synced or bool(self._failure) or self._stopping.is_set(),
                timeout_s,
            )
            return self._synced

    def advisories(self) -> list[pb.Advisory]:
        """Every advisory the mirror holds (a copy of the list; do not modify the items)."""
        with self._lock:
            return self._mirror.advisories()

    @property
    def position(self) -> tuple[str, int]:
        """The epoch and seq the next subscription resumes after."""
        with self._lock:
            return self._mirror.epoch, self._mirror.last_seq

    def close(self, timeout_s: float = 5.0) -> None:
        """Stop subscribing; idempotent."""
        self._stopping.set()
        with self._changed:
            call = self._call
            self._changed.notify_all()
        if call is not None:
            call.cancel()
        for thread in (self._reader, self._watchdog):
            if thread is not threading.current_thread():
                thread.join(timeout_s)
        self._channel.close()

    def __enter__(self) -> AdvisoryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the reader thread ---------------------------------------------------------------------
    def _run(self) -> None:
        attempt = 0
        fresh = False  # subscribe without resuming: after a cut-off, for a fresh snapshot
        while not self._stopping.is_set():
            delivered, error = self._stream(fresh)
            if self._stopping.is_set():
                return
            code = error.code() if error is not None else None
            if code in PERMANENT_CODES:
                assert error is not None
                log.error(
                    "advisories: %s refused the subscription (%s: %s); not retrying",
                    self.target,
                    _code_name(error),
                    _details(error),
                )
                with self._changed:
                    self._failure = f"{_code_name(error)}: {_details(error)}"
                    self._changed.notify_all()
                return
            fresh = code is grpc.StatusCode.RESOURCE_EXHAUSTED and delivered
            if fresh:
                self.stats.cut_off += 1
                log.warning("advisories: fell behind and was cut off; resubscribing")
            if delivered:
                attempt = 0  # it worked until now: start the backoff over
            delay_s = self.config.reconnect.delay_s(attempt, self._jitter())
            attempt += 1
            level = logging.WARNING if attempt == 1 else logging.DEBUG
            log.log(
                level,
                "advisories: stream to %s ended (%s); subscribing again in %.2fs",
                self.target,
                _code_name(error) if error is not None else "closed by the service",
                delay_s,
            )
            self._stopping.wait(delay_s)

    def _stream(self, fresh: bool) -> tuple[bool, grpc.RpcError | None]:
        """One Subscribe stream, read to its end; (did it deliver anything, its error)."""
        request = pb.SubscribeRequest(
            servers=self.servers, harness=self.harness, subscriber_name=self._name
        )
        with self._lock:
            if self._stopping.is_set():
                return False, None
            resuming = bool(self._mirror.epoch) and not fresh
            if resuming:
                request.resume_epoch = self._mirror.epoch
                request.resume_after_seq = self._mirror.last_seq
            # Started under the lock, so close() either sees it (and cancels it) or has
            # set _stopping before it (checked just above).
            call = self._stub.Subscribe(request, metadata=self._metadata)
            self._call = call
            self._last_message_at = time.monotonic()
            self.stats.connects += 1
        delivered = False
        try:
            for message in call:
                with self._changed:
                    kind = self._mirror.apply_message(message)
                    self._count(kind, message, first=not delivered, resuming=resuming)
                    self._last_message_at = time.monotonic()
                    self._synced = self._mirror.complete
                    self._changed.notify_all()
                delivered = True
            return delivered, None
        except grpc.RpcError as error:
            self.stats.broken += 1
            return delivered, error
        finally:
            with self._changed:
                self._call = None
                self._synced = False
                self._changed.notify_all()

    def _count(
        self, kind: str, message: pb.SubscribeResponse, *, first: bool, resuming: bool
    ) -> None:
        stats = self.stats
        if kind == "snapshot":
            stats.snapshots += 1
            if message.snapshot.resync:
                stats.resyncs += 1
                log.info("advisories: the service could not resume the stream; resynced")
        elif kind == "change":
            stats.changes += 1
        elif kind == "heartbeat":
            stats.heartbeats += 1
        if first and resuming and kind != "snapshot":
            stats.resumed += 1

    # -- the watchdog thread -------------------------------------------------------------------
    def _watch(self) -> None:
        idle_s = self.config.idle_timeout_s
        while not self._stopping.wait(idle_s / 4):
            with self._lock:
                call = self._call
                silent = call is not None and time.monotonic() - self._last_message_at > idle_s
                if silent:
                    self.stats.stalled += 1
            if silent:
                log.warning(
                    "advisories: no message from %s for %.0fs; reconnecting", self.target, idle_s
                )
                call.cancel()


def from_check_response(response: pb.CheckResponse) -> CheckResult:
    """The service's verdict as a CheckResult; an unknown verdict allows (fail open)."""
    advisory = response.advisory if response.HasField("advisory") else None
    if response.verdict == pb.VERDICT_DENY:
        return CheckResult(decision=Decision.DENY, advisory=advisory)
    if response.verdict == pb.VERDICT_PROBE:
        return CheckResult(
            decision=Decision.PROBE, advisory=advisory, probe_permit=response.probe_permit
        )
    return CheckResult(decision=Decision.ALLOW, advisory=advisory)


def _code_name(error: grpc.RpcError) -> str:
    code = error.code() if hasattr(error, "code") else None
    return code.name if code is not None else type(error).__name__


def _details(error: grpc.RpcError) -> str:
    return str(error.details()) if hasattr(error, "details") else str(error)
