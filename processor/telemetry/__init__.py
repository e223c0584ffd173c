"""Self-telemetry: the service's own metrics and health endpoints."""
