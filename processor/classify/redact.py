"""Error texts scrubbed before they leave the process.

Recorded tool errors go on to the model (as the result of a refused call), to logs and to
metrics. Tool servers write them for their own operators, so they can hold credentials,
private paths and addresses. :func:`redact` keeps what failed and why ("upstream MCP session
is closed", "Bad Request", tool names, JSON-RPC codes, methods such as ``tools/call``, the
upstream's scheme, host and port: IPs and ports are not credentials) and removes:

- keys with a known prefix (``sk-``, ``ghp_``, ``github_pat_``, ``xoxb-``, ``glpat-``,
  ``AKIA``, ``AIza``), JWTs, PEM private key blocks, and runs of 32+ base64/hex characters
  holding a digit (keys, hashes, ids) -> ``[REDACTED]``;
- the value after a key that names a secret (``password=``, ``token:``, ``"api_key":``,
  ``Cookie:``, ...), after an ``UPPER_SNAKE=`` environment name, and after ``Bearer`` or
  ``Basic`` -> the key stays, the value becomes ``[REDACTED]``;
- in URLs: userinfo, query and fragment -> ``[REDACTED]``; of the path only a short plain
  first segment stays (``/mcp``), the rest -> ``<path>``: webhooks carry secrets there;
- filesystem paths -> ``<path>``: absolute with two segments or a file extension, ``~/``,
  ``./``, Windows and UNC, relative ending in a file name (``secret/file.txt``);
- e-mail addresses -> ``<email>``.

The patterns err towards removing too much: a false positive costs a word, a false negative
leaks a credential. The result is one printable line (whitespace runs become a space;
controls, lone surrogates and bidi overrides become U+FFFD) of at most ``max_chars``, cut
between words with a trailing "…". Only the first ``SCAN_FACTOR * max_chars`` characters
are read, and no pattern repeats a quantified group, so the cost is bounded whatever the
input. A word cut by either limit is dropped whole, since half a secret matches no pattern.
``redact`` is idempotent. It takes any ``str``; only ``max_chars`` below 1 raises.
"""

from __future__ import annotations

import re

DEFAULT_MAX_CHARS = 300  # characters: a line a model can read, not a log dump
# Scrubbing mostly shortens text (indentation, URL paths, tracebacks), so four times the
# cap is enough to fill it, and it bounds the work on megabyte-sized errors.
SCAN_FACTOR = 4

REDACTED = "[REDACTED]"
PATH_MARKER = "<path>"
EMAIL_MARKER = "<email>"
ELLIPSIS = "…"

# Controls, lone surrogates (a later UTF-8 encode would fail on them) and bidi overrides
# (they make a log line read differently from what it holds).
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff\u202a-\u202e\u2066-\u2069]")
_REPLACEMENT_CHARACTER = "\ufffd"

# Keys found by their prefix. No word boundary before them: a key glued to text is a key.
_PREFIXED_KEY = re.compile(
    r"(?:gh[pousr]_|github_pat_|glpat-|xox[abposr]-|AIza)[A-Za-z0-9_-]{16,}"
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"
    r"|eyJ[A-Za-z0-9_.-]{16,}"  # a JWT: base64url of '{"', then more dotted parts
)
# "sk-" also ends words ("task-scheduler-service"); a key holds a long alphanumeric run.
_SK_KEY = re.compile(r"sk-[A-Za-z0-9_-]{16,}")
_KEY_BODY = re.compile(r"[A-Za-z0-9]{16}")
_PRIVATE_KEY_BLOCK = re.compile(
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----[^-]*(?:-----END [A-Z ]*PRIVATE KEY-----)?"
)

