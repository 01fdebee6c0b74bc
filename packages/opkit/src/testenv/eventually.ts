/**
 * The waits of testenv, in one place: `sleep` and `eventually` (poll until a condition holds). Both take
 * the time from an injected Clock, so the control plane's start-up, node and provisioner loops can be
 * driven by a FakeClock in unit tests; tests against the real control plane use the real clock.
 */
import { realClock, type Clock } from "../clock/index.ts";

/** Resolves after `ms` milliseconds of `clock` time. */
export function sleep(ms: number, clock: Clock = realClock): Promise<void> {
  return new Promise((resolve) => clock.setTimeout(resolve, ms));
}

/** A wait that gave up: says what was awaited, for how long, and the last error seen. */
export class WaitTimeoutError extends Error {
  /** The last error the condition threw, if any. */
  readonly lastError: unknown;
  constructor(what: string, timeoutMs: number, lastError: unknown) {
    const last =
      lastError === undefined
        ? ""
        : `: ${lastError instanceof Error ? lastError.message : JSON.stringify(lastError)}`;
    super(`timed out after ${timeoutMs} ms waiting for ${what}${last}`);
    this.name = "WaitTimeoutError";
    this.lastError = lastError;
  }
}

/**
 * Poll until a condition holds: the one wait loop tests use against the control plane, with a message
 * that says what was awaited and the last error seen. A condition that throws counts as "not yet".
 */
export async function eventually<T>(
  what: string,
  fn: () => Promise<T | undefined | false | null> | T | undefined | false | null,
  timeoutMs = 60_000,
  intervalMs = 200,
  clock: Clock = realClock,
): Promise<T> {
  const deadline = clock.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    if (clock.now() > deadline) throw new WaitTimeoutError(what, timeoutMs, last);
    await sleep(intervalMs, clock);
  }
}
