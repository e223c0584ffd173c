/**
 * The fingerprint of a call, byte for byte as mcp-breaker computes it
 * (`clients/python/mcp_breaker_client/shared/fingerprint.py`): SHA-256 over server, NUL, tool, NUL, the canonical
 * JSON of the arguments, NUL; lowercase hex, first 32 characters.
 *
 * What is hashed is the JSON the call sends: a JavaScript value is first what
 * `JSON.stringify` makes of it (the MCP SDK sends that: `toJSON` applied, `undefined`
 * members dropped, `NaN` and infinities as `null`), and its canonical form is the one the
 * Python side gives the same JSON text once parsed:
 *
 * - keys sorted by code point (not by UTF-16 unit, as `Array.prototype.sort` would);
 * - no whitespace; non-ASCII as is; `"`, `\`, and controls escaped as Python's `json` does;
 * - a number written as integer digits stays so (`JSON.stringify` writes integers up to
 *   1e21 as digits, which Python reads as an int); any other number is written as Python
 *   writes that float (`1.5e-07`, `1e+21`);
 * - anything nested deeper than 32 levels becomes the string `<nested too deep>`;
 * - lone surrogates are hashed as Python's "surrogatepass" encodes them.
 *
 * A value `JSON.stringify` cannot send (a cycle, a `BigInt`, a bare function) has no
 * fingerprint at all (`undefined`), never a made-up one. Pure functions, no I/O.
 */
import { createHash } from "node:crypto";

export const FINGERPRINT_HEX_CHARS = 32; // 128 bits, as the service keeps
export const MAX_DEPTH = 32; // what is nested deeper than this is hashed as one marker
export const DEEP_MARKER = "<nested too deep>";

const NUL = Buffer.of(0);

/** Thrown inside the fast path when a value needs `JSON.stringify`'s own rules. */
const NOT_PLAIN: unique symbol = Symbol("not plain JSON");

/**
 * The canonical JSON text of `value` as mcp-breaker hashes it; `undefined` when the value
 * cannot be sent as JSON.
 */
export function canonicalJson(value: unknown): string | undefined {
  try {
    return write(value, 0, false);
  } catch (error) {
    if (error !== NOT_PLAIN) throw error;
  }
  // Something the fast path does not read itself (a Date, an undefined member, NaN, a
  // class instance, nesting past the limit, which may be a cycle): take the JSON the
  // call would send and read that.
  let wire: unknown;
  try {
    const text = JSON.stringify(value);
    if (text === undefined) return undefined;
    wire = JSON.parse(text);
  } catch {
    return undefined;
  }
  return write(wire, 0, true);
}

/** The fingerprint of a call; `undefined` when the arguments are not JSON. */
export function fingerprint(
  server: string | null | undefined,
  tool: string,
  arguments_: unknown,
): string | undefined {
  const canonical = canonicalJson(arguments_);
  if (canonical === undefined) return undefined;
  const digest = createHash("sha256");
  for (const part of [server ?? "", tool, canonical]) {
    digest.update(utf8(part));
    digest.update(NUL); // a separator no part can contain unescaped
  }
  return digest.digest("hex").slice(0, FINGERPRINT_HEX_CHARS);
}

/**
 * What a harness records as `mcp.tool.args_hash` instead of the arguments: the SHA-256
 * of their canonical JSON, in full; `undefined` when they are not JSON.
 */
export function argumentsDigest(arguments_: unknown): string | undefined {
  const canonical = canonicalJson(arguments_);
  if (canonical === undefined) return undefined;
  return createHash("sha256").update(utf8(canonical)).digest("hex");
}

/**
 * Both fingerprints a span of this call may carry: from its recorded arguments, and from
 * their digest (`{"args_hash": digest}`, what the spans of a harness that records only
 * the digest give, as this library's do). Empty when the arguments are not JSON.
 */
export function fingerprints(
  server: string | null | undefined,
  tool: string,
  arguments_: unknown,
): string[] {
  const digest = argumentsDigest(arguments_);
  if (digest === undefined) return [];
  return [
    fingerprint(server, tool, arguments_) as string,
    fingerprint(server, tool, { args_hash: digest }) as string,
  ];
}

// -- the writer ----------------------------------------------------------------------------

/**
 * `parsed`: the value came from JSON.parse (no cycle, nothing JSON.stringify would
 * change). Otherwise a structure nested past the limit may be a cycle, which has no
 * fingerprint: only JSON.stringify can tell, so the fallback decides.
 */
function write(value: unknown, depth: number, parsed: boolean): string {
  if (depth > MAX_DEPTH) {
    if (!parsed) throw NOT_PLAIN;
    return writeString(DEEP_MARKER);
  }
  switch (typeof value) {
    case "string":
      return writeString(value);
    case "boolean":
      return value ? "true" : "false";
    case "number":
      if (!Number.isFinite(value)) throw NOT_PLAIN; // sent as null
      return writeNumber(value);
    case "object":
      if (value === null) return "null";
      if (Array.isArray(value)) return writeArray(value, depth, parsed);
      return writeObject(value as object, depth, parsed);
    default:
      throw NOT_PLAIN; // undefined, bigint, function, symbol: JSON.stringify decides
  }
}

