/**
 * Leader election on a coordination.k8s.io/v1 Lease, with client-go's semantics so opkit replicas
 * interoperate with the timing assumptions Go operators make:
 *
 * - A candidate takes the Lease when it does not exist, when it was released (empty holder), or when
 *   the holder has not renewed it for `leaseDurationSeconds` — measured from when this process last
 *   *saw the record change*, on its own monotonic clock. Comparing the holder's `renewTime` with our
 *   wall clock would trust two clocks to agree; observing change only trusts each clock's rate.
 * - Every write is an update with the resourceVersion that was read, so of two candidates racing for
 *   an expired Lease exactly one wins (the other gets a ConflictError and retries).
 * - The leader renews every `retryPeriod`; if it cannot renew for `renewDeadline` it gives up before
 *   the Lease can expire for others (renewDeadline < leaseDuration), so two leaders never overlap as
 *   long as clocks tick at the same rate.
 * - Every Lease request is aborted at its deadline (a round's renew deadline), so a renewal delayed in
 *   the network cannot land after this process gave up. With a `fence`, writes are let through only
 *   until the renew deadline after the *sending* of the last successful renewal, by this process's own
 *   clock: from the instant leadership may be lost, the fenced client writes nothing, whatever the work
 *   does with its signal.
 */
import { hostname } from "node:os";
import { randomUUID } from "node:crypto";
import type { WriteFence } from "../client/fence.ts";
import { LeaseLock, type LeaseClient, type LeaseSpec } from "../client/lease.ts";
import { realClock, withTimeout, type Clock, type TimerHandle } from "../clock/index.ts";
import type { Logger } from "../logging/index.ts";

export type { LeaseClient, LeaseSpec };

/**
 * Options of a `LeaderElector`: which Lease, who we are, and the timing (client-go's defaults: 15 s lease, 10
 * s renew deadline, 2 s retry).
 */
export interface LeaderElectorOptions {
  /** Reads and writes the Lease; needs get, create and update on leases in its namespace. */
  client: LeaseClient;
  /** Namespace and name of the Lease. */
  namespace: string;
  /** The Lease's name, shared by every replica of one operator and unique to it. */
  name: string;
  /** Unique per process; default `${hostname}_${uuid}`. */
  identity?: string;
  /** How long others wait after the last observed renewal before taking over (default 15 s). */
  leaseDurationMs?: number;
  /** How long the leader keeps retrying a failed renewal before it gives up (default 10 s). */
  renewDeadlineMs?: number;
  /** Interval between attempts to acquire or renew (default 2 s). */
  retryPeriodMs?: number;
  /**
   * Acquire attempts wait retryPeriod × (1 + random × jitterFactor) (default 1.2, as client-go), so
   * candidates that start together do not hit the API server in lockstep.
   */
  jitterFactor?: number;
  /** Monotonic time for expiry and timers. */
  clock?: Clock;
  /** Wall time written into acquireTime and renewTime (informational: expiry never reads them). */
  wallClock?: () => Date;
  /** Randomness for the jitter; injectable for tests. */
  random?: () => number;
  /** Called with true when leadership starts and false when it ends (leader_election_master_status). */
  onLeaderStatus?: (leading: boolean) => void;
  /** Where acquire, renew failures and losses are logged. */
  logger?: Logger;
  /**
   * Opened on each successful acquire or renewal until the renew deadline after that request was sent,
   * and closed for good when leading ends: give the work a client fenced by it (`withDefaults({ fence })`).
   * The elector's own Lease requests must not go through it.
   */
  fence?: WriteFence;
}

/** Why leading ended, for `onStoppedLeading`. */
export interface StoppedLeadingInfo {
  /** True when leadership was lost (not renewed in time, or taken over); false after `stop()`. */
  lost: boolean;
  /** What happened, in words, for logs. */
  reason: string;
}

/**
 * What a `LeaderElector` tells its user: when leading starts (with a signal that aborts when it ends), when
 * it stopped, and who leads now.
 */
export interface LeaderCallbacks {
  /**
   * Leadership acquired: start the work. `signal` aborts when leadership ends; when it was lost, its
   * reason is a LeadershipLostError and the work must stop at once, since another replica may lead
   * soon.
   */
  onStartedLeading(signal: AbortSignal): void | Promise<void>;
  /** Called once after leading ended, lost or stopped; not called if leadership was never acquired. */
  onStoppedLeading(info: StoppedLeadingInfo): void;
  /** A different holder was observed (ourselves included when we acquire). */
  onNewLeader?(identity: string): void;
}

/**
 * Leader election timings that cannot work (e.g. a renew deadline not shorter than the lease duration, which
 * could let two leaders overlap); the message says which.
 */
export class LeaderElectionConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "LeaderElectionConfigError";
  }
}

