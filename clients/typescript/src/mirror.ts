/**
 * The harness's local mirror of the advisories in force, and the check before each call.
 *
 * Plain data, clock passed in, no I/O. The subscriber feeds it what the `Subscribe`
 * stream says:
 *
 * - a **snapshot** replaces everything held (the first message of a stream, or a resync);
 *   a snapshot in parts: the part marked `first` replaces, later parts add, and the
 *   mirror is complete once a part has `more` false;
 * - a **change** replaces the advisory with the same id; one in `STATE_CLOSED` removes it;
 * - the stream's **epoch** and the **seq** of the last change are kept, so a reconnecting
 *   subscriber can ask to resume exactly where it left off.
 *
 * `check` answers "may this call go?" from four indexes, one per scope
 * (`docs/advisories.md`, "Matching advisories in a local mirror"):
 *
 *     SCOPE_SERVER      refuses a call with the same server
 *     SCOPE_TOOL        ... the same server and tool
 *     SCOPE_TURN_TOOL   ... the same turn, server and tool
 *     SCOPE_TURN_CALL   ... the same turn and fingerprint
 *
 * `DENY` when a matching advisory refuses (`OPEN`, `FORCED_OPEN`, `TURN_BLOCKED`, or a state
 * this version does not know), is enforced and has not expired; `PROBE_NEEDED` when one is
 * half-open (ask the service's `Check` for the permit); else `ALLOW`, with a shadow-mode
 * advisory attached when one would have refused. An unknown scope matches no call: better
 * a missed refusal than refusing calls at random.
 *
 * Expiry: past its `expiresUnixNano` an advisory no longer applies, whatever the stream
 * says (a mirror cut off from the service must not refuse on stale news), except that an
 * open *circuit* past its expiry is what the service turns half-open, so it reads as
 * half-open here too. Bounded: at most `maxAdvisories`, the oldest dropped first.
 */
import type { Advisory, State } from "./advisory.js";
import { callFingerprints, resolveServer } from "./calls.js";
import { ConfigError } from "./errors.js";

export const DEFAULT_MAX_ADVISORIES = 100_000; // ten times the service's default bound
const NS_PER_MS = 1_000_000;

export const Decision = {
  ALLOW: "allow",
  DENY: "deny", // do not make the call; give the model the advisory's message
  PROBE_NEEDED: "probe_needed", // half-open: ask the service (checkRemote) for a permit
  PROBE: "probe", // the service granted this caller the probe permit: make the call
} as const;
export type Decision = (typeof Decision)[keyof typeof Decision];

export class CheckResult {
  readonly decision: Decision;
  /**
   * Why: the refusing advisory (DENY), the half-open one (PROBE_NEEDED, PROBE), or for an
   * ALLOW the shadow-mode advisory that would have refused. Shared with the mirror: read
   * it, do not modify it.
   */
  readonly advisory: Advisory | null;
  readonly probePermit: number;
  /** False when the service could not be asked (checkRemote): allowed, failing open. */
  readonly answered: boolean;

  constructor(
    decision: Decision,
    options: { advisory?: Advisory | null; probePermit?: number; answered?: boolean } = {},
  ) {
    this.decision = decision;
    this.advisory = options.advisory ?? null;
    this.probePermit = options.probePermit ?? 0;
    this.answered = options.answered ?? true;
  }

  get refused(): boolean {
    return this.decision === Decision.DENY;
  }

  /** Allowed, but only because the advisory that refuses it is in shadow mode. */
  get shadow(): boolean {
    return this.decision === Decision.ALLOW && this.advisory !== null;
  }
}

export const ALLOWED = new CheckResult(Decision.ALLOW);

/** The call to check: the turn as the spans carry it (`mcp.turn.id`, else the trace id). */
export interface ToolCall {
  turn: string;
  server?: string | null; // else the `server__tool` prefix of the tool's name
  tool: string;
  arguments?: unknown; // fingerprinted only when the turn has an exact-call advisory
  fingerprint?: string; // instead of the arguments
}

/** The states that let a call go or say nothing; any other refuses, a future one too. */
const LETS_CALLS_GO: ReadonlySet<State> = new Set<State>([
  "STATE_UNSPECIFIED", // a sender's omission, not a new state
  "STATE_CLOSED",
  "STATE_HALF_OPEN",
  "STATE_FORCED_CLOSED",
]);

export function refuses(state: State): boolean {
  return !LETS_CALLS_GO.has(state);
}

