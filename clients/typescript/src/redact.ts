/**
 * Error texts scrubbed before they leave the harness: the same rules, and the same result
 * for the same text, as mcp-breaker's `processor/classify/redact.py` (shared test vectors
 * keep the two in step).
 *
 * A tool's error goes onto the harness's `mcp.tool.call` span, and spans travel on to
 * tracing backends as they are. Tool servers write errors for their own operators, so
 * they can hold credentials, private paths and addresses. `redact` keeps what failed and
 * why (the message, tool names, JSON-RPC codes, the upstream's scheme, host and port) and
 * removes:
 *
 * - keys with a known prefix (`sk-`, `ghp_`, `github_pat_`, `xoxb-`, `glpat-`, `AKIA`,
 *   `AIza`), JWTs, PEM private key blocks, runs of 32+ base64/hex characters holding a
 *   digit → `[REDACTED]`;
 * - the value after a key that names a secret (`password=`, `token:`, `"api_key":`, ...),
 *   after an `UPPER_SNAKE=` environment name, after `Bearer` or `Basic`. `pass`, `pw` and
 *   `key` name a secret as a whole part of a key name (`dbPass`, `DB-PASS`, `accessKeyId`;
 *   not `compass` or `hotkey`), and alone `pass` and `key` only before `=` ("key: not
 *   found" stays). The separator may be fullwidth (`＝`) or URL-encoded (`%3D`), the quotes
 *   JSON-escaped (`{\"client_secret\":\"x\"}`). A bare value runs to the next space, over
 *   the `&`, `;` and `,` a password may hold, but not into the next `key=` of a query
 *   string or form body (`a=1&password=x&b=2`: only `x` goes);
 * - the password glued to a MySQL client's flag (`mysql -u root -pS3cret`) → `-p[REDACTED]`;
 * - secrets written in prose, the word after a secret keyword (`password hunter2x`, `the
 *   token tkn9f8e7d6c5`, `api key k3y-7781`, `PIN 4921`, `my password is Tr0ub4dor&3`) →
 *   the keyword stays, the word becomes `[REDACTED]`. See "Prose" below;
 * - in URLs: userinfo, query and fragment; of the path only a short plain first segment;
 * - filesystem paths → `<path>`; e-mail addresses → `<email>`.
 *
 * The result is one printable line of at most `maxChars` code points, cut between words
 * with a trailing "…"; only the first `SCAN_FACTOR * maxChars` code points are read, so
 * the cost is bounded whatever the input. Lengths count code points, as Python's do.
 *
 * Prose. A keyword is one of `PROSE_KEYWORDS` (a plural or a glued prefix such as
 * `db_password` or `X-Api-Key` too). Between it and the value may stand `:` or `=` (a
 * field), `is`/`was`/`equals` (a copula, optionally `set to`), or `for`/`of`
 * [`user`/`account`] *name* followed by a field or a copula ("password for user bob is x":
 * the name stays). The value is the next word, or a quoted string. It becomes `[REDACTED]`
 * when it follows a field (a quoted key such as `"pin":` counts only with a secret-shaped or
 * quoted value), or it is quoted, or it is secret-shaped (a digit or a character other than
 * a letter, mixed case that camel-case names do not have, 20 letters or more), or it follows
 * a password word and is not one of the ordinary follow-words in `PROSE_STOP_WORDS`. A word
 * starting with a bracket, one without a letter or digit, another keyword or an auth scheme
 * is not a value. So "Unauthorized: token expired" and "invalid api key" read as written.
 */

import { ConfigError } from "./errors.js";

export const DEFAULT_MAX_CHARS = 300;
export const SCAN_FACTOR = 4;

export const REDACTED = "[REDACTED]";
export const PATH_MARKER = "<path>";
export const EMAIL_MARKER = "<email>";
const ELLIPSIS = "…";

