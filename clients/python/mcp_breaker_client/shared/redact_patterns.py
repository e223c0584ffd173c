"""The patterns :mod:`mcp_breaker_client.shared.redact` finds secrets, paths and addresses with.

Keys known by their prefix or shape, key-value pairs, the command lines and markup that
quote a credential, URLs, paths and e-mail addresses, each compiled once, at import; and
the markers redact writes in place of what it removes. What each pattern takes, and why,
is said in redact's module docstring; the words of secrets written in prose are
:mod:`mcp_breaker_client.shared.redact_prose`'s.
"""

from __future__ import annotations

import re

from mcp_breaker_client.shared import secret_words

REDACTED = "[REDACTED]"
PATH_MARKER = "<path>"
EMAIL_MARKER = "<email>"

# Controls, lone surrogates (a later UTF-8 encode would fail on them) and bidi overrides
# (they make a log line read differently from what it holds).
UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff\u202a-\u202e\u2066-\u2069]")
REPLACEMENT_CHARACTER = "\ufffd"

# Keys found by their prefix. No word boundary before them: a key glued to text is a key.
PREFIXED_KEY = re.compile(
    r"(?:gh[pousr]_|github_pat_|glpat-|xox[abposr]-|AIza)[A-Za-z0-9_-]{16,}"
    r"|(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[0-9A-Z]{16}"
    r"|eyJ[A-Za-z0-9_.-]{16,}"  # a JWT: base64url of '{"', then more dotted parts
    r"|[MN][A-Za-z0-9_-]{23,}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,}"  # a Discord bot token
)
# Keys known by a mark in their middle, looked for only where the mark is (a pattern that
# starts with a character class is tried at every position).
MARKED_KEYS = (
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
SCANNER_KEY = re.compile(
    r"(?<![A-Za-z0-9_.-])"
    r"(?:[sr]k_(?:live|test|prod)_|SG\.|npm_|pypi-|shp(?:at|ca|pa|ss)_|do[opr]_v1_|hf_"
    r"|gl(?:c|sa)_|hv[sb]\.|lin_api_|PMAK-|pul-|sq0(?:atp|csp)-|ATATT3|AGE-SECRET-KEY-1"
    r"|GOCSPX-|ya29\.|xapp-|gl(?:ptt|rt|dt|cbt|soat|ffct|imt|oas)-|GR1348941|sntry[su]_"
    r"|dp\.(?:pt|st|sa|ct)\.|dt0c01\.|NRAK-|secret_|figd_|pscale_(?:tkn|pw|oauth)_"
    r"|rubygems_|xkeysib-|LTAI|gsk_|r8_|dckr_pat_|sbp_|ATBB|pplx-|key-|AKCp)"
    r"(?P<body>[A-Za-z0-9_.+/=-]{10,})"
)
# "sk-" also ends words ("task-scheduler-service"); a key holds a long alphanumeric run.
SK_KEY = re.compile(r"sk-[A-Za-z0-9_-]{16,}")
KEY_BODY = re.compile(r"[A-Za-z0-9]{16}")
PRIVATE_KEY_BLOCK = re.compile(
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
QUOTED_PAIR = re.compile(
    rf"""(?P<key>["'][\w.-]*?{_KEY_WORD}["']\s*{_SEPARATOR}\s*)"""
    r"""(?P<value>"(?:[^"\\]|\\.)*"?|'[^']*'?)""",
    re.IGNORECASE,
)
# JSON inside a JSON string escapes its quotes: {\"client_secret\":\"x\",\"pin\":1}. Such a
# key is never prose, so a bare value (a number, true, null) goes too.
ESCAPED_PAIR = re.compile(
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
BARE_PAIR = re.compile(
    rf"(?P<key>{_KEY_NAME}\s*{_SEPARATOR}\s*(?:{_SCHEME}\s+)?)"
    rf"{_NOT_REDACTED}(?!{_SCHEME}(?![\w.~/\\@+-]))(?P<value>{_VALUE})",
    re.IGNORECASE,
)
# A MySQL client's command up to the shell's next "|", ";" or "&"; quoted arguments whole.
MYSQL_COMMAND = re.compile(
    r"""\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlcheck|mysqlshow|mysqlsh|mariadb)\b"""
    r"""[^|;&'"]*(?:(?:'[^']*'?|"[^"]*"?)[^|;&'"]*)*"""
)
# In it, a password glued to its flag: "mysql -u root -pS3cret db". "-p" alone prompts, "-P
# 3306" is the port; a command of another program ("cp -pr") has no such flag.
GLUED_PASSWORD = re.compile(
    rf"""(?P<key>(?<=\s)-p){_NOT_REDACTED}(?P<value>'[^']*'?|"[^"]*"?|[^\s…]+)"""
)
ENV_ASSIGNMENT = re.compile(
    rf"(?<![\w.-])(?P<key>[A-Z][A-Z0-9_]+=){_NOT_REDACTED}(?P<value>{_VALUE})"
)
AUTH_CREDENTIAL = re.compile(
    r"\b(?P<scheme>bearer|basic)\s+(?P<credential>[A-Za-z0-9._~+/=-]+)", re.IGNORECASE
)

# What follows a credential word in the syntaxes error texts quote. A value after them is
# a word up to the next space (a quote, "…" and "]" end it too), or a quoted string.
_WORD_VALUE = r"""(?:"[^"]*"?|'[^']*'?|[^\s"'…\]]+)"""
# A command-line option naming a secret, then its value: "--password X", "--api-key X",
# "-passin pass:X" (openssl). "--password-stdin" and "--pass-through" name none.
FLAG_VALUE = re.compile(
    r"(?<![\w-])(?P<key>--?(?:[A-Za-z0-9]+[_-])*"
    r"(?:password|passwd|passphrase|passcode|pass|pwd|token|secret|api[_-]?key|key"
    r"|credentials?|passin|passout)(?:\s+|=)(?:pass:)?)"
    rf"{_NOT_REDACTED}(?!-)(?P<value>{_WORD_VALUE})",
    re.IGNORECASE,
)
# A user and password in one option: "curl -u user:pass", "--user user:pass", smbclient's
# "-U user%pass", lftp's "-u user,pass". Digits on both sides are a uid:gid ("-u 1000:1000").
USER_PASSWORD = re.compile(
    r"(?<![\w-])(?P<key>(?:-[uUa]|--user|--auth|--basic-auth|--proxy-user|--http-user|--creds)"
    r"(?:\s+|=)[\"']?(?P<user>[^\s:%,\"'…]+)[:%,])"
    rf"{_NOT_REDACTED}(?P<value>[^\s\"'…]+)"
)
# A name that names a secret, then its value, as XML attributes and Kubernetes env
# entries write them: <add key="Password" value="x"/>, name: DB_PASSWORD value: x.
NAMED_VALUE = re.compile(
    r"(?<![\w-])(?:name|key|id)\s*[:=]\s*(?P<quote>[\"']?)(?P<name>[\w.-]+)(?P=quote)\s+"
    rf"(?P<key>value\s*[:=]\s*){_NOT_REDACTED}(?P<value>{_WORD_VALUE})",
    re.IGNORECASE,
)
# An XML element naming a secret, and its text: <password>x</password>, <wsse:Password
# Type="...">x</wsse:Password>, <param name="token">x</param>. The text holds no "<", so
# each element is read once.
XML_ELEMENT = re.compile(
    r"<(?P<tag>[\w.-]+(?::[\w.-]+)?)(?P<attributes>\s[^<>]*)?>"
    rf"{_NOT_REDACTED}(?P<value>[^<]+)</(?P=tag)\s*>"
)
XML_NAME_ATTRIBUTE = re.compile(r"""(?:name|key|id)\s*=\s*["'](?P<name>[^"'<>]*)["']""")
# Any name, then "=" or ":", then a value: _redact_foreign_pair decides by the name
# (one with a letter outside ASCII, or in another language: "pässword", "contraseña",
# "mot_de_passe", "密码").
ANY_PAIR = re.compile(
    rf"(?<![\w.-])(?P<name>[\w.-]+)(?P<key>\s*(?:[:=＝：]|%3D)\s*){_NOT_REDACTED}"
    rf"(?P<value>{_VALUE})",
    re.IGNORECASE,
)
FOREIGN_ENDINGS = secret_words.KEY_NAME_ENDINGS_ABROAD
ENGLISH_ENDINGS = secret_words.KEY_NAME_ENDINGS_ENGLISH
FOREIGN_NAMES = frozenset(secret_words.KEY_NAMES_ABROAD)
# Letters NFKD does not take apart.
UNMARKED_LETTERS = str.maketrans({"ł": "l", "ø": "o", "đ": "d", "ħ": "h", "ı": "i", "ß": "ss"})
# A command whose short option takes a password, up to the shell's next "|", ";" or "&"
# as MYSQL_COMMAND reads it: sshpass -p, the mongo shells' -p, redis-cli -a, sqlcmd -P,
# the ldap tools' -w, and "login" of the registry and cloud clients (docker login -p,
# az login -p, cf login -p). Elsewhere "-p" is a port or "preserve" ("ssh -p 22").
PASSWORD_OPTION = {
    "sshpass": "p", "mongo": "p", "mongosh": "p", "mongodump": "p", "mongorestore": "p",
    "mongoexport": "p", "mongoimport": "p", "redis-cli": "a", "keydb-cli": "a", "sqlcmd": "P",
    "bcp": "P", "osql": "P", "ldapsearch": "w", "ldapmodify": "w", "ldapadd": "w",
    "ldapdelete": "w", "ldapwhoami": "w", "ldappasswd": "w",
}  # fmt: skip
_LOGIN_CLIENTS = (
    "docker", "podman", "nerdctl", "buildah", "skopeo", "oras", "helm", "crane", "regctl",
    "az", "cf", "oc",
)  # fmt: skip
PASSWORD_COMMAND = re.compile(
    r"(?<![\w-])(?:(?P<command>"
    + "|".join(re.escape(name) for name in PASSWORD_OPTION)
    + r")|(?:"
    + "|".join(_LOGIN_CLIENTS)
    + r")(?:\s+[\w.-]+){0,3}?\s+login)(?![\w-])"
    r"""[^|;&'"]*(?:(?:'[^']*'?|"[^"]*"?)[^|;&'"]*)*"""
)
PASSWORD_OPTIONS = {
    letter: re.compile(
        rf"""(?P<key>(?<=\s)-{letter}\s*){_NOT_REDACTED}(?!-)(?P<value>'[^']*'?|"[^"]*"?|[^\s…]+)"""
    )
    for letter in "pPaw"
}

# The parts of a key name or a keyword: "mot de passe", "mot_de_passe" and "motdepasse"
# compare alike without them.
WORD_SEPARATORS = re.compile(r"[\s_.'’-]+")

# ASCII URL characters minus quotes and parentheses, which usually enclose the URL.
URL = re.compile(r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*://[A-Za-z0-9._~%!$&*+,;=:@/?#\[\]-]*")
PLAIN_SEGMENT = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,15}")
TRAILING_PUNCTUATION = ".,;:!?"  # ends the sentence, not the URL or path

# The domain also takes local-part characters and "@": a glued "a@b.c_d@e.f" goes whole.
EMAIL = re.compile(r"(?<![\w.%+-])[\w.%+-]+@[\w%+-]+\.[\w.%+@-]+", re.ASCII)
WINDOWS_PATH = re.compile(r"(?<![A-Za-z0-9])[A-Za-z]:[\\/][\w.~/\\@+$-]*")
# Any word with a slash; _path_or_word decides whether it is a path.
SLASHED_WORD = re.compile(r"(?<![\w.~/\\-])[\w.~-]*[/\\][\w.~/\\@+-]*")
FILE_EXTENSION = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,7}$")
OPAQUE_RUN = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{32,}={0,2}")
DIGIT = re.compile(r"[0-9]")
# A shorter run is a token when its characters look drawn at random: upper, lower and
# digits, changing class at most steps ("9fJk2LmQ8rTzX4vB1nW7"), where a name changes it
# at word steps only ("Http2ServerConnectionHandler"). detect-secrets and gitleaks judge
# such runs by their entropy; this is the same idea, on the classes of the characters.
TOKEN_RUN = re.compile(r"(?<![A-Za-z0-9+/_.-])[A-Za-z0-9_-]{20,}(?![A-Za-z0-9+/_-]|\.[A-Za-z0-9])")
MIN_CLASS_CHANGES = 0.4  # a share of the steps from one character to the next
