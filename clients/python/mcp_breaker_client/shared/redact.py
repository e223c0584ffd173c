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
- what follows a credential word in other syntaxes, the word staying: an option naming a
  secret (``--password X``, ``--api-key X``, ``-passin pass:X``), the short option of a
  command that takes a password there (``sshpass -p``, ``docker login -p``, ``redis-cli -a``,
  ``sqlcmd -P``, ``ldapsearch -w``; not ``ssh -p 22``), a user and password in one option
  (``curl -u user:pass``, ``-U user%pass``), an XML element or a named value naming a secret
  (``<password>X</password>``, ``<add key="Password" value="X"/>``, ``name: DB_PASSWORD
  value: X``), a key name in another language or with letters outside ASCII, compared
  without its accents (``pässword=``, ``contraseña:``, ``mot_de_passe=``, ``密码=``), and a
  verb of setting (``password was reset to X``, ``changed from X to Y``). The words of
  eleven languages are in :mod:`mcp_breaker_client.shared.secret_words`;
- keys with the prefixes public secret-scanning rule sets key on (Stripe ``sk_live_``,
  SendGrid ``SG.``, npm, PyPI, Hugging Face, Vault, Grafana, ... see ``SCANNER_KEY``), and a
  run of 20+ letters and digits that mixes upper case, lower case and digits and changes
  between them at 40% or more of its steps, as random keys do and names do not;
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
cookie, pin, otp, ...; mot de passe, Passwort, contraseña, senha, wachtwoord, пароль, jeton,
clé API, ... of ``secret_words``; a plural or a glued prefix such as ``db_password`` or
``X-Api-Key`` too). Between it and the value may stand ``:`` or ``=`` (a field),
``is``/``was``/``equals``/``is now``/``has been`` or a copula of another language (``est``,
``ist``, ``es``, ``é``, ``è``; optionally ``set to``), a verb of setting (``was reset to``:
the value goes unless it is a stop word), or ``for``/``of`` [``user``/``account``] *name*
followed by a field or a copula ("password for user bob is x": the name stays). The value
is the next word, or a quoted string. In Chinese, Japanese and Korean the value is the run
of another script right after the word and its particle (``密码是abc123``,
``パスワードはx1です``), and goes unless it is a stop word. It becomes ``[REDACTED]`` when

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

The patterns (``SCANNER_KEY``, ``_WORD_VALUE``, ...) are in
:mod:`mcp_breaker_client.shared.redact_patterns`; the prose words (``_PROSE_KEYWORDS``,
``_PROSE_STOP_WORDS``, ...) and the rule above in :mod:`mcp_breaker_client.shared.redact_prose`.
This module runs them in turn (``_scrub``) and cuts the result.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from itertools import pairwise

from mcp_breaker_client.shared.redact_patterns import (
    ANY_PAIR,
    AUTH_CREDENTIAL,
    BARE_PAIR,
    DIGIT,
    EMAIL,
    EMAIL_MARKER,
    ENGLISH_ENDINGS,
    ENV_ASSIGNMENT,
    ESCAPED_PAIR,
    FILE_EXTENSION,
    FLAG_VALUE,
    FOREIGN_ENDINGS,
    FOREIGN_NAMES,
    GLUED_PASSWORD,
    KEY_BODY,
    MARKED_KEYS,
    MIN_CLASS_CHANGES,
    MYSQL_COMMAND,
    NAMED_VALUE,
    OPAQUE_RUN,
    PASSWORD_COMMAND,
    PASSWORD_OPTION,
    PASSWORD_OPTIONS,
    PATH_MARKER,
    PLAIN_SEGMENT,
    PREFIXED_KEY,
    PRIVATE_KEY_BLOCK,
    QUOTED_PAIR,
    REDACTED,
    REPLACEMENT_CHARACTER,
    SCANNER_KEY,
    SK_KEY,
    SLASHED_WORD,
    TOKEN_RUN,
    TRAILING_PUNCTUATION,
    UNMARKED_LETTERS,
    UNPRINTABLE,
    URL,
    USER_PASSWORD,
    WINDOWS_PATH,
    WORD_SEPARATORS,
    XML_ELEMENT,
    XML_NAME_ATTRIBUTE,
)
from mcp_breaker_client.shared.redact_prose import (
    CJK_CHARACTER,
    CJK_KEY,
    PROSE_TRAILING,
    redact_cjk_value,
    redact_prose,
    trailing,
)

# redact's API. The markers are defined with the patterns: redact_prose writes them too, and
# could not import them from here.
__all__ = [
    "DEFAULT_MAX_CHARS",
    "ELLIPSIS",
    "EMAIL_MARKER",
    "PATH_MARKER",
    "REDACTED",
    "SCAN_FACTOR",
    "redact",
]

DEFAULT_MAX_CHARS = 300  # characters: a line a model can read, not a log dump
# Scrubbing mostly shortens text (indentation, URL paths, tracebacks), so four times the
# cap is enough to fill it, and it bounds the work on megabyte-sized errors.
SCAN_FACTOR = 4