# A key that ends in one of these words names a secret; "Unauthorized:" does not.
_SECRET_KEY_WORDS = (
    "password", "passwd", "pwd", "passphrase", "secret", "token", "api_key", "apikey",
    "api-key", "access_key", "private_key", "credential", "credentials", "auth",
    "authorization", "session", "session_id", "sessionid", "session-id", "cookie",
    "signature",
)  # fmt: skip
_KEY_WORD = "(?:" + "|".join(re.escape(word) for word in _SECRET_KEY_WORDS) + ")"
# A value: quoted (an unclosed quote runs to the end), or up to a delimiter. "…" is the
# cap's own mark and never a value, so cutting after "token:" stays stable.
_VALUE = r"""(?:"[^"]*"?|'[^']*'?|[^\s"',;&)\]}…]+)"""
_NOT_REDACTED = r"(?!\[REDACTED\])"
# A quoted key must have a quoted value: "Error calling tool 'get_token': disk full".
_QUOTED_PAIR = re.compile(
    rf"""(?P<key>["'][\w.-]*?{_KEY_WORD}["']\s*[:=]\s*)(?P<value>"[^"]*"?|'[^']*'?)""",
    re.IGNORECASE,
)
# "Authorization: Bearer x" keeps its scheme; a scheme word alone is not a credential.
_SCHEME = r"(?:bearer|basic|token|digest)"
_BARE_PAIR = re.compile(
    rf"(?<![\w.-])(?P<key>[\w.-]*?{_KEY_WORD}(?![\w-])\s*[:=]\s*(?:{_SCHEME}\s+)?)"
    rf"{_NOT_REDACTED}(?!{_SCHEME}(?![\w-]))(?P<value>{_VALUE})",
    re.IGNORECASE,
)
_ENV_ASSIGNMENT = re.compile(
    rf"(?<![\w.-])(?P<key>[A-Z][A-Z0-9_]+=){_NOT_REDACTED}(?P<value>{_VALUE})"
)
_AUTH_CREDENTIAL = re.compile(
    r"\b(?P<scheme>bearer|basic)\s+(?P<credential>[A-Za-z0-9._~+/=-]+)", re.IGNORECASE
)

# ASCII URL characters minus quotes and parentheses, which usually enclose the URL.
_URL = re.compile(
    r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*://[A-Za-z0-9._~%!$&*+,;=:@/?#\[\]-]*"
)
_PLAIN_SEGMENT = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,15}")
_TRAILING_PUNCTUATION = ".,;:!?"  # ends the sentence, not the URL or path

# The domain also takes local-part characters and "@": a glued "a@b.c_d@e.f" goes whole.
_EMAIL = re.compile(r"(?<![\w.%+-])[\w.%+-]+@[\w%+-]+\.[\w.%+@-]+", re.ASCII)
_WINDOWS_PATH = re.compile(r"(?<![A-Za-z0-9])[A-Za-z]:[\\/][\w.~/\\@+$-]*")
# Any word with a slash; _path_or_word decides whether it is a path.
_SLASHED_WORD = re.compile(r"(?<![\w.~/\\-])[\w.~-]*[/\\][\w.~/\\@+-]*")
_FILE_EXTENSION = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,7}$")
_OPAQUE_RUN = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{32,}={0,2}")
_DIGIT = re.compile(r"[0-9]")


