/**
 * Error texts scrubbed before they leave the harness: the same rules, and the same result
 * for the same text, as mcp-breaker's `clients/python/mcp_breaker_client/shared/redact.py` (shared test vectors
 * keep the two in step).
 *
 * A tool's error goes onto the harness's `mcp.tool.call` span, and spans travel on to
 * tracing backends as they are. Tool servers write errors for their own operators, so
 * they can hold credentials, private paths and addresses. `redact` keeps what failed and
 * why (the message, tool names, JSON-RPC codes, the upstream's scheme, host and port) and
 * removes:
 *
 * - keys with a known prefix (`sk-`, `ghp_`, `github_pat_`, `xoxb-`, `glpat-`, `AKIA`,
 *   `AIza`), JWTs, Discord, Terraform Cloud and Azure AD keys, PEM and PuTTY private keys,
 *   runs of 32+ base64/hex characters holding a digit → `[REDACTED]`;
 * - the value after a key that names a secret (`password=`, `token:`, `"api_key":`, ...),
 *   after an `UPPER_SNAKE=` environment name, after `Bearer` or `Basic`. `pass`, `pw` and
 *   `key` name a secret as a whole part of a key name (`dbPass`, `DB-PASS`, `accessKeyId`;
 *   not `compass` or `hotkey`), and alone `pass` and `key` only before `=` ("key: not
 *   found" stays). The separator may be fullwidth (`＝`) or URL-encoded (`%3D`), the quotes
 *   JSON-escaped (`{\"client_secret\":\"x\"}`). A bare value runs to the next space, over
 *   the `&`, `;` and `,` a password may hold, but not into the next `key=` of a query
 *   string or form body (`a=1&password=x&b=2`: only `x` goes);
 * - the password glued to a MySQL client's flag (`mysql -u root -pS3cret`) → `-p[REDACTED]`;
 * - what follows a credential word in other syntaxes, the word staying: an option naming a
 *   secret (`--password X`, `--api-key X`, `-passin pass:X`), the short option of a command
 *   that takes a password there (`sshpass -p`, `docker login -p`, `redis-cli -a`, `sqlcmd
 *   -P`, `ldapsearch -w`; not `ssh -p 22`), a user and password in one option (`curl -u
 *   user:pass`, `-U user%pass`), an XML element or a named value naming a secret
 *   (`<password>X</password>`, `<add key="Password" value="X"/>`, `name: DB_PASSWORD value:
 *   X`), a key name in another language or with letters outside ASCII, compared without its
 *   accents (`pässword=`, `contraseña:`, `mot_de_passe=`, `密码=`), and a verb of setting
 *   (`password was reset to X`, `changed from X to Y`). The words of eleven languages are in
 *   `secret-words.ts`;
 * - keys with the prefixes public secret-scanning rule sets key on (Stripe `sk_live_`,
 *   SendGrid `SG.`, npm, PyPI, Hugging Face, Vault, Grafana, ... see `SCANNER_KEY`), and a
 *   run of 20+ letters and digits that mixes upper case, lower case and digits and changes
 *   between them at 40% or more of its steps, as random keys do and names do not;
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
 * Prose. A keyword is one of `PROSE_KEYWORDS` (password, token, api key, ...; mot de passe,
 * Passwort, contraseña, senha, wachtwoord, пароль, jeton, clé API, ... of `secret-words.ts`;
 * a plural or a glued prefix such as `db_password` or `X-Api-Key` too). Between it and the
 * value may stand `:` or `=` (a field), `is`/`was`/`equals`/`is now`/`has been` or a copula
 * of another language (`est`, `ist`, `es`, `é`, `è`; optionally `set to`), a verb of setting
 * (`was reset to`: the value goes unless it is a stop word), or `for`/`of`
 * [`user`/`account`] *name* followed by a field or a copula ("password for user bob is x":
 * the name stays). The value is the next word, or a quoted string. In Chinese, Japanese and
 * Korean the value is the run of another script right after the word and its particle
 * (`密码是abc123`, `パスワードはx1です`), and goes unless it is a stop word. It becomes
 * `[REDACTED]` when it follows a field (a quoted key such as `"pin":` counts only with a
 * secret-shaped or quoted value), or it is quoted, or it is secret-shaped (a digit or a
 * character other than a letter, mixed case that camel-case names do not have, 20 letters
 * or more), or it follows a password word or a verb of setting and is not one of the
 * ordinary follow-words in `PROSE_STOP_WORDS`. A word starting with a bracket, one without a
 * letter or digit, another keyword or an auth scheme is not a value. So "Unauthorized: token
 * expired" and "invalid api key" read as written.
 */

