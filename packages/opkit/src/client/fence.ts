/**
 * A write fence: writes may be sent only until a moment on this process's own monotonic clock, the
 * moment after which a Lease this process renewed may have passed to another replica. The leader
 * elector moves that moment forward on each successful renewal; the client consults the fence before
 * every attempt of a mutating request, and the fence aborts the writes still in flight the instant it
 * closes (the transport then destroys their connections, so nothing buffered in them is sent later).
 *
 * Only time is trusted, not signals reaching user code: a reconcile or a runnable that ignores its
 * AbortSignal still cannot write once leadership may be lost.
 */
import { realClock, type Clock, type TimerHandle } from "../clock/index.ts";
import type { RequestInfo } from "./errors.ts";

/**
 * A write refused, or cut in flight, because this replica may no longer hold its Lease. Refused before
 * sending (`inFlight` false), the server cannot have seen it; cut in flight, it may have been applied
 * before the fence closed.
 */
export class FencedWriteError extends Error {
  /** The write that was refused or cut. */
  readonly request: RequestInfo;
  /** True when the write had been sent when the fence closed (its outcome is unknown). */
  readonly inFlight: boolean;
  constructor(request: RequestInfo, reason: string, inFlight: boolean) {
    super(
      `${request.method} ${request.path}: ${inFlight ? "cut in flight" : "not sent"}: writes are fenced: ${reason}`,
    );
    this.name = "FencedWriteError";
    this.request = request;
    this.inFlight = inFlight;
  }
}

/** Options of a `WriteFence`. */
export interface WriteFenceOptions {
  /** Monotonic time; a FakeClock in tests. */
  clock?: Clock;
  /** What the fence guards, for error messages (e.g. "lease ns/name"). */
  name?: string;
}

/** Why a fence closed, carried by the signal of the writes it cut. */
class FenceClosed extends Error {
  constructor(message: string) {
    super(message);
    this.name = "FenceClosed";
  }
}

/**
 * Lets writes through until a monotonic deadline (see the module comment). Starts closed: nothing may
 * write before the first `openUntil`.
 */
export class WriteFence {
  private readonly clock: Clock;
  private readonly name: string;
  private until = -Infinity;
  private closedForGood: string | undefined;
  private timer: TimerHandle | undefined;
  // Aborted when the fence closes; a new one for each open period, so a reopened fence cuts only the
  // writes sent after it reopened when it closes again.
  private period = new AbortController();

  constructor(options: WriteFenceOptions = {}) {
    this.clock = options.clock ?? realClock;
    this.name = options.name ?? "write fence";
  }

  /**
   * Let writes through until monotonic time `until` (e.g. when the renewal that just succeeded was sent,
   * plus the renew deadline). Never moves the deadline back; ignored after `close`.
   */
  openUntil(until: number): void {
    if (this.closedForGood !== undefined || !(until > this.until)) return;
    if (!this.isOpen()) this.period = new AbortController();
    this.until = until;
    if (this.timer !== undefined) this.clock.clearTimeout(this.timer);
    this.timer = this.clock.setTimeout(() => this.expire(), until - this.clock.now());
  }

  /** Close for good (leadership lost or given up): every write from now on fails, in flight ones are cut. */
  close(reason: string): void {
    if (this.closedForGood !== undefined) return;
    this.closedForGood = reason;
    this.until = -Infinity;
    if (this.timer !== undefined) this.clock.clearTimeout(this.timer);
    this.timer = undefined;
    this.period.abort(new FenceClosed(reason));
  }

  /** Whether a write may be sent now: the deadline, read on the clock, has not passed. */
  isOpen(): boolean {
    return this.closedForGood === undefined && this.clock.now() < this.until;
  }

  /**
   * Throw FencedWriteError when a write may not be sent now; otherwise the signal that aborts when the
   * fence closes, to be combined with the write's own.
   */
  admit(request: RequestInfo): AbortSignal {
    if (!this.isOpen()) {
      // The timer may not have run yet (a process resumed after a pause): cut the stragglers now.
      this.expire();
      throw new FencedWriteError(request, this.reason(), false);
    }
    return this.period.signal;
  }

  /** The FencedWriteError for a write whose signal `admit` gave was aborted by the fence; else undefined. */
  cut(request: RequestInfo, reason: unknown): FencedWriteError | undefined {
    if (!(reason instanceof FenceClosed)) return undefined;
    return new FencedWriteError(request, reason.message, true);
  }

  private reason(): string {
    if (this.closedForGood !== undefined) return `${this.name} closed: ${this.closedForGood}`;
    if (this.until === -Infinity) return `${this.name} was never renewed`;
    return `${this.name} not renewed in time (${Math.round(this.clock.now() - this.until)} ms past its deadline)`;
  }

  private expire(): void {
    if (this.isOpen()) {
      // A timer may fire a little early on the monotonic clock: wait out the rest.
      this.timer = this.clock.setTimeout(() => this.expire(), this.until - this.clock.now());
      return;
    }
    if (this.timer !== undefined) this.clock.clearTimeout(this.timer);
    this.timer = undefined;
    if (!this.period.signal.aborted) this.period.abort(new FenceClosed(this.reason()));
  }
}
