/**
 * The sentences this client writes for a model on its own, word for word as the service
 * writes them (`clients/python/mcp_breaker_client/shared/messages.py`; the tests ask the Python code itself):
 * which tool on which MCP server, one sentence that says what to do, the recorded error
 * (already redacted) last in parentheses, one period.
 */

/** "`fetch_invoice` on MCP server `billing`", or the tool alone when no server is named. */
export function toolSubject(tool: string, server: string): string {
  return server ? `\`${tool}\` on MCP server \`${server}\`` : `\`${tool}\``;
}

/** The recorded error as the sentence's last words; the one period is the sentence's. */
function theError(why: string): string {
  const trimmed = why.trim().replace(/[ .]+$/, "");
  return trimmed ? ` (the error: ${trimmed})` : "";
}

/** The tool failed in this turn in a way that will not change before the turn ends. */
export function turnToolBlocked(subject: string, why: string): string {
  return (
    `${subject} is unavailable for the rest of this turn, so do not call it again; ` +
    `answer what you can without it${theError(why) || " (it failed)"}.`
  );
}

/** This exact call (same arguments) failed in this turn; other arguments may work. */
export function turnCallBlocked(subject: string, why: string): string {
  return (
    `This exact call to ${subject} already failed in this turn, so do not repeat it; ` +
    `change the arguments or answer without it${theError(why) || " (it failed)"}.`
  );
}

/** Refused on an advisory that carried no message of its own. */
export function refusedWithoutMessage(subject: string, cause: string): string {
  return (
    `${subject} is unavailable right now, so do not call it again this turn; ` +
    `answer what you can without it${theError(cause)}.`
  );
}