/** The abort reason of `onStartedLeading`'s signal when leadership was lost, not given up. */
export class LeadershipLostError extends Error {
  /** "namespace/name" of the Lease. */
  readonly lease: string;
  /** This replica's identity. */
  readonly identity: string;
  constructor(lease: string, identity: string, reason: string) {
    super(`leader election lost for lease ${lease} (${identity}): ${reason}`);
    this.name = "LeadershipLostError";
    this.lease = lease;
    this.identity = identity;
  }
}

/** A unique candidate identity: the host name (the pod's name in a cluster) and a random id, as client-go. */
export function defaultIdentity(): string {
  return `${hostname()}_${randomUUID()}`;
}

/** How long a Lease is valid after its last renewal before others may take it: 15 s, as client-go. */
export const DEFAULT_LEASE_DURATION_MS = 15_000;
/** How long the leader retries renewing before it gives up leading: 10 s, as client-go. */
export const DEFAULT_RENEW_DEADLINE_MS = 10_000;
/** Interval between acquire and renew attempts: 2 s, as client-go. */
export const DEFAULT_RETRY_PERIOD_MS = 2_000;
const DEFAULT_JITTER_FACTOR = 1.2;

type Outcome = "done" | "timeout" | "stopped";

/**
 * Lease-based leader election (client-go's algorithm): at most one replica leads at a time, and a leader that
 * cannot renew stops its work before its Lease can expire. The Manager uses it when `leaderElection` is set;
 * use it directly for custom singleton work.
 */
export class LeaderElector {
  /** This candidate's identity, written into the Lease's holderIdentity. */
  readonly identity: string;
  private readonly namespace: string;
  private readonly name: string;
  private readonly leaseDurationMs: number;
  private readonly renewDeadlineMs: number;
  private readonly retryPeriodMs: number;
  private readonly jitterFactor: number;
  private readonly clock: Clock;
  private readonly random: () => number;
  private readonly onLeaderStatus: ((leading: boolean) => void) | undefined;
  private readonly logger: Logger | undefined;
  private readonly fence: WriteFence | undefined;

  private readonly lock: LeaseLock;
  private reportedLeader = "";

  private leading = false;
  private running: Promise<void> | undefined;
  private stopController: AbortController | undefined;
  private release = false;
  private inflight: Promise<unknown> | undefined;

  constructor(options: LeaderElectorOptions) {
    this.namespace = options.namespace;
    this.name = options.name;
    this.identity = options.identity ?? defaultIdentity();
    this.leaseDurationMs = options.leaseDurationMs ?? DEFAULT_LEASE_DURATION_MS;
    this.renewDeadlineMs = options.renewDeadlineMs ?? DEFAULT_RENEW_DEADLINE_MS;
    this.retryPeriodMs = options.retryPeriodMs ?? DEFAULT_RETRY_PERIOD_MS;
    this.jitterFactor = options.jitterFactor ?? DEFAULT_JITTER_FACTOR;
    this.clock = options.clock ?? realClock;
    this.random = options.random ?? Math.random;
    this.onLeaderStatus = options.onLeaderStatus;
    this.logger = options.logger?.child({ lease: this.lease, identity: this.identity });
    this.fence = options.fence;
    this.lock = new LeaseLock({
      client: options.client,
      namespace: this.namespace,
      name: this.name,
      identity: this.identity,
      leaseDurationMs: this.leaseDurationMs,
      clock: this.clock,
      wallClock: options.wallClock,
      logger: this.logger,
    });

    // client-go's checks: the leader must give up (renewDeadline) before others may take over
    // (leaseDuration), and must get several attempts in before giving up.
    if (!this.identity) throw new LeaderElectionConfigError("identity must not be empty");
    if (!(this.retryPeriodMs > 0)) throw new LeaderElectionConfigError("retryPeriod must be positive");
    if (!(this.leaseDurationMs > this.renewDeadlineMs)) {
      throw new LeaderElectionConfigError(
        `leaseDuration (${this.leaseDurationMs} ms) must be greater than renewDeadline (${this.renewDeadlineMs} ms)`,
      );
    }
    if (!(this.renewDeadlineMs > this.retryPeriodMs * this.jitterFactor)) {
      throw new LeaderElectionConfigError(
        `renewDeadline (${this.renewDeadlineMs} ms) must be greater than retryPeriod × jitterFactor ` +
          `(${this.retryPeriodMs} ms × ${this.jitterFactor})`,
      );
    }
  }

  /** "namespace/name" of the Lease. */
  get lease(): string {
    return `${this.namespace}/${this.name}`;
  }

  /** True while this process leads: it acquired the Lease and has not seen anyone else hold it since. */
  isLeader(): boolean {
    return this.leading && this.lock.holdsObserved();
  }

  /** The holder last observed in the Lease ("" when none or released). */
  leader(): string {
    return this.lock.holder();
  }