// Python's `\w` on text: letters and numbers of any script, and "_" (no combining marks).
const W = String.raw`\p{L}\p{N}_`;
// Python's re.IGNORECASE matches an ASCII letter in either case and four more letters that
// fold to one: "İ" and "ı" to "i", "ſ" to "s", the Kelvin sign to "k". JavaScript's /iu
// misses "İ" and "ı", and it takes U+0345 (a combining mark that folds to "ι") for a letter
// in `\p{L}`. So no pattern below has the "i" flag: `anyCase` spells the cases out.
const OTHER_CASES: Readonly<Record<string, string>> = {
  i: "I\u0130\u0131",
  k: "K\u212a",
  s: "S\u017f",
};
const ANY_CASE_LETTERS = String.raw`A-Za-z\u0130\u0131\u017f\u212a`; // [A-Za-z], ignoring case
// Python's str.split() whitespace. After the window is split on it and joined with
// single spaces, " " is the only whitespace left, so the patterns below write " " where
// the Python ones write `\s` (JavaScript's `\s` is a different set).
const PYTHON_WHITESPACE =
  /[\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+/u;

const UNPRINTABLE = /[\x00-\x1f\x7f-\x9f\ud800-\udfff\u202a-\u202e\u2066-\u2069]/gu;
const REPLACEMENT_CHARACTER = "\ufffd";

const PREFIXED_KEY = new RegExp(
  String.raw`(?:gh[pousr]_|github_pat_|glpat-|xox[abposr]-|AIza)[A-Za-z0-9_-]{16,}` +
    String.raw`|(?:AKIA|ASIA)[0-9A-Z]{16}` +
    String.raw`|eyJ[A-Za-z0-9_.-]{16,}`,
  "gu",
);
const SK_KEY = /sk-[A-Za-z0-9_-]{16,}/gu;
const KEY_BODY = /[A-Za-z0-9]{16}/u;
const PRIVATE_KEY_BLOCK =
  /-----BEGIN [A-Z ]*PRIVATE KEY-----[^-]*(?:-----END [A-Z ]*PRIVATE KEY-----)?/gu;

// A key that ends in one of these words names a secret; "Unauthorized:" does not. They may
// be glued to what comes before them: "PGPASSWORD", "db.password", "x-api-key".
const SECRET_KEY_WORDS = [
  "password", "passwd", "pwd", "passphrase", "secret", "token", "api_key", "apikey",
  "api-key", "access_key", "private_key", "credential", "credentials", "auth",
  "authorization", "session", "session_id", "sessionid", "session-id", "cookie",
  "signature",
]; // prettier-ignore
// Letters, "_" and "-": nothing to escape.
const KEY_WORD = `(?:${SECRET_KEY_WORDS.map(anyCase).join("|")})`;
// Short words that end many ordinary words ("compass", "bypass", "hotkey", "monkey"): they
// name a secret only as a whole part of the key name, at its start or after "_", "-", "."
// or a camel-case step ("pass", "db_pass", "DB-PASS", "dbPass", "secretAccessKey").
const SHORT_KEY_WORDS = ["pass", "pw", "key"];
const SHORT_KEY_WORD = `(?:${SHORT_KEY_WORDS.map(anyCase).join("|")})`;
// Their first letters: a cheap test before the look-behinds of PART_START, at every letter.
const SHORT_KEY_FIRST = `(?=${[...new Set(SHORT_KEY_WORDS.map((word) => word[0] as string))]
  .sort()
  .map(anyCase)
  .join("|")})`;
// Where a part of a key name starts: after no letter or digit (or after a form body's
// "%26"), or at a camel-case step ("dbPass", "APIKey"). Python ignores case in the first
// look-behind (so "İ", "ı", "ſ" and the Kelvin sign count as letters) and not in the
// camel-case steps, its `(?-i:...)`: no pattern here ignores case, so those read as written.
const PART_START =
  String.raw`(?:(?<![${ANY_CASE_LETTERS}0-9])|(?<=%26)|` +
  String.raw`(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z]))`;
// A part after the secret word that still names the secret: "accessKeyId", "token_value".
// The camel-case step is case-sensitive, as Python's `(?-i:(?=[A-Z]))`.
const KEY_SUFFIX = `(?:(?:[_.-]|(?=[A-Z]))(?:${[
  "id", "value", "str", "string", "b64", "base64", "hex", "raw", "plain",
].map(anyCase).join("|")}))`; // prettier-ignore
// Alone, the English ones are keys only before "=": "key: not found" is prose, "key=abc" and
// "pw: abc" are not.
const ENGLISH_SHORT_KEY_WORDS = ["pass", "key"];
const SHORT_KEY_BEFORE_COLON = `(?!(?:${ENGLISH_SHORT_KEY_WORDS.map(anyCase).join("|")})${KEY_SUFFIX}? *[:：])`;
// "=" or ":", fullwidth too, and "%3D", the "=" of a URL-encoded form body. The patterns
// that read a separator ignore case in Python, so "%3d" is one too. ASSIGN is also read
// in ENV_ASSIGNMENT's value, which does not ignore case: it comes in both kinds.
const SEPARATOR = String.raw`(?:[:=＝：]|%3[dD])`;
const ASSIGN = String.raw`(?:[=＝]|%3D)`;
const ASSIGN_ANY_CASE = String.raw`(?:[=＝]|%3[dD])`;
// As in Python, where BARE_PAIR and ESCAPED_PAIR ignore case and ENV_ASSIGNMENT does not.
const NOT_REDACTED = String.raw`(?!\[REDACTED\])`;
const NOT_REDACTED_ANY_CASE = String.raw`(?!\[${anyCase("redacted")}\])`;
// A value: quoted (an unclosed quote runs to the end), or a word. A password may hold "&",
// ";" or "," ("Tr0ub4dor&3", "abc;def123"): they join the word on unless they end it
// (before a space or a quote) or another "key=" of a query string or form body follows
// ("a=1&password=x&b=2", "password%3Dx%26user%3Db"). The two parts share no character, so
// the repetition cannot backtrack. "…" is the cap's own mark and never a value, so cutting
// after "token:" stays stable.
const VALUE_CHAR = String.raw`[^ "',;&)\]}…%]`;
/** VALUE for a pattern that ignores case in Python (`anyCase`) or not. */
function valuePattern(ignoreCase: boolean): string {
  const assign = ignoreCase ? ASSIGN_ANY_CASE : ASSIGN;
  const notRedacted = ignoreCase ? NOT_REDACTED_ANY_CASE : NOT_REDACTED;
  const lonePercent = String.raw`%(?!26[${W}.-]*${assign})`; // "%26" before a key is a form body's "&"
  // One character, then runs of the rest split at each "%" ("unrolled": no run is ambiguous).
  const part = `(?:${VALUE_CHAR}|${lonePercent})${VALUE_CHAR}*(?:${lonePercent}${VALUE_CHAR}*)*`;
  // Python's run of joining characters is possessive ("++"), which JavaScript lacks. A
  // plain "+" matches the same: the look-ahead at its end refuses each of these
  // characters, so no shorter run it could give back would match.
  const join = String.raw`[,;&)\]}]+(?![${W}.-]*${assign})${notRedacted}(?=[^ "',;&)\]}…])`;
  return String.raw`(?:"[^"]*"?|'[^']*'?|${part}(?:${join}${part})*)`;
}
const VALUE = valuePattern(false);
const VALUE_ANY_CASE = valuePattern(true);
// A quoted key must have a quoted value: "Error calling tool 'get_token': disk full". In a
// double-quoted value, as in JSON, a backslash escapes the next character: "ab\"cd" is one.
// (Python's "." takes any character but "\n", and no line break is left in the window.)
const QUOTED_PAIR = new RegExp(
  String.raw`(?<key>["'][${W}.-]*?${KEY_WORD}["'] *${SEPARATOR} *)` +
    String.raw`(?<value>"(?:[^"\\]|\\.)*"?|'[^']*'?)`,
  "gu",
);
// JSON inside a JSON string escapes its quotes: {\"client_secret\":\"x\",\"pin\":1}. Such a
// key is never prose, so a bare value (a number, true, null) goes too.
const ESCAPED_PAIR = new RegExp(
  String.raw`(?<key>\\"[${W}.-]*?${KEY_WORD}\\" *${SEPARATOR} *)${NOT_REDACTED_ANY_CASE}` +
    String.raw`(?<value>\\"[^"]*"?|[${W}.+-]+)`,
  "gu",
);
// "Authorization: Bearer x" keeps its scheme; a scheme word alone is not a credential.
// "Basic/x.txt" is no scheme word: a later pass would make it "<path>", then a value; so
// the scheme ends where a path, e-mail or key could not go on ("Bearer…" is the cap's).
const SCHEME = `(?:${["bearer", "basic", "token", "digest"].map(anyCase).join("|")})`;
// A key name starts after no word character, or after the "%26" ("&") of a form body.
const KEY_NAME =
  String.raw`(?:(?<![${W}.-])|(?<=%26))${SHORT_KEY_BEFORE_COLON}` +
  String.raw`[${W}.-]*?(?:${KEY_WORD}|${SHORT_KEY_FIRST}${PART_START}${SHORT_KEY_WORD})` +
  String.raw`${KEY_SUFFIX}?(?![${W}-])`;
const BARE_PAIR = new RegExp(
  String.raw`(?<key>${KEY_NAME} *${SEPARATOR} *(?:${SCHEME} +)?)` +
    String.raw`${NOT_REDACTED_ANY_CASE}(?!${SCHEME}(?![${W}.~/\\@+-]))(?<value>${VALUE_ANY_CASE})`,
  "gu",
);
// A MySQL client's command up to the shell's next "|", ";" or "&"; quoted arguments whole.
// Python's `\b` knows letters of any script, JavaScript's only ASCII: so look-arounds.
const MYSQL_COMMAND = new RegExp(
  String.raw`(?<![${W}])(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlcheck|mysqlshow|mysqlsh|mariadb)(?![${W}])` +
    String.raw`[^|;&'"]*(?:(?:'[^']*'?|"[^"]*"?)[^|;&'"]*)*`,
  "gu",
);
// In it, a password glued to its flag: "mysql -u root -pS3cret db". "-p" alone prompts, "-P
// 3306" is the port; a command of another program ("cp -pr") has no such flag.
const GLUED_PASSWORD = new RegExp(
  String.raw`(?<key>(?<= )-p)${NOT_REDACTED}(?<value>'[^']*'?|"[^"]*"?|[^ …]+)`,
  "gu",
);
const ENV_ASSIGNMENT = new RegExp(
  String.raw`(?<![${W}.-])(?<key>[A-Z][A-Z0-9_]+=)${NOT_REDACTED}(?<value>${VALUE})`,
  "gu",
);
const AUTH_CREDENTIAL = new RegExp(
  String.raw`(?<![${W}])(?<scheme>${anyCase("bearer")}|${anyCase("basic")}) +` +
    String.raw`(?<credential>[${ANY_CASE_LETTERS}0-9._~+/=-]+)`,
  "gu",
);

// Prose: a keyword, then a filler, then a word. See the module comment for the rule.
// Longer forms first, so "session id" is read before "session" and "auth token" before "auth".
const PROSE_KEYWORDS = [
  "password", "passwd", "passphrase", "passcode", "pwd", "token", "secret", "api key",
  "apikey", "access key", "secret key", "private key", "signing key", "encryption key",
  "master key", "license key", "ssh key", "auth token", "access token", "refresh token",
  "id token", "session token", "bearer token", "client secret", "authorization", "auth",
  "bearer", "credential", "session id", "sessionid", "session", "cookie", "pin", "otp",
  "totp", "mfa code", "2fa code", "verification code", "security code", "one-time code",
  "signature",
]; // prettier-ignore
// Their values are often plain words ("swordfish"), so any word goes but the stop words.
const PASSWORD_WORDS: ReadonlySet<string> = new Set([
  "password", "passwd", "passphrase", "passcode", "pwd",
]); // prettier-ignore
// Words that follow a password word in error texts. Seen on a value, they keep it readable.
const PROSE_STOP_WORDS: ReadonlySet<string> = new Set([
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
]); // prettier-ignore
// "Authorization: Bearer ..." names its scheme next; the scheme is not the credential.
const SCHEME_WORDS: ReadonlySet<string> = new Set([
  "bearer", "basic", "token", "digest", "negotiate", "ntlm",
]); // prettier-ignore
// A space or hyphen in a keyword stands for " ", "_", "-" or nothing ("api key", "api_key",
// "API-Key", "apikey"); the keywords hold no other character to escape.
const PROSE_KEY_SOURCE =
  String.raw`(?<![${W}.-])(?:[${W}.-]*[_.-])?(?<word>` +
  [...PROSE_KEYWORDS]
    .sort((a, b) => b.length - a.length) // stable: equal lengths keep their order
    .map((keyword) => anyCase(keyword).replace(/[ -]/gu, "[ _-]?"))
    .join("|") +
  String.raw`)${anyCase("s")}?(?![${W}-])(?<quote>["']?)`;
const PROSE_KEY = new RegExp(PROSE_KEY_SOURCE, "gu");
const WHOLE_PROSE_KEY = new RegExp(`^(?:${PROSE_KEY_SOURCE})$`, "u");
// The patterns below are matched where the previous one ended (the "y" flag).
const PROSE_FOR = new RegExp(
  String.raw` +(?:${anyCase("for")}|${anyCase("of")}) +` +
    String.raw`(?:${anyCase("user")} +|${anyCase("account")} +)?[^ :=]+`,
  "uy",
);
const PROSE_FIELD = / *[:=] */uy;
const PROSE_COPULA = new RegExp(
  String.raw` +(?:${anyCase("is")}|${anyCase("was")}|${anyCase("equals")})` +
    String.raw`(?: +${anyCase("set")} +${anyCase("to")})? +| +${anyCase("set")} +${anyCase("to")} +`,
  "uy",
);
const PROSE_GAP = / +/uy;
// A quoted string (an unclosed quote runs to the end, as in VALUE), or the next word whole:
// a password may hold any symbol ("Tr0ub4dor&3"). "…" is the cap's own mark, never a value.
const PROSE_VALUE = /"[^"]*"?|'[^']*'?|[^ …]+/uy;
const PROSE_TRAILING = ".,;:!?)]}\"'"; // ends the sentence or the enclosing brackets
const MARKERS = [REDACTED, PATH_MARKER, EMAIL_MARKER];
const MIN_LETTER_RUN = 20; // letters-only words this long are keys, not English

