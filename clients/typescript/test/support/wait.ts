/** Waiting for something that happens elsewhere (another process, the network), bounded. */
import { setTimeout as sleep } from "node:timers/promises";

export const WAIT_MS = 20_000; // generous: a bound on waiting, not a measurement

export async function waitFor(
  predicate: () => boolean | Promise<boolean>,
  what: string,
  timeoutMs: number = WAIT_MS,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(10);
  }
}
