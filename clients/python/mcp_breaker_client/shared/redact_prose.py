"""Secrets written in prose, for :mod:`mcp_breaker_client.shared.redact`: the word after a keyword.

The keywords, what may stand between a keyword and its value, the stop words, their
patterns (compiled once, at import), and the rule that decides whether the word goes, as
the part "Prose" of redact's module docstring describes it; Chinese, Japanese and Korean
by a pattern of their own (``CJK_KEY``).
"""

from __future__ import annotations

import enum
import re
from itertools import pairwise

from mcp_breaker_client.shared import secret_words
from mcp_breaker_client.shared.redact_patterns import (
    EMAIL_MARKER,
    PATH_MARKER,
    REDACTED,
    WORD_SEPARATORS,
)

# Chinese, Japanese and Korean: the word, its particle, then a run of another script.
_CJK_SCRIPT = (
    "\u1100-\u11ff\u3000-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uff00-\uffef"
)
CJK_CHARACTER = re.compile(f"[{_CJK_SCRIPT}]")
CJK_KEY = re.compile(
    "(?P<word>"
    + "|".join(
        re.escape(word).replace(r"\ ", " ?")
        for word in secret_words.CJK_PASSWORD_WORDS + secret_words.CJK_OTHER_WORDS
    )
    + r")\s*(?:"
    + "|".join(secret_words.CJK_PARTICLES)
    + rf")?\s*(?P<value>[^\s{_CJK_SCRIPT}…]+)",
    re.IGNORECASE,
)

# Prose: a keyword, then a filler, then a word. See redact's module docstring for the rule.
# Longer forms first, so "session id" is read before "session" and "auth token" before "auth".
_PROSE_KEYWORDS = (
    "password", "passwd", "passphrase", "passcode", "pwd", "token", "secret", "api key",
    "apikey", "access key", "secret key", "private key", "signing key", "encryption key",
    "master key", "license key", "ssh key", "auth token", "access token", "refresh token",
    "id token", "session token", "bearer token", "client secret", "authorization", "auth",
    "bearer", "credential", "session id", "sessionid", "session", "cookie", "pin", "otp",
    "totp", "mfa code", "2fa code", "verification code", "security code", "one-time code",
    "signature", *secret_words.PASSWORD_WORDS_ABROAD, *secret_words.OTHER_WORDS_ABROAD,
)  # fmt: skip
# Their values are often plain words ("swordfish"), so any word goes but the stop words.
# Compared without spaces, "_" or "-": "mot de passe", "mot_de_passe" and "motdepasse".
_ENGLISH_PASSWORD_WORDS = ("password", "passwd", "passphrase", "passcode", "pwd")
_PASSWORD_WORDS = frozenset(
    WORD_SEPARATORS.sub("", word)
    for word in (*_ENGLISH_PASSWORD_WORDS, *secret_words.PASSWORD_WORDS_ABROAD)
)
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
    "default", "expire", "continue", "value", "values", "now",
)  # fmt: skip
_PROSE_STOP_WORDS = frozenset(_PROSE_STOP_LIST + secret_words.STOP_WORDS_ABROAD)
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
_COPULAS = (
    "is", "was", "equals", "is now", "was now", "has been", "have been", "had been",
    *secret_words.COPULAS_ABROAD,
)  # fmt: skip
_PROSE_COPULA = re.compile(
    r"\s+(?:"
    + "|".join(word.replace(" ", r"\s+") for word in sorted(_COPULAS, key=len, reverse=True))
    + r")(?:\s+set\s+to)?\s+|\s+set\s+to\s+",
    re.IGNORECASE,
)
# A verb of setting before the value ("was reset to X", "has been changed to X", "rotated
# to X", "changed from X to Y"): the value goes unless it is a stop word, whatever the
# keyword ("set to expire" stays).
_PROSE_SET_TO = re.compile(
    r"\s+(?:(?:is|was|were|are|has\s+been|have\s+been|had\s+been|will\s+be|got|been)\s+)?"
    r"(?:re)?(?:set|changed|updated|rotated|generated)\s+(?P<preposition>to|from)\s+",
    re.IGNORECASE,
)
_PROSE_TO = re.compile(r"\s+to\s+", re.IGNORECASE)
_PROSE_GAP = re.compile(r"\s+")
# A quoted string (an unclosed quote runs to the end, as in _VALUE), or the next word whole:
# a password may hold any symbol ("Tr0ub4dor&3"). "…" is the cap's own mark, never a value.
_PROSE_VALUE = re.compile(r"""\"[^\"]*\"?|'[^']*'?|[^\s…]+""")
PROSE_TRAILING = ".,;:!?)]}\"'"  # ends the sentence or the enclosing brackets
_MARKERS = (REDACTED, PATH_MARKER, EMAIL_MARKER)
_MIN_LETTER_RUN = 20  # letters-only words this long are keys, not English


def redact_cjk_value(match: re.Match[str]) -> str:
    """A run of another script after a CJK credential word is its value, unless a stop word."""
    raw = match.group("value")
    bare = _without_markers(raw).rstrip(PROSE_TRAILING)
    if raw.startswith(_MARKERS) or not any(char.isalnum() for char in bare) or _is_stop(bare):
        return match.group()
    return match.group()[: match.start("value") - match.start()] + REDACTED + trailing(raw)


