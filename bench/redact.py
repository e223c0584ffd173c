"""What redaction costs on the error texts it is given: characters read per CPU second.

``redact`` runs on every failed call's error text (the client's ``shared/outcome.py``), so its
cost is paid once per failure, on texts as tool servers write them. Two corpora:

    realistic    error texts of the kinds the service sees: JSON-RPC errors, transport
                 failures with URLs, tracebacks with paths, HTTP bodies, texts holding a
                 credential in the shapes tests/fixtures/redaction/ lists, in several
                 languages; short ones and ones past the scan limit
    adversarial  inputs built to make a pattern work hard: long runs of one character, of
                 keywords, of separators, of quotes, of flags (what the client's
                 tests/test_shared_redact.py feeds it as well)

Each round redacts every text of a corpus once; CPU time, best of several rounds. The
figure is the characters of input per second (a text past the scan limit counts only the
characters read: SCAN_FACTOR times the cap).

    .venv/bin/python bench/redact.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mcp_breaker_client.shared.redact import DEFAULT_MAX_CHARS, SCAN_FACTOR, redact

TRACEBACK = (
    "ToolError: Error calling tool 'raising_tool': boom\n"
    "Traceback (most recent call last):\n"
    '  File "/home/alice/project/server.py", line 12, in call_tool\n'
    "    raise RuntimeError(msg)\n"
    '  File "/usr/lib/python3.12/site-packages/httpx/_transports/default.py", line 69\n'
    "httpx.ConnectError: [Errno 111] Connection refused\n"
)
REALISTIC = [
    "upstream MCP session is closed",
    "mcp-beaver: upstream MCP session is closed (reconnect also failed: reconnect upstream MCP "
    '"http://127.0.0.1:8931/mcp": sending "notifications/initialized": Bad Request)',
    "MCP error -32602: Invalid params: expected string at $.url, got number",
    "MCP error -32601: Unknown tool: browser_navigate_everywhere",
    "Request timed out after 60000 ms (tools/call playwright__browser_navigate)",
    TRACEBACK,
    TRACEBACK * 6,
    'HTTP 401 Unauthorized: {"error": "invalid_token", "error_description": "The access token '
    'expired", "token": "ya29.a0AfH6SMBx3kJ9"}',
    "connect postgres://app:pa55word@db.internal:5432/app failed: password authentication "
    'failed for user "app"',
    "GET https://api.example.com/v1/search?q=mcp&api_key=qk-77161 returned 429 Too Many Requests",
    "POST https://hooks.slack.com/services/T0000/B0000/XXXXXXXXXXXXXXXX: 404 no_service",
    "exec failed: sshpass -p Hunter2x ssh deploy@10.0.0.7 'systemctl restart app'",
    "docker login -u ci -p DkrPw99 registry.example.com: unauthorized",
    "curl -u admin:s3cretPw https://artifacts.example.com/api/upload: 403",
    "<error><code>401</code><password>XmlPw1</password><message>denied</message></error>",
    "the password was reset to Temp1234! by the helpdesk",
    "échec de connexion : le mot de passe est Soleil42, utilisateur bob",
    "Anmeldung fehlgeschlagen: das Passwort lautet Geheim99",
    "连接失败：密码是abc12345，请重试",
    "config error: pässword=Umlaut9 is not accepted",
    "stripe: sk_live_4eC39HqLyjWDarjtT1zdp7dc rejected (invalid_request_error)",
    "AccessDenied for AKIAIOSFODNN7EXAMPLE on arn:aws:s3:::bucket/key",
    "Error: ENOENT: no such file or directory, open 'C:\\Users\\bob\\AppData\\config.json'",
    "token limit exceeded: 128000 tokens requested, 100000 allowed",
    'password authentication failed for user "bob"; Unauthorized: token expired',
    "Cookie: session=s355ion-77; theme=dark rejected by upstream",
    "x" * 2000,
    "failed: " + "word " * 400,
]
ADVERSARIAL = [
    "x" * 1_000_000,
    "password=" + "s" * 100_000,
    "Bearer " * 50_000,
    "/a" * 100_000,
    "'token':\"" * 30_000,
    "password " * 50_000,
    "-p " * 100_000,
    "-u a:" * 60_000,
    "<password>" * 30_000,
    "mot de passe " * 30_000,
    "密码是" * 50_000,
    "password was reset to " * 20_000,
    "pässword=" * 30_000,
    "aB3" * 100_000,
]


def characters_read(texts: list[str]) -> int:
    limit = SCAN_FACTOR * DEFAULT_MAX_CHARS
    return sum(min(len(text), limit) for text in texts)


def best_seconds(texts: list[str], rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.process_time()
        for text in texts:
            redact(text)
        best = min(best, time.process_time() - started)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    arguments = parser.parse_args()
    print(f"{'corpus':<12} {'texts':>6} {'chars read':>11} {'µs/text':>9} {'chars/s':>12}")
    for name, texts in (("realistic", REALISTIC * 20), ("adversarial", ADVERSARIAL)):
        seconds = best_seconds(texts, arguments.rounds)
        read = characters_read(texts)
        print(
            f"{name:<12} {len(texts):>6} {read:>11,} {seconds / len(texts) * 1e6:>9.1f} "
            f"{read / seconds:>12,.0f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
