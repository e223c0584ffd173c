"""Subscribe to mcp-breaker's advisories as a harness does, and print what is out.

    watch_advisories.py [HOST:PORT] [--follow]

HOST:PORT is the advisory port (default localhost:4320), plaintext and without a token,
as ./scripts/serve runs it. Prints the advisories in force and what the harness's check
before a call would answer; with --follow, then every change until Ctrl-C.
"""

import sys
import time

from mcp_breaker_client import AdvisoryClient
from mcp_breaker_client.v1 import advisories_pb2 as pb

args = [a for a in sys.argv[1:] if not a.startswith("--")]
target = args[0] if args else "localhost:4320"
client = AdvisoryClient(target, harness="quickstart-harness")
if not client.wait_until_synced(10):
    sys.exit(f"no answer from {target}: {client.failure or 'is mcp-breaker serving there?'}")

shown: dict[str, int] = {}


def show_changes() -> None:
    for advisory in client.advisories():
        if shown.get(advisory.id) != advisory.state:
            shown[advisory.id] = advisory.state
            what = f"{advisory.server}/{advisory.tool or '*'}"
            state = pb.State.Name(advisory.state)
            print(f"{pb.Scope.Name(advisory.scope)} {what} {state}: {advisory.message}")


show_changes()
# What a harness asks before each call; in a new turn only advisories across turns apply.
arguments = {"url": "https://example.test"}
verdict = client.check("a-new-turn", "playwright", "browser_navigate", arguments)
print(f"check(playwright/browser_navigate) in a new turn: {verdict.decision.name}")
try:
    while "--follow" in sys.argv:
        time.sleep(0.5)
        show_changes()
except KeyboardInterrupt:
    pass
client.close()
