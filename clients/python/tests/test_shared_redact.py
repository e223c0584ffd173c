"""Tests for mcp_breaker_client.shared.redact: what goes, what stays, and that nothing breaks it."""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp_breaker_client.shared.redact import DEFAULT_MAX_CHARS, ELLIPSIS, redact

SIRENS_ECHO = (
    "mcp-beaver: upstream MCP session is closed (reconnect also failed: reconnect upstream MCP "
    '"http://127.0.0.1:8931/mcp": sending "notifications/initialized": Bad Request)'
)
TRACEBACK = (
    "ToolError: Error calling tool 'raising_tool': boom\n"
    "Traceback (most recent call last):\n"
    '  File "/home/alice/project/server.py", line 12, in call_tool\n'
    "    raise RuntimeError(msg)\n"
    "RuntimeError: boom\n"
)
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0"
    ".dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
)
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEpAIBAAKCAQEA7bq98b6u2QWvYk1Ql5yK3nE4cT4x\n"
    "q1Z0Y9e7k2v3n8QmW1b4c5d6e7f8g9h0i1j2k3l4m5\n"
    "-----END RSA PRIVATE KEY-----"
)

# (id, input, exact expected output)
EXACT = [
    ("sirens-echo kept whole", SIRENS_ECHO, SIRENS_ECHO),
    ("unknown tool", "Unknown tool: no_such_tool", "Unknown tool: no_such_tool"),
    ("json-rpc code", "MCP error -32602: Invalid params", "MCP error -32602: Invalid params"),
    ("declined", "The user declined this tool call", "The user declined this tool call"),
    (
        "mcp method names",
        "tools/call tools/list resources/read notifications/tools/list_changed HTTP/1.1 I/O",
        "tools/call tools/list resources/read notifications/tools/list_changed HTTP/1.1 I/O",
    ),
    ("dotted exception", "fastmcp.exceptions.ToolError: x", "fastmcp.exceptions.ToolError: x"),
    (
        "hyphenated name ending in sk-",
        "task-scheduler-service failed",
        "task-scheduler-service failed",
    ),
    ("auth in a word", "Unauthorized: missing credentials", "Unauthorized: missing credentials"),
    (
        "quoted tool name ending in token",
        "Error calling tool 'get_token': disk full",
        "Error calling tool 'get_token': disk full",
    ),
    ("empty", "", ""),
    ("only whitespace", " \n\t ", ""),
    (
        "relative path with extension",
        "Error calling tool 'raising_tool': disk exploded while reading secret/file.txt",
        "Error calling tool 'raising_tool': disk exploded while reading <path>",
    ),
    (
        "multi-line traceback",
        TRACEBACK,
        "ToolError: Error calling tool 'raising_tool': boom Traceback (most recent call last): "
        'File "<path>", line 12, in call_tool raise RuntimeError(msg) RuntimeError: boom',
    ),
    (
        "url userinfo, query and fragment",
        "connect https://user:hunter2@db.example.com:5432/app?token=abc&x=1#frag failed",
        "connect https://[REDACTED]@db.example.com:5432/app?[REDACTED]#[REDACTED] failed",
    ),
    (
        "slack webhook path",
        "post to https://hooks.slack.com/services/T0000/B0000/XXXXXXXXXXXXXXXX: 404",
        "post to https://hooks.slack.com/services/<path>: 404",
    ),
    (
        "opaque first url segment",
        "GET https://api.example.com/0123456789abcdef0123/x failed",
        "GET https://api.example.com/<path> failed",
    ),
    (
        "authorization bearer",
        "Authorization: Bearer abc.def.ghi rejected",
        "Authorization: Bearer [REDACTED] rejected",
    ),
    ("authorization basic", "Authorization: Basic dXNlcjpwYXNz", "Authorization: Basic [REDACTED]"),
    ("bare bearer", "sent Bearer abc.def.ghi", "sent Bearer [REDACTED]"),
    ("bearer in prose", "missing bearer token", "missing bearer token"),
    ("basic in prose", "Basic Auth required", "Basic Auth required"),
    ("jwt", f"token {JWT} expired", "token [REDACTED] expired"),
    (
        "openai key",
        "key sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD invalid",
        "key [REDACTED] invalid",
    ),
    (
        "anthropic key",
        "x-api-key sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789 rejected",
        "x-api-key [REDACTED] rejected",
    ),
    ("github token", "ghp_abcdefghijklmnopqrstuvwxyz0123456789 revoked", "[REDACTED] revoked"),
    (
        "slack bot token",
        "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx invalid_auth",
        "[REDACTED] invalid_auth",
    ),
    ("aws access key id", "AccessDenied for AKIAIOSFODNN7EXAMPLE", "AccessDenied for [REDACTED]"),
    ("google key", "key=AIzaSyA1234567890abcdefghijklmnopqrstuv", "key=[REDACTED]"),
    (
        "json password",
        '{"user": "bob", "password": "hunter2", "code": -32602}',
        '{"user": "bob", "password": "[REDACTED]", "code": -32602}',
    ),
    ("python dict secret", "{'client_secret': 'abc def'}", "{'client_secret': '[REDACTED]'}"),
    (
        "key=value secret",
        "login failed: password=hunter2; retry",
        "login failed: password=[REDACTED]; retry",
    ),
    ("session header", "Mcp-Session-Id: 4f9a2c not found", "Mcp-Session-Id: [REDACTED] not found"),
    (
        "env assignments",
        "OPENAI_API_KEY=sk-abc DATABASE_URL=postgres://u:p@h/db failed",
        "OPENAI_API_KEY=[REDACTED] DATABASE_URL=[REDACTED] failed",
    ),
    # A value runs on over "&", ";" and "," that a password may hold, up to a space or the
    # next key of a query string or form body.
    ("ampersand in value", "password=Tr0ub4dor&3", "password=[REDACTED]"),
    (
        "semicolon in env value",
        "PGPASSWORD=abc;def123 psql failed",
        "PGPASSWORD=[REDACTED] psql failed",
    ),
    ("query string", "a=1&password=x&b=2", "a=1&password=[REDACTED]&b=2"),
    (
        "query string, two secrets",
        "a=1&password=x&b=2&token=y",
        "a=1&password=[REDACTED]&b=2&token=[REDACTED]",
    ),
    ("punctuation in value", "password=a,b,c;d&e", "password=[REDACTED]"),
    ("comma before next pair", "password=hunter2, user=bob", "password=[REDACTED], user=bob"),
    ("closing bracket", "(password=abc) rejected", "(password=[REDACTED]) rejected"),
    ("cookie attributes", "session=abc; Path=/", "session=[REDACTED]; Path=/"),
    (
        "url-encoded form body",
        "POST /login body user%3Dbob%26password%3DUrlEncPw77%26remember%3D1 failed",
        "POST /login body user%3Dbob%26password%3D[REDACTED]%26remember%3D1 failed",
    ),
    (
        "url-encoded ampersand in value",
        "password%3DTr0ub%264%26x%3D1",
        "password%3D[REDACTED]%26x%3D1",
    ),
    (
        "query string, encoded value",
        "user=bob&password=Enc%26Pw77&x=1",
        "user=bob&password=[REDACTED]&x=1",
    ),
    ("fullwidth equals", "password＝Secret", "password＝[REDACTED]"),
    ("fullwidth colon", "token：abc", "token：[REDACTED]"),
    # JSON inside a JSON string, and an escaped quote inside a JSON value.
    (
        "escaped json",
        'body "{\\"client_secret\\":\\"EscCliSec9\\",\\"user\\":\\"bob\\"}" rejected',
        'body "{\\"client_secret\\":\\"[REDACTED]\\",\\"user\\":\\"bob\\"}" rejected',
    ),
    (
        "escaped json number",
        '{\\"password\\":1234,\\"ok\\":true}',
        '{\\"password\\":[REDACTED],\\"ok\\":true}',
    ),
    (
        "escaped quote in json value",
        '{"password": "ab\\"cd", "user": "bob"}',
        '{"password": "[REDACTED]", "user": "bob"}',
    ),
    # Short key words, alone or as a whole part of a key name.
    ("pass", "pass=abc", "pass=[REDACTED]"),
    ("pw", "pw=abc", "pw=[REDACTED]"),
    ("pw colon", "pw: abc", "pw: [REDACTED]"),
    ("pwd", "pwd=abc", "pwd=[REDACTED]"),
    ("key", "key=abc", "key=[REDACTED]"),
    ("apikey", "apikey=abc", "apikey=[REDACTED]"),
    ("access_key", "access_key=abc", "access_key=[REDACTED]"),
    ("camel-case pass", "dbPass=abc", "dbPass=[REDACTED]"),
    ("snake-case pass", "db_pass=abc", "db_pass=[REDACTED]"),
    ("kebab-case pass", "DB-PASS=abc", "DB-PASS=[REDACTED]"),
    ("camel-case key", "secretAccessKey=abc", "secretAccessKey=[REDACTED]"),
    ("key id", "accessKeyId=abc", "accessKeyId=[REDACTED]"),
    ("acronym key", "APIKey=abc", "APIKey=[REDACTED]"),
    (
        "compound key colon",
        "Ocp-Apim-Subscription-Key: abc",
        "Ocp-Apim-Subscription-Key: [REDACTED]",
    ),
    ("value suffix", "passwordValue=abc", "passwordValue=[REDACTED]"),
    # Command lines.
    ("mysql glued password", "mysql -u root -pS3cret db", "mysql -u root -p[REDACTED] db"),
    (
        "mysql quoted passwords",
        "mysql -u root -p'two words' -pX db",
        "mysql -u root -p'[REDACTED]' -p[REDACTED] db",
    ),
    ("mysql password option", "mysql --password=Secret db", "mysql --password=[REDACTED] db"),
    ("mysqldump", "mysqldump -pSecret app | gzip", "mysqldump -p[REDACTED] app | gzip"),
    ("pem block", f"bad key {PEM} after", "bad key [REDACTED] after"),
    ("posix path", "cannot open /etc/ssl/private/server.key", "cannot open <path>"),
    ("home path", "read ~/.ssh/id_rsa: permission denied", "read <path>: permission denied"),
    ("dot path", "missing ./config/local.yaml.", "missing <path>."),
    ("windows path", r"open C:\Users\bob\secrets.txt failed", "open <path> failed"),
    ("unc path", r"share \\fileserver\team\notes unavailable", "share <path> unavailable"),
    ("single segment route kept", "POST /mcp returned 405", "POST /mcp returned 405"),
    ("email", "invite for bob.smith@example.com.", "invite for <email>."),
    ("glued emails", "a@b.cd_e@f.gh", "<email>"),
    ("hex hash", "trace 6d1efdd560dd868db1fdbea1394cd3cd lost", "trace [REDACTED] lost"),
    (
        "long identifier kept",
        "mcp__playwright__browser_navigate_everywhere",
        "mcp__playwright__browser_navigate_everywhere",
    ),
    ("whitespace collapsed", "a\tb\n\n  c\r\nd", "a b c d"),
    ("control characters", "a\x00b\x1bc\x7fd", "a\ufffdb\ufffdc\ufffdd"),
    ("lone surrogates", "a\ud800b\udfffc", "a\ufffdb\ufffdc"),
    ("bidi override", "ok\u202edlrow", "ok\ufffddlrow"),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in EXACT], ids=[c[0] for c in EXACT])
