"""The normalized events classification produces: a tool call, or a tool listing.

Everything downstream (the breaker, roster health, metrics, advisories) reads these and
never a raw span. Raw arguments are not in here: only their fingerprint.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import MISSING, dataclass, fields
from typing import Any, TypeVar

_T = TypeVar("_T")


def _slot_init(cls: type[_T]) -> type[_T]:
    """A frozen, slotted dataclass's ``__init__``, remade to fill each slot through its
    descriptor. The one dataclasses writes calls ``object.__setattr__`` per field (frozen
    classes refuse plain assignment), which makes an event cost some 60% more to build, and
    one is built per call and listing. Same parameters, defaults, errors and instance.
    """
    namespace: dict[str, Any] = {}
    parameters, body = [], []
    for f in fields(cls):  # type: ignore[arg-type]
        if f.default_factory is not MISSING:
            raise TypeError(f"{cls.__name__}.{f.name}: a default factory is not supported")
        namespace[f"_set_{f.name}"] = cls.__dict__[f.name].__set__
        if f.default is MISSING:
            parameters.append(f.name)
        else:
            namespace[f"_default_{f.name}"] = f.default
            parameters.append(f"{f.name}=_default_{f.name}")
        body.append(f"    _set_{f.name}(self, {f.name})")
    source = f"def __init__(self, *, {', '.join(parameters)}):\n" + "\n".join(body)
    exec(source, namespace)
    init = namespace["__init__"]
    generated = cls.__init__
    init.__qualname__ = generated.__qualname__
    init.__annotations__ = generated.__annotations__
    setattr(cls, "__init__", init)  # noqa: B010  (mypy will not have a method assigned)
    return cls


def builder(cls: type[_T]) -> Callable[..., _T]:
    """A function that builds a slotted dataclass from the keyword arguments its constructor
    takes, for the objects built per MCP span. It costs about half as much as calling the
    class: a class called with keyword arguments gathers them into a dict on every call
    (``tp_init`` takes one), a function does not. Same fields, defaults (a default factory
    is called per object, as the constructor calls it), errors for a missing or unknown
    argument, and instance: the constructor stays as it is for everyone else.
    """
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__}: __post_init__ is not supported")
    frozen = cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
    namespace: dict[str, Any] = {"_new": object.__new__, "_cls": cls, "_MISSING": MISSING}
    parameters, body = [], []
    for f in fields(cls):  # type: ignore[arg-type]
        value = f.name
        if f.default is not MISSING:
            namespace[f"_default_{f.name}"] = f.default
            parameters.append(f"{f.name}=_default_{f.name}")
        elif f.default_factory is not MISSING:
            namespace[f"_factory_{f.name}"] = f.default_factory
            parameters.append(f"{f.name}=_MISSING")
            value = f"_factory_{f.name}() if {f.name} is _MISSING else {f.name}"
        else:
            parameters.append(f.name)
        if frozen:  # past the frozen class's __setattr__, through the slot itself
            namespace[f"_set_{f.name}"] = cls.__dict__[f.name].__set__
            body.append(f"    _set_{f.name}(self, {value})")
        else:
            body.append(f"    self.{f.name} = {value}")
    source = (
        f"def build(*, {', '.join(parameters)}):\n    self = _new(_cls)\n"
        + "\n".join(body)
        + "\n    return self"
    )
    exec(source, namespace)
    build: Callable[..., _T] = namespace["build"]
    build.__qualname__ = build.__name__ = f"build_{cls.__name__}"
    return build


class Outcome(enum.StrEnum):
    OK = "ok"
    FAILED = "failed"
    NEUTRAL = "neutral"  # the user or the harness stopped it: neither failure nor success
    UNKNOWN = "unknown"  # no outcome signal at all: never guessed


class FailureClass(enum.StrEnum):
    TRANSPORT = "transport"  # session closed, connection refused/reset, upstream unavailable
    TIMEOUT = "timeout"
    TOOL_ERROR = "tool_error"  # the tool ran and reported failure
    PROTOCOL = "protocol"  # a JSON-RPC error such as -32602 invalid params
    UNKNOWN_TOOL = "unknown_tool"  # -32601, "tool not found"
    HIDDEN = "hidden"  # isError false around a typed failure body


class FailureOrigin(enum.StrEnum):
    """Who a failure is evidence about: the server's session, or the tool alone."""

    # The MCP server never answered (the connection or session is gone), or a proxy in
    # front of it said its upstream MCP session is gone: evidence about the whole server.
    SESSION = "session"
    NO_ANSWER = "no_answer"  # timed out waiting for the server: the tool may just be slow
    TOOL = "tool"  # the server answered: the tool ran (or was refused) and reported failure


