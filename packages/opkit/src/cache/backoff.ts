/**
 * The reconnect backoff of a watcher (client-go's reflector values): 800 ms doubling to 30 s, jittered,
 * and forgotten after 2 minutes without a failure so that one bad minute does not slow the next
 * failure an hour later. Time and randomness are injected for tests.
 */
import { realClock, type Clock } from "../clock/index.ts";

export interface BackoffOptions {
  initialMs?: number;
  maxMs?: number;
  factor?: number;
  /** Up to this fraction of the delay is added at random, so many clients do not retry in step. */
  jitter?: number;
  /** Time without failures after which the delay starts again from `initialMs`. */
  resetAfterMs?: number;
  clock?: Clock;
  random?: () => number;
}

export class Backoff {
  private readonly initialMs: number;
  private readonly maxMs: number;
  private readonly factor: number;
  private readonly jitter: number;
  private readonly resetAfterMs: number;
  private readonly clock: Clock;
  private readonly random: () => number;
  private attempts = 0;
  private lastFailureAt: number | undefined;

  constructor(opts: BackoffOptions = {}) {
    this.initialMs = opts.initialMs ?? 800;
    this.maxMs = opts.maxMs ?? 30_000;
    this.factor = opts.factor ?? 2;
    this.jitter = opts.jitter ?? 0.5;
    this.resetAfterMs = opts.resetAfterMs ?? 120_000;
    this.clock = opts.clock ?? realClock;
    this.random = opts.random ?? Math.random;
  }

  /** The delay before the next attempt, after a failure. */
  next(): number {
    const now = this.clock.now();
    if (this.lastFailureAt !== undefined && now - this.lastFailureAt >= this.resetAfterMs) this.attempts = 0;
    this.lastFailureAt = now;
    const base = Math.min(this.maxMs, this.initialMs * this.factor ** this.attempts);
    this.attempts++;
    return Math.min(this.maxMs, base * (1 + this.jitter * this.random()));
  }

  /** Wait the next delay (resolves early if `signal` aborts). */
  wait(signal?: AbortSignal): Promise<void> {
    const ms = this.next();
    return new Promise((resolve) => {
      if (signal?.aborted) return resolve();
      const h = this.clock.setTimeout(() => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      }, ms);
      const onAbort = (): void => {
        this.clock.clearTimeout(h);
        resolve();
      };
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }

  get failures(): number {
    return this.attempts;
  }
}
