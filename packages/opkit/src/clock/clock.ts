/**
 * The Clock contract, the process clock, the FakeClock for tests and `sleep` on either.
 */

/** Opaque handle returned by `Clock.setTimeout`; only meaningful to the clock that made it. */
export type TimerHandle = object;

/**
 * Time as a dependency: the current monotonic time and one-shot timers. Pass `realClock` in production and a
 * `FakeClock` in tests, so code with delays (backoff, requeue, lease renewal) is tested without sleeping.
 */
export interface Clock {
  /** Milliseconds on a monotonic scale; only differences are meaningful. */
  now(): number;
  /** Call `fn` once after `ms` milliseconds (negative counts as 0); keep the handle to cancel it. */
  setTimeout(fn: () => void, ms: number): TimerHandle;
  /** Cancel a timer that has not fired; a no-op for one that fired or was cleared. */
  clearTimeout(handle: TimerHandle): void;
}

// Node turns delays above 2^31-1 ms into 1 ms. Clamping instead makes a far-off timer fire early, which
// callers must tolerate anyway (the queue re-checks the ready time and re-arms).
const MAX_NODE_DELAY_MS = 2 ** 31 - 1;

/** The process clock: `performance.now()` so durations are immune to wall-clock jumps. */
export const realClock: Clock = {
  now: () => performance.now(),
  setTimeout: (fn, ms) => globalThis.setTimeout(fn, Math.min(Math.max(0, ms), MAX_NODE_DELAY_MS)),
  clearTimeout: (handle) => globalThis.clearTimeout(handle as ReturnType<typeof globalThis.setTimeout>),
};

interface FakeTimer {
  at: number;
  seq: number;
  fn: () => void;
}

/**
 * A manual clock for tests. Time moves only through `advance`, which fires due timers one at a time in
 * (due time, creation order) and sets `now()` to each timer's due time while it runs, so callbacks see
 * the same time a real clock would have shown them.
 */
export class FakeClock implements Clock {
  private time: number;
  private seq = 0;
  private readonly timers = new Set<FakeTimer>();

  constructor(startMs = 0) {
    this.time = startMs;
  }

  /** The fake time in milliseconds: the start value plus everything `advance` has moved it. */
  now(): number {
    return this.time;
  }

  /** Arm a timer due `ms` after the current fake time; it fires only inside `advance`. */
  setTimeout(fn: () => void, ms: number): TimerHandle {
    const timer: FakeTimer = { at: this.time + Math.max(0, ms), seq: this.seq++, fn };
    this.timers.add(timer);
    return timer;
  }

  /** Cancel a pending fake timer. */
  clearTimeout(handle: TimerHandle): void {
    this.timers.delete(handle as FakeTimer);
  }

  /** Timers armed and not yet fired or cleared. */
  pendingTimers(): number {
    return this.timers.size;
  }

  /**
   * Moves time forward by `ms`, firing every timer due by the end, including timers that callbacks
   * arm along the way, so a chain of short timers behaves as it would in real time.
   */
  advance(ms: number): void {
    if (!(ms >= 0)) throw new RangeError(`FakeClock.advance needs a non-negative duration, got ${ms}`);
    const target = this.time + ms;
    for (;;) {
      const next = this.earliest();
      if (next === undefined || next.at > target) break;
      this.timers.delete(next);
      this.time = Math.max(this.time, next.at);
      next.fn();
    }
    this.time = target;
  }

  // A linear scan keeps this obviously correct; tests hold a handful of timers.
  private earliest(): FakeTimer | undefined {
    let best: FakeTimer | undefined;
    for (const t of this.timers) {
      if (best === undefined || t.at < best.at || (t.at === best.at && t.seq < best.seq)) best = t;
    }
    return best;
  }
}

/**
 * Wait `ms` on `clock` (fake time in tests); rejects with the signal's reason as soon as it aborts, and
 * leaves no timer behind either way.
 */
export function sleep(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason as Error);
    const onAbort = () => {
      clock.clearTimeout(timer);
      reject(signal?.reason as Error);
    };
    const timer = clock.setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
