"""Advisories: the breaker's decisions pushed to the harnesses that subscribe (port 4320)."""
