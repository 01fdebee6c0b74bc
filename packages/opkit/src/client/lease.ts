/**
 * One coordination.k8s.io/v1 Lease held as a lock, with client-go's resource-lock semantics: the record
 * is taken when it does not exist, was released (empty holder) or has not changed for its duration —
 * measured from when this process last *saw it change*, on its own monotonic clock, never by comparing
 * the holder's renewTime with our wall clock. Every write is an update guarded by the resourceVersion
 * read, so of two candidates racing for one Lease exactly one wins.
 *
 * Leader election (one Lease) and sharding (a Lease per shard and per replica) both hold Leases through
 * it; it knows nothing of what the Lease guards.
 */
import type { KubeClient } from "./client.ts";
import { errorMessage, NotFoundError } from "./errors.ts";
import { microTime } from "./types.ts";
import { Leases, type Lease } from "./builtins.ts";
import { realClock, type Clock } from "../clock/index.ts";
import type { Logger } from "../logging/index.ts";

/** The spec of a coordination.k8s.io/v1 Lease: holder, duration, acquire and renew times, transitions. */
export type LeaseSpec = NonNullable<Lease["spec"]>;

/** The part of KubeClient a LeaseLock uses: get, create and update of Leases. */
export type LeaseClient = Pick<KubeClient, "get" | "create" | "update">;

/** What a LeaseLock is: which Lease, who holds it for us, for how long, and the clocks. */
export interface LeaseLockOptions {
  /** Reads and writes the Lease. */
  client: LeaseClient;
  /** The Lease's namespace. */
  namespace: string;
  /** The Lease's name. */
  name: string;
  /** Written into holderIdentity; unique per process. */
  identity: string;
  /** How long others wait after the last observed change before taking the Lease over. */
  leaseDurationMs: number;
  /** Labels set on the Lease when this lock creates it (e.g. to list a group of Leases). */
  labels?: Record<string, string>;
  /** Monotonic time for expiry. */
  clock?: Clock;
  /** Wall time written into acquireTime and renewTime (informational: expiry never reads them). */
  wallClock?: () => Date;
  /** Where failed optimistic renewals are logged (debug). */
  logger?: Logger;
}

/**
 * A Lease used as a lock: `tryAcquireOrRenew` takes or keeps it, `release` hands it back at once. Not
 * safe for concurrent attempts on one instance: callers serialize them.
 */
export class LeaseLock {
  /** The holder identity this lock writes. */
  readonly identity: string;
  /** The Lease's namespace. */
  readonly namespace: string;
  /** The Lease's name. */
  readonly name: string;
  private readonly client: LeaseClient;
  private readonly leaseDurationMs: number;
  private readonly labels: Record<string, string> | undefined;
  private readonly clock: Clock;
  private readonly wallClock: () => Date;
  private readonly logger: Logger | undefined;

  // The last Lease read or written: its resourceVersion guards the next update.
  private lastLease: Lease | undefined;
  // The record as last seen changing, and when (monotonic): the basis of expiry.
  private observed: LeaseSpec | undefined;
  private observedRaw = "";
  private observedAt = 0;
  /** The error of the last failed attempt, for loss reasons and logs. */
  lastError = "";

  constructor(options: LeaseLockOptions) {
    this.client = options.client;
    this.namespace = options.namespace;
    this.name = options.name;
    this.identity = options.identity;
    this.leaseDurationMs = options.leaseDurationMs;
    this.labels = options.labels;
    this.clock = options.clock ?? realClock;
    this.wallClock = options.wallClock ?? (() => new Date());
    this.logger = options.logger;
  }

  /** "namespace/name" of the Lease. */
  get lease(): string {
    return `${this.namespace}/${this.name}`;
  }

  /** The holder last observed ("" when none or released). */
  holder(): string {
    return this.observed?.holderIdentity ?? "";
  }

  /**
   * The resourceVersion of the Lease as last read or written here (undefined before the first), e.g. as a
   * precondition for deleting exactly the record this process saw.
   */
  resourceVersion(): string | undefined {
    return this.lastLease?.metadata.resourceVersion;
  }

  /** Whether the last observed record names us as holder (not whether it is still valid). */
  holdsObserved(): boolean {
    return this.observed?.holderIdentity === this.identity;
  }

  /**
   * The monotonic time at which the observed record expires for us unless we see it change before (see
   * validAt); undefined when none was observed.
   */
  expiresAt(): number | undefined {
    if (!this.observed) return undefined;
    return this.observedAt + (this.observed.leaseDurationSeconds ?? 0) * 1000;
  }

