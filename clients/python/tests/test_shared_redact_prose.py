"""Tests for mcp_breaker_client.shared.redact on secrets written in prose, and on every other shape.

A corpus of secret shapes (each secret must be gone), a table of ordinary error phrases (each
must come back as written), and a property that the prose rule keeps ``redact`` idempotent.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp_breaker_client.shared.redact import PATH_MARKER, REDACTED, redact

# (id, input, the secret that must not appear in the output)
SECRETS = [
    # Prose: a keyword, maybe a filler, then the value.
    ("password word", "password hunter2prose", "hunter2prose"),
    ("the token", "the token tkn9f8e7d6c5", "tkn9f8e7d6c5"),
    ("api key", "api key k3y-7781", "k3y-7781"),
    ("password is", "my password is Tr0ub4dor&3", "Tr0ub4dor&3"),
    (
        "passphrase",
        "use passphrase correct-horse-battery-staple",
        "correct-horse-battery-staple",
    ),
    ("pin", "PIN 4921", "4921"),
    ("otp colon", "otp: 883921", "883921"),
    ("plain password word", "login: password swordfish rejected", "swordfish"),
    ("password was", "the password was Sup3rSecret! before rotation", "Sup3rSecret!"),
    ("password for user", "password for user bob is hunter2", "hunter2"),
    ("password for user colon", "password for alice: s3same", "s3same"),
    ("token for account", "token of account ci-bot is gh0st-t0ken", "gh0st-t0ken"),
    ("passwd", "passwd 0penSesame", "0penSesame"),
    ("pwd", "pwd=abc pwd xYz9876", "xYz9876"),
    ("passcode", "passcode 246810 not accepted", "246810"),
    ("secret", "secret s3cr3t-value leaked", "s3cr3t-value"),
    ("client secret", "client secret cs_live_ab12 invalid", "cs_live_ab12"),
    ("access key", "access key AK1234ZZ denied", "AK1234ZZ"),
    ("secret key", "secret key wJalrXUtnFEMI/K7MDENG rejected", "wJalrXUtnFEMI/K7MDENG"),
    ("private key", "private key pk_9f8e7d loaded", "pk_9f8e7d"),
    ("auth token", "auth token at-55aa66bb expired", "at-55aa66bb"),
    ("access token", "access token ya29.a0AfH6SM refused", "ya29.a0AfH6SM"),
    ("refresh token", "refresh token rt_0011 revoked", "rt_0011"),
    ("session id", "session id 4f9a2c not found", "4f9a2c"),
    ("session", "MCP session c0ffee-1234 not found", "c0ffee-1234"),
    ("cookie", "cookie sid=8f7e6d5c4b3a rejected", "8f7e6d5c4b3a"),
    ("credential", "credential cr3d-0001 rejected", "cr3d-0001"),
    ("authorization prose", "authorization xyz-123 rejected", "xyz-123"),
    ("bearer prose", "bearer abc123!", "abc123!"),
    ("signature", "signature sig_ab12cd34 mismatch", "sig_ab12cd34"),
    ("mixed case", "token hUnTeRtWo rejected", "hUnTeRtWo"),
    ("long letter run", "token abcdefghijklmnopqrstuvwx rejected", "abcdefghijklmnopqrstuvwx"),
    ("quoted prose value", 'password "correct horse" rejected', "correct horse"),
    ("single quoted value", "token 'tk live' rejected", "tk live"),
    ("equals spaced", "pin = 1234", "1234"),
    ("set to", "the token was set to tk-42 by admin", "tk-42"),
    ("mfa code", "mfa code 112233 expired", "112233"),
    ("verification code", "verification code: 778899", "778899"),
    ("plural", "passwords hunter2 and hunter3 rejected", "hunter2"),
    ("cli flag", "exec failed: --password hunter2x", "hunter2x"),
    ("glued prefix", "db_password s3cret!", "s3cret!"),
    ("header prose", "X-Api-Key abc123def rejected", "abc123def"),
    ("after another keyword", "password token tok3n-9 rejected", "tok3n-9"),
    ("sentence end", "Your password is Tr0ub4dor&3.", "Tr0ub4dor&3"),
    # key=value and key: value.
    ("key=value", "login failed: password=hunter2; retry", "hunter2"),
    ("key: value", "token: abc.def.ghi", "abc.def.ghi"),
    ("api key colon", "api key: k3y-7782", "k3y-7782"),
    ("prefixed key=value", "db.password=Zx9!q", "Zx9!q"),
    ("env value with semicolon", "PGPASSWORD=abc;def123", "def123"),
    ("value with ampersand", "password=Tr0ub4dor&3xq", "3xq"),
    ("escaped json pair", '{\\"client_secret\\":\\"EscCliSec9\\"}', "EscCliSec9"),
    ("camel-case key", "dbPass=Sh0rt", "Sh0rt"),
    ("secret access key", "secretAccessKey=wJalrXUt", "wJalrXUt"),
    ("access key id", "accessKeyId=ASIAXX", "ASIAXX"),
    ("url-encoded", "password%3DUrlEncPw77", "UrlEncPw77"),
    ("mysql -p", "mysql -pMyS3cret", "MyS3cret"),
    ("fullwidth equals", "password＝FwSecret", "FwSecret"),
    # URLs.
    ("url userinfo", "connect postgres://app:pa55word@db:5432/app failed", "pa55word"),
    ("url query", "GET https://api.example.com/v1?api_key=qk-771 failed", "qk-771"),
    ("url path token", "POST https://hooks.example.com/hook/abcd1234efgh", "abcd1234efgh"),
    # Headers.
    ("authorization bearer", "Authorization: Bearer abc.def.ghi rejected", "abc.def.ghi"),
    ("authorization basic", "Authorization: Basic dXNlcjpwYXNz", "dXNlcjpwYXNz"),
    ("cookie header", "Cookie: session=s355ion-77; theme=dark", "s355ion-77"),
    ("x-api-key header", "x-api-key: 0a1b2c3d", "0a1b2c3d"),
    # JSON and Python literals.
    ("json password", '{"password": "hunter2"}', "hunter2"),
    ("json number pin", '{"pin": 4921}', "4921"),
    ("json otp", '{"otp": "883921", "ok": false}', "883921"),
    ("python dict", "{'client_secret': 'abc def'}", "abc def"),
    # Environment variables.
    ("env assignment", "OPENAI_API_KEY=sk-abc failed", "sk-abc"),
    ("env prose", "GITHUB_TOKEN gh0-tok3n is not set right", "gh0-tok3n"),
    # Keys known by their prefix.
    ("openai key", "key sk-proj-abcdefghijklmnopqrstuvwxyz0123", "abcdefghijklmnopqrstuvwxyz0123"),
    ("github token", "ghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_abcdefghijklmnop"),
    ("aws key id", "AccessDenied for AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    ("google key", "AIzaSyA1234567890abcdefghijklmnopqrstuv", "AIzaSyA1234567890"),
    (
        "slack token",
        "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOp",
        "AbCdEfGhIjKlMnOp",
    ),
]

# Ordinary error phrases: each comes back exactly as written.
SURVIVORS = [
    "Unauthorized: token expired",
    "upstream MCP session is closed",
    "invalid api key",
    "token expired",
    "password incorrect",
    "invalid token",
    "the token is invalid",
    "session closed",
    "authorization failed",
    "token limit exceeded",
    'password authentication failed for user "bob"',
    "password is too short",
    "password must be at least 12 characters",
    "Unauthorized: missing credentials",
    "missing bearer token",
    "Basic Auth required",
    "refresh token revoked",
    "api key not found",
    "secret manager unavailable",
    "access token has expired",
    "session not found, reconnecting",
    "Invalid token. Please sign in again",
    "token (expired) rejected",
    "TokenExpiredError: jwt expired",
    "pin the version to avoid drift",
    "Error calling tool 'get_token': disk full",
    "cookie not set",
    "password for user bob rejected",
    "the credentials have expired",
    "signature verification failed",
    # Short key words only as a whole part of a key name, and "key" or "pass" alone only
    # before "=": these are words, not keys.
    "the key was not found",
    "key: not found",
    "Missing key: user_id",
    "Invalid key, expected one of: a, b",
    "KeyError: 'api_key'",
    "password reset link sent",
    "keyboard layout unknown",
    "passage blocked",
    "compass=north",
    "bypass=true",
    "hotkey=F5",
    "monkey=banana",
    "pass: 3 fail: 0",
    "the pass was rejected",
    "--pass-through=x",
    "tokenExpiry=3600",
    "token_count=5",
    # "-p" is a password only glued to a MySQL client's flag.
    "cp -pr src dst failed",
    "ssh -p 22 host refused",
    "mysql -h db -P 3306 -u root -p",
]


@pytest.mark.parametrize(("text", "secret"), [c[1:] for c in SECRETS], ids=[c[0] for c in SECRETS])
def test_redact_removes_every_secret_shape(text: str, secret: str) -> None:
    """Whatever shape a secret is written in, it does not come out."""
    result = redact(text)
    assert secret not in result
    assert REDACTED in result or PATH_MARKER in result  # what was there is marked


@pytest.mark.parametrize("text", SURVIVORS)
def test_redact_keeps_ordinary_error_phrases(text: str) -> None:
    """The phrases a harness author needs read as they were written."""
    assert redact(text) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("password hunter2prose", "password [REDACTED]"),
        ("my password is Tr0ub4dor&3.", "my password is [REDACTED]."),
        ("password for user bob is hunter2", "password for user bob is [REDACTED]"),
        ("password 'abc def' bad", "password '[REDACTED]' bad"),
        ('{"pin": 4921, "otp": "883921"}', '{"pin": [REDACTED], "otp": "[REDACTED]"}'),
        ("Authorization: Bearer abc.def", "Authorization: Bearer [REDACTED]"),
        ("password token abc123", "password token [REDACTED]"),
    ],
    ids=[
        "keyword stays",
        "punctuation stays",
        "user name stays",
        "quotes stay",
        "json stays json",
        "scheme stays",
        "keyword is no value",
    ],
)
def test_redact_prose_keeps_the_keyword_and_the_sentence(text: str, expected: str) -> None:
    """Only the value goes: the keyword, the filler and what follows remain."""
    assert redact(text) == expected


KEYWORDS = [
    "password", "Password", "passphrase", "pwd", "token", "api key", "API-Key", "secret",
    "session id", "session", "cookie", "PIN", "otp", "bearer", "authorization", "auth token",
    "db_password", '"pin"', "'token'",
]  # fmt: skip
FILLERS = ["", ":", " :", "=", " =", " is", " was", " is set to", " for user bob is", " of x:"]
WORDS = [
    "hunter2", "swordfish", "expired", "invalid", "is", "Tr0ub4dor&3", "[REDACTED]", "<path>",
    "(expired)", "'a b'", '"x', "Bearer", "token", "-", "hUnTeR", "TokenError", "…", "",
    "bob@example.com", "/etc/passwd", "https://u:p@h/x/y?q", "x" * 40 + "1",
]  # fmt: skip


@given(
    parts=st.lists(
        st.tuples(
            st.sampled_from(KEYWORDS),
            st.sampled_from(FILLERS),
            st.sampled_from(WORDS),
            st.sampled_from([" ", "", ". ", ", ", "\n", "; "]),
        ),
        max_size=6,
    ),
    max_chars=st.integers(min_value=1, max_value=120),
)
def test_redact_prose_is_idempotent(parts: list[tuple[str, str, str, str]], max_chars: int) -> None:
    """Keywords, fillers and values in any mix: scrubbing scrubbed text changes nothing."""
    text = "".join(f"{key}{filler} {word}{end}" for key, filler, word, end in parts)
    once = redact(text, max_chars=max_chars)
    assert redact(once, max_chars=max_chars) == once


PAIR_KEYS = [
    "password", "PGPASSWORD", "pass", "pw", "key", "dbPass", "db_pass", "DB-PASS", "api_key",
    "secretAccessKey", "accessKeyId", "client_secret",
]  # fmt: skip
# A scheme word is no value ("Authorization: Bearer x"), so no value starts with one.
SCHEME_START = re.compile(r"(?i)(?:bearer|basic|token|digest)(?![\w.~/\\@+-])")


@given(
    key=st.sampled_from(PAIR_KEYS),
    separator=st.sampled_from(["=", " = ", "＝", "%3D"]),
    value=st.from_regex(
        r"[A-Za-z0-9!#*+-]{1,8}(?:[&;,][A-Za-z0-9!#*+-]{1,6}){0,3}", fullmatch=True
    ).filter(lambda value: SCHEME_START.match(value) is None),
    after=st.sampled_from(["", " rejected", "&user=bob", "; retry", ", user=bob", "%26x%3D1"]),
)
def test_redact_pair_value_runs_to_the_next_key(
    key: str, separator: str, value: str, after: str
) -> None:
    """A value goes whole, over "&", ";" and ","; the next pair and the sentence stay."""
    assert redact(f"{key}{separator}{value}{after}") == f"{key}{separator}{REDACTED}{after}"


@given(
    key=st.sampled_from(["password", "passphrase", "token", "api key", "pin", "otp", "secret"]),
    filler=st.sampled_from(["", ":", " =", " is", " was"]),
    secret=st.from_regex(r"[a-z]{2,8}[0-9][A-Za-z0-9!&#%-]{2,10}", fullmatch=True),
    before=st.sampled_from(["", "error: ", "the ", "login failed, "]),
    after=st.sampled_from(["", " rejected", ".", ", retry", " (401)"]),
)
def test_redact_prose_never_lets_a_shaped_secret_through(
    key: str, filler: str, secret: str, before: str, after: str
) -> None:
    """A value holding a digit after a keyword is gone, whatever the filler."""
    result = redact(f"{before}{key}{filler} {secret}{after}")
    assert secret not in result
    assert redact(result) == result
