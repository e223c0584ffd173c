"""The harness side of mcp-breaker: heed its advisories before each MCP tool call.

calls.py        server, fingerprint and recorded arguments of a call, as the service sees them
mirror.py       the advisories in force, kept locally; check() answers in microseconds
channel.py      the gRPC channel to the advisory port: plaintext, TLS, mutual TLS, token
subscriber.py   AdvisoryClient: the Subscribe stream into a mirror; check(), check_remote()
tracing.py      PromptToolSpanProcessor (tool spans exported at once), record_tool_call()
mcp_adapter.py  BreakerSession: the mcp SDK 2.x ClientSession, refusing what is out
pydantic_ai.py  BreakerToolset: Pydantic AI's MCPToolset, through a BreakerSession
openai_agents.py BreakerMCPServer: the OpenAI Agents SDK's MCP server, likewise

shared/         what the harness and the service compute alike (the service imports it)
v1/             the advisory API's stubs, generated from proto/

calls, mirror, channel and subscriber need only ``grpcio`` and ``protobuf`` (this
distribution's own dependencies); tracing needs ``opentelemetry-sdk`` (the ``[tracing]``
extra) and mcp_adapter the ``mcp`` SDK too (``[mcp]``), the framework adapters their
framework (``[pydantic-ai]``, ``[openai-agents]``), so they are imported from their
modules, not from here.
"""

from mcp_breaker_client.channel import TlsConfig
from mcp_breaker_client.mirror import CheckResult, Decision, Mirror
from mcp_breaker_client.subscriber import AdvisoryClient, ClientConfig, ReconnectPolicy

__all__ = [
    "AdvisoryClient",
    "CheckResult",
    "ClientConfig",
    "Decision",
    "Mirror",
    "ReconnectPolicy",
    "TlsConfig",
]
