"""AI SDK 7 (npm ``ai``) capture client: runs ``vercel_ai7/client.mjs`` under node.

The Node client registers ``@ai-sdk/otel``'s ``OpenTelemetry`` integration
(``registerTelemetry``, the v7 docs' set-up; telemetry is then on by default) and calls
``generateText`` on the SDK's own ``MockLanguageModelV4`` scripted with PLAN, with tools from
``@ai-sdk/mcp``'s stdio client against the Python tool server, exporting through the global
``NodeTracerProvider`` over OTLP/gRPC. This venv only runs the tool server.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from client_vercel_ai6 import run

if __name__ == "__main__":
    sys.exit(run("vercel_ai7"))
