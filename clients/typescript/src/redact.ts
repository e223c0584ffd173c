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
 *   after an `UPPER_SNAKE=` environment name, after `Bearer` or `Basic`;
 * - in URLs: userinfo, query and fragment; of the path only a short plain first segment;
 * - filesystem paths → `<path>`; e-mail addresses → `<email>`.
 *
 * The result is one printable line of at most `maxChars` code points, cut between words
 * with a trailing "…"; only the first `SCAN_FACTOR * maxChars` code points are read, so
 * the cost is bounded whatever the input. Lengths count code points, as Python's do.
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

const SECRET_KEY_WORDS = [
  "password", "passwd", "pwd", "passphrase", "secret", "token", "api_key", "apikey",
  "api-key", "access_key", "private_key", "credential", "credentials", "auth",
  "authorization", "session", "session_id", "sessionid", "session-id", "cookie",
  "signature",
]; // prettier-ignore
const KEY_WORD = `(?:${SECRET_KEY_WORDS.join("|")})`; // letters, "_" and "-": nothing to escape
const VALUE = String.raw`(?:"[^"]*"?|'[^']*'?|[^ "',;&)\]}…]+)`;
const NOT_REDACTED = String.raw`(?!\[REDACTED\])`;
const QUOTED_PAIR = new RegExp(
  String.raw`(?<key>["'][${W}.-]*?${KEY_WORD}["'] *[:=] *)(?<value>"[^"]*"?|'[^']*'?)`,
  "giu",
);
const SCHEME = "(?:bearer|basic|token|digest)";
const BARE_PAIR = new RegExp(
  String.raw`(?<![${W}.-])(?<key>[${W}.-]*?${KEY_WORD}(?![${W}-]) *[:=] *(?:${SCHEME} +)?)` +
    String.raw`${NOT_REDACTED}(?!${SCHEME}(?![${W}-]))(?<value>${VALUE})`,
  "giu",
);
const ENV_ASSIGNMENT = new RegExp(
  String.raw`(?<![${W}.-])(?<key>[A-Z][A-Z0-9_]+=)${NOT_REDACTED}(?<value>${VALUE})`,
  "gu",
);
const AUTH_CREDENTIAL = new RegExp(
  String.raw`(?<![${W}])(?<scheme>bearer|basic) +(?<credential>[A-Za-z0-9._~+/=-]+)`,
  "giu",
);

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
  text = text.replace(QUOTED_PAIR, redactPair);
  text = text.replace(BARE_PAIR, redactPair);
  text = text.replace(ENV_ASSIGNMENT, redactPair);
  text = text.replace(AUTH_CREDENTIAL, redactCredential);
  // A URL is rewritten whole; the plain-text rules must not see its host:port or path.
  const pieces: string[] = [];
  let position = 0;
  for (const url of text.matchAll(URL_PATTERN)) {
    const start = url.index ?? 0;
    pieces.push(scrubPlain(text.slice(position, start)), scrubUrl(url[0]));
    position = start + url[0].length;
  }
  pieces.push(scrubPlain(text.slice(position)));
  return pieces.join("");
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
  const groups = args.at(-1) as { key: string; value: string };
  const quote = groups.value[0] === '"' || groups.value[0] === "'" ? groups.value[0] : "";
  return groups.key + quote + REDACTED + quote;
}

function redactCredential(...args: unknown[]): string {
  const match = args[0] as string;
  const groups = args.at(-1) as { scheme: string; credential: string };
  const credential = groups.credential;
  if (isAlpha(credential) && (isLower(credential) || isTitle(credential))) {
    return match; // prose: "bearer token", "Basic Auth"
  }
  return `${groups.scheme} ${REDACTED}`;
}

function redactOpaque(match: string): string {
  // Words and identifiers this long rarely hold a digit; keys, hashes and ids do.
  return DIGIT.test(match) ? REDACTED : match;
}

function replaceKeepingPunctuation(pattern: RegExp, marker: string, text: string): string {
  return text.replace(pattern, (match) => marker + splitTrailing(match)[1]);
}

function splitTrailing(text: string): [string, string] {
  let end = text.length;
  while (end > 0 && TRAILING_PUNCTUATION.includes(text[end - 1] as string)) end--;
  return [text.slice(0, end), text.slice(end)];
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

// Python's str predicates on the ASCII-only credential (its pattern admits no other letter
// but the two that case-fold to ASCII, "ſ" and the Kelvin sign, which the \p tests cover).
function isAlpha(text: string): boolean {
  return /^\p{L}+$/u.test(text);
}

function isLower(text: string): boolean {
  return text === text.toLowerCase() && text !== text.toUpperCase();
}

function isTitle(text: string): boolean {
  const first = text.slice(0, 1);
  const rest = text.slice(1);
  return first !== first.toLowerCase() && (rest === "" || rest === rest.toLowerCase());
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