def _compact(word: str) -> str:
    return WORD_SEPARATORS.sub("", word.lower())


class _Filler(enum.Enum):
    """What stands between a prose keyword and its value, and so when the value goes."""

    FIELD = "field"  # ":" or "=": whatever it is
    SET_TO = "set to"  # a verb of setting: unless it is a stop word
    FROM = "from"  # "changed from X": as SET_TO, and the value after the next "to" too
    PLAIN = "plain"  # a copula or a space: as redact's module docstring says


def redact_prose(text: str) -> str:
    """Redact the word after each prose keyword that the rule in redact's module docstring names."""
    pieces: list[str] = []
    done = 0  # text[:done] is in pieces
    search_from = 0
    # Each turn moves past a keyword; each match reads only the few words after it.
    while (key := _PROSE_KEY.search(text, search_from)) is not None:
        search_from = key.end()
        found = _prose_value(text, key)
        strong = _compact(key.group("word")) in _PASSWORD_WORDS
        while found is not None:
            value, filler = found
            found = None
            raw = value.group()
            quote = raw[0] if raw[0] in "\"'" else ""
            content = raw[1:].rstrip(quote) if quote else raw
            marker = next((marker for marker in _MARKERS if content.startswith(marker)), "")
            if marker:
                # Already redacted. What is glued after the marker ("[REDACTED],api key x")
                # is read on, as it is once a later pass has removed this keyword.
                search_from = value.start() + len(quote) + len(marker)
                break
            # A later pass may turn part of a word into a marker ("@./" -> "@<path>"); judged
            # without its markers (and before the "]" of one is taken for punctuation), the
            # word reads the same the next time.
            bare = _without_markers(content)
            if not quote:
                bare = bare.rstrip(PROSE_TRAILING)
            if not _is_prose_value(bare, quoted=bool(quote)):
                break  # another keyword or a scheme word may follow: search from the key
            if not (
                filler is _Filler.FIELD
                or quote
                or _is_secret_shaped(bare)
                or ((strong or filler is not _Filler.PLAIN) and not _is_stop(bare))
            ):
                break
            pieces.append(text[done : value.start()])
            pieces.append(quote + REDACTED + quote if quote else REDACTED + trailing(raw))
            done = search_from = value.end()
            if filler is _Filler.FROM and not trailing(raw):
                # "changed from X to Y": Y is the new secret.
                to = _PROSE_TO.match(text, value.end())
                following = None if to is None else _PROSE_VALUE.match(text, to.end())
                if following is not None:
                    found = (following, _Filler.SET_TO)
    pieces.append(text[done:])
    return "".join(pieces)


def _prose_value(text: str, key: re.Match[str]) -> tuple[re.Match[str], _Filler] | None:
    """The value word after ``key``, and what stands between them."""
    position = key.end()
    if key.group("quote"):
        # A quoted key is JSON or a quoted name: "pin": 4921 goes, 'get_token': disk stays.
        field = _PROSE_FIELD.match(text, position)
        if field is None:
            return None
        value = _PROSE_VALUE.match(text, field.end())
        return None if value is None else (value, _Filler.PLAIN)
    clause = _PROSE_FOR.match(text, position)
    if clause is not None:
        position = clause.end()  # "password for user bob is x": the name stays
    field = _PROSE_FIELD.match(text, position)
    if field is not None:
        value = _PROSE_VALUE.match(text, field.end())
        return None if value is None else (value, _Filler.FIELD)
    setting = _PROSE_SET_TO.match(text, position)
    if setting is not None:
        value = _PROSE_VALUE.match(text, setting.end())
        kind = _Filler.FROM if setting.group("preposition").lower() == "from" else _Filler.SET_TO
        return None if value is None else (value, kind)
    filler = _PROSE_COPULA.match(text, position)
    if filler is None:
        if clause is not None:
            return None  # "password for user bob rejected": no value named
        filler = _PROSE_GAP.match(text, position)
        if filler is None:
            return None
    value = _PROSE_VALUE.match(text, filler.end())
    return None if value is None else (value, _Filler.PLAIN)


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
    if not any(char.isupper() or char.islower() for char in word):
        return False  # Chinese, Japanese, Korean, Arabic...: no case to read
    if word.islower() or word.isupper() or word.istitle():
        return False
    # CamelCase names ("TokenExpiredError") start upper and put a lower after each upper.
    camel = word[0].isupper() and not any(
        char.isupper() and not following.islower() for char, following in pairwise(word)
    )
    return not camel or word[-1].isupper()


def trailing(word: str) -> str:
    """The punctuation that ends ``word``, never part of a marker inside it."""
    ends = [word.rfind(marker) + len(marker) for marker in _MARKERS if marker in word]
    body = word[max(ends, default=0) :]
    return body[len(body.rstrip(PROSE_TRAILING)) :]


def _without_markers(word: str) -> str:
    for marker in _MARKERS:
        word = word.replace(marker, "")
    return word


def _is_stop(word: str) -> bool:
    return word.lower() in _PROSE_STOP_WORDS