def test_redact_exact(text: str, expected: str) -> None:
    """Each nasty case comes out exactly as the policy says."""
    assert redact(text) == expected


# (id, input, substrings that must be gone, substrings that must stay)
GONE_AND_KEPT = [
    (
        "sirens-echo meaning",
        SIRENS_ECHO,
        [],
        [
            "upstream MCP session is closed",
            "Bad Request",
            "notifications/initialized",
            "127.0.0.1:8931",
        ],
    ),
    (
        "credentials in a failing reconnect",
        'reconnect upstream MCP "https://admin:s3cr3t@10.0.0.7:8931/mcp?api_key=k1": Unauthorized',
        ["admin", "s3cr3t", "k1"],
        ["reconnect upstream MCP", "10.0.0.7:8931/mcp", "Unauthorized"],
    ),
    (
        "traceback paths",
        TRACEBACK,
        ["/home", "alice", "server.py"],
        ["raising_tool", "RuntimeError: boom", "line 12"],
    ),
    (
        "cookie header",
        "Set-Cookie: sid=8f7e6d5c4b3a; Path=/ rejected by upstream",
        ["8f7e6d5c4b3a"],
        ["rejected by upstream"],
    ),
    (
        "pem without end",
        "key -----BEGIN PRIVATE KEY----- MIIEvQIBADANBgkqhkiG9w0",
        ["MIIE"],
        ["key"],
    ),
]