import { ConfigError } from "./errors.js";
import * as secretWords from "./secret-words.js";

export const DEFAULT_MAX_CHARS = 300;
export const SCAN_FACTOR = 4;

export const REDACTED = "[REDACTED]";
export const PATH_MARKER = "<path>";
export const EMAIL_MARKER = "<email>";
const ELLIPSIS = "…";

// Python's `\w` on text: letters and numbers of any script, and "_" (no combining marks).
const W = String.raw`\p{L}\p{N}_`;
// Python's re.IGNORECASE matches a letter in either case, any letter that lower-cases to
// it ("İ" to "i", the Kelvin sign to "k"), and the few letters its re._casefix names: "ı"
// for "i", "ſ" for "s", and Cyrillic letters of Unicode 9 that fold to "в", "д", "о", "с",
// "т", "ъ" and "ѣ". JavaScript's /iu misses "İ" and "ı", and it takes U+0345 (a combining
// mark that folds to "ι") for a letter in `\p{L}`. So no pattern below has the "i" flag:
// `anyCase` spells the cases out; this table holds, by a letter's lower case, the cases its
// own toUpperCase() and toLowerCase() do not give.
const OTHER_CASES: Readonly<Record<string, string>> = {
  i: "\u0130\u0131",
  k: "\u212a",
  s: "\u017f",
  в: "\u1c80",
  д: "\u1c81",
  о: "\u1c82",
  с: "\u1c83",
  т: "\u1c84\u1c85",
  ъ: "\u1c86",
  ѣ: "\u1c87",
};
const ANY_CASE_LETTERS = String.raw`A-Za-z\u0130\u0131\u017f\u212a`; // [A-Za-z], ignoring case
// Python's str.split() whitespace. After the window is split on it and joined with
// single spaces, " " is the only whitespace left, so the patterns below write " " where
// the Python ones write `\s` (JavaScript's `\s` is a different set).
const PYTHON_SPACE = String.raw`\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000`;
const PYTHON_WHITESPACE = new RegExp(`[${PYTHON_SPACE}]+`, "u");
// Python's str.isalnum(): `\p{L}` and `\p{N}` (the same sets, for the characters Python's
// Unicode version knows).
const ALPHANUMERIC = /[\p{L}\p{N}]/u;

const UNPRINTABLE = /[\x00-\x1f\x7f-\x9f\ud800-\udfff\u202a-\u202e\u2066-\u2069]/gu;
const REPLACEMENT_CHARACTER = "\ufffd";

