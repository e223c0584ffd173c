"""Configuration: one module per component (its defaults, config and validation), the
service that composes them, and the loader (file, env, flags).

Every default is a named constant with its unit in the name, written down once, in its
component's module (``docs/configuration.md`` is checked against them by a test).
``validate()`` returns one line per problem, naming the key and the bad value; the loader
collects them all so a person fixes a file in one pass. Nothing is clamped silently.
"""

from mcp_breaker_client.shared.turns import TurnKey

from processor.config.advisories import AdvisoriesConfig, AdvisoryTlsConfig
from processor.config.analyze import AnalyzeConfig
from processor.config.auth import AuthConfig
from processor.config.breaker import BreakerConfig, Rule
from processor.config.classify import ClassifyConfig
from processor.config.endpoints import grpc_target, split_endpoint
from processor.config.forward import (
    Compression,
    ForwardConfig,
    ForwardProtocol,
    QueueConfig,
    QueueStorage,
    RetryConfig,
)
from processor.config.load import (
    ENV_PREFIX,
    env_var_name,
    leaf_keys,
    load_config,
    unknown_environment,
)
from processor.config.receivers import (
    GrpcReceiverConfig,
    HttpReceiverConfig,
    ReceiverAuth,
    ReceiversConfig,
    SpanTenant,
)
from processor.config.roster import RosterConfig
from processor.config.server_tls import ServerTlsConfig
from processor.config.service import ServerConfig, ServiceConfig
from processor.config.state import Backend, RedisConfig, StateConfig
from processor.config.telemetry import LogConfig, LogLevel, TelemetryConfig

__all__ = [
    "ENV_PREFIX",
    "AdvisoriesConfig",
    "AdvisoryTlsConfig",
    "AnalyzeConfig",
    "AuthConfig",
    "Backend",
    "BreakerConfig",
    "ClassifyConfig",
    "Compression",
    "ForwardConfig",
    "ForwardProtocol",
    "GrpcReceiverConfig",
    "HttpReceiverConfig",
    "LogConfig",
    "LogLevel",
    "QueueConfig",
    "QueueStorage",
    "ReceiverAuth",
    "ReceiversConfig",
    "RedisConfig",
    "RetryConfig",
    "RosterConfig",
    "Rule",
    "ServerConfig",
    "ServerTlsConfig",
    "ServiceConfig",
    "SpanTenant",
    "StateConfig",
    "TelemetryConfig",
    "TurnKey",
    "env_var_name",
    "grpc_target",
    "leaf_keys",
    "load_config",
    "split_endpoint",
    "unknown_environment",
]