  /** Whether the observed record has not expired at monotonic `now`, counted from when we saw it change. */
  validAt(now: number): boolean {
    return (this.expiresAt() ?? 0) > now;
  }

  /**
   * Whether another process could take the Lease now: it is unknown (never seen: may not exist),
   * released, or expired on our clock.
   */
  takeable(now: number): boolean {
    if (!this.observed) return true;
    return this.holder() === "" || (!this.holdsObserved() && !this.validAt(now));
  }

  /**
   * Feed a copy of the Lease read elsewhere (e.g. one list of many Leases), so expiry is tracked without
   * a GET per Lease. A record that did not change keeps its first-seen time.
   */
  observe(lease: Lease): void {
    const spec = lease.spec ?? {};
    if (JSON.stringify(spec) !== this.observedRaw) this.setObserved(lease);
    else this.lastLease = lease;
  }

  /**
   * One attempt, as client-go's tryAcquireOrRenew: returns true when we hold the Lease afterwards. Never
   * throws; the error is kept in `lastError`. A ConflictError means another candidate wrote first.
   */
  async tryAcquireOrRenew(signal?: AbortSignal): Promise<boolean> {
    try {
      return await this.attempt(signal);
    } catch (err) {
      this.lastError = errorMessage(err);
      this.logger?.debug({ err: this.lastError, lease: this.lease }, "lease attempt failed");
      return false;
    }
  }

  private async attempt(signal: AbortSignal | undefined): Promise<boolean> {
    const now = this.clock.now();
    const wallNow = microTime(this.wallClock());
    const record: LeaseSpec = {
      holderIdentity: this.identity,
      leaseDurationSeconds: Math.max(1, Math.ceil(this.leaseDurationMs / 1000)),
      acquireTime: wallNow,
      renewTime: wallNow,
      leaseTransitions: 0,
    };

    // Fast path: the holder renews on top of the Lease it last wrote, saving a GET per renewal.
    if (this.holdsObserved() && this.validAt(now) && this.lastLease) {
      record.acquireTime = this.observed?.acquireTime ?? wallNow;
      record.leaseTransitions = this.observed?.leaseTransitions ?? 0;
      try {
        this.setObserved(await this.client.update({ ...this.lastLease, spec: record }, { signal }));
        return true;
      } catch (err) {
        this.logger?.debug({ err: String(err), lease: this.lease }, "optimistic renewal failed; reading");
      }
    }

    let current: Lease;
    try {
      current = await this.client.get(Leases, this.name, { namespace: this.namespace, signal });
    } catch (err) {
      if (!(err instanceof NotFoundError)) throw err;
      const created = await this.client.create<Lease>(
        {
          apiVersion: Leases.apiVersion,
          kind: Leases.kind,
          metadata: {
            name: this.name,
            namespace: this.namespace,
            ...(this.labels ? { labels: this.labels } : {}),
          },
          spec: record,
        },
        { signal },
      );
      this.setObserved(created);
      return true;
    }

    this.observe(current);
    this.lastLease = current;
    const spec = current.spec ?? {};
    if ((spec.holderIdentity ?? "") !== "" && this.validAt(now) && !this.holdsObserved()) {
      this.lastError = `lease is held by ${spec.holderIdentity} and has not expired`;
      return false;
    }

    if (this.holdsObserved()) {
      record.acquireTime = spec.acquireTime ?? wallNow;
      record.leaseTransitions = spec.leaseTransitions ?? 0;
    } else {
      record.leaseTransitions = (spec.leaseTransitions ?? 0) + 1;
    }
    this.setObserved(await this.client.update({ ...current, spec: record }, { signal }));
    return true;
  }

  /**
   * Hand the Lease back at once (empty holder, 1 s duration) so a successor need not wait for it to
   * expire. Only when we hold it; release only once the work it guards has stopped. Throws what the
   * update threw; resolves false when there was nothing of ours to release.
   */
  async release(signal?: AbortSignal): Promise<boolean> {
    if (!this.holdsObserved() || !this.lastLease) return false;
    const wallNow = microTime(this.wallClock());
    const record: LeaseSpec = {
      holderIdentity: "",
      leaseDurationSeconds: 1,
      acquireTime: wallNow,
      renewTime: wallNow,
      leaseTransitions: this.observed?.leaseTransitions ?? 0,
    };
    this.setObserved(await this.client.update({ ...this.lastLease, spec: record }, { signal }));
    return true;
  }

  private setObserved(lease: Lease): void {
    this.lastLease = lease;
    this.observed = lease.spec ?? {};
    this.observedRaw = JSON.stringify(this.observed);
    this.observedAt = this.clock.now();
  }
}
