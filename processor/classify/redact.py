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
  ``Basic`` -> the key stays, the value becomes ``[REDACTED]``. ``pass``, ``pw`` and ``key``
  name a secret as a whole part of a key name (``dbPass``, ``DB-PASS``, ``accessKeyId``; not
  ``compass`` or ``hotkey``), and alone ``pass`` and ``key`` only before ``=`` ("key: not
  found" stays). The separator may be fullwidth (``＝``) or URL-encoded (``%3D``), the
  quotes JSON-escaped (``{\\"client_secret\\":\\"x\\"}``). A bare value runs to the next space,
  over the ``&``, ``;`` and ``,`` a password may hold, but not into the next ``key=`` of a
  query string or form body (``a=1&password=x&b=2``: only ``x`` goes);
- the password glued to a MySQL client's flag (``mysql -u root -pS3cret``) -> ``-p[REDACTED]``;
- secrets written in prose, the word after a secret keyword (``password hunter2x``, ``the
  token tkn9f8e7d6c5``, ``api key k3y-7781``, ``PIN 4921``, ``otp: 883921``, ``my password is
  Tr0ub4dor&3``) -> the keyword stays, the word becomes ``[REDACTED]``. See "Prose" below;
- in URLs: userinfo, query and fragment -> ``[REDACTED]``; of the path only a short plain
  first segment stays (``/mcp``), the rest -> ``<path>``: webhooks carry secrets there;
- filesystem paths -> ``<path>``: absolute with two segments or a file extension, ``~/``,
  ``./``, Windows and UNC, relative ending in a file name (``secret/file.txt``);
- e-mail addresses -> ``<email>``.

The patterns err towards removing too much: a false positive costs a word, a false negative
leaks a credential. The result is one printable line (whitespace runs become a space;
controls, lone surrogates and bidi overrides become U+FFFD) of at most ``max_chars``, cut
between words with a trailing "…". Only the first ``SCAN_FACTOR * max_chars`` characters
are read, and no pattern repeats a group that could match the same text in two ways (the
parts of a repeated group start with different characters), so the cost is bounded
whatever the input. A word cut by either limit is dropped whole, since half a secret
matches no pattern.
``redact`` is idempotent. It takes any ``str``; only ``max_chars`` below 1 raises.

Prose. A keyword is one of ``_PROSE_KEYWORDS`` (password, passphrase, token, secret, api key,
access key, private key, auth token, authorization, bearer, credential, session id, session,
cookie, pin, otp, ...; a plural or a glued prefix such as ``db_password`` or ``X-Api-Key``
too). Between it and the value may stand ``:`` or ``=`` (a field), ``is``/``was``/``equals``
(a copula, optionally ``set to``), or ``for``/``of`` [``user``/``account``] *name* followed by
a field or a copula ("password for user bob is x": the name stays). The value is the next
word, or a quoted string. It becomes ``[REDACTED]`` when

- it follows a field (``otp: 883921``; a quoted key such as ``"pin":`` counts only with a
  secret-shaped or quoted value, so ``'get_token': disk full`` stays), or it is quoted, or
- it is secret-shaped: it holds a digit or a character other than a letter
  (``correct-horse-battery-staple``, ``Tr0ub4dor&3``), mixes case in a way camel-case names
  do not (``hUnTeR``; ``TokenExpiredError`` stays), or runs to 20 letters or more, or
- it follows a password word (password, passwd, passphrase, passcode, pwd) and is not one
  of the ordinary follow-words in ``_PROSE_STOP_WORDS`` ("password incorrect", "password
  authentication failed", "password is too short" stay; "password swordfish" goes).

So a plain word after any other keyword stays: "Unauthorized: token expired", "invalid api
key", "upstream MCP session is closed", "token limit exceeded", "session closed" read as
written. A word starting with a bracket, one without a letter or digit, another keyword or
an auth scheme ("Authorization: Bearer ...") is not a value. What gets through: a plain
dictionary word after a keyword other than a password word ("the token is swordfish",
"bearer token xyz"), a password-word value that happens to be a stop word ("password
expired"), a secret that no keyword introduces and no shape rule catches, and what follows
the first space of an unquoted value (``passwd=pa ss`` keeps ``ss``).
"""

from __future__ import annotations

import re
from itertools import pairwise

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

# A key that ends in one of these words names a secret; "Unauthorized:" does not. They may
# be glued to what comes before them: "PGPASSWORD", "db.password", "x-api-key".
_SECRET_KEY_WORDS = (
    "password", "passwd", "pwd", "passphrase", "secret", "token", "api_key", "apikey",
    "api-key", "access_key", "private_key", "credential", "credentials", "auth",
    "authorization", "session", "session_id", "sessionid", "session-id", "cookie",
    "signature",
)  # fmt: skip
_KEY_WORD = "(?:" + "|".join(re.escape(word) for word in _SECRET_KEY_WORDS) + ")"
# Short words that end many ordinary words ("compass", "bypass", "hotkey", "monkey"): they
# name a secret only as a whole part of the key name, at its start or after "_", "-", "."
# or a camel-case step ("pass", "db_pass", "DB-PASS", "dbPass", "secretAccessKey").
_SHORT_KEY_WORDS = ("pass", "pw", "key")
_SHORT_KEY_WORD = "(?:" + "|".join(_SHORT_KEY_WORDS) + ")"
# Their first letters: a cheap test before the look-behinds of _PART_START, at every letter.
_SHORT_KEY_FIRST = "(?=[" + "".join(sorted({word[0] for word in _SHORT_KEY_WORDS})) + "])"
# Where a part of a key name starts: after no letter or digit (or after a form body's
# "%26"), or at a camel-case step ("dbPass", "APIKey").
_PART_START = r"(?:(?<![A-Za-z0-9])|(?<=%26)|(?-i:(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])))"
# A part after the secret word that still names the secret: "accessKeyId", "token_value".
_KEY_SUFFIX = r"(?:(?:[_.-]|(?-i:(?=[A-Z])))(?:id|value|str|string|b64|base64|hex|raw|plain))"
# Alone, the English ones are keys only before "=": "key: not found" is prose, "key=abc" and
# "pw: abc" are not.
_ENGLISH_SHORT_KEY_WORDS = ("pass", "key")
_SHORT_KEY_BEFORE_COLON = (
    "(?!(?:" + "|".join(_ENGLISH_SHORT_KEY_WORDS) + rf"){_KEY_SUFFIX}?\s*[:：])"
)
# "=" or ":", fullwidth too, and "%3D", the "=" of a URL-encoded form body.
_SEPARATOR = r"(?:[:=＝：]|%3D)"
_ASSIGN = r"(?:[=＝]|%3D)"
_NOT_REDACTED = r"(?!\[REDACTED\])"
# A value: quoted (an unclosed quote runs to the end), or a word. A password may hold "&",
# ";" or "," ("Tr0ub4dor&3", "abc;def123"): they join the word on unless they end it
# (before a space or a quote) or another "key=" of a query string or form body follows
# ("a=1&password=x&b=2", "password%3Dx%26user%3Db"). The two parts share no character, so
# the repetition cannot backtrack. "…" is the cap's own mark and never a value, so cutting
# after "token:" stays stable.
_VALUE_CHAR = r"""[^\s"',;&)\]}…%]"""
_LONE_PERCENT = rf"%(?!26[\w.-]*{_ASSIGN})"  # "%26" before a key is a form body's "&"
# One character, then runs of the rest split at each "%" ("unrolled": no run is ambiguous).
_VALUE_PART = rf"(?:{_VALUE_CHAR}|{_LONE_PERCENT}){_VALUE_CHAR}*(?:{_LONE_PERCENT}{_VALUE_CHAR}*)*"
_VALUE_JOIN = rf"""[,;&)\]}}]++(?![\w.-]*{_ASSIGN}){_NOT_REDACTED}(?=[^\s"',;&)\]}}…])"""
_VALUE = rf"""(?:"[^"]*"?|'[^']*'?|{_VALUE_PART}(?:{_VALUE_JOIN}{_VALUE_PART})*)"""
# A quoted key must have a quoted value: "Error calling tool 'get_token': disk full". In a
# double-quoted value, as in JSON, a backslash escapes the next character: "ab\"cd" is one.
_QUOTED_PAIR = re.compile(
    rf"""(?P<key>["'][\w.-]*?{_KEY_WORD}["']\s*{_SEPARATOR}\s*)"""
    r"""(?P<value>"(?:[^"\\]|\\.)*"?|'[^']*'?)""",
    re.IGNORECASE,
)
# JSON inside a JSON string escapes its quotes: {\"client_secret\":\"x\",\"pin\":1}. Such a
# key is never prose, so a bare value (a number, true, null) goes too.
_ESCAPED_PAIR = re.compile(
    rf"""(?P<key>\\"[\w.-]*?{_KEY_WORD}\\"\s*{_SEPARATOR}\s*){_NOT_REDACTED}"""
    r"""(?P<value>\\"[^"]*"?|[\w.+-]+)""",
    re.IGNORECASE,
)
# "Authorization: Bearer x" keeps its scheme; a scheme word alone is not a credential.
# "Basic/x.txt" is no scheme word: a later pass would make it "<path>", then a value; so
# the scheme ends where a path, e-mail or key could not go on ("Bearer…" is the cap's).
_SCHEME = r"(?:bearer|basic|token|digest)"
# A key name starts after no word character, or after the "%26" ("&") of a form body.
_KEY_NAME = (
    rf"(?:(?<![\w.-])|(?<=%26)){_SHORT_KEY_BEFORE_COLON}"
    rf"[\w.-]*?(?:{_KEY_WORD}|{_SHORT_KEY_FIRST}{_PART_START}{_SHORT_KEY_WORD})"
    rf"{_KEY_SUFFIX}?(?![\w-])"
)
_BARE_PAIR = re.compile(
    rf"(?P<key>{_KEY_NAME}\s*{_SEPARATOR}\s*(?:{_SCHEME}\s+)?)"
    rf"{_NOT_REDACTED}(?!{_SCHEME}(?![\w.~/\\@+-]))(?P<value>{_VALUE})",
    re.IGNORECASE,
)
# A MySQL client's command up to the shell's next "|", ";" or "&"; quoted arguments whole.
_MYSQL_COMMAND = re.compile(
    r"""\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlcheck|mysqlshow|mysqlsh|mariadb)\b"""
    r"""[^|;&'"]*(?:(?:'[^']*'?|"[^"]*"?)[^|;&'"]*)*"""
)
# In it, a password glued to its flag: "mysql -u root -pS3cret db". "-p" alone prompts, "-P
# 3306" is the port; a command of another program ("cp -pr") has no such flag.
_GLUED_PASSWORD = re.compile(
    rf"""(?P<key>(?<=\s)-p){_NOT_REDACTED}(?P<value>'[^']*'?|"[^"]*"?|[^\s…]+)"""
)
_ENV_ASSIGNMENT = re.compile(
    rf"(?<![\w.-])(?P<key>[A-Z][A-Z0-9_]+=){_NOT_REDACTED}(?P<value>{_VALUE})"
)
_AUTH_CREDENTIAL = re.compile(
    r"\b(?P<scheme>bearer|basic)\s+(?P<credential>[A-Za-z0-9._~+/=-]+)", re.IGNORECASE
)

# Prose: a keyword, then a filler, then a word. See the module docstring for the rule.
# Longer forms first, so "session id" is read before "session" and "auth token" before "auth".
_PROSE_KEYWORDS = (
    "password", "passwd", "passphrase", "passcode", "pwd", "token", "secret", "api key",
    "apikey", "access key", "secret key", "private key", "signing key", "encryption key",
    "master key", "license key", "ssh key", "auth token", "access token", "refresh token",
    "id token", "session token", "bearer token", "client secret", "authorization", "auth",
    "bearer", "credential", "session id", "sessionid", "session", "cookie", "pin", "otp",
    "totp", "mfa code", "2fa code", "verification code", "security code", "one-time code",
    "signature",
)  # fmt: skip
# Their values are often plain words ("swordfish"), so any word goes but the stop words.
_PASSWORD_WORDS = frozenset({"password", "passwd", "passphrase", "passcode", "pwd"})
# Words that follow a password word in error texts. Seen on a value, they keep it readable.
_PROSE_STOP_LIST = (
    "a", "an", "the", "and", "or", "but", "not", "no", "nor", "is", "was", "are", "were", "be",
    "been", "being", "has", "have", "had", "does", "do", "did", "will", "would", "can", "cannot",
    "could", "should", "must", "may", "might", "shall", "to", "for", "from", "of", "in", "on",
    "at", "by", "with", "without", "as", "if", "when", "while", "since", "than", "that", "this",
    "these", "those", "too", "also", "still", "now", "then", "only", "so", "yet", "already",
    "again", "here", "there", "none", "null", "nil", "empty", "blank", "unset", "set", "yes",
    "required", "missing", "needed", "needs", "provided", "supplied", "given", "entered",
    "specified", "expected", "invalid", "incorrect", "wrong", "bad", "weak", "short", "long",
    "correct", "valid", "ok", "okay", "good", "expired", "expires", "expiring", "expiry",
    "revoked", "rejected", "denied", "refused", "mismatch", "mismatched", "change", "changed",
    "changes", "changing", "reset", "resets", "update", "updated", "updates", "rotated",
    "rotation", "policy", "policies", "length", "hash", "hashed", "hashing", "encrypted",
    "encryption", "protected", "protection", "field", "fields", "prompt", "prompts", "manager",
    "login", "logon", "sign", "signin", "auth", "authentication", "authenticated", "authorization",
    "verification", "verify", "verified", "validation", "validated", "check", "checks", "checking",
    "complexity", "strength", "requirement", "requirements", "rule", "rules", "file", "files",
    "store", "storage", "vault", "attempt", "attempts", "retry", "retries", "failure", "failures",
    "failed", "fails", "error", "errors", "unknown", "mode", "type", "format", "hint", "input",
    "dialog", "entry", "form", "reuse", "reused", "history", "age", "lifetime", "limit", "limits",
    "exceeded", "locked", "lockout", "disabled", "enabled", "accepted", "match", "matches",
    "matched", "contains", "containing", "cracked", "leaked", "compromised", "contain",
)  # fmt: skip
_PROSE_STOP_WORDS = frozenset(_PROSE_STOP_LIST)
# "Authorization: Bearer ..." names its scheme next; the scheme is not the credential.
_SCHEME_WORDS = frozenset({"bearer", "basic", "token", "digest", "negotiate", "ntlm"})
_PROSE_KEY = re.compile(
    r"(?<![\w.-])(?:[\w.-]*[_.-])?(?P<word>"
    + "|".join(
        re.escape(word).replace(r"\ ", "[ _-]?").replace(r"\-", "[ _-]?")
        for word in sorted(_PROSE_KEYWORDS, key=len, reverse=True)
    )
    + r")s?(?![\w-])(?P<quote>[\"']?)",
    re.IGNORECASE,
)
_PROSE_FOR = re.compile(r"\s+(?:for|of)\s+(?:user\s+|account\s+)?[^\s:=]+", re.IGNORECASE)
_PROSE_FIELD = re.compile(r"\s*[:=]\s*")
_PROSE_COPULA = re.compile(r"\s+(?:is|was|equals)(?:\s+set\s+to)?\s+|\s+set\s+to\s+", re.IGNORECASE)
_PROSE_GAP = re.compile(r"\s+")
# A quoted string (an unclosed quote runs to the end, as in _VALUE), or the next word whole:
# a password may hold any symbol ("Tr0ub4dor&3"). "…" is the cap's own mark, never a value.
_PROSE_VALUE = re.compile(r"""\"[^\"]*\"?|'[^']*'?|[^\s…]+""")
_PROSE_TRAILING = ".,;:!?)]}\"'"  # ends the sentence or the enclosing brackets
_MARKERS = (REDACTED, PATH_MARKER, EMAIL_MARKER)
_MIN_LETTER_RUN = 20  # letters-only words this long are keys, not English

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
    text = _ESCAPED_PAIR.sub(_redact_pair, text)
    text = _QUOTED_PAIR.sub(_redact_pair, text)
    text = _BARE_PAIR.sub(_redact_pair, text)
    text = _ENV_ASSIGNMENT.sub(_redact_pair, text)
    # Prose before schemes: a scheme pair "Basic Basic" kept whole must not hide what
    # follows once prose has removed the word before it.
    text = _redact_prose(text)
    text = _redact_credentials(text)
    # A URL is rewritten whole; the plain-text rules must not see its host:port or path.
    pieces: list[str] = []
    position = 0
    for url in _URL.finditer(text):
        pieces.append(_scrub_plain(text[position : url.start()]))
        pieces.append(_scrub_url(url.group()))
        position = url.end()
    pieces.append(_scrub_plain(text[position:]))
    # Last: where a command line ends (an unquoted "|", ";" or "&") is only settled once
    # every other pass has had its say; earlier, a pass that removed the end would make
    # the next redact() see a longer command, and redact() would not be idempotent.
    return _MYSQL_COMMAND.sub(_redact_mysql_command, "".join(pieces))


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
    quote = value[:2] if value.startswith('\\"') else value[0] if value[0] in "\"'" else ""
    return match.group("key") + quote + REDACTED + quote


def _redact_mysql_command(match: re.Match[str]) -> str:
    return _GLUED_PASSWORD.sub(_redact_pair, match.group())


def _redact_credentials(text: str) -> str:
    pieces: list[str] = []
    done = search_from = 0
    while (match := _AUTH_CREDENTIAL.search(text, search_from)) is not None:
        credential = match.group("credential")
        if credential.isalpha() and (credential.islower() or credential.istitle()):
            # Prose: "bearer token", "Basic Auth". The word may itself be a scheme with a
            # credential after it ("Basic Basic dXNl"), so the search goes on from it.
            search_from = match.start("credential")
            continue
        pieces.append(text[done : match.start()])
        pieces.append(match.group("scheme") + " " + REDACTED)
        done = search_from = match.end()
    pieces.append(text[done:])
    return "".join(pieces)


def _redact_prose(text: str) -> str:
    """Redact the word after each prose keyword that the rule in the module docstring names."""
    pieces: list[str] = []
    done = 0  # text[:done] is in pieces
    search_from = 0
    # Each turn moves past a keyword; each match reads only the few words after it.
    while (key := _PROSE_KEY.search(text, search_from)) is not None:
        search_from = key.end()
        found = _prose_value(text, key)
        if found is None:
            continue
        value, always = found
        raw = value.group()
        quote = raw[0] if raw[0] in "\"'" else ""
        content = raw[1:].rstrip(quote) if quote else raw
        marker = next((marker for marker in _MARKERS if content.startswith(marker)), "")
        if marker:
            # Already redacted. What is glued after the marker ("[REDACTED],api key x") is
            # read on, as it is once a later pass has removed this keyword.
            search_from = value.start() + len(quote) + len(marker)
            continue
        # A later pass may turn part of a word into a marker ("@./" -> "@<path>"); judged
        # without its markers (and before the "]" of one is taken for punctuation), the word
        # reads the same the next time.
        bare = _without_markers(content)
        if not quote:
            bare = bare.rstrip(_PROSE_TRAILING)
        if not _is_prose_value(bare, quoted=bool(quote)):
            continue  # another keyword or a scheme word may follow: search from the key
        strong = key.group("word").lower() in _PASSWORD_WORDS
        if not (always or quote or _is_secret_shaped(bare) or (strong and not _is_stop(bare))):
            continue
        pieces.append(text[done : value.start()])
        pieces.append(quote + REDACTED + quote if quote else REDACTED + _trailing(raw))
        done = search_from = value.end()
    pieces.append(text[done:])
    return "".join(pieces)


def _prose_value(text: str, key: re.Match[str]) -> tuple[re.Match[str], bool] | None:
    """The value word after ``key``, and whether its filler makes it a value whatever it is."""
    position = key.end()
    if key.group("quote"):
        # A quoted key is JSON or a quoted name: "pin": 4921 goes, 'get_token': disk stays.
        field = _PROSE_FIELD.match(text, position)
        if field is None:
            return None
        value = _PROSE_VALUE.match(text, field.end())
        return None if value is None else (value, False)
    clause = _PROSE_FOR.match(text, position)
    if clause is not None:
        position = clause.end()  # "password for user bob is x": the name stays
    field = _PROSE_FIELD.match(text, position)
    if field is not None:
        value = _PROSE_VALUE.match(text, field.end())
        return None if value is None else (value, True)
    filler = _PROSE_COPULA.match(text, position)
    if filler is None:
        if clause is not None:
            return None  # "password for user bob rejected": no value named
        filler = _PROSE_GAP.match(text, position)
        if filler is None:
            return None
    value = _PROSE_VALUE.match(text, filler.end())
    return None if value is None else (value, False)


def _is_prose_value(word: str, *, quoted: bool) -> bool:
    if not word or word[0] in "([{<" or not any(char.isalnum() for char in word):
        return False  # "(expired)", "-", "<path>": prose or a marker, not a secret
    if quoted:
        return True  # a literal, even 'api key': the cap may cut it to 'api…' next time
    return word.lower() not in _SCHEME_WORDS and _PROSE_KEY.fullmatch(word) is None


def _is_secret_shaped(word: str) -> bool:
    """A digit, a symbol, odd mixed case or a long letter run: no English word looks so."""
    if not word.isalpha() or len(word) >= _MIN_LETTER_RUN:
        return True
    if word.islower() or word.isupper() or word.istitle():
        return False
    # CamelCase names ("TokenExpiredError") start upper and put a lower after each upper.
    camel = word[0].isupper() and not any(
        char.isupper() and not following.islower() for char, following in pairwise(word)
    )
    return not camel or word[-1].isupper()


def _trailing(word: str) -> str:
    """The punctuation that ends ``word``, never part of a marker inside it."""
    ends = [word.rfind(marker) + len(marker) for marker in _MARKERS if marker in word]
    body = word[max(ends, default=0) :]
    return body[len(body.rstrip(_PROSE_TRAILING)) :]


def _without_markers(word: str) -> str:
    for marker in _MARKERS:
        word = word.replace(marker, "")
    return word


def _is_stop(word: str) -> bool:
    return word.lower() in _PROSE_STOP_WORDS


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