@pytest.mark.parametrize(
    ("text", "gone", "kept"), [c[1:] for c in GONE_AND_KEPT], ids=[c[0] for c in GONE_AND_KEPT]
)
def test_redact_removes_secrets_keeps_meaning(text: str, gone: list[str], kept: list[str]) -> None:
    """Secrets are gone and the words that say what failed remain."""
    result = redact(text)
    for secret in gone:
        assert secret not in result
    for meaning in kept:
        assert meaning in result


def test_redact_drops_a_secret_cut_at_the_scan_limit() -> None:
    """A key cut in half by the scan limit is dropped, not left as a fragment."""
    text = "x " * 595 + "sk-" + "A1" * 40
    result = redact(text)
    assert "sk-" not in result
    assert "A1A1" not in result


@pytest.mark.parametrize(
    ("text", "max_chars"),
    [
        ("x" * 1_000_000, DEFAULT_MAX_CHARS),
        ("word " * 200_000, DEFAULT_MAX_CHARS),
        ("ab\n" * 500_000, 64),
        ("password=" + "s" * 1_000_000, DEFAULT_MAX_CHARS),
        ("Bearer " * 200_000, 10),
        ("/a" * 500_000, DEFAULT_MAX_CHARS),
        ("'token':\"" * 100_000, DEFAULT_MAX_CHARS),
    ],
    ids=[
        "one-word",
        "many-words",
        "many-lines",
        "long-value",
        "repeated-scheme",
        "deep-path",
        "quotes",
    ],
)
def test_redact_huge_input_is_capped(text: str, max_chars: int) -> None:
    """A megabyte of input comes back within the cap, ending in an ellipsis."""
    result = redact(text, max_chars=max_chars)
    assert len(result) <= max_chars
    assert result.endswith(ELLIPSIS)