class NeutralReason(enum.StrEnum):
    DECLINED = "declined"  # the user refused permission
    DISMISSED = "dismissed"  # the user dismissed a question
    CANCELLED = "cancelled"  # the harness interrupted the call
    # The harness did not make the call because an mcp-breaker advisory said the tool was
    # out (its span says mcp.breaker.refused): a dead call spared.
    REFUSED_BY_ADVISORY = "refused_by_advisory"


class Dialect(enum.StrEnum):
    HARNESS = "harness"  # our convention: mcp.tool.call / mcp.tools.list
    SEMCONV = "semconv"  # OpenTelemetry MCP semantic conventions
    MCP_SDK = "mcp_sdk"  # the official mcp Python SDK 2.x (semconv plus its quirks)
    FASTMCP = "fastmcp"
    TRACELOOP = "traceloop"  # OpenLLMetry's opentelemetry-instrumentation-mcp
    LOGFIRE = "logfire"


class Side(enum.StrEnum):
    CLIENT = "client"  # the harness's view of the call
    SERVER = "server"  # the tool server's view
    UNSPECIFIED = "unspecified"  # one span tells the whole call (harness, traceloop)


@_slot_init
@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """What a span (or a pair of spans) says about how a call ended."""

    outcome: Outcome
    failure_class: FailureClass | None = None
    neutral_reason: NeutralReason | None = None
    origin: FailureOrigin | None = None  # for failures: what the failure is evidence about
    error_excerpt: str = ""  # redacted, length-capped; built only for failures and neutrals

    @property
    def decisive(self) -> bool:
        return self.outcome is not Outcome.UNKNOWN


UNKNOWN_VERDICT = Verdict(outcome=Outcome.UNKNOWN)


@_slot_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    turn: str  # mcp.turn.id (or a configured key), else the trace id in hex
    round: int | None
    server: str | None
    tool: str
    fingerprint: str | None  # None when no arguments were recorded; never a made-up one
    verdict: Verdict
    start_ns: int
    end_ns: int
    trace_id: bytes
    span_ids: tuple[bytes, ...]  # every span the call was read from
    dialect: Dialect
    harness: str = ""  # the calling process's service.name, when its resource names one
    tenant: str = ""  # from the resource attribute classify.tenant_attribute; "" = default
    # When the call was complete enough to decide (the pipeline's arrival clock, seconds):
    # how long after another call it arrived, for the breaker's reorder window.
    arrived_s: float = 0.0

    @property
    def outcome(self) -> Outcome:
        return self.verdict.outcome

    @property
    def failure_class(self) -> FailureClass | None:
        return self.verdict.failure_class


@_slot_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ToolListing:
    turn: str
    round: int | None
    server: str | None
    configured: int | None = None
    listed: int | None = None
    reached: int | None = None
    cached: bool | None = None
    unavailable: int | None = None
    registered: int | None = None
    offered: int | None = None
    namespaces_connected: tuple[str, ...] | None = None
    namespaces_attached: tuple[str, ...] | None = None
    namespaces_required: tuple[str, ...] | None = None
    # When the session's tool snapshot was taken, and when each namespace connected
    # (epoch seconds): a namespace that connected later cannot be in the snapshot.
    tool_snapshot_at_s: float | None = None
    namespaces_connected_at_s: tuple[tuple[str, float], ...] | None = None
    # Where the health claim comes from: "client_namespace" (a call through the session's
    # own client) can prove a namespace works; "offline_spawn" cannot.
    probe_source: str | None = None
    offered_tools: tuple[str, ...] | None = None  # names, when the harness records them
    problems: tuple[str, ...] = ()  # attributes that were present but malformed
    start_ns: int
    end_ns: int
    trace_id: bytes
    span_ids: tuple[bytes, ...]
    dialect: Dialect
    harness: str = ""  # the listing process's service.name
    tenant: str = ""


Event = ToolCall | ToolListing


# The builders of the events, for classification: one is built per call and per listing.
build_tool_call = builder(ToolCall)
build_tool_listing = builder(ToolListing)
