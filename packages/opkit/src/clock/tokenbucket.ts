/**
 * The token bucket: `burst` tokens at once, refilled at a steady rate on an injected clock. The client's
 * request limit, the workqueue's overall retry limit and the Event recorder's per-object limit are this
 * one bucket used three ways (wait for a token, reserve one ahead, or drop when none is left).
 */
import type { Clock } from "./clock.ts";

/** How fast a bucket refills: `qps` tokens per second, or one token every `intervalMs`. */
export type TokenBucketRate = { qps: number } | { intervalMs: number };

/** A token bucket that starts full. Time is read from the clock only when a token is asked for. */
export class TokenBucket {
  private readonly rate: TokenBucketRate;
  private readonly burst: number;
  private readonly clock: Pick<Clock, "now">;
  private tokens: number;
  private last: number;

  constructor(rate: TokenBucketRate, burst: number, clock: Pick<Clock, "now">) {
    this.rate = rate;
    this.burst = burst;
    this.clock = clock;
    this.tokens = burst;
    this.last = clock.now();
  }

  /** Take a token when one is available; false (and nothing taken) when the bucket is empty. */
  tryTake(): boolean {
    this.refill();
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }

  /** Milliseconds until `tryTake` can succeed (0 when it can now). */
  waitMs(): number {
    this.refill();
    return this.tokens >= 1 ? 0 : this.msFor(1 - this.tokens);
  }

  /**
   * Take a token even when none is left yet (the bucket goes into debt, as golang.org/x/time/rate's
   * reservations do) and return how long to wait until it is due; successive calls are spaced at the rate.
   */
  reserve(): number {
    this.refill();
    this.tokens -= 1;
    return this.tokens >= 0 ? 0 : this.msFor(-this.tokens);
  }

  private refill(): void {
    const now = this.clock.now();
    const elapsed = Math.max(0, now - this.last);
    const gained = "qps" in this.rate ? (elapsed * this.rate.qps) / 1000 : elapsed / this.rate.intervalMs;
    this.tokens = Math.min(this.burst, this.tokens + gained);
    this.last = now;
  }

  private msFor(tokens: number): number {
    return "qps" in this.rate ? (tokens * 1000) / this.rate.qps : tokens * this.rate.intervalMs;
  }
}