const URL_PATTERN =
  /(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*:\/\/[A-Za-z0-9._~%!$&*+,;=:@/?#[\]-]*/gu;
const PLAIN_SEGMENT = /^[A-Za-z][A-Za-z0-9_-]{0,15}$/u;
const TRAILING_PUNCTUATION = ".,;:!?";

// ASCII `\w` here, as the Python pattern is compiled with re.ASCII.
const EMAIL = /(?<![A-Za-z0-9_.%+-])[A-Za-z0-9_.%+-]+@[A-Za-z0-9_%+-]+\.[A-Za-z0-9_.%+@-]+/gu;
const WINDOWS_PATH = new RegExp(String.raw`(?<![A-Za-z0-9])[A-Za-z]:[\\/][${W}.~/\\@+$-]*`, "gu");
const SLASHED_WORD = new RegExp(String.raw`(?<![${W}.~/\\-])[${W}.~-]*[/\\][${W}.~/\\@+-]*`, "gu");
const FILE_EXTENSION = /\.[A-Za-z][A-Za-z0-9]{0,7}$/u;
const OPAQUE_RUN = /(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{32,}={0,2}/gu;
const DIGIT = /[0-9]/u;

/**
 * `text` without secrets or private detail, on one line, at most `maxChars` long.
 *
 * @param text an error text as a tool, server or harness wrote it.
 * @param maxChars the longest result, "…" included; at least 1.
 */
export function redact(text: string, maxChars: number = DEFAULT_MAX_CHARS): string {
  if (!Number.isInteger(maxChars) || maxChars < 1) {
    throw new ConfigError(`maxChars must be an integer of at least 1, but was ${maxChars}`);
  }
  const scanLimit = SCAN_FACTOR * maxChars;
  const head = codePointSlice(text, scanLimit);
  const cut = head.length < text.length;
  let window = head.split(PYTHON_WHITESPACE).filter(Boolean).join(" ");
  if (cut) window = window.slice(0, Math.max(0, window.lastIndexOf(" "))); // half a secret
  window = window.replace(UNPRINTABLE, REPLACEMENT_CHARACTER);
  return cap(scrub(window), maxChars, cut);
}

function scrub(text: string): string {
  // Keys first: a key inside a pair, a URL or a PEM block is gone whatever parses next.
  text = text.replace(PREFIXED_KEY, REDACTED);
  text = text.replace(SK_KEY, (match) => (KEY_BODY.test(match) ? REDACTED : match));
  text = text.replace(PRIVATE_KEY_BLOCK, REDACTED);
  text = text.replace(ESCAPED_PAIR, redactPair);
  text = text.replace(QUOTED_PAIR, redactPair);
  text = text.replace(BARE_PAIR, redactPair);
  text = text.replace(ENV_ASSIGNMENT, redactPair);
  // Prose before schemes: a scheme pair "Basic Basic" kept whole must not hide what
  // follows once prose has removed the word before it.
  text = redactProse(text);
  text = redactCredentials(text);
  // A URL is rewritten whole; the plain-text rules must not see its host:port or path.
  const pieces: string[] = [];
  let position = 0;
  for (const url of text.matchAll(URL_PATTERN)) {
    const start = url.index ?? 0;
    pieces.push(scrubPlain(text.slice(position, start)), scrubUrl(url[0]));
    position = start + url[0].length;
  }
  pieces.push(scrubPlain(text.slice(position)));
  // Last: where a command line ends is only settled once every other pass has had its
  // say (or redact would not be idempotent), as in the Python implementation.
  return pieces
    .join("")
    .replace(MYSQL_COMMAND, (command) => command.replace(GLUED_PASSWORD, redactPair));
}

function scrubPlain(text: string): string {
  text = replaceKeepingPunctuation(EMAIL, EMAIL_MARKER, text);
  // Opaque runs before paths: a run ends at "." where a path goes on.
  text = text.replace(OPAQUE_RUN, redactOpaque);
  text = replaceKeepingPunctuation(WINDOWS_PATH, PATH_MARKER, text);
  return text.replace(SLASHED_WORD, pathOrWord);
}

function scrubUrl(whole: string): string {
  const [url, tail] = splitTrailing(whole);
  const [scheme, , afterScheme] = partition(url, "://");
  const [beforeFragment, hashSign] = partition(afterScheme, "#");
  const [beforeQuery, questionMark] = partition(beforeFragment, "?");
  const [authority, slash, path] = partition(beforeQuery, "/");
  const at = authority.lastIndexOf("@");
  const hostPort = at < 0 ? authority : authority.slice(at + 1);
  const parts = [scheme, "://"];
  if (at >= 0) parts.push(`${REDACTED}@`);
  parts.push(hostPort.replace(OPAQUE_RUN, redactOpaque));
  if (slash) parts.push(`/${shortenUrlPath(path)}`);
  if (questionMark) parts.push(`?${REDACTED}`);
  if (hashSign) parts.push(`#${REDACTED}`);
  parts.push(tail);
  return parts.join("");
}

/** Keep a short plain first segment ("mcp", "v1"); the rest may hold a token. */
function shortenUrlPath(path: string): string {
  const [first, slash, rest] = partition(path, "/");
  if (!first && !rest) return "";
  if (!PLAIN_SEGMENT.test(first)) return PATH_MARKER;
  if (rest) return `${first}/${PATH_MARKER}`;
  return first + slash;
}

function pathOrWord(match: string): string {
  const [word, tail] = splitTrailing(match);
  const segments = word.replaceAll("\\", "/").split("/").filter(Boolean);
  const last = segments.at(-1);
  const hasExtension = last !== undefined && FILE_EXTENSION.test(last);
  let isPath: boolean;
  if (["~", "./", "../", ".\\", "..\\"].some((prefix) => word.startsWith(prefix))) {
    isPath = true;
  } else if (word.startsWith("/") || word.startsWith("\\")) {
    isPath = segments.length >= 2 || hasExtension; // "/etc/passwd", not a route "/mcp"
  } else {
    isPath = hasExtension; // "secret/file.txt", not "tools/call"
  }
  return isPath ? PATH_MARKER + tail : match;
}

function redactPair(...args: unknown[]): string {
  const { key, value } = args.at(-1) as { key: string; value: string };
  // A JSON-escaped quote (\") is kept whole, as a plain one is.
  let quote = "";
  if (value.startsWith('\\"')) quote = value.slice(0, 2);
  else if (value[0] === '"' || value[0] === "'") quote = value[0];
  return key + quote + REDACTED + quote;
}

function redactCredentials(text: string): string {
  const pieces: string[] = [];
  let done = 0;
  let searchFrom = 0;
  let match: RegExpExecArray | null;
  while ((match = searchAt(AUTH_CREDENTIAL, text, searchFrom)) !== null) {
    const { scheme, credential } = match.groups as { scheme: string; credential: string };
    const end = match.index + match[0].length;
    if (isAlpha(credential) && (isLower(credential) || isTitle(credential))) {
      // Prose: "bearer token", "Basic Auth". The word may itself be a scheme with a
      // credential after it ("Basic Basic dXNl"), so the search goes on from it.
      searchFrom = end - credential.length;
      continue;
    }
    pieces.push(text.slice(done, match.index), `${scheme} ${REDACTED}`);
    done = searchFrom = end;
  }
  pieces.push(text.slice(done));
  return pieces.join("");
}

/** Redact the word after each prose keyword that the rule in the module comment names. */
function redactProse(text: string): string {
  const pieces: string[] = [];
  let done = 0; // text.slice(0, done) is in pieces
  let searchFrom = 0;
  let key: RegExpExecArray | null;
  // Each turn moves past a keyword; each match reads only the few words after it.
  while ((key = searchAt(PROSE_KEY, text, searchFrom)) !== null) {
    searchFrom = key.index + key[0].length;
    const found = proseValue(text, key);
    if (found === null) continue;
    const [value, always] = found;
    const raw = value[0];
    const quote = raw[0] === '"' || raw[0] === "'" ? raw[0] : "";
    const content = quote ? stripTrailing(raw.slice(1), quote) : raw;
    const marker = MARKERS.find((marker) => content.startsWith(marker)) ?? "";
    if (marker) {
      // Already redacted. What is glued after the marker ("[REDACTED],api key x") is
      // read on, as it is once a later pass has removed this keyword.
      searchFrom = value.index + quote.length + marker.length;
      continue;
    }
    // A later pass may turn part of a word into a marker ("@./" -> "@<path>"); judged
    // without its markers (and before the "]" of one is taken for punctuation), the word
    // reads the same the next time.
    let bare = withoutMarkers(content);
    if (!quote) bare = stripTrailing(bare, PROSE_TRAILING);
    if (!isProseValue(bare, quote !== "")) continue; // another keyword or a scheme word may follow
    const strong = PASSWORD_WORDS.has((key.groups as { word: string }).word.toLowerCase());
    if (!(always || quote || isSecretShaped(bare) || (strong && !isStop(bare)))) continue;
    pieces.push(text.slice(done, value.index));
    pieces.push(quote ? quote + REDACTED + quote : REDACTED + trailing(raw));
    done = searchFrom = value.index + raw.length;
  }
  pieces.push(text.slice(done));
  return pieces.join("");
}

/** The value word after `key`, and whether its filler makes it a value whatever it is. */
function proseValue(text: string, key: RegExpExecArray): [RegExpExecArray, boolean] | null {
  let position = key.index + key[0].length;
  if ((key.groups as { quote: string }).quote) {
    // A quoted key is JSON or a quoted name: "pin": 4921 goes, 'get_token': disk stays.
    const field = matchAt(PROSE_FIELD, text, position);
    if (field === null) return null;
    const value = matchAt(PROSE_VALUE, text, field.index + field[0].length);
    return value === null ? null : [value, false];
  }
  const clause = matchAt(PROSE_FOR, text, position);
  if (clause !== null) position = clause.index + clause[0].length; // "password for user bob is x"
  const field = matchAt(PROSE_FIELD, text, position);
  if (field !== null) {
    const value = matchAt(PROSE_VALUE, text, field.index + field[0].length);
    return value === null ? null : [value, true];
  }
  let filler = matchAt(PROSE_COPULA, text, position);
  if (filler === null) {
    if (clause !== null) return null; // "password for user bob rejected": no value named
    filler = matchAt(PROSE_GAP, text, position);
    if (filler === null) return null;
  }
  const value = matchAt(PROSE_VALUE, text, filler.index + filler[0].length);
  return value === null ? null : [value, false];
}

function isProseValue(word: string, quoted: boolean): boolean {
  if (!word || "([{<".includes(word[0] as string) || !/[\p{L}\p{N}]/u.test(word)) {
    return false; // "(expired)", "-", "<path>": prose or a marker, not a secret
  }
  if (quoted) return true; // a literal, even 'api key': the cap may cut it to 'api…' next time
  return !SCHEME_WORDS.has(word.toLowerCase()) && !WHOLE_PROSE_KEY.test(word);
}

/** A digit, a symbol, odd mixed case or a long letter run: no English word looks so. */
function isSecretShaped(word: string): boolean {
  const characters = Array.from(word);
  if (!isAlpha(word) || characters.length >= MIN_LETTER_RUN) return true;
  if (isLower(word) || isUpper(word) || isTitle(word)) return false;
  // CamelCase names ("TokenExpiredError") start upper and put a lower after each upper.
  const camel =
    isUpperCharacter(characters[0] as string) &&
    !characters.some(
      (character, at) =>
        at + 1 < characters.length &&
        isUpperCharacter(character) &&
        !isLowerCharacter(characters[at + 1] as string),
    );
  return !camel || isUpperCharacter(characters.at(-1) as string);
}

/** The punctuation that ends `word`, never part of a marker inside it. */
function trailing(word: string): string {
  const ends = MARKERS.filter((marker) => word.includes(marker)).map(
    (marker) => word.lastIndexOf(marker) + marker.length,
  );
  const body = word.slice(Math.max(0, ...ends));
  return body.slice(stripTrailing(body, PROSE_TRAILING).length);
}

function withoutMarkers(word: string): string {
  for (const marker of MARKERS) word = word.replaceAll(marker, "");
  return word;
}

function isStop(word: string): boolean {
  return PROSE_STOP_WORDS.has(word.toLowerCase());
}

function redactOpaque(match: string): string {
  // Words and identifiers this long rarely hold a digit; keys, hashes and ids do.
  return DIGIT.test(match) ? REDACTED : match;
}

function replaceKeepingPunctuation(pattern: RegExp, marker: string, text: string): string {
  return text.replace(pattern, (match) => marker + splitTrailing(match)[1]);
}

function splitTrailing(text: string): [string, string] {
  const core = stripTrailing(text, TRAILING_PUNCTUATION);
  return [core, text.slice(core.length)];
}

/** Python's str.rstrip(characters), for ASCII `characters`. */
function stripTrailing(text: string, characters: string): string {
  let end = text.length;
  while (end > 0 && characters.includes(text[end - 1] as string)) end--;
  return text.slice(0, end);
}

/** Python's pattern.search(text, position): the first match at or after `position`. */
function searchAt(pattern: RegExp, text: string, position: number): RegExpExecArray | null {
  pattern.lastIndex = position; // a "g" pattern
  return pattern.exec(text);
}

/** Python's pattern.match(text, position): a match that starts at `position`. */
function matchAt(pattern: RegExp, text: string, position: number): RegExpExecArray | null {
  pattern.lastIndex = position; // a "y" pattern
  return pattern.exec(text);
}

/** Python's str.partition: before, separator (or ""), after. */
function partition(text: string, separator: string): [string, string, string] {
  const at = text.indexOf(separator);
  if (at < 0) return [text, "", ""];
  return [text.slice(0, at), separator, text.slice(at + separator.length)];
}

function cap(text: string, maxChars: number, cut: boolean): string {
  const points = codePoints(text);
  if (points.length <= maxChars && !cut) return text;
  if (points.length < maxChars) return text + ELLIPSIS;
  let head = points.slice(0, maxChars - ELLIPSIS.length).join("");
  if (points[maxChars - ELLIPSIS.length] !== " ") {
    // Drop the cut word: a piece of a marker or a key would read differently next time.
    head = head.slice(0, Math.max(0, head.lastIndexOf(" ")));
  }
  return head.replace(/ +$/u, "") + ELLIPSIS;
}

/** A pattern for a lowercase ASCII word that matches it as Python's re.IGNORECASE does. */
function anyCase(word: string): string {
  return word.replace(
    /[a-z]/gu,
    (letter) => `[${letter}${OTHER_CASES[letter] ?? letter.toUpperCase()}]`,
  );
}

// Python's str predicates: str.isalpha() is \p{L}; a character is upper or lower by the
// Unicode Uppercase and Lowercase properties, title by the Lt category.
function isAlpha(text: string): boolean {
  return /^\p{L}+$/u.test(text);
}

function isUpperCharacter(character: string): boolean {
  return /^\p{Uppercase}$/u.test(character);
}

function isLowerCharacter(character: string): boolean {
  return /^\p{Lowercase}$/u.test(character);
}

function isTitleCharacter(character: string): boolean {
  return /^\p{Lt}$/u.test(character);
}

/** Python's str.islower(): a cased character, and none upper or title. */
function isLower(text: string): boolean {
  let cased = false;
  for (const character of text) {
    if (isUpperCharacter(character) || isTitleCharacter(character)) return false;
    cased ||= isLowerCharacter(character);
  }
  return cased;
}

/** Python's str.isupper(): a cased character, and none lower or title. */
function isUpper(text: string): boolean {
  let cased = false;
  for (const character of text) {
    if (isLowerCharacter(character) || isTitleCharacter(character)) return false;
    cased ||= isUpperCharacter(character);
  }
  return cased;
}

/** Python's str.istitle(): upper or title only after uncased, lower only after cased. */
function isTitle(text: string): boolean {
  let cased = false;
  let previousIsCased = false;
  for (const character of text) {
    if (isUpperCharacter(character) || isTitleCharacter(character)) {
      if (previousIsCased) return false;
      previousIsCased = cased = true;
    } else if (isLowerCharacter(character)) {
      if (!previousIsCased) return false;
      previousIsCased = cased = true;
    } else {
      previousIsCased = false;
    }
  }
  return cased;
}

function codePoints(text: string): string[] {
  return /[\ud800-\udfff]/.test(text) ? Array.from(text) : text.split("");
}

/** The first `count` code points of `text`. */
function codePointSlice(text: string, count: number): string {
  if (text.length <= count) return text;
  if (!/[\ud800-\udfff]/.test(text.slice(0, 2 * count))) return text.slice(0, count);
  let end = 0;
  for (let taken = 0; taken < count && end < text.length; taken++) {
    const code = text.charCodeAt(end);
    const pair = code >= 0xd800 && code <= 0xdbff && isLowSurrogate(text.charCodeAt(end + 1));
    end += pair ? 2 : 1;
  }
  return text.slice(0, end);
}

function isLowSurrogate(code: number): boolean {
  return code >= 0xdc00 && code <= 0xdfff;
}