function writeArray(items: readonly unknown[], depth: number, parsed: boolean): string {
  if (Object.getPrototypeOf(items) !== Array.prototype) throw NOT_PLAIN;
  const parts: string[] = [];
  for (const item of items) {
    // JSON.stringify writes null for these in an array; let it.
    if (item === undefined || typeof item === "function" || typeof item === "symbol") {
      throw NOT_PLAIN;
    }
    parts.push(write(item, depth + 1, parsed));
  }
  return `[${parts.join(",")}]`;
}

function writeObject(object: object, depth: number, parsed: boolean): string {
  const prototype = Object.getPrototypeOf(object);
  if (prototype !== Object.prototype && prototype !== null) throw NOT_PLAIN;
  if (typeof (object as { toJSON?: unknown }).toJSON === "function") throw NOT_PLAIN;
  const record = object as Record<string, unknown>;
  const keys = Object.keys(record).sort(compareCodePoints);
  const parts: string[] = [];
  for (const key of keys) {
    const item = record[key];
    if (item === undefined || typeof item === "function" || typeof item === "symbol") {
      throw NOT_PLAIN; // dropped by JSON.stringify
    }
    parts.push(`${writeString(key)}:${write(item, depth + 1, parsed)}`);
  }
  return `{${parts.join(",")}}`;
}

/** Digits for what Python reads as an int; Python's `repr` for what it reads as a float. */
function writeNumber(value: number): string {
  const text = String(value); // what JSON.stringify sends
  if (/^-?\d+$/.test(text)) return text;
  return pythonFloatRepr(value);
}

/**
 * `repr(float)` in Python: the shortest digits that round-trip (the same digits
 * JavaScript finds), in fixed notation when the decimal point falls within
 * (-4, 16] digits of them, else as `d.ddde±XX`.
 */
export function pythonFloatRepr(value: number): string {
  if (Number.isNaN(value)) return "nan";
  if (!Number.isFinite(value)) return value > 0 ? "inf" : "-inf";
  const sign = value < 0 || Object.is(value, -0) ? "-" : "";
  const [mantissa = "", exponentText = "0"] = String(Math.abs(value)).split("e");
  const [whole = "", fraction = ""] = mantissa.split(".");
  let digits = whole + fraction;
  let point = whole.length + Number(exponentText); // value = 0.DIGITS × 10^point
  const leading = /^0*/.exec(digits)?.[0].length ?? 0;
  digits = digits.slice(leading);
  point -= leading;
  digits = digits.replace(/0+$/, "");
  if (digits === "") return `${sign}0.0`;
  if (point <= -4 || point > 16) {
    const exponent = point - 1;
    const head = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    const magnitude = String(Math.abs(exponent)).padStart(2, "0");
    return `${sign}${head}e${exponent < 0 ? "-" : "+"}${magnitude}`;
  }
  if (point <= 0) return `${sign}0.${"0".repeat(-point)}${digits}`;
  if (point >= digits.length) return `${sign}${digits}${"0".repeat(point - digits.length)}.0`;
  return `${sign}${digits.slice(0, point)}.${digits.slice(point)}`;
}

function writeString(text: string): string {
  if (text.isWellFormed()) return JSON.stringify(text); // the same escapes as Python's
  // JSON.stringify escapes a lone surrogate (\udXXX); Python writes it as it is.
  let out = '"';
  for (const char of text) {
    const code = char.codePointAt(0) as number;
    if (code >= 0xd800 && code <= 0xdfff) out += char;
    else out += JSON.stringify(char).slice(1, -1);
  }
  return `${out}"`;
}

/** Code point order, as Python compares strings (UTF-16 order differs past U+FFFF). */
export function compareCodePoints(a: string, b: string): number {
  const length = Math.min(a.length, b.length);
  for (let i = 0; i < length; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    if (x < 0xd800 && y < 0xd800) return x - y;
    // A difference in the second half of a pair: compare the whole pairs.
    const at = i > 0 && isHighSurrogate(a.charCodeAt(i - 1)) ? i - 1 : i;
    return (a.codePointAt(at) as number) - (b.codePointAt(at) as number);
  }
  return a.length - b.length;
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}

/** UTF-8, with lone surrogates encoded as themselves (Python's "surrogatepass"). */
function utf8(text: string): Buffer {
  if (text.isWellFormed()) return Buffer.from(text, "utf8");
  const bytes: number[] = [];
  for (const char of text) {
    const code = char.codePointAt(0) as number;
    if (code >= 0xd800 && code <= 0xdfff) {
      bytes.push(0xe0 | (code >> 12), 0x80 | ((code >> 6) & 0x3f), 0x80 | (code & 0x3f));
    } else {
      bytes.push(...Buffer.from(char, "utf8"));
    }
  }
  return Buffer.from(bytes);
}