  /**
   * Campaign until elected, lead until stopped or lost, then return. One run at a time; a lost
   * leadership is not re-campaigned (controller-runtime exits the process instead, so the work restarts
   * from a clean state).
   */
  run(callbacks: LeaderCallbacks): Promise<void> {
    if (this.running) {
      return Promise.reject(new Error(`leader elector for ${this.lease} is already running`));
    }
    const stop = new AbortController();
    this.stopController = stop;
    this.release = false;
    this.running = this.campaign(callbacks, stop.signal).finally(() => {
      this.running = undefined;
      this.stopController = undefined;
    });
    return this.running;
  }

  /**
   * Stop campaigning or leading; resolves when `run` has returned. With `release`, a leader hands the
   * Lease over at once (empty holder, 1 s duration) instead of making successors wait for it to
   * expire; release only once the work it guards has stopped.
   */
  async stop(options: { release?: boolean } = {}): Promise<void> {
    const running = this.running;
    if (!running) return;
    this.release ||= options.release ?? false;
    this.stopController?.abort();
    await running;
  }

  private async campaign(callbacks: LeaderCallbacks, stop: AbortSignal): Promise<void> {
    const acquired = await this.acquire(callbacks, stop);
    if (!acquired) {
      // Stopped while an attempt was in flight: it may still have won the Lease for us. Nothing ever
      // ran under it, so give it back whatever `release` says, or successors wait a lease duration.
      // (The stop aborts the attempt's requests, so this waits for no slow server.)
      await this.releaseLease();
      return;
    }

    this.leading = true;
    this.onLeaderStatus?.(true);
    this.logger?.info("acquired lease");
    const work = new AbortController();
    // Not awaited: the work runs while this loop keeps the Lease; a failure in it is the caller's to
    // handle, and must not stop the renewals that keep other replicas from starting the same work.
    void Promise.resolve()
      .then(() => callbacks.onStartedLeading(work.signal))
      .catch((err: unknown) => this.logger?.error({ err }, "onStartedLeading failed"));

    const info = await this.renewLoop(callbacks, stop);
    this.leading = false;
    // Before anything else, and before a release hands the Lease to a successor.
    this.fence?.close(info.lost ? `leadership lost: ${info.reason}` : "leadership given up");
    work.abort(info.lost ? new LeadershipLostError(this.lease, this.identity, info.reason) : undefined);
    if (info.lost) this.logger?.error({ reason: info.reason }, "leader election lost");
    else if (this.release) await this.releaseLease();
    this.onLeaderStatus?.(false);
    try {
      callbacks.onStoppedLeading(info);
    } catch (err) {
      this.logger?.error({ err }, "onStoppedLeading failed");
    }
  }

  private async acquire(callbacks: LeaderCallbacks, stop: AbortSignal): Promise<boolean> {
    this.logger?.info("attempting to acquire leader lease");
    while (!stop.aborted) {
      const started = this.clock.now();
      const attempt = this.tryAcquireOrRenew(stop, started + this.renewDeadlineMs);
      const outcome = await this.race(attempt, Infinity, stop);
      if (outcome === "stopped") return false;
      const ok = await attempt;
      this.reportTransition(callbacks);
      if (ok) return true;
      const now = this.clock.now();
      // Held by another and not expired when this attempt started: a standby reads the Lease every
      // half retry period (1-2.2 s by default) and tries again the moment it expires on our clock.
      // Expiry counts from when we saw the last renewal, so it comes up to one read period after the
      // real one; client-go reads every 2-4.4 s and then waits for its next read after the expiry, so
      // its takeover came up to ~9 s after the Lease's real expiry, ours at most 2.2 s. Every attempt
      // reads the Lease first: a renewal we had not seen yet still wins.
      const expires = this.lock.holdsObserved() ? undefined : this.lock.expiresAt();
      const held = expires !== undefined && expires >= started;
      const period = held ? this.retryPeriodMs / 2 : this.retryPeriodMs;
      let next = now + period * (1 + this.random() * this.jitterFactor);
      // +1 ms: a timer may fire a little early on the monotonic clock, and an attempt that started
      // before the expiry cannot have taken the Lease: once past it, the next attempt comes at once.
      if (held) next = Math.min(next, Math.max(now, expires + 1));
      if ((await this.race(undefined, next, stop)) === "stopped") return false;
    }
    return false;
  }

