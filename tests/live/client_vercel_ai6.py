"""AI SDK 6 (npm ``ai``) capture client: runs ``vercel_ai6/client.mjs`` under node.

The Node client calls ``generateText`` with ``experimental_telemetry: { isEnabled: true }``
on the SDK's own ``MockLanguageModelV3`` scripted with PLAN, with tools from ``@ai-sdk/mcp``'s
stdio client against the Python tool server, and exports the AI SDK's spans through the
global ``NodeTracerProvider`` over OTLP/gRPC. This venv only runs the tool server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import frameworks_common as common


def npm_ci(project: Path) -> None:
    """Install the pinned packages when node_modules is missing or older than the lock."""
    modules, lock = project / "node_modules", project / "package-lock.json"
    if modules.exists() and modules.stat().st_mtime >= lock.stat().st_mtime:
        return
    command = ["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"]
    subprocess.run(command, cwd=project, check=True, stdout=sys.stderr)
    modules.touch()


def run(stack: str) -> int:
    """Run ``<stack>/client.mjs`` with the scenario; node's exit status."""
    args = common.client_args()
    project = common.HERE / stack
    npm_ci(project)
    command, command_args = common.server_command()
    scenario = {
        "plan": common.PLAN,
        "final": common.FINAL_TEXT,
        "server": {"command": command, "args": command_args},
    }
    node = ["node", str(project / "client.mjs"), "--endpoint", args.endpoint]
    node += ["--out", str(args.out.resolve())]
    if args.simple:
        node.append("--simple")
    env = {**os.environ, "MCP_BREAKER_SCENARIO": json.dumps(scenario)}
    return subprocess.run(node, cwd=project, env=env).returncode


if __name__ == "__main__":
    sys.exit(run("vercel_ai6"))