// Keys found by their prefix. No word boundary before them: a key glued to text is a key.
const PREFIXED_KEY = new RegExp(
  String.raw`(?:gh[pousr]_|github_pat_|glpat-|xox[abposr]-|AIza)[A-Za-z0-9_-]{16,}` +
    String.raw`|(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[0-9A-Z]{16}` +
    String.raw`|eyJ[A-Za-z0-9_.-]{16,}` + // a JWT: base64url of '{"', then more dotted parts
    String.raw`|[MN][A-Za-z0-9_-]{23,}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,}`, // a Discord bot token
  "gu",
);
// Keys known by a mark in their middle, looked for only where the mark is (a pattern that
// starts with a character class is tried at every position).
const MARKED_KEYS: ReadonlyArray<readonly [string, RegExp]> = [
  ["atlasv1", /[a-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{16,}/gu], // Terraform Cloud
  ["Q~", /[A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,}/gu], // an Azure AD secret
];
// The prefixes public secret-scanning rule sets (gitleaks, detect-secrets) key on: Stripe,
// SendGrid, npm, PyPI, Hugging Face, Vault, Grafana, ... (redact.py names them all). Some
// are also words ("secret_manager_unavailable", "key-value-store"), so what follows must
// look like a key: a digit, or both cases (redactScannerKey).
const SCANNER_KEY = new RegExp(
  String.raw`(?<![A-Za-z0-9_.-])` +
    String.raw`(?:[sr]k_(?:live|test|prod)_|SG\.|npm_|pypi-|shp(?:at|ca|pa|ss)_|do[opr]_v1_|hf_` +
    String.raw`|gl(?:c|sa)_|hv[sb]\.|lin_api_|PMAK-|pul-|sq0(?:atp|csp)-|ATATT3|AGE-SECRET-KEY-1` +
    String.raw`|GOCSPX-|ya29\.|xapp-|gl(?:ptt|rt|dt|cbt|soat|ffct|imt|oas)-|GR1348941|sntry[su]_` +
    String.raw`|dp\.(?:pt|st|sa|ct)\.|dt0c01\.|NRAK-|secret_|figd_|pscale_(?:tkn|pw|oauth)_` +
    String.raw`|rubygems_|xkeysib-|LTAI|gsk_|r8_|dckr_pat_|sbp_|ATBB|pplx-|key-|AKCp)` +
    String.raw`(?<body>[A-Za-z0-9_.+/=-]{10,})`,
  "gu",
);
// "sk-" also ends words ("task-scheduler-service"); a key holds a long alphanumeric run.
const SK_KEY = /sk-[A-Za-z0-9_-]{16,}/gu;
const KEY_BODY = /[A-Za-z0-9]{16}/u;
// (Python's "." takes any character but "\n", as JavaScript's does: no line break is left
// in the window.)
const PRIVATE_KEY_BLOCK = new RegExp(
  String.raw`-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[^-]*` +
    String.raw`(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----)?` +
    String.raw`|PuTTY-User-Key-File-[0-9]+:.*`, // a PuTTY key file: the rest of the text
  "gu",
);

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

// What follows a credential word in the syntaxes error texts quote. A value after them is
// a word up to the next space (a quote, "…" and "]" end it too), or a quoted string.
const WORD_VALUE = String.raw`(?:"[^"]*"?|'[^']*'?|[^ "'…\]]+)`;
// A command-line option naming a secret, then its value: "--password X", "--api-key X",
// "-passin pass:X" (openssl). "--password-stdin" and "--pass-through" name none. The words
// in Python's order: where one fails ("pass" in "-passin"), the next is tried.
const FLAG_SECRET_WORDS = [
  "password", "passwd", "passphrase", "passcode", "pass", "pwd", "token", "secret",
  "api[_-]?key", "key", "credentials?", "passin", "passout",
]; // prettier-ignore
const FLAG_VALUE = new RegExp(
  String.raw`(?<![${W}-])(?<key>--?(?:[${ANY_CASE_LETTERS}0-9]+[_-])*` +
    `(?:${FLAG_SECRET_WORDS.map(anyCase).join("|")})(?: +|=)(?:${anyCase("pass")}:)?)` +
    String.raw`${NOT_REDACTED_ANY_CASE}(?!-)(?<value>${WORD_VALUE})`,
  "gu",
);
// A user and password in one option: "curl -u user:pass", "--user user:pass", smbclient's
// "-U user%pass", lftp's "-u user,pass". Digits on both sides are a uid:gid ("-u 1000:1000").
const USER_PASSWORD = new RegExp(
  String.raw`(?<![${W}-])(?<key>(?:-[uUa]|--user|--auth|--basic-auth|--proxy-user|--http-user|--creds)` +
    String.raw`(?: +|=)["']?(?<user>[^ :%,"'…]+)[:%,])` +
    String.raw`${NOT_REDACTED}(?<value>[^ "'…]+)`,
  "gu",
);
// A name that names a secret, then its value, as XML attributes and Kubernetes env
// entries write them: <add key="Password" value="x"/>, name: DB_PASSWORD value: x.
const NAMED_VALUE = new RegExp(
  String.raw`(?<![${W}-])(?:${anyCase("name")}|${anyCase("key")}|${anyCase("id")}) *[:=] *` +
    String.raw`(?<quote>["']?)(?<name>[${W}.-]+)\k<quote> +` +
    String.raw`(?<key>${anyCase("value")} *[:=] *)${NOT_REDACTED_ANY_CASE}(?<value>${WORD_VALUE})`,
  "gu",
);
// An XML element naming a secret, and its text: <password>x</password>, <wsse:Password
// Type="...">x</wsse:Password>, <param name="token">x</param>. The text holds no "<", so
// each element is read once.
const XML_ELEMENT = new RegExp(
  String.raw`<(?<tag>[${W}.-]+(?::[${W}.-]+)?)(?<attributes> [^<>]*)?>` +
    String.raw`${NOT_REDACTED}(?<value>[^<]+)</\k<tag> *>`,
  "gu",
);
const XML_NAME_ATTRIBUTE = /(?:name|key|id) *= *["'](?<name>[^"'<>]*)["']/gu;
// Any name, then "=" or ":", then a value: redactForeignPairs decides by the name (one with
// a letter outside ASCII, or in another language: "pässword", "contraseña", "mot_de_passe",
// "密码").
const ANY_PAIR = new RegExp(
  String.raw`(?<![${W}.-])(?<name>[${W}.-]+)(?<key> *${SEPARATOR} *)${NOT_REDACTED_ANY_CASE}` +
    String.raw`(?<value>${VALUE_ANY_CASE})`,
  "gu",
);
// Letters NFKD does not take apart.
const UNMARKED_LETTERS: Readonly<Record<string, string>> = {
  ł: "l",
  ø: "o",
  đ: "d",
  ħ: "h",
  ı: "i",
  ß: "ss",
};
const UNMARKED_LETTER = new RegExp(`[${Object.keys(UNMARKED_LETTERS).join("")}]`, "gu");
// Chinese, Japanese and Korean: the word, its particle, then a run of another script.
const CJK_SCRIPT = String.raw`\u1100-\u11ff\u3000-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uff00-\uffef`;
const CJK_CHARACTER = new RegExp(`[${CJK_SCRIPT}]`, "u");
// The words and particles hold no character to escape; a space in a word may be left out.
const CJK_WORDS = [...secretWords.CJK_PASSWORD_WORDS, ...secretWords.CJK_OTHER_WORDS].map((word) =>
  anyCase(word).replaceAll(" ", " ?"),
);
const CJK_KEY = new RegExp(
  `(?<word>${CJK_WORDS.join("|")}) *(?:${secretWords.CJK_PARTICLES.join("|")})?` +
    ` *(?<value>[^ ${CJK_SCRIPT}…]+)`,
  "gu",
);
// A command whose short option takes a password, up to the shell's next "|", ";" or "&"
// as MYSQL_COMMAND reads it: sshpass -p, the mongo shells' -p, redis-cli -a, sqlcmd -P,
// the ldap tools' -w, and "login" of the registry and cloud clients (docker login -p,
// az login -p, cf login -p). Elsewhere "-p" is a port or "preserve" ("ssh -p 22").
const PASSWORD_OPTION: Readonly<Record<string, string>> = {
  sshpass: "p", mongo: "p", mongosh: "p", mongodump: "p", mongorestore: "p",
  mongoexport: "p", mongoimport: "p", "redis-cli": "a", "keydb-cli": "a", sqlcmd: "P",
  bcp: "P", osql: "P", ldapsearch: "w", ldapmodify: "w", ldapadd: "w",
  ldapdelete: "w", ldapwhoami: "w", ldappasswd: "w",
}; // prettier-ignore
const LOGIN_CLIENTS = [
  "docker", "podman", "nerdctl", "buildah", "skopeo", "oras", "helm", "crane", "regctl",
  "az", "cf", "oc",
]; // prettier-ignore
// The names hold letters and "-" only, which need no escape outside a class.
const PASSWORD_COMMAND = new RegExp(
  String.raw`(?<![${W}-])(?:(?<command>${Object.keys(PASSWORD_OPTION).join("|")})` +
    String.raw`|(?:${LOGIN_CLIENTS.join("|")})(?: +[${W}.-]+){0,3}? +login)(?![${W}-])` +
    String.raw`[^|;&'"]*(?:(?:'[^']*'?|"[^"]*"?)[^|;&'"]*)*`,
  "gu",
);
const PASSWORD_OPTIONS: Readonly<Record<string, RegExp>> = Object.fromEntries(
  Array.from("pPaw", (letter) => [
    letter,
    new RegExp(
      String.raw`(?<key>(?<= )-${letter} *)${NOT_REDACTED}(?!-)(?<value>'[^']*'?|"[^"]*"?|[^ …]+)`,
      "gu",
    ),
  ]),
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
  "signature", ...secretWords.PASSWORD_WORDS_ABROAD, ...secretWords.OTHER_WORDS_ABROAD,
]; // prettier-ignore
// Their values are often plain words ("swordfish"), so any word goes but the stop words.
// Compared without spaces, "_" or "-": "mot de passe", "mot_de_passe" and "motdepasse".
// (Python's `\s`, as the folded key names of namesSecret may hold any of its spaces.)
const WORD_SEPARATORS = new RegExp(String.raw`[${PYTHON_SPACE}_.'’-]+`, "gu");
const ENGLISH_PASSWORD_WORDS = ["password", "passwd", "passphrase", "passcode", "pwd"];
const PASSWORD_WORDS: ReadonlySet<string> = new Set(
  [...ENGLISH_PASSWORD_WORDS, ...secretWords.PASSWORD_WORDS_ABROAD].map((word) =>
    word.replace(WORD_SEPARATORS, ""),
  ),
);
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
  "default", "expire", "continue", "value", "values", "now", ...secretWords.STOP_WORDS_ABROAD,
]); // prettier-ignore
// "Authorization: Bearer ..." names its scheme next; the scheme is not the credential.
const SCHEME_WORDS: ReadonlySet<string> = new Set([
  "bearer", "basic", "token", "digest", "negotiate", "ntlm",
]); // prettier-ignore
// A space or hyphen in a keyword stands for " ", "_", "-" or nothing ("api key", "api_key",
// "API-Key", "apikey"); the keywords hold no other character to escape.
const PROSE_KEY_SOURCE =
  String.raw`(?<![${W}.-])(?:[${W}.-]*[_.-])?(?<word>` +
  longestFirst(PROSE_KEYWORDS)
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
const COPULAS = [
  "is", "was", "equals", "is now", "was now", "has been", "have been", "had been",
  ...secretWords.COPULAS_ABROAD,
]; // prettier-ignore
const PROSE_COPULA = new RegExp(
  ` +(?:${longestFirst(COPULAS).map(anyCasePhrase).join("|")})` +
    `(?: +${anyCasePhrase("set to")})? +| +${anyCasePhrase("set to")} +`,
  "uy",
);
// A verb of setting before the value ("was reset to X", "has been changed to X", "rotated
// to X", "changed from X to Y"): the value goes unless it is a stop word, whatever the
// keyword ("set to expire" stays).
const SETTING_AUXILIARIES = [
  "is", "was", "were", "are", "has been", "have been", "had been", "will be", "got", "been",
]; // prettier-ignore
const SETTING_VERBS = ["set", "changed", "updated", "rotated", "generated"];
const PROSE_SET_TO = new RegExp(
  ` +(?:(?:${SETTING_AUXILIARIES.map(anyCasePhrase).join("|")}) +)?` +
    `(?:${anyCase("re")})?(?:${SETTING_VERBS.map(anyCase).join("|")})` +
    ` +(?<preposition>${anyCase("to")}|${anyCase("from")}) +`,
  "uy",
);
const PROSE_TO = new RegExp(` +${anyCase("to")} +`, "uy");
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
// A shorter run is a token when its characters look drawn at random: upper, lower and
// digits, changing class at most steps ("9fJk2LmQ8rTzX4vB1nW7"), where a name changes it
// at word steps only ("Http2ServerConnectionHandler"). detect-secrets and gitleaks judge
// such runs by their entropy; this is the same idea, on the classes of the characters.
const TOKEN_RUN = /(?<![A-Za-z0-9+/_.-])[A-Za-z0-9_-]{20,}(?![A-Za-z0-9+/_-]|\.[A-Za-z0-9])/gu;
const MIN_CLASS_CHANGES = 0.4; // a share of the steps from one character to the next

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
  for (const [mark, pattern] of MARKED_KEYS) {
    if (text.includes(mark)) text = text.replace(pattern, REDACTED);
  }
  text = text.replace(SCANNER_KEY, redactScannerKey);
  text = text.replace(SK_KEY, (match) => (KEY_BODY.test(match) ? REDACTED : match));
  text = text.replace(PRIVATE_KEY_BLOCK, REDACTED);
  text = text.replace(ESCAPED_PAIR, redactPair);
  // Before the pairs: 'key="Password"' is a pair whose value names the secret next to it.
  text = text.replace(XML_ELEMENT, redactXmlElement);
  text = text.replace(NAMED_VALUE, redactNamedValue);
  text = text.replace(QUOTED_PAIR, redactPair);
  text = text.replace(BARE_PAIR, redactPair);
  text = text.replace(ENV_ASSIGNMENT, redactPair);
  text = redactForeignPairs(text);
  // What follows a credential word on a command line, then in prose.
  text = text.replace(USER_PASSWORD, redactUserPassword);
  text = text.replace(FLAG_VALUE, redactWordValue);
  // Prose before schemes: a scheme pair "Basic Basic" kept whole must not hide what
  // follows once prose has removed the word before it.
  text = redactProse(text);
  if (CJK_CHARACTER.test(text)) text = text.replace(CJK_KEY, redactCjkValue);
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
    .replace(MYSQL_COMMAND, (command) => command.replace(GLUED_PASSWORD, redactPair))
    .replace(PASSWORD_COMMAND, redactPasswordCommand);
}

