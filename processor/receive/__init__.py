"""The OTLP receivers: transports that translate to and from the shared intake."""