ELLIPSIS = "…"
# What the last texts redacted to, by the part of each that is read (at most SCAN_FACTOR
# times max_chars characters): the same error comes again and again, as a dead tool
# answers every call alike and each layer of one call (a framework's span, the SDK's)
# repeats it, and scrubbing one costs tens of microseconds of regular expressions.
REDACTED_TEXTS_KEPT = 512


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
    return _redact_read_part(text[:scan_limit] if cut else text, cut, max_chars)


@functools.lru_cache(maxsize=REDACTED_TEXTS_KEPT)
def _redact_read_part(read: str, cut: bool, max_chars: int) -> str:
    """``redact`` of a text whose first ``SCAN_FACTOR * max_chars`` characters are
    ``read``, ``cut`` if it went on: all the result depends on."""
    window = " ".join(read.split())
    if cut:
        window = window.rpartition(" ")[0]  # the last word may be half a secret
    window = UNPRINTABLE.sub(REPLACEMENT_CHARACTER, window)
    return _cap(_scrub(window), max_chars, cut)


def _scrub(text: str) -> str:
    # Keys first: a key inside a pair, a URL or a PEM block is gone whatever parses next.
    text = PREFIXED_KEY.sub(REDACTED, text)
    for mark, pattern in MARKED_KEYS:
        if mark in text:
            text = pattern.sub(REDACTED, text)
    text = SCANNER_KEY.sub(_redact_scanner_key, text)
    text = SK_KEY.sub(_redact_sk_key, text)
    text = PRIVATE_KEY_BLOCK.sub(REDACTED, text)
    text = ESCAPED_PAIR.sub(_redact_pair, text)
    # Before the pairs: 'key="Password"' is a pair whose value names the secret next to it.
    text = XML_ELEMENT.sub(_redact_xml_element, text)
    text = NAMED_VALUE.sub(_redact_named_value, text)
    text = QUOTED_PAIR.sub(_redact_pair, text)
    text = BARE_PAIR.sub(_redact_pair, text)
    text = ENV_ASSIGNMENT.sub(_redact_pair, text)
    text = _redact_foreign_pairs(text)
    # What follows a credential word on a command line, then in prose.
    text = USER_PASSWORD.sub(_redact_user_password, text)
    text = FLAG_VALUE.sub(_redact_word_value, text)
    # Prose before schemes: a scheme pair "Basic Basic" kept whole must not hide what
    # follows once prose has removed the word before it.
    text = redact_prose(text)
    if CJK_CHARACTER.search(text) is not None:
        text = CJK_KEY.sub(redact_cjk_value, text)
    text = _redact_credentials(text)
    # A URL is rewritten whole; the plain-text rules must not see its host:port or path.
    pieces: list[str] = []
    position = 0
    for url in URL.finditer(text):
        pieces.append(_scrub_plain(text[position : url.start()]))
        pieces.append(_scrub_url(url.group()))
        position = url.end()
    pieces.append(_scrub_plain(text[position:]))
    # Last: where a command line ends (an unquoted "|", ";" or "&") is only settled once
    # every other pass has had its say; earlier, a pass that removed the end would make
    # the next redact() see a longer command, and redact() would not be idempotent.
    text = MYSQL_COMMAND.sub(_redact_mysql_command, "".join(pieces))
    return PASSWORD_COMMAND.sub(_redact_password_command, text)


def _scrub_plain(text: str) -> str:
    text = _replace(EMAIL, EMAIL_MARKER, text)
    # Opaque runs before paths: a run ends at "." where a path goes on, so paths must be
    # judged on what is left, or the next pass would see a different word.
    text = OPAQUE_RUN.sub(_redact_opaque, text)
    text = TOKEN_RUN.sub(_redact_token_run, text)
    text = _replace(WINDOWS_PATH, PATH_MARKER, text)
    return SLASHED_WORD.sub(_path_or_word, text)


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
    parts.append(OPAQUE_RUN.sub(_redact_opaque, host_port))
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
    if not PLAIN_SEGMENT.fullmatch(first):
        return PATH_MARKER
    if rest:
        return first + "/" + PATH_MARKER
    return first + slash


def _path_or_word(match: re.Match[str]) -> str:
    word, tail = _split_trailing(match.group())
    segments = [segment for segment in word.replace("\\", "/").split("/") if segment]
    has_extension = bool(segments) and FILE_EXTENSION.search(segments[-1]) is not None
    if word.startswith(("~", "./", "../", ".\\", "..\\")):
        is_path = True
    elif word.startswith(("/", "\\")):
        is_path = len(segments) >= 2 or has_extension  # "/etc/passwd", not a route "/mcp"
    else:
        is_path = has_extension  # "secret/file.txt", not "tools/call"
    return PATH_MARKER + tail if is_path else match.group()


def _redact_sk_key(match: re.Match[str]) -> str:
    return REDACTED if KEY_BODY.search(match.group()) else match.group()


def _redact_pair(match: re.Match[str]) -> str:
    value = match.group("value")
    quote = value[:2] if value.startswith('\\"') else value[0] if value[0] in "\"'" else ""
    return match.group("key") + quote + REDACTED + quote


