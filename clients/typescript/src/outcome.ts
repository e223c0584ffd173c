/**
 * How mcp-breaker will read the outcome of an `mcp.tool.call` span this library wrote: a
 * port of the part of the service's `clients/python/mcp_breaker_client/shared/outcome.py` (`judge`) that the
 * spans of `recordToolCall` reach. The wrapper needs it to refuse a repeat of its own
 * failure before the service's advisory arrives, keyed as the service will key the block:
 * a `transport` or `timeout` failure closes the tool for the turn, any other only the
 * identical call, a neutral outcome nothing.
 *
 * Signals are read in the service's order: a refused call is neutral; an explicit
 * `cancelled` is neutral; a user's "no" or a cancellation in the error text is neutral;
 * then the failure's class, from a JSON-RPC code in `error.type`, else from the words of
 * the error (unknown tool, then timeout, then transport; else `tool_error`, or `protocol`
 * beside an unlisted code). The word lists are the service's; they match case-insensitively
 * as JavaScript's `/i` does (the service's Python also folds a few non-ASCII letters, such
 * as "ſ" to "s", that error texts do not hold).
 */
import { redact } from "./redact.js";

export type FailureClass =
  "transport" | "timeout" | "tool_error" | "protocol" | "unknown_tool" | "hidden";

/** The failure classes that close the whole tool for the rest of the turn. */
export const TOOL_WIDE: ReadonlySet<FailureClass> = new Set<FailureClass>(["transport", "timeout"]);

export interface Verdict {
  outcome: "ok" | "failed" | "neutral" | "unknown";
  failureClass: FailureClass | null; // for failed
  excerpt: string; // the error as the service keeps it: redacted, at most 300 characters
}

/** What a record wrote that bears on the outcome (the harness convention's attributes). */
export interface RecordedOutcome {
  outcome: string | null; // mcp.tool.outcome
  error: string; // mcp.tool.error (redacted), which is also the status message
  errorType: string | null; // error.type
  isError: boolean | null; // mcp.tool.is_error
  statusError: boolean; // the span's status is ERROR
  exceptions: ReadonlyArray<readonly [string, string]>; // exception events: type, message
  refused: boolean; // mcp.breaker.refused
}

// JSON-RPC error codes (the MCP SDKs use -32001 for a request timeout).
const JSONRPC_CLASSES: ReadonlyMap<number, FailureClass> = new Map<number, FailureClass>([
  [-32601, "unknown_tool"],
  [-32602, "protocol"],
  [-32600, "protocol"],
  [-32700, "protocol"],
  [-32001, "timeout"],
]);

const NEUTRAL_PHRASES: readonly RegExp[] = [
  /user (declined|denied|rejected)/i,
  /permission (was )?(declined|denied)/i,
  /user dismissed/i,
  /\b(interrupted|cancell?ed|aborted by the user)\b/i,
];

const TRANSPORT_WORDS = new RegExp(
  String.raw`session (is )?closed|closed ?resource|broken ?(pipe|resource)|connection ?(refused|reset|` +
    String.raw`error|closed|aborted|lost)|econn(refused|reset)|not connected|upstream (is )?unavailable|` +
    String.raw`upstream .*closed|service unavailable|\b503\b|\b502\b|bad gateway|end ?of ?stream|eof\b|` +
    String.raw`disconnected|unreachable|transport`,
  "i",
);
const TIMEOUT_WORDS = /time[sd]? ?out|deadline (exceeded|expired)|\b504\b/i;
const UNKNOWN_TOOL_WORDS = /unknown tool|tool .{0,80}not found|no such tool|notfounderror/i;

const OUTCOME_VALUES: Readonly<Record<string, "ok" | "failed" | "neutral">> = {
  ok: "ok",
  success: "ok",
  failed: "failed",
  failure: "failed",
  error: "failed",
  declined: "neutral",
  dismissed: "neutral",
  cancelled: "neutral",
  canceled: "neutral",
  interrupted: "neutral",
};

const OK: Verdict = { outcome: "ok", failureClass: null, excerpt: "" };
const UNKNOWN: Verdict = { outcome: "unknown", failureClass: null, excerpt: "" };

/** The verdict the service's `judge` comes to on a span that recorded `recorded`. */
export function judge(recorded: RecordedOutcome): Verdict {
  const explicit =
    recorded.outcome === null ? undefined : OUTCOME_VALUES[recorded.outcome.trim().toLowerCase()];
  const quiet =
    !recorded.error &&
    recorded.errorType === null &&
    recorded.exceptions.length === 0 &&
    recorded.outcome === null &&
    !recorded.statusError &&
    recorded.isError !== true &&
    !recorded.refused;
  if (quiet) return recorded.isError === false ? OK : UNKNOWN;
  const texts = [recorded.error, recorded.errorType ?? ""];
  for (const [kind, message] of recorded.exceptions) {
    texts.push(message.startsWith(kind) ? message : `${kind}: ${message}`);
  }
  const text = joined(texts);
  const neutral: Verdict = { outcome: "neutral", failureClass: null, excerpt: redact(text) };
  if (recorded.refused && explicit !== "failed") return neutral;
  if (explicit === "neutral") return neutral;
  // A reason is read where failures are recorded: the error and the exceptions.
  const saysNeutral = [recorded.error, ...recorded.exceptions.map(([, message]) => message)].some(
    (t) => t && NEUTRAL_PHRASES.some((phrase) => phrase.test(t)),
  );
  if (saysNeutral && explicit !== "ok") return neutral;
  let failure = failureClass(recorded, text);
  if (failure === null && explicit === "failed") failure = classFromWords(text, "tool_error");
  if (failure !== null) return { outcome: "failed", failureClass: failure, excerpt: redact(text) };
  if (explicit !== undefined || recorded.isError === false) return OK;
  return UNKNOWN;
}

/**
 * What the span says of its failure, each thing once: an SDK often writes the same error as
 * the status, the error type and the exception event (the service's `_joined`).
 */
function joined(texts: readonly string[]): string {
  let kept: string[] = [];
  for (const raw of texts) {
    const text = raw.trim();
    if (!text || kept.some((told) => told.includes(text))) continue;
    kept = kept.filter((told) => !text.includes(told)); // said again, more fully
    kept.push(text);
  }
  return kept.join(" | ");
}

function failureClass(recorded: RecordedOutcome, text: string): FailureClass | null {
  const code = asInt(recorded.errorType);
  if (code !== null) return JSONRPC_CLASSES.get(code) ?? classFromWords(text, "protocol");
  const declared =
    recorded.errorType !== null ||
    recorded.statusError ||
    recorded.isError === true ||
    recorded.exceptions.length > 0;
  return declared ? classFromWords(text, "tool_error") : null;
}

function classFromWords(text: string, fallback: FailureClass): FailureClass {
  if (UNKNOWN_TOOL_WORDS.test(text)) return "unknown_tool";
  if (TIMEOUT_WORDS.test(text)) return "timeout";
  if (TRANSPORT_WORDS.test(text)) return "transport";
  return fallback;
}

/** A JSON-RPC code written as text ("-32602"); null for anything else. */
function asInt(value: string | null): number | null {
  if (value === null) return null;
  const text = value.trim();
  return /^-?[0-9]{1,11}$/.test(text) ? Number(text) : null;
}