@pytest.mark.parametrize(
    ("text", "max_chars", "expected"),
    [
        ("alpha beta gamma", 16, "alpha beta gamma"),
        ("alpha beta gamma", 15, "alpha beta…"),
        ("alpha beta gamma", 11, "alpha beta…"),
        ("alpha beta gamma", 10, "alpha…"),
        ("alphabetagamma", 5, "…"),
        ("password: hunter2 and more", 13, "password:…"),
        ("anything", 1, "…"),
    ],
    ids=[
        "fits",
        "cut-before-word",
        "cut-at-space",
        "cut-in-word",
        "one-long-word",
        "cut-after-key",
        "one",
    ],
)
def test_redact_cuts_between_words(text: str, max_chars: int, expected: str) -> None:
    """The cap drops a cut word whole, so no half secret or half marker is left."""
    assert redact(text, max_chars=max_chars) == expected


@pytest.mark.parametrize("max_chars", [0, -1], ids=["zero", "negative"])
def test_redact_rejects_max_chars_below_one(max_chars: int) -> None:
    """A cap below one character is a programming error."""
    with pytest.raises(ValueError, match="max_chars must be at least 1"):
        redact("x", max_chars=max_chars)


@given(text=st.text(), max_chars=st.integers(min_value=1, max_value=400))
def test_redact_never_raises_and_stays_in_bounds(text: str, max_chars: int) -> None:
    """Any text comes back within the cap, on one line."""
    result = redact(text, max_chars=max_chars)
    assert len(result) <= max_chars
    assert "\n" not in result
    result.encode("utf-8")  # no lone surrogate left to break a later encode


@given(text=st.text(), max_chars=st.integers(min_value=1, max_value=400))
def test_redact_is_idempotent(text: str, max_chars: int) -> None:
    """Scrubbing scrubbed text changes nothing."""
    once = redact(text, max_chars=max_chars)
    assert redact(once, max_chars=max_chars) == once


@given(
    before=st.text(),
    body=st.text(alphabet=string.ascii_letters + string.digits, min_size=40, max_size=40),
    after=st.text(),
)
def test_redact_never_lets_an_embedded_key_through(before: str, body: str, after: str) -> None:
    """An sk- key survives no surrounding text."""
    result = redact(before + "sk-" + body + after)
    assert "sk-" + body not in result
    assert body not in result


@pytest.mark.parametrize(
    "text",
    ["mysql passwd &p -pr", "mariadb Bearer x& -pt", "mysqldump password &p -pX user@x.io"],
)
def test_a_command_line_whose_end_another_pass_removes_is_redacted_once(text: str) -> None:
    """The MySQL pass runs last: run earlier, a later pass could remove the '&' that ended
    the command, and a second redact() would find another -p in it."""
    once = redact(text)
    assert redact(once) == once
    assert "-p[REDACTED]" in once


def test_a_text_redacted_again_is_redacted_from_what_is_kept() -> None:
    """The same error comes back call after call: the second time it is not scrubbed
    again, and what is kept stays bounded."""
    from mcp_breaker_client.shared import redact as module

    module._redact_read_part.cache_clear()
    text = "connect failed: password=hunter2 at https://alice:pw@db.internal:5432/x"
    first = redact(text)
    assert "hunter2" not in first and redact(text) == first
    info = module._redact_read_part.cache_info()
    assert (info.hits, info.misses) == (1, 1)
    for i in range(module.REDACTED_TEXTS_KEPT + 10):
        redact(f"error {i}: token=t{i}")
    assert module._redact_read_part.cache_info().currsize == module.REDACTED_TEXTS_KEPT


def test_what_a_long_text_redacts_to_depends_on_what_is_read_of_it() -> None:
    """Two texts alike in their first SCAN_FACTOR * max_chars characters redact alike,
    whatever follows: what the kept results are found by."""
    from mcp_breaker_client.shared.redact import SCAN_FACTOR

    head = "upstream said: " + "x" * (SCAN_FACTOR * 50)
    head = head[: SCAN_FACTOR * 50]
    longer, other = head + " password=s3cret", head + " nothing"
    assert redact(longer, max_chars=50) == redact(other, max_chars=50)
    assert "s3cret" not in redact(longer, max_chars=50)