/** Where a call finds this advisory; null for a scope this version does not know. */
export function indexKey(advisory: Advisory): string | null {
  switch (advisory.scope) {
    case "SCOPE_SERVER":
      return key("server", advisory.server);
    case "SCOPE_TOOL":
      return key("tool", advisory.server, advisory.tool);
    case "SCOPE_TURN_TOOL":
      return key("turn_tool", advisory.turn, advisory.server, advisory.tool);
    case "SCOPE_TURN_CALL":
      return key("turn_call", advisory.turn, advisory.fingerprint);
    default:
      return null;
  }
}

/** Length-prefixed parts: no name, whatever it holds, can make two keys collide. */
function key(kind: string, ...parts: string[]): string {
  let out = kind;
  for (const part of parts) out += `|${part.length}:${part}`;
  return out;
}

interface Entry {
  advisory: Advisory;
  expiresMs: number; // 0: until changed
  key: string | null;
}

export interface SnapshotPart {
  advisories: Advisory[];
  resync: boolean; // a resume could not be honoured
  more: boolean; // more parts follow
  first: boolean; // this part starts the snapshot
}

/** One message of the `Subscribe` stream. */
export type StreamMessage =
  | { kind: "snapshot"; epoch: string; seq: bigint; snapshot: SnapshotPart }
  | { kind: "change"; epoch: string; seq: bigint; change: Advisory }
  | { kind: "heartbeat"; epoch: string; seq: bigint; atUnixNano: bigint }
  | { kind: "unknown"; epoch: string; seq: bigint };

export class Mirror {
  readonly maxAdvisories: number;
  /** "" until the first whole snapshot: nothing to resume from. */
  epoch = "";
  lastSeq = 0n;
  /** Advisories dropped to stay within maxAdvisories. */
  evicted = 0;
  private readonly byId = new Map<string, Entry>();
  private readonly index = new Map<string, Set<string>>();
  // Turn -> its SCOPE_TURN_CALL advisories: the fingerprint (a hash of the arguments) is
  // only computed for a call whose turn has one.
  private readonly callTurns = new Map<string, number>();
  private readonly rosters = new Map<string, string>(); // turn -> its roster advisory id
  private inSnapshot = false;

  constructor(options: { maxAdvisories?: number } = {}) {
    const max = options.maxAdvisories ?? DEFAULT_MAX_ADVISORIES;
    if (!Number.isInteger(max) || max < 1) {
      throw new ConfigError(`maxAdvisories must be a positive integer, but was ${max}`);
    }
    this.maxAdvisories = max;
  }

  get size(): number {
    return this.byId.size;
  }

  get(id: string): Advisory | undefined {
    return this.byId.get(id)?.advisory;
  }

  advisories(): Advisory[] {
    return Array.from(this.byId.values(), (entry) => entry.advisory);
  }

  /** False while the parts of a snapshot are still arriving. */
  get complete(): boolean {
    return !this.inSnapshot;
  }

  // -- what the stream says ---------------------------------------------------------------

  /** A snapshot: exactly these advisories are in force (closed ones are skipped). */
  replace(epoch: string, seq: bigint, advisories: Iterable<Advisory>): void {
    this.byId.clear();
    this.index.clear();
    this.callTurns.clear();
    this.rosters.clear();
    for (const advisory of advisories) {
      if (advisory.state !== "STATE_CLOSED") this.put(advisory);
    }
    this.epoch = epoch;
    this.lastSeq = seq;
  }

  /** A change: it replaces the advisory with its id; a closed one is removed. */
  apply(epoch: string, seq: bigint, advisory: Advisory): void {
    if (advisory.state === "STATE_CLOSED") this.remove(advisory.id);
    else this.put(advisory);
    this.epoch = epoch;
    this.lastSeq = seq;
  }

  /**
   * One message of the stream. A heartbeat's seq is not taken as received: it may count
   * a change still on its way, and resuming after it would skip that change.
   */
  applyMessage(message: StreamMessage): void {
    if (message.kind === "snapshot") {
      const part = message.snapshot;
      // The first part replaces, the rest add. (A service that sends one part sets
      // neither flag, or first without more.)
      if (part.first || !this.inSnapshot) {
        this.replace(message.epoch, message.seq, part.advisories);
      } else {
        for (const advisory of part.advisories) {
          if (advisory.state !== "STATE_CLOSED") this.put(advisory);
        }
      }
      this.inSnapshot = part.more;
      // The position counts only once the snapshot is whole: a stream that breaks between
      // its parts must start over, not resume past the parts it never got.
      this.epoch = part.more ? "" : message.epoch;
      this.lastSeq = part.more ? 0n : message.seq;
    } else if (message.kind === "change") {
      this.apply(message.epoch, message.seq, message.change);
    }
  }

