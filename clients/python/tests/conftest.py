from __future__ import annotations

from hypothesis import settings

# No per-example deadline: on a shared, loaded machine one slow example is the machine,
# not the code.
settings.register_profile("mcp-breaker-client", deadline=None)
settings.load_profile("mcp-breaker-client")
