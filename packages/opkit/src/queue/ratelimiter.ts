/**
 * Rate limiters decide how long a failed key waits before it is retried. They mirror client-go's
 * workqueue rate limiters so operators tuned for controller-runtime behave the same here.
 */
import { realClock, TokenBucket } from "../clock/index.ts";
import type { Clock } from "../clock/index.ts";

/**
 * Decides how long a failed key waits before it is retried (client-go's workqueue rate limiter contract).
 * Implement it to customise retry backoff of a controller.
 */
export interface RateLimiter<K> {
  /** Records one more failure of `key` and returns how many milliseconds it should wait. */
  when(key: K): number;
  /** Clears the failure history of `key`, typically after a successful reconcile. */
  forget(key: K): void;
  /** Failures recorded for `key` since the last `forget`. */
  retries(key: K): number;
}

/** Options of the per-key exponential backoff. */
export interface ExponentialBackoffOptions {
  /** Delay after the first failure (default 5 ms). */
  baseDelayMs?: number;
  /** Ceiling for the delay (default 1000 s). */
  maxDelayMs?: number;
}

/** Delay after the first failure of a key: 5 ms, as client-go. */
export const DEFAULT_BASE_DELAY_MS = 5;
/** Ceiling for a key's backoff: 1000 s, as client-go. */
export const DEFAULT_MAX_DELAY_MS = 1_000_000;

function checkNonNegative(name: string, value: number): void {
  if (!(value >= 0) || !Number.isFinite(value)) {
    throw new RangeError(`${name} must be a finite number >= 0, got ${value}`);
  }
}

/** Per-key exponential backoff: base·2^(failures-1), capped. */
export class ExponentialFailureRateLimiter<K> implements RateLimiter<K> {
  private readonly base: number;
  private readonly max: number;
  private readonly failures = new Map<K, number>();

  constructor(options: ExponentialBackoffOptions = {}) {
    this.base = options.baseDelayMs ?? DEFAULT_BASE_DELAY_MS;
    this.max = options.maxDelayMs ?? DEFAULT_MAX_DELAY_MS;
    checkNonNegative("baseDelayMs", this.base);
    checkNonNegative("maxDelayMs", this.max);
  }

  /** Record a failure and return base·2^(failures-1) ms, capped at the maximum. */
  when(key: K): number {
    const exp = this.failures.get(key) ?? 0;
    this.failures.set(key, exp + 1);
    // 0 · 2^1024 would be NaN; a zero base means "never wait".
    if (this.base === 0) return 0;
    // 2^exp becomes Infinity past exp 1023, and Infinity is not < max, so long failure streaks land
    // on the cap instead of overflowing.
    const delay = this.base * 2 ** exp;
    return delay < this.max ? delay : this.max;
  }

  /** Forget the key's failures, so its next failure starts at the base delay again. */
  forget(key: K): void {
    this.failures.delete(key);
  }

  /** Failures recorded for the key since the last `forget`. */
  retries(key: K): number {
    return this.failures.get(key) ?? 0;
  }
}

/** Options of the shared token bucket. */
export interface TokenBucketOptions {
  /** Sustained rate in keys per second. */
  qps: number;
  /** Keys allowed at once before the rate applies. */
  burst: number;
  /** Time source for refills; a FakeClock in tests. */
  clock?: Clock;
}

/**
 * One bucket shared by all keys, like golang.org/x/time/rate: each call reserves a token even when
 * none is available yet, so tokens go negative and successive calls are spaced 1/qps apart.
 */
export class TokenBucketRateLimiter<K> implements RateLimiter<K> {
  private readonly bucket: TokenBucket;

  constructor(options: TokenBucketOptions) {
    if (!(options.qps > 0) || !Number.isFinite(options.qps)) {
      throw new RangeError(`qps must be a finite number > 0, got ${options.qps}`);
    }
    if (!(options.burst >= 1) || !Number.isFinite(options.burst)) {
      throw new RangeError(`burst must be a finite number >= 1, got ${options.burst}`);
    }
    this.bucket = new TokenBucket({ qps: options.qps }, options.burst, options.clock ?? realClock);
  }

  /** Take a token and return how long to wait until it is available (0 while the burst lasts). */
  when(_key: K): number {
    return this.bucket.reserve();
  }

  /** Nothing to forget: the bucket is shared, not per key. */
  forget(_key: K): void {}

  // The bucket is not per key, so it has no failure count of its own (client-go returns 0 too).
  /** Always 0: the bucket keeps no per-key failure count. */
  retries(_key: K): number {
    return 0;
  }
}

/** Combines limiters: the longest delay wins, and every limiter records every failure. */
export class MaxOfRateLimiter<K> implements RateLimiter<K> {
  private readonly limiters: readonly RateLimiter<K>[];

  constructor(...limiters: RateLimiter<K>[]) {
    this.limiters = limiters;
  }

  /** Record the failure in every limiter and return the longest delay. */
  when(key: K): number {
    let delay = 0;
    // No short-circuit: each limiter has to see the failure to keep its own state right.
    for (const limiter of this.limiters) delay = Math.max(delay, limiter.when(key));
    return delay;
  }

  /** Forget the key in every limiter. */
  forget(key: K): void {
    for (const limiter of this.limiters) limiter.forget(key);
  }

  /** The highest failure count any limiter has for the key. */
  retries(key: K): number {
    let n = 0;
    for (const limiter of this.limiters) n = Math.max(n, limiter.retries(key));
    return n;
  }
}

/** Options of `defaultControllerRateLimiter`: the per-key backoff and an optional overall bucket. */
export interface DefaultRateLimiterOptions extends ExponentialBackoffOptions {
  /**
   * An overall token bucket on top of the per-key backoff. Off by default: controller-runtime
   * dropped its 10 qps / 100 burst bucket because it throttled healthy keys behind failing ones.
   */
  bucket?: {
    /** Sustained retries per second across all keys. */
    qps: number;
    /** Retries allowed at once before the rate applies. */
    burst: number;
  };
  /** Time source for the bucket; a FakeClock in tests. */
  clock?: Clock;
}

/** The limiter a controller uses unless told otherwise: per-key exponential backoff 5 ms → 1000 s. */
export function defaultControllerRateLimiter<K>(options: DefaultRateLimiterOptions = {}): RateLimiter<K> {
  const backoff = new ExponentialFailureRateLimiter<K>(options);
  if (!options.bucket) return backoff;
  const bucket = new TokenBucketRateLimiter<K>({ ...options.bucket, clock: options.clock ?? realClock });
  return new MaxOfRateLimiter<K>(backoff, bucket);
}