  private async renewLoop(callbacks: LeaderCallbacks, stop: AbortSignal): Promise<StoppedLeadingInfo> {
    const stopped: StoppedLeadingInfo = { lost: false, reason: "stopped" };
    for (;;) {
      if ((await this.race(undefined, this.clock.now() + this.retryPeriodMs, stop)) === "stopped") {
        return stopped;
      }
      // Each round of renewal attempts has renewDeadline to succeed, counted from its first attempt.
      const deadline = this.clock.now() + this.renewDeadlineMs;
      for (;;) {
        const attempt = this.tryAcquireOrRenew(stop, deadline);
        const outcome = await this.race(attempt, deadline, stop);
        if (outcome === "stopped") return stopped;
        if (outcome === "timeout") {
          return { lost: true, reason: `renewal timed out after ${this.renewDeadlineMs} ms` };
        }
        const ok = await attempt;
        this.reportTransition(callbacks);
        if (ok) break;
        // Someone else holds a valid Lease: we are already deposed, and waiting out the deadline
        // would only let two processes believe they lead.
        const holder = this.lock.holder();
        if (holder !== "" && holder !== this.identity) {
          return { lost: true, reason: `lease is held by ${holder}` };
        }
        const remaining = deadline - this.clock.now();
        if (
          remaining <= 0 ||
          (await this.race(undefined, deadline, stop, this.retryPeriodMs)) === "timeout"
        ) {
          return {
            lost: true,
            reason: `failed to renew within ${this.renewDeadlineMs} ms: ${this.lock.lastError || "unknown error"}`,
          };
        }
        if (stop.aborted) return stopped;
      }
    }
  }

  /**
   * One attempt through the lock, its requests aborted at the monotonic `deadline` or on `stop`; never
   * throws. A success opens the fence until the renew deadline after the attempt *started*: the server may
   * have applied it at any moment since, so that is when others began counting the Lease's duration.
   * Kept as `inflight` so a release can wait for it.
   */
  private tryAcquireOrRenew(stop: AbortSignal, deadline: number): Promise<boolean> {
    const started = this.clock.now();
    const attempt = withTimeout(
      this.clock,
      deadline - started,
      (bounded) => this.lock.tryAcquireOrRenew(AbortSignal.any([bounded, stop])),
      { reason: () => new Error(`lease request cut at its deadline (${this.lease})`) },
    ).then((r) => {
      if (r.timedOut) this.lock.lastError = "lease request cut at its deadline";
      const ok = !r.timedOut && r.value;
      if (ok) this.fence?.openUntil(started + this.renewDeadlineMs);
      return ok;
    });
    this.inflight = attempt;
    return attempt;
  }

  private async releaseLease(): Promise<void> {
    // A renewal still in flight would race the release and one of them would conflict; let it land.
    // One renew deadline bounds the wait and the release together: a stop never waits longer.
    const deadline = this.clock.now() + this.renewDeadlineMs;
    if (this.inflight) {
      await this.race(this.inflight, deadline, undefined);
    }
    if (!this.lock.holdsObserved()) return;
    try {
      // Aborted at the deadline: a request left open would not be bounded by anything.
      const released = await withTimeout(this.clock, deadline - this.clock.now(), (signal) =>
        this.lock.release(signal),
      );
      if (!released.timedOut && released.value) {
        this.logger?.info("released lease");
        return;
      }
      this.logger?.warn("releasing the lease timed out; successors wait for it to expire");
    } catch (err) {
      this.logger?.warn({ err: String(err) }, "releasing the lease failed; successors wait for it to expire");
    }
  }

  private reportTransition(callbacks: LeaderCallbacks): void {
    const holder = this.lock.holder();
    if (holder === "" || holder === this.reportedLeader) return;
    this.reportedLeader = holder;
    if (holder !== this.identity) this.logger?.info({ leader: holder }, "new leader elected");
    try {
      callbacks.onNewLeader?.(holder);
    } catch (err) {
      this.logger?.error({ err }, "onNewLeader failed");
    }
  }

  /**
   * Wait for `promise` (or just time), until the monotonic `deadline`, or until `stop` aborts,
   * whichever comes first. `maxWaitMs` caps the wait without counting as a timeout.
   */
  private race(
    promise: Promise<unknown> | undefined,
    deadline: number,
    stop: AbortSignal | undefined,
    maxWaitMs = Infinity,
  ): Promise<Outcome> {
    if (stop?.aborted) return Promise.resolve("stopped");
    return new Promise<Outcome>((resolve) => {
      let timer: TimerHandle | undefined;
      let settled = false;
      const finish = (outcome: Outcome): void => {
        if (settled) return;
        settled = true;
        if (timer) this.clock.clearTimeout(timer);
        stop?.removeEventListener("abort", onAbort);
        resolve(outcome);
      };
      const onAbort = (): void => finish("stopped");
      stop?.addEventListener("abort", onAbort, { once: true });
      const untilDeadline = deadline - this.clock.now();
      const wait = Math.min(untilDeadline, maxWaitMs);
      if (Number.isFinite(wait)) {
        timer = this.clock.setTimeout(() => finish(wait >= untilDeadline ? "timeout" : "done"), wait);
      }
      promise?.then(
        () => finish("done"),
        () => finish("done"),
      );
    });
  }
}
