"""Stubs generated from proto/mcp_breaker/v1 by scripts/gen-proto."""
