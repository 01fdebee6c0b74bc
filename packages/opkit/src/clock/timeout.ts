/**
 * Racing work against a timer on an injected clock: the one place the library does it, so every deadline
 * (shutdown grace, health checks, admission handlers, lease attempts) arms and clears its timer the same
 * way and a FakeClock drives all of them in tests.
 */
import type { Clock, TimerHandle } from "./clock.ts";

/** What `withTimeout` resolves to: the work's value, or `timedOut` when the timer fired first. */
export type Timed<R> = { timedOut: false; value: R } | { timedOut: true };

/** Options of `withTimeout`. */
export interface WithTimeoutOptions {
  /** The reason the work's signal aborts with when the timer fires (default "timed out after <ms> ms"). */
  reason?: () => Error;
  /** Stop waiting when this aborts: `withTimeout` rejects with its reason (as an Error). */
  signal?: AbortSignal;
}

/**
 * Run `work` and wait for it at most `ms` on `clock`. The work gets a signal that aborts when the timer
 * fires, so it can stop what it started; whether it does or not, the result is `{ timedOut: true }` at
 * that moment. Rejects with the work's error when it fails first. The timer is cleared either way.
 */
export async function withTimeout<R>(
  clock: Clock,
  ms: number,
  work: (signal: AbortSignal) => R | PromiseLike<R>,
  opts: WithTimeoutOptions = {},
): Promise<Timed<R>> {
  const abort = new AbortController();
  const { signal } = opts;
  let timer: TimerHandle | undefined;
  let onAbort: (() => void) | undefined;
  const expired = new Promise<Timed<R>>((resolve) => {
    timer = clock.setTimeout(() => {
      abort.abort(opts.reason?.() ?? new Error(`timed out after ${ms} ms`));
      resolve({ timedOut: true });
    }, ms);
  });
  const racers: Promise<Timed<R>>[] = [
    Promise.resolve()
      .then(() => work(abort.signal))
      .then((value) => ({ timedOut: false as const, value })),
    expired,
  ];
  if (signal)
    racers.push(
      new Promise<never>((_, reject) => {
        onAbort = () =>
          reject(signal.reason instanceof Error ? signal.reason : new Error(String(signal.reason)));
        signal.addEventListener("abort", onAbort, { once: true });
      }),
    );
  try {
    return await Promise.race(racers);
  } finally {
    if (timer !== undefined) clock.clearTimeout(timer);
    if (onAbort) signal?.removeEventListener("abort", onAbort);
  }
}