def _redact_mysql_command(match: re.Match[str]) -> str:
    return GLUED_PASSWORD.sub(_redact_pair, match.group())


def _redact_password_command(match: re.Match[str]) -> str:
    command = match.group("command")
    option = PASSWORD_OPTIONS[PASSWORD_OPTION[command] if command else "p"]
    return option.sub(_redact_pair, match.group())


def _redact_scanner_key(match: re.Match[str]) -> str:
    body = match.group("body")
    looks_like_a_key = DIGIT.search(body) is not None or (
        body.lower() != body and body.upper() != body
    )
    return REDACTED if looks_like_a_key else match.group()


def _redact_word_value(match: re.Match[str]) -> str:
    """The value of ``match`` (a ``_WORD_VALUE``) redacted; what ends a sentence stays."""
    raw = match.group("value")
    head = match.group()[: match.start("value") - match.start()]
    if raw[0] in "\"'":
        return head + raw[0] + REDACTED + raw[0]
    if not any(char.isalnum() for char in raw):
        return match.group()  # "--token :" names no value
    return head + REDACTED + trailing(raw)


def _redact_user_password(match: re.Match[str]) -> str:
    if match.group("user").isdigit() and match.group("value").rstrip(PROSE_TRAILING).isdigit():
        return match.group()  # "-u 1000:1000": a uid and a gid
    return _redact_word_value(match)


def _redact_named_value(match: re.Match[str]) -> str:
    if not _names_secret(match.group("name"), english=True):
        return match.group()
    return _redact_word_value(match)


def _redact_xml_element(match: re.Match[str]) -> str:
    names = [match.group("tag").rpartition(":")[2]]
    attributes = match.group("attributes") or ""
    names += [found.group("name") for found in XML_NAME_ATTRIBUTE.finditer(attributes)]
    named = any(_names_secret(name, english=True) for name in names)
    if not named or not match.group("value").strip():
        return match.group()
    whole, start = match.group(), match.start()
    return whole[: match.start("value") - start] + REDACTED + whole[match.end("value") - start :]


def _redact_foreign_pairs(text: str) -> str:
    pieces: list[str] = []
    done = search_from = 0
    while (match := ANY_PAIR.search(text, search_from)) is not None:
        name = match.group("name")
        if not _names_secret(name, english=not name.isascii()):
            # The value may itself start a pair: "error: pässword=x".
            search_from = match.end("key")
            continue
        pieces.append(text[done : match.start()])
        pieces.append(name + _redact_pair(match))
        done = search_from = match.end()
    pieces.append(text[done:])
    return "".join(pieces)


@functools.lru_cache(maxsize=1024)  # error texts repeat their key names
def _names_secret(name: str, *, english: bool) -> bool:
    """Whether a key name, folded (``_fold``), ends in a credential word of any language."""
    parts = [part for part in WORD_SEPARATORS.split(_fold(name)) if part]
    if not parts:
        return False
    compact = "".join(parts)
    endings = _FOLDED_FOREIGN_ENDINGS + (_FOLDED_ENGLISH_ENDINGS if english else ())
    return compact.endswith(endings) or parts[-1] in _FOLDED_FOREIGN_NAMES


def _fold(text: str) -> str:
    """``text`` without accents or other marks, in lower case: "Pąsswörd" -> "password"."""
    if text.isascii():
        return text.lower()
    decomposed = unicodedata.normalize("NFKD", text)
    bare = "".join(char for char in decomposed if not unicodedata.category(char).startswith("M"))
    return bare.lower().translate(UNMARKED_LETTERS)


_FOLDED_FOREIGN_ENDINGS = tuple(_fold(word) for word in FOREIGN_ENDINGS)
_FOLDED_ENGLISH_ENDINGS = tuple(_fold(word) for word in ENGLISH_ENDINGS)
_FOLDED_FOREIGN_NAMES = frozenset(_fold(word) for word in FOREIGN_NAMES)


def _redact_token_run(match: re.Match[str]) -> str:
    run = match.group()
    if not (DIGIT.search(run) and run.lower() != run and run.upper() != run):
        return run
    classes = [
        "d" if char.isdigit() else "u" if char.isupper() else "l" if char.islower() else "o"
        for char in run
    ]
    changes = sum(first != second for first, second in pairwise(classes))
    return REDACTED if changes >= MIN_CLASS_CHANGES * (len(run) - 1) else run


def _redact_credentials(text: str) -> str:
    pieces: list[str] = []
    done = search_from = 0
    while (match := AUTH_CREDENTIAL.search(text, search_from)) is not None:
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


def _redact_opaque(match: re.Match[str]) -> str:
    # Words and identifiers this long rarely hold a digit; keys, hashes and ids do.
    return REDACTED if DIGIT.search(match.group()) else match.group()


def _replace(pattern: re.Pattern[str], marker: str, text: str) -> str:
    """Replace each match by ``marker``, keeping the punctuation that ends the sentence."""
    return pattern.sub(lambda match: marker + _split_trailing(match.group())[1], text)


def _split_trailing(text: str) -> tuple[str, str]:
    core = text.rstrip(TRAILING_PUNCTUATION)
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
