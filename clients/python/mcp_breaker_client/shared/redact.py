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
  SendGrid ``SG.``, npm, PyPI, Hugging Face, Vault, Grafana, ... see ``_SCANNER_KEY``), and a
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
"""

from __future__ import annotations

import enum
import functools
import re
import unicodedata
from itertools import pairwise

from mcp_breaker_client.shared import secret_words

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
    r"|(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[0-9A-Z]{16}"
    r"|eyJ[A-Za-z0-9_.-]{16,}"  # a JWT: base64url of '{"', then more dotted parts
    r"|[MN][A-Za-z0-9_-]{23,}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,}"  # a Discord bot token
)
# Keys known by a mark in their middle, looked for only where the mark is (a pattern that
# starts with a character class is tried at every position).
_MARKED_KEYS = (
    ("atlasv1", re.compile(r"[a-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{16,}")),  # Terraform Cloud
    ("Q~", re.compile(r"[A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,}")),  # an Azure AD secret
)
# The prefixes public secret-scanning rule sets (gitleaks, detect-secrets) key on: Stripe,
# SendGrid, npm, PyPI, Shopify, DigitalOcean, Hugging Face, Grafana, Vault, Linear,
# Postman, Pulumi, Square, Atlassian, age, Google OAuth, Slack apps, GitLab's other
# tokens, Sentry, Doppler, Dynatrace, New Relic, Notion, Figma, PlanetScale, RubyGems,
# Brevo, Alibaba, Groq, Replicate, Docker Hub, Supabase, Bitbucket, Perplexity, Mailgun,
# Artifactory. Some are also words ("secret_manager_unavailable", "key-value-store"), so
# what follows must look like a key: a digit, or both cases (_redact_scanner_key).
_SCANNER_KEY = re.compile(
    r"(?<![A-Za-z0-9_.-])"
    r"(?:[sr]k_(?:live|test|prod)_|SG\.|npm_|pypi-|shp(?:at|ca|pa|ss)_|do[opr]_v1_|hf_"
    r"|gl(?:c|sa)_|hv[sb]\.|lin_api_|PMAK-|pul-|sq0(?:atp|csp)-|ATATT3|AGE-SECRET-KEY-1"
    r"|GOCSPX-|ya29\.|xapp-|gl(?:ptt|rt|dt|cbt|soat|ffct|imt|oas)-|GR1348941|sntry[su]_"
    r"|dp\.(?:pt|st|sa|ct)\.|dt0c01\.|NRAK-|secret_|figd_|pscale_(?:tkn|pw|oauth)_"
    r"|rubygems_|xkeysib-|LTAI|gsk_|r8_|dckr_pat_|sbp_|ATBB|pplx-|key-|AKCp)"
    r"(?P<body>[A-Za-z0-9_.+/=-]{10,})"
)
# "sk-" also ends words ("task-scheduler-service"); a key holds a long alphanumeric run.
_SK_KEY = re.compile(r"sk-[A-Za-z0-9_-]{16,}")
_KEY_BODY = re.compile(r"[A-Za-z0-9]{16}")
_PRIVATE_KEY_BLOCK = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[^-]*"
    r"(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----)?"
    r"|PuTTY-User-Key-File-[0-9]+:.*"  # a PuTTY key file: the rest of the text
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

# What follows a credential word in the syntaxes error texts quote. A value after them is
# a word up to the next space (a quote, "…" and "]" end it too), or a quoted string.
_WORD_VALUE = r"""(?:"[^"]*"?|'[^']*'?|[^\s"'…\]]+)"""
# A command-line option naming a secret, then its value: "--password X", "--api-key X",
# "-passin pass:X" (openssl). "--password-stdin" and "--pass-through" name none.
_FLAG_VALUE = re.compile(
    r"(?<![\w-])(?P<key>--?(?:[A-Za-z0-9]+[_-])*"
    r"(?:password|passwd|passphrase|passcode|pass|pwd|token|secret|api[_-]?key|key"
    r"|credentials?|passin|passout)(?:\s+|=)(?:pass:)?)"
    rf"{_NOT_REDACTED}(?!-)(?P<value>{_WORD_VALUE})",
    re.IGNORECASE,
)
# A user and password in one option: "curl -u user:pass", "--user user:pass", smbclient's
# "-U user%pass", lftp's "-u user,pass". Digits on both sides are a uid:gid ("-u 1000:1000").
_USER_PASSWORD = re.compile(
    r"(?<![\w-])(?P<key>(?:-[uUa]|--user|--auth|--basic-auth|--proxy-user|--http-user|--creds)"
    r"(?:\s+|=)[\"']?(?P<user>[^\s:%,\"'…]+)[:%,])"
    rf"{_NOT_REDACTED}(?P<value>[^\s\"'…]+)"
)
# A name that names a secret, then its value, as XML attributes and Kubernetes env
# entries write them: <add key="Password" value="x"/>, name: DB_PASSWORD value: x.
_NAMED_VALUE = re.compile(
    r"(?<![\w-])(?:name|key|id)\s*[:=]\s*(?P<quote>[\"']?)(?P<name>[\w.-]+)(?P=quote)\s+"
    rf"(?P<key>value\s*[:=]\s*){_NOT_REDACTED}(?P<value>{_WORD_VALUE})",
    re.IGNORECASE,
)
# An XML element naming a secret, and its text: <password>x</password>, <wsse:Password
# Type="...">x</wsse:Password>, <param name="token">x</param>. The text holds no "<", so
# each element is read once.
_XML_ELEMENT = re.compile(
    r"<(?P<tag>[\w.-]+(?::[\w.-]+)?)(?P<attributes>\s[^<>]*)?>"
    rf"{_NOT_REDACTED}(?P<value>[^<]+)</(?P=tag)\s*>"
)
_XML_NAME_ATTRIBUTE = re.compile(r"""(?:name|key|id)\s*=\s*["'](?P<name>[^"'<>]*)["']""")
# Any name, then "=" or ":", then a value: _redact_foreign_pair decides by the name
# (one with a letter outside ASCII, or in another language: "pässword", "contraseña",
# "mot_de_passe", "密码").
_ANY_PAIR = re.compile(
    rf"(?<![\w.-])(?P<name>[\w.-]+)(?P<key>\s*(?:[:=＝：]|%3D)\s*){_NOT_REDACTED}"
    rf"(?P<value>{_VALUE})",
    re.IGNORECASE,
)
_FOREIGN_ENDINGS = secret_words.KEY_NAME_ENDINGS_ABROAD
_ENGLISH_ENDINGS = secret_words.KEY_NAME_ENDINGS_ENGLISH
_FOREIGN_NAMES = frozenset(secret_words.KEY_NAMES_ABROAD)
# Letters NFKD does not take apart.
_UNMARKED_LETTERS = str.maketrans({"ł": "l", "ø": "o", "đ": "d", "ħ": "h", "ı": "i", "ß": "ss"})
# Chinese, Japanese and Korean: the word, its particle, then a run of another script.
_CJK_SCRIPT = (
    "\u1100-\u11ff\u3000-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uff00-\uffef"
)
_CJK_CHARACTER = re.compile(f"[{_CJK_SCRIPT}]")
_CJK_KEY = re.compile(
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
# A command whose short option takes a password, up to the shell's next "|", ";" or "&"
# as _MYSQL_COMMAND reads it: sshpass -p, the mongo shells' -p, redis-cli -a, sqlcmd -P,
# the ldap tools' -w, and "login" of the registry and cloud clients (docker login -p,
# az login -p, cf login -p). Elsewhere "-p" is a port or "preserve" ("ssh -p 22").
_PASSWORD_OPTION = {
    "sshpass": "p", "mongo": "p", "mongosh": "p", "mongodump": "p", "mongorestore": "p",
    "mongoexport": "p", "mongoimport": "p", "redis-cli": "a", "keydb-cli": "a", "sqlcmd": "P",
    "bcp": "P", "osql": "P", "ldapsearch": "w", "ldapmodify": "w", "ldapadd": "w",
    "ldapdelete": "w", "ldapwhoami": "w", "ldappasswd": "w",
}  # fmt: skip
_LOGIN_CLIENTS = (
    "docker", "podman", "nerdctl", "buildah", "skopeo", "oras", "helm", "crane", "regctl",
    "az", "cf", "oc",
)  # fmt: skip
_PASSWORD_COMMAND = re.compile(
    r"(?<![\w-])(?:(?P<command>"
    + "|".join(re.escape(name) for name in _PASSWORD_OPTION)
    + r")|(?:"
    + "|".join(_LOGIN_CLIENTS)
    + r")(?:\s+[\w.-]+){0,3}?\s+login)(?![\w-])"
    r"""[^|;&'"]*(?:(?:'[^']*'?|"[^"]*"?)[^|;&'"]*)*"""
)
_PASSWORD_OPTIONS = {
    letter: re.compile(
        rf"""(?P<key>(?<=\s)-{letter}\s*){_NOT_REDACTED}(?!-)(?P<value>'[^']*'?|"[^"]*"?|[^\s…]+)"""
    )
    for letter in "pPaw"
}

# Prose: a keyword, then a filler, then a word. See the module docstring for the rule.
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
_WORD_SEPARATORS = re.compile(r"[\s_.'’-]+")
_ENGLISH_PASSWORD_WORDS = ("password", "passwd", "passphrase", "passcode", "pwd")
_PASSWORD_WORDS = frozenset(
    _WORD_SEPARATORS.sub("", word)
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
# A shorter run is a token when its characters look drawn at random: upper, lower and
# digits, changing class at most steps ("9fJk2LmQ8rTzX4vB1nW7"), where a name changes it
# at word steps only ("Http2ServerConnectionHandler"). detect-secrets and gitleaks judge
# such runs by their entropy; this is the same idea, on the classes of the characters.
_TOKEN_RUN = re.compile(r"(?<![A-Za-z0-9+/_.-])[A-Za-z0-9_-]{20,}(?![A-Za-z0-9+/_-]|\.[A-Za-z0-9])")
_MIN_CLASS_CHANGES = 0.4  # a share of the steps from one character to the next


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
    for mark, pattern in _MARKED_KEYS:
        if mark in text:
            text = pattern.sub(REDACTED, text)
    text = _SCANNER_KEY.sub(_redact_scanner_key, text)
    text = _SK_KEY.sub(_redact_sk_key, text)
    text = _PRIVATE_KEY_BLOCK.sub(REDACTED, text)
    text = _ESCAPED_PAIR.sub(_redact_pair, text)
    # Before the pairs: 'key="Password"' is a pair whose value names the secret next to it.
    text = _XML_ELEMENT.sub(_redact_xml_element, text)
    text = _NAMED_VALUE.sub(_redact_named_value, text)
    text = _QUOTED_PAIR.sub(_redact_pair, text)
    text = _BARE_PAIR.sub(_redact_pair, text)
    text = _ENV_ASSIGNMENT.sub(_redact_pair, text)
    text = _redact_foreign_pairs(text)
    # What follows a credential word on a command line, then in prose.
    text = _USER_PASSWORD.sub(_redact_user_password, text)
    text = _FLAG_VALUE.sub(_redact_word_value, text)
    # Prose before schemes: a scheme pair "Basic Basic" kept whole must not hide what
    # follows once prose has removed the word before it.
    text = _redact_prose(text)
    if _CJK_CHARACTER.search(text) is not None:
        text = _CJK_KEY.sub(_redact_cjk_value, text)
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
    text = _MYSQL_COMMAND.sub(_redact_mysql_command, "".join(pieces))
    return _PASSWORD_COMMAND.sub(_redact_password_command, text)


def _scrub_plain(text: str) -> str:
    text = _replace(_EMAIL, EMAIL_MARKER, text)
    # Opaque runs before paths: a run ends at "." where a path goes on, so paths must be
    # judged on what is left, or the next pass would see a different word.
    text = _OPAQUE_RUN.sub(_redact_opaque, text)
    text = _TOKEN_RUN.sub(_redact_token_run, text)
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


def _redact_password_command(match: re.Match[str]) -> str:
    command = match.group("command")
    option = _PASSWORD_OPTIONS[_PASSWORD_OPTION[command] if command else "p"]
    return option.sub(_redact_pair, match.group())


def _redact_scanner_key(match: re.Match[str]) -> str:
    body = match.group("body")
    looks_like_a_key = _DIGIT.search(body) is not None or (
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
    return head + REDACTED + _trailing(raw)


def _redact_user_password(match: re.Match[str]) -> str:
    if match.group("user").isdigit() and match.group("value").rstrip(_PROSE_TRAILING).isdigit():
        return match.group()  # "-u 1000:1000": a uid and a gid
    return _redact_word_value(match)


def _redact_named_value(match: re.Match[str]) -> str:
    if not _names_secret(match.group("name"), english=True):
        return match.group()
    return _redact_word_value(match)


def _redact_xml_element(match: re.Match[str]) -> str:
    names = [match.group("tag").rpartition(":")[2]]
    attributes = match.group("attributes") or ""
    names += [found.group("name") for found in _XML_NAME_ATTRIBUTE.finditer(attributes)]
    named = any(_names_secret(name, english=True) for name in names)
    if not named or not match.group("value").strip():
        return match.group()
    whole, start = match.group(), match.start()
    return whole[: match.start("value") - start] + REDACTED + whole[match.end("value") - start :]


def _redact_foreign_pairs(text: str) -> str:
    pieces: list[str] = []
    done = search_from = 0
    while (match := _ANY_PAIR.search(text, search_from)) is not None:
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


def _redact_cjk_value(match: re.Match[str]) -> str:
    """A run of another script after a CJK credential word is its value, unless a stop word."""
    raw = match.group("value")
    bare = _without_markers(raw).rstrip(_PROSE_TRAILING)
    if raw.startswith(_MARKERS) or not any(char.isalnum() for char in bare) or _is_stop(bare):
        return match.group()
    return match.group()[: match.start("value") - match.start()] + REDACTED + _trailing(raw)


@functools.lru_cache(maxsize=1024)  # error texts repeat their key names
def _names_secret(name: str, *, english: bool) -> bool:
    """Whether a key name, folded (``_fold``), ends in a credential word of any language."""
    parts = [part for part in _WORD_SEPARATORS.split(_fold(name)) if part]
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
    return bare.lower().translate(_UNMARKED_LETTERS)


_FOLDED_FOREIGN_ENDINGS = tuple(_fold(word) for word in _FOREIGN_ENDINGS)
_FOLDED_ENGLISH_ENDINGS = tuple(_fold(word) for word in _ENGLISH_ENDINGS)
_FOLDED_FOREIGN_NAMES = frozenset(_fold(word) for word in _FOREIGN_NAMES)


def _compact(word: str) -> str:
    return _WORD_SEPARATORS.sub("", word.lower())


def _redact_token_run(match: re.Match[str]) -> str:
    run = match.group()
    if not (_DIGIT.search(run) and run.lower() != run and run.upper() != run):
        return run
    classes = [
        "d" if char.isdigit() else "u" if char.isupper() else "l" if char.islower() else "o"
        for char in run
    ]
    changes = sum(first != second for first, second in pairwise(classes))
    return REDACTED if changes >= _MIN_CLASS_CHANGES * (len(run) - 1) else run


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


class _Filler(enum.Enum):
    """What stands between a prose keyword and its value, and so when the value goes."""

    FIELD = "field"  # ":" or "=": whatever it is
    SET_TO = "set to"  # a verb of setting: unless it is a stop word
    FROM = "from"  # "changed from X": as SET_TO, and the value after the next "to" too
    PLAIN = "plain"  # a copula or a space: as the module docstring says


def _redact_prose(text: str) -> str:
    """Redact the word after each prose keyword that the rule in the module docstring names."""
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
                bare = bare.rstrip(_PROSE_TRAILING)
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
            pieces.append(quote + REDACTED + quote if quote else REDACTED + _trailing(raw))
            done = search_from = value.end()
            if filler is _Filler.FROM and not _trailing(raw):
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
