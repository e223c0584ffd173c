"""Configuration: the model (defaults, validation) and the loader (file, env, flags)."""

from processor.config.load import ENV_PREFIX, env_var_name, leaf_keys, load_config
from processor.config.model import (
    ClassifyConfig,
    Compression,
    ForwardConfig,
    ForwardProtocol,
    GrpcReceiverConfig,
    HttpReceiverConfig,
    LogConfig,
    LogLevel,
    QueueConfig,
    ReceiversConfig,
    RetryConfig,
    ServiceConfig,
    TelemetryConfig,
    split_endpoint,
)

__all__ = [
    "ENV_PREFIX",
    "ClassifyConfig",
    "Compression",
    "ForwardConfig",
    "ForwardProtocol",
    "GrpcReceiverConfig",
    "HttpReceiverConfig",
    "LogConfig",
    "LogLevel",
    "QueueConfig",
    "ReceiversConfig",
    "RetryConfig",
    "ServiceConfig",
    "TelemetryConfig",
    "env_var_name",
    "leaf_keys",
    "load_config",
    "split_endpoint",
]