function scrubPlain(text: string): string {
  text = replaceKeepingPunctuation(EMAIL, EMAIL_MARKER, text);
  // Opaque runs before paths: a run ends at "." where a path goes on.
  text = text.replace(OPAQUE_RUN, redactOpaque);
  text = text.replace(TOKEN_RUN, redactTokenRun);
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

/** The named groups of a match, the last argument a replace callback is given. */
function groupsOf(args: unknown[]): Record<string, string | undefined> {
  return args.at(-1) as Record<string, string | undefined>;
}

function redactPasswordCommand(command: string, ...args: unknown[]): string {
  const name = groupsOf(args).command;
  const option = PASSWORD_OPTIONS[name === undefined ? "p" : (PASSWORD_OPTION[name] as string)];
  return command.replace(option as RegExp, redactPair);
}

function redactScannerKey(match: string, ...args: unknown[]): string {
  const body = groupsOf(args).body as string;
  const looksLikeAKey =
    DIGIT.test(body) || (body.toLowerCase() !== body && body.toUpperCase() !== body);
  return looksLikeAKey ? REDACTED : match;
}

/** The value of `match` (a WORD_VALUE, at its end) redacted; what ends a sentence stays. */
function redactWordValue(match: string, ...args: unknown[]): string {
  const raw = groupsOf(args).value as string;
  const head = match.slice(0, match.length - raw.length);
  if (raw[0] === '"' || raw[0] === "'") return head + raw[0] + REDACTED + raw[0];
  if (!ALPHANUMERIC.test(raw)) return match; // "--token :" names no value
  return head + REDACTED + trailing(raw);
}

function redactUserPassword(match: string, ...args: unknown[]): string {
  const { user, value } = groupsOf(args) as { user: string; value: string };
  if (isDigits(user) && isDigits(stripTrailing(value, PROSE_TRAILING))) {
    return match; // "-u 1000:1000": a uid and a gid
  }
  return redactWordValue(match, ...args);
}

function redactNamedValue(match: string, ...args: unknown[]): string {
  if (!namesSecret(groupsOf(args).name as string, true)) return match;
  return redactWordValue(match, ...args);
}

function redactXmlElement(match: string, ...args: unknown[]): string {
  const groups = groupsOf(args);
  const tag = groups.tag as string;
  const attributes = groups.attributes ?? ""; // an element may have none
  const value = groups.value as string;
  const names = [tag.slice(tag.lastIndexOf(":") + 1)];
  for (const found of attributes.matchAll(XML_NAME_ATTRIBUTE)) {
    names.push((found.groups as { name: string }).name);
  }
  const named = names.some((name) => namesSecret(name, true));
  if (!named || isBlank(value)) return match;
  const start = "<".length + tag.length + attributes.length + ">".length;
  return match.slice(0, start) + REDACTED + match.slice(start + value.length);
}

function redactForeignPairs(text: string): string {
  const pieces: string[] = [];
  let done = 0;
  let searchFrom = 0;
  let match: RegExpExecArray | null;
  while ((match = searchAt(ANY_PAIR, text, searchFrom)) !== null) {
    const groups = match.groups as { name: string; key: string; value: string };
    if (!namesSecret(groups.name, !isAscii(groups.name))) {
      // The value may itself start a pair: "error: pässword=x".
      searchFrom = match.index + groups.name.length + groups.key.length;
      continue;
    }
    pieces.push(text.slice(done, match.index), groups.name + redactPair(groups));
    done = searchFrom = match.index + match[0].length;
  }
  pieces.push(text.slice(done));
  return pieces.join("");
}

/** A run of another script after a CJK credential word is its value, unless a stop word. */
function redactCjkValue(match: string, ...args: unknown[]): string {
  const raw = groupsOf(args).value as string;
  const bare = stripTrailing(withoutMarkers(raw), PROSE_TRAILING);
  if (
    MARKERS.some((marker) => raw.startsWith(marker)) ||
    !ALPHANUMERIC.test(bare) ||
    isStop(bare)
  ) {
    return match;
  }
  return match.slice(0, match.length - raw.length) + REDACTED + trailing(raw);
}

/** Whether a key name, folded (`fold`), ends in a credential word of any language. */
function namesSecret(name: string, english: boolean): boolean {
  const parts = fold(name).split(WORD_SEPARATORS).filter(Boolean);
  const last = parts.at(-1);
  if (last === undefined) return false;
  const compact = parts.join("");
  const endings = english
    ? [...FOLDED_FOREIGN_ENDINGS, ...FOLDED_ENGLISH_ENDINGS]
    : FOLDED_FOREIGN_ENDINGS;
  return endings.some((ending) => compact.endsWith(ending)) || FOLDED_FOREIGN_NAMES.has(last);
}

/** `text` without accents or other marks, in lower case: "Pąsswörd" -> "password". */
function fold(text: string): string {
  if (isAscii(text)) return text.toLowerCase();
  const bare = text.normalize("NFKD").replace(/\p{M}/gu, "");
  return bare
    .toLowerCase()
    .replace(UNMARKED_LETTER, (letter) => UNMARKED_LETTERS[letter] ?? letter);
}

const FOLDED_FOREIGN_ENDINGS = secretWords.KEY_NAME_ENDINGS_ABROAD.map(fold);
const FOLDED_ENGLISH_ENDINGS = secretWords.KEY_NAME_ENDINGS_ENGLISH.map(fold);
const FOLDED_FOREIGN_NAMES: ReadonlySet<string> = new Set(secretWords.KEY_NAMES_ABROAD.map(fold));

function compact(word: string): string {
  return word.toLowerCase().replace(WORD_SEPARATORS, "");
}

function redactTokenRun(run: string): string {
  if (!(DIGIT.test(run) && run.toLowerCase() !== run && run.toUpperCase() !== run)) return run;
  const classes = Array.from(run, characterClass);
  const changes = classes.filter((kind, at) => at > 0 && kind !== classes[at - 1]).length;
  return changes >= MIN_CLASS_CHANGES * (run.length - 1) ? REDACTED : run;
}

/** Digit, upper, lower or other, for the ASCII of a TOKEN_RUN. */
function characterClass(character: string): "d" | "u" | "l" | "o" {
  if (DIGIT.test(character)) return "d";
  if (/[A-Z]/u.test(character)) return "u";
  if (/[a-z]/u.test(character)) return "l";
  return "o";
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

/**
 * What stands between a prose keyword and its value, and so when the value goes:
 * "field" (":" or "="): whatever it is; "set to" (a verb of setting): unless it is a stop
 * word; "from" ("changed from X"): as "set to", and the value after the next "to" too;
 * "plain" (a copula or a space): as the module comment says.
 */
type Filler = "field" | "set to" | "from" | "plain";

/** Redact the word after each prose keyword that the rule in the module comment names. */
function redactProse(text: string): string {
  const pieces: string[] = [];
  let done = 0; // text.slice(0, done) is in pieces
  let searchFrom = 0;
  let key: RegExpExecArray | null;
  // Each turn moves past a keyword; each match reads only the few words after it.
  while ((key = searchAt(PROSE_KEY, text, searchFrom)) !== null) {
    searchFrom = key.index + key[0].length;
    let found = proseValue(text, key);
    const strong = PASSWORD_WORDS.has(compact((key.groups as { word: string }).word));
    while (found !== null) {
      const [value, filler] = found;
      found = null;
      const raw = value[0];
      const quote = raw[0] === '"' || raw[0] === "'" ? raw[0] : "";
      const content = quote ? stripTrailing(raw.slice(1), quote) : raw;
      const marker = MARKERS.find((marker) => content.startsWith(marker)) ?? "";
      if (marker) {
        // Already redacted. What is glued after the marker ("[REDACTED],api key x") is
        // read on, as it is once a later pass has removed this keyword.
        searchFrom = value.index + quote.length + marker.length;
        break;
      }
      // A later pass may turn part of a word into a marker ("@./" -> "@<path>"); judged
      // without its markers (and before the "]" of one is taken for punctuation), the word
      // reads the same the next time.
      let bare = withoutMarkers(content);
      if (!quote) bare = stripTrailing(bare, PROSE_TRAILING);
      if (!isProseValue(bare, quote !== "")) break; // another keyword or a scheme word may follow
      const goes =
        filler === "field" ||
        quote !== "" ||
        isSecretShaped(bare) ||
        ((strong || filler !== "plain") && !isStop(bare));
      if (!goes) break;
      pieces.push(text.slice(done, value.index));
      pieces.push(quote ? quote + REDACTED + quote : REDACTED + trailing(raw));
      done = searchFrom = value.index + raw.length;
      if (filler === "from" && !trailing(raw)) {
        // "changed from X to Y": Y is the new secret.
        const to = matchAt(PROSE_TO, text, done);
        const following = to === null ? null : matchAt(PROSE_VALUE, text, to.index + to[0].length);
        if (following !== null) found = [following, "set to"];
      }
    }
  }
  pieces.push(text.slice(done));
  return pieces.join("");
}

/** The value word after `key`, and what stands between them. */
function proseValue(text: string, key: RegExpExecArray): [RegExpExecArray, Filler] | null {
  let position = key.index + key[0].length;
  if ((key.groups as { quote: string }).quote) {
    // A quoted key is JSON or a quoted name: "pin": 4921 goes, 'get_token': disk stays.
    const field = matchAt(PROSE_FIELD, text, position);
    if (field === null) return null;
    const value = matchAt(PROSE_VALUE, text, field.index + field[0].length);
    return value === null ? null : [value, "plain"];
  }
  const clause = matchAt(PROSE_FOR, text, position);
  if (clause !== null) position = clause.index + clause[0].length; // "password for user bob is x"
  const field = matchAt(PROSE_FIELD, text, position);
  if (field !== null) {
    const value = matchAt(PROSE_VALUE, text, field.index + field[0].length);
    return value === null ? null : [value, "field"];
  }
  const setting = matchAt(PROSE_SET_TO, text, position);
  if (setting !== null) {
    const value = matchAt(PROSE_VALUE, text, setting.index + setting[0].length);
    const preposition = (setting.groups as { preposition: string }).preposition;
    return value === null
      ? null
      : [value, preposition.toLowerCase() === "from" ? "from" : "set to"];
  }
  let filler = matchAt(PROSE_COPULA, text, position);
  if (filler === null) {
    if (clause !== null) return null; // "password for user bob rejected": no value named
    filler = matchAt(PROSE_GAP, text, position);
    if (filler === null) return null;
  }
  const value = matchAt(PROSE_VALUE, text, filler.index + filler[0].length);
  return value === null ? null : [value, "plain"];
}

function isProseValue(word: string, quoted: boolean): boolean {
  if (!word || "([{<".includes(word[0] as string) || !ALPHANUMERIC.test(word)) {
    return false; // "(expired)", "-", "<path>": prose or a marker, not a secret
  }
  if (quoted) return true; // a literal, even 'api key': the cap may cut it to 'api…' next time
  return !SCHEME_WORDS.has(word.toLowerCase()) && !WHOLE_PROSE_KEY.test(word);
}

/** A digit, a symbol, odd mixed case or a long letter run: no English word looks so. */
function isSecretShaped(word: string): boolean {
  const characters = Array.from(word);
  if (!isAlpha(word) || characters.length >= MIN_LETTER_RUN) return true;
  if (!characters.some((character) => isUpper(character) || isLower(character))) {
    return false; // Chinese, Japanese, Korean, Arabic...: no case to read
  }
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

/**
 * A pattern that matches `word` as Python's re.IGNORECASE does: each letter becomes the
 * class of its cases. Other characters stay as written, so a word may hold a piece of
 * pattern ("api[_-]?key") but no character a class would need escaped.
 */
function anyCase(word: string): string {
  return Array.from(word, (character) => {
    const lower = character.toLowerCase();
    const cases = new Set([
      character,
      lower,
      character.toUpperCase(),
      ...(OTHER_CASES[lower] ?? ""),
    ]);
    // A case of two characters ("ß" upper-cased, "İ" lower-cased) is no case of one.
    const single = [...cases].filter((each) => Array.from(each).length === 1);
    return single.length > 1 ? `[${single.join("")}]` : character;
  }).join("");
}

/** `anyCase` for words between spaces: a space stands for any run of them. */
function anyCasePhrase(phrase: string): string {
  return anyCase(phrase).replaceAll(" ", " +");
}

/** Longer first, as Python's sorted(key=len, reverse=True): equal lengths keep their order. */
function longestFirst(words: readonly string[]): string[] {
  return [...words].sort((a, b) => Array.from(b).length - Array.from(a).length);
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

// Python's str.isdigit(): characters of Numeric_Type Digit or Decimal, which are `\p{Nd}`
// and these of `\p{No}` (superscripts, subscripts, circled digits, ...).
const DIGITS = new RegExp(
  String.raw`^[\p{Nd}\u00b2\u00b3\u00b9\u1369-\u1371\u19da\u2070\u2074-\u2079\u2080-\u2089` +
    String.raw`\u2460-\u2468\u2474-\u247c\u2488-\u2490\u24ea\u24f5-\u24fd\u24ff\u2776-\u277e` +
    String.raw`\u2780-\u2788\u278a-\u2792\u{10a40}-\u{10a43}\u{10e60}-\u{10e68}\u{11052}-\u{1105a}` +
    String.raw`\u{1f100}-\u{1f10a}]+$`,
  "u",
);

function isDigits(text: string): boolean {
  return DIGITS.test(text);
}

function isAscii(text: string): boolean {
  return /^[\x00-\x7f]*$/u.test(text);
}

const BLANK = new RegExp(`^[${PYTHON_SPACE}]*$`, "u");

/** Python's `not text.strip()`: nothing but its whitespace. */
function isBlank(text: string): boolean {
  return BLANK.test(text);
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