def redact(text: str, *, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """Return ``text`` without secrets or private detail, on one line, at most ``max_chars`` long.

    Args:
        text: an error text as a tool, server or harness wrote it.
        max_chars: the longest result, "…" included; at least 1.
    """
    if max_chars < 1:
        raise ValueError(f"max_chars must be at least 1, but was {max_chars}")
    scan_limit = SCAN_FACTOR * max_chars
    cut = len(text) > scan_limit
    window = " ".join(text[:scan_limit].split())
    if cut:
        window = window.rpartition(" ")[0]  # the last word may be half a secret
    window = _UNPRINTABLE.sub(_REPLACEMENT_CHARACTER, window)
    return _cap(_scrub(window), max_chars, cut)


def _scrub(text: str) -> str:
    # Keys first: a key inside a pair, a URL or a PEM block is gone whatever parses next.
    text = _PREFIXED_KEY.sub(REDACTED, text)
    text = _SK_KEY.sub(_redact_sk_key, text)
    text = _PRIVATE_KEY_BLOCK.sub(REDACTED, text)
    text = _QUOTED_PAIR.sub(_redact_pair, text)
    text = _BARE_PAIR.sub(_redact_pair, text)
    text = _ENV_ASSIGNMENT.sub(_redact_pair, text)
    text = _AUTH_CREDENTIAL.sub(_redact_credential, text)
    # A URL is rewritten whole; the plain-text rules must not see its host:port or path.
    pieces: list[str] = []
    position = 0
    for url in _URL.finditer(text):
        pieces.append(_scrub_plain(text[position : url.start()]))
        pieces.append(_scrub_url(url.group()))
        position = url.end()
    pieces.append(_scrub_plain(text[position:]))
    return "".join(pieces)


def _scrub_plain(text: str) -> str:
    text = _replace(_EMAIL, EMAIL_MARKER, text)
    # Opaque runs before paths: a run ends at "." where a path goes on, so paths must be
    # judged on what is left, or the next pass would see a different word.
    text = _OPAQUE_RUN.sub(_redact_opaque, text)
    text = _replace(_WINDOWS_PATH, PATH_MARKER, text)
    return _SLASHED_WORD.sub(_path_or_word, text)


def _scrub_url(url: str) -> str:
    url, tail = _split_trailing(url)
    scheme, _, rest = url.partition("://")
    rest, hash_sign, _fragment = rest.partition("#")
    rest, question_mark, _query = rest.partition("?")
    authority, slash, path = rest.partition("/")
    _userinfo, at_sign, host_port = authority.rpartition("@")
    parts = [scheme, "://"]
    if at_sign:
        parts.append(REDACTED + "@")
    parts.append(_OPAQUE_RUN.sub(_redact_opaque, host_port))
    if slash:
        parts.append("/" + _shorten_url_path(path))
    if question_mark:
        parts.append("?" + REDACTED)
    if hash_sign:
        parts.append("#" + REDACTED)
    parts.append(tail)
    return "".join(parts)


def _shorten_url_path(path: str) -> str:
    """Keep a short plain first segment ("mcp", "v1"); the rest may hold a token."""
    first, slash, rest = path.partition("/")
    if not first and not rest:
        return ""
    if not _PLAIN_SEGMENT.fullmatch(first):
        return PATH_MARKER
    if rest:
        return first + "/" + PATH_MARKER
    return first + slash


def _path_or_word(match: re.Match[str]) -> str:
    word, tail = _split_trailing(match.group())
    segments = [segment for segment in word.replace("\\", "/").split("/") if segment]
    has_extension = bool(segments) and _FILE_EXTENSION.search(segments[-1]) is not None
    if word.startswith(("~", "./", "../", ".\\", "..\\")):
        is_path = True
    elif word.startswith(("/", "\\")):
        is_path = len(segments) >= 2 or has_extension  # "/etc/passwd", not a route "/mcp"
    else:
        is_path = has_extension  # "secret/file.txt", not "tools/call"
    return PATH_MARKER + tail if is_path else match.group()


def _redact_sk_key(match: re.Match[str]) -> str:
    return REDACTED if _KEY_BODY.search(match.group()) else match.group()


def _redact_pair(match: re.Match[str]) -> str:
    value = match.group("value")
    quote = value[0] if value[0] in "\"'" else ""
    return match.group("key") + quote + REDACTED + quote


def _redact_credential(match: re.Match[str]) -> str:
    credential = match.group("credential")
    if credential.isalpha() and (credential.islower() or credential.istitle()):
        return match.group()  # prose: "bearer token", "Basic Auth"
    return match.group("scheme") + " " + REDACTED


def _redact_opaque(match: re.Match[str]) -> str:
    # Words and identifiers this long rarely hold a digit; keys, hashes and ids do.
    return REDACTED if _DIGIT.search(match.group()) else match.group()


def _replace(pattern: re.Pattern[str], marker: str, text: str) -> str:
    """Replace each match by ``marker``, keeping the punctuation that ends the sentence."""
    return pattern.sub(lambda match: marker + _split_trailing(match.group())[1], text)


def _split_trailing(text: str) -> tuple[str, str]:
    core = text.rstrip(_TRAILING_PUNCTUATION)
    return core, text[len(core) :]


def _cap(text: str, max_chars: int, cut: bool) -> str:
    if len(text) <= max_chars and not cut:
        return text
    if len(text) < max_chars:
        return text + ELLIPSIS
    head = text[: max_chars - len(ELLIPSIS)]
    if text[len(head)] != " ":
        # Drop the cut word: a piece of a marker or a key would read differently next time.
        head = head.rpartition(" ")[0]
    return head.rstrip() + ELLIPSIS
