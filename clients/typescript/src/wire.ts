/**
 * The messages of the advisory contract as @grpc/proto-loader decodes them, and what this
 * library makes of them. What a later contract adds is tolerated: an unknown message
 * kind applies nothing, an unknown verdict allows (fails open).
 */
import { fromWire, type WireAdvisory } from "./advisory.js";
import { CheckResult, Decision, type StreamMessage } from "./mirror.js";

export interface WireSubscribeResponse {
  epoch: string;
  seq: string;
  kind?: "snapshot" | "change" | "heartbeat";
  snapshot?: { advisories: WireAdvisory[]; resync: boolean; more: boolean; first: boolean };
  change?: WireAdvisory;
  heartbeat?: { atUnixNano: string };
}

export interface WireCheckResponse {
  verdict: string | number;
  advisory: WireAdvisory | null;
  probePermit: string;
}

export function toStreamMessage(wire: WireSubscribeResponse): StreamMessage {
  const epoch = wire.epoch;
  const seq = BigInt(wire.seq || 0);
  if (wire.kind === "snapshot" && wire.snapshot) {
    const part = wire.snapshot;
    return {
      kind: "snapshot",
      epoch,
      seq,
      snapshot: {
        advisories: part.advisories.map(fromWire),
        resync: part.resync,
        more: part.more,
        first: part.first,
      },
    };
  }
  if (wire.kind === "change" && wire.change) {
    return { kind: "change", epoch, seq, change: fromWire(wire.change) };
  }
  if (wire.kind === "heartbeat" && wire.heartbeat) {
    return { kind: "heartbeat", epoch, seq, atUnixNano: BigInt(wire.heartbeat.atUnixNano || 0) };
  }
  return { kind: "unknown", epoch, seq }; // a kind a later contract adds: nothing to apply
}

/** The service's verdict as a CheckResult; an unknown verdict allows (fail open). */
export function fromCheckResponse(response: WireCheckResponse): CheckResult {
  const advisory = response.advisory ? fromWire(response.advisory) : null;
  if (response.verdict === "VERDICT_DENY") return new CheckResult(Decision.DENY, { advisory });
  if (response.verdict === "VERDICT_PROBE") {
    return new CheckResult(Decision.PROBE, {
      advisory,
      probePermit: Number(response.probePermit || 0),
    });
  }
  return new CheckResult(Decision.ALLOW, { advisory });
}