  private put(advisory: Advisory): void {
    this.remove(advisory.id); // a snapshot listing an id twice: the last one counts
    const entry: Entry = {
      advisory,
      expiresMs: Number(advisory.expiresUnixNano) / NS_PER_MS,
      key: indexKey(advisory),
    };
    this.byId.set(advisory.id, entry);
    if (advisory.scope === "SCOPE_TURN_ROSTER") this.rosters.set(advisory.turn, advisory.id);
    if (entry.key !== null) {
      let ids = this.index.get(entry.key);
      if (ids === undefined) this.index.set(entry.key, (ids = new Set()));
      ids.add(advisory.id);
      if (advisory.scope === "SCOPE_TURN_CALL") {
        this.callTurns.set(advisory.turn, (this.callTurns.get(advisory.turn) ?? 0) + 1);
      }
    }
    while (this.byId.size > this.maxAdvisories) {
      const oldest = this.byId.keys().next().value as string;
      this.remove(oldest);
      this.evicted++;
    }
  }

  private remove(id: string): void {
    const known = this.byId.get(id);
    if (known === undefined) return;
    this.byId.delete(id);
    const advisory = known.advisory;
    if (advisory.scope === "SCOPE_TURN_ROSTER" && this.rosters.get(advisory.turn) === id) {
      this.rosters.delete(advisory.turn);
    }
    if (known.key === null) return;
    const ids = this.index.get(known.key);
    if (ids !== undefined) {
      ids.delete(id);
      if (ids.size === 0) this.index.delete(known.key);
    }
    if (advisory.scope === "SCOPE_TURN_CALL") {
      const left = (this.callTurns.get(advisory.turn) ?? 0) - 1;
      if (left > 0) this.callTurns.set(advisory.turn, left);
      else this.callTurns.delete(advisory.turn);
    }
  }

  /**
   * The turn's roster collapsed: the harness should list its tools again. It refuses no
   * call, so `check` never returns it.
   */
  rosterCollapse(turn: string, nowMs: number): Advisory | null {
    const id = this.rosters.get(turn);
    const entry = id === undefined ? undefined : this.byId.get(id);
    if (entry === undefined || stateAt(entry, nowMs) === null) return null;
    return entry.advisory;
  }

  // -- the check --------------------------------------------------------------------------

  /** May this call go now? See the module comment for how advisories match. */
  check(call: ToolCall, nowMs: number): CheckResult {
    if (this.byId.size === 0) return ALLOWED;
    const server = resolveServer(call.server, call.tool);
    const { turn, tool } = call;
    // The order the service's Check reads them in: the turn's blocks, then circuits.
    const keys = [key("turn_tool", turn, server, tool)];
    if (this.callTurns.has(turn)) {
      const prints = call.fingerprint
        ? [call.fingerprint]
        : callFingerprints(server, tool, call.arguments);
      for (const print of prints) keys.push(key("turn_call", turn, print));
    }
    if (server) keys.push(key("server", server));
    keys.push(key("tool", server, tool));

    let halfOpen: Advisory | null = null;
    let shadow: Advisory | null = null;
    for (const indexed of keys) {
      const ids = this.index.get(indexed);
      if (ids === undefined) continue;
      for (const id of ids) {
        const entry = this.byId.get(id) as Entry;
        const state = stateAt(entry, nowMs);
        if (state === null) continue;
        const advisory = entry.advisory;
        if (refuses(state)) {
          if (advisory.enforced) return new CheckResult(Decision.DENY, { advisory });
          shadow ??= advisory;
        } else if (state === "STATE_HALF_OPEN" && advisory.enforced) {
          halfOpen ??= advisory;
        }
      }
    }
    if (halfOpen !== null) return new CheckResult(Decision.PROBE_NEEDED, { advisory: halfOpen });
    return shadow === null ? ALLOWED : new CheckResult(Decision.ALLOW, { advisory: shadow });
  }
}

/** The advisory's state at `nowMs`; null when it no longer applies. */
function stateAt(entry: Entry, nowMs: number): State | null {
  const { advisory, expiresMs } = entry;
  if (!expiresMs || expiresMs > nowMs) return advisory.state;
  if (
    advisory.state === "STATE_OPEN" &&
    (advisory.scope === "SCOPE_SERVER" || advisory.scope === "SCOPE_TOOL")
  ) {
    return "STATE_HALF_OPEN"; // its open period is over: one probe may go
  }
  return null;
}
