/**
 * Shard membership and ownership through Leases, in the operator's namespace:
 *
 * - every replica renews a heartbeat Lease `<group>-member-<id>`; the live replicas are those whose
 *   heartbeat this replica saw change within its lease duration (on its own monotonic clock);
 * - every shard has a Lease `<group>-shard-<i>`; a replica holds at most its fair share,
 *   ceil(shards / live replicas): it takes free or expired shard Leases up to it and hands back the
 *   extras when replicas join;
 * - a shard is handed back only after its work stopped: `releasing` must resolve (no key of the shard
 *   dispatched any more, in-flight reconciles of it finished) before the Lease is released, and a new
 *   holder starts only after that release or after the Lease expired;
 * - a held shard whose Lease cannot be renewed for the renew deadline (shorter than the lease duration)
 *   or that another replica took is `lost`: its work must stop at once;
 * - heartbeats do not pile up: a replica stopping cleanly deletes its own, and a live replica deletes
 *   one that has stayed expired for a grace period well beyond its duration, guarded by the
 *   resourceVersion it saw, so a replica that renews meanwhile keeps its heartbeat.
 *
 * Every timer runs on the injected clock. It knows nothing of controllers or caches: callers act on
 * the callbacks.
 */
import { createHash } from "node:crypto";
import type { KubeClient } from "../client/client.ts";
import { Leases, type Lease } from "../client/builtins.ts";
import { LeaseLock } from "../client/lease.ts";
import { ConflictError, NotFoundError } from "../client/errors.ts";
import { realClock, withTimeout, type Clock, type TimerHandle } from "../clock/index.ts";
import type { Logger } from "../logging/index.ts";

/** The label every Lease of one sharded operator carries, with the group name as value. */
export const SHARD_GROUP_LABEL = "opkit.dev/shard-group";
/** The label telling heartbeat Leases ("member") from shard Leases ("shard"). */
export const SHARD_ROLE_LABEL = "opkit.dev/shard-role";

/**
 * The part of KubeClient shard coordination uses: get, list, create and update of Leases, and delete
 * to remove heartbeats (without it, heartbeats are released instead and dead ones stay).
 */
export type ShardLeaseClient = Pick<KubeClient, "get" | "create" | "update" | "list"> &
  Partial<Pick<KubeClient, "delete">>;

/** What a ShardCoordinator tells its user about the shards it holds. */
export interface ShardCallbacks {
  /** The shard's Lease was acquired: its work may start (once its caches are ready). */
  acquired(shard: number): void;
  /**
   * The shard is being handed back: stop dispatching its keys and resolve once its in-flight work has
   * finished. The Lease is renewed meanwhile and released only after this resolves.
   */
  releasing(shard: number): Promise<void>;
  /** The shard's Lease was lost (not renewed in time, or taken over): stop its work at once. */
  lost(shard: number, reason: string): void;
}

/** Counters and gauges of shard ownership; the manager wires them to its metrics. */
export interface ShardMetricsSink {
  /** The number of shards held now. */
  held(count: number): void;
  /** One shard changed hands here (acquired, released or lost). */
  handover(direction: "acquired" | "released" | "lost"): void;
}

/** Options of a ShardCoordinator: the Leases' namespace and group, the shard count, timings and clocks. */
export interface ShardCoordinatorOptions {
  /** Reads and writes the Leases; needs get, list, create and update on leases in `namespace`. */
  client: ShardLeaseClient;
  /** Where the Leases live (the operator's namespace). */
  namespace: string;
  /** The Lease name prefix shared by every replica of one operator, e.g. its name. */
  group: string;
  /** The fixed number of shards, the same on every replica. */
  count: number;
  /** Unique per process; written into every Lease it holds. */
  identity: string;
  /** How long others wait after the last observed renewal before taking a Lease over (default 15 s). */
  leaseDurationMs?: number;
  /** How long a held shard's renewal may keep failing before the shard counts as lost (default 10 s). */
  renewDeadlineMs?: number;
  /** Interval between rounds of renewals, membership reads and acquisitions (default 2 s). */
  retryPeriodMs?: number;
  /**
   * How long another replica's heartbeat Lease must have stayed expired (unchanged past its duration,
   * on this replica's clock) before this replica deletes it (default 3 × leaseDuration).
   */
  deadMemberGraceMs?: number;
  /** Monotonic time for expiry and timers. */
  clock?: Clock;
  /** Wall time written into the Leases (informational). */
  wallClock?: () => Date;
  /** Randomness for which free shard to try first; injectable for tests. */
  random?: () => number;
  /** Shard metrics. */
  metrics?: ShardMetricsSink;
  /** Where acquisitions, releases and losses are logged. */
  logger?: Logger;
}

/** Shard coordination options that cannot work; the message says which. */
export class ShardConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ShardConfigError";
  }
}

/** The fair share of `count` shards among `replicas` live replicas: ceil(count / replicas). */
export function fairShare(count: number, replicas: number): number {
  return Math.ceil(count / Math.max(1, replicas));
}

type ShardState = "free" | "held" | "draining";

interface Shard {
  index: number;
  lock: LeaseLock;
  state: ShardState;
  lastRenew: number;
  drained: boolean;
  drain: Promise<void> | undefined;
}

/** A Lease name part from any identity: 10 hex digits of its SHA-256 (identities may hold `_`). */
function memberId(identity: string): string {
  return createHash("sha256").update(identity).digest("hex").slice(0, 10);
}

/**
 * Holds this replica's fair share of a fixed set of shards through Leases, hands shards over when
 * replicas join or leave, and tells its user which shards to work on (see the module comment).
 */
export class ShardCoordinator {
  /** This replica's identity. */
  readonly identity: string;
  /** The shard count. */
  readonly count: number;
  private readonly client: ShardLeaseClient;
  private readonly namespace: string;
  private readonly group: string;
  private readonly leaseDurationMs: number;
  private readonly renewDeadlineMs: number;
  private readonly retryPeriodMs: number;
  private readonly deadMemberGraceMs: number;
  private readonly clock: Clock;
  private readonly random: () => number;
  private readonly metrics: ShardMetricsSink | undefined;
  private readonly logger: Logger | undefined;
  private readonly heartbeat: LeaseLock;
  private readonly shards: Shard[] = [];
  // Member Lease name → the record as last seen changing and when (monotonic).
  private readonly members = new Map<string, { raw: string; at: number; durationMs: number }>();
  private callbacks: ShardCallbacks | undefined;
  private timer: TimerHandle | undefined;
  private tickRunning: Promise<void> | undefined;
  private stopped = true;
  private stopping: Promise<void> | undefined;
  private liveReplicas = 1;

  constructor(options: ShardCoordinatorOptions) {
    this.client = options.client;
    this.namespace = options.namespace;
    this.group = options.group;
    this.count = options.count;
    this.identity = options.identity;
    this.leaseDurationMs = options.leaseDurationMs ?? 15_000;
    this.renewDeadlineMs = options.renewDeadlineMs ?? 10_000;
    this.retryPeriodMs = options.retryPeriodMs ?? 2_000;
    this.deadMemberGraceMs = options.deadMemberGraceMs ?? 3 * this.leaseDurationMs;
    this.clock = options.clock ?? realClock;
    this.random = options.random ?? Math.random;
    this.metrics = options.metrics;
    this.logger = options.logger?.child({ shardGroup: this.group, identity: this.identity });
    if (!Number.isInteger(this.count) || this.count < 1 || this.count > 4096)
      throw new ShardConfigError(`shards.count must be a whole number from 1 to 4096, got ${this.count}`);
    if (!this.identity) throw new ShardConfigError("identity must not be empty");
    if (!(this.retryPeriodMs > 0)) throw new ShardConfigError("retryPeriod must be positive");
    if (!(this.deadMemberGraceMs >= 0))
      throw new ShardConfigError(`deadMemberGrace must not be negative, got ${this.deadMemberGraceMs}`);
    if (!(this.leaseDurationMs > this.renewDeadlineMs))
      throw new ShardConfigError(
        `leaseDuration (${this.leaseDurationMs} ms) must be greater than renewDeadline (${this.renewDeadlineMs} ms)`,
      );
    if (!(this.renewDeadlineMs > this.retryPeriodMs))
      throw new ShardConfigError(
        `renewDeadline (${this.renewDeadlineMs} ms) must be greater than retryPeriod (${this.retryPeriodMs} ms)`,
      );
    const lock = (name: string, role: string): LeaseLock =>
      new LeaseLock({
        client: this.client,
        namespace: this.namespace,
        name,
        identity: this.identity,
        leaseDurationMs: this.leaseDurationMs,
        labels: { [SHARD_GROUP_LABEL]: this.group, [SHARD_ROLE_LABEL]: role },
        clock: this.clock,
        wallClock: options.wallClock,
        logger: this.logger,
      });
    this.heartbeat = lock(`${this.group}-member-${memberId(this.identity)}`, "member");
    for (let i = 0; i < this.count; i++)
      this.shards.push({
        index: i,
        lock: lock(this.shardLeaseName(i), "shard"),
        state: "free",
        lastRenew: 0,
        drained: false,
        drain: undefined,
      });
  }

  /** The name of shard `index`'s Lease. */
  shardLeaseName(index: number): string {
    return `${this.group}-shard-${index}`;
  }

  /** The shards this replica holds and works on now (not those being handed back), ascending. */
  held(): number[] {
    return this.shards.filter((s) => s.state === "held").map((s) => s.index);
  }

  /** Live replicas as last counted (this one included). */
  replicas(): number {
    return this.liveReplicas;
  }

  /** Begin: heartbeat, then rounds every retry period. */
  start(callbacks: ShardCallbacks): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.stopping = undefined;
    this.callbacks = callbacks;
    this.schedule(0);
  }

  /**
   * Stop taking shards, hand back every held shard (after `releasing` resolved for it) and delete the
   * heartbeat, so successors need not wait for expiry and the others count one replica less at once.
   * Until a shard's `releasing` resolved its Lease is still renewed, however long that takes: a successor
   * never starts while its work may still run.
   */
  stop(): Promise<void> {
    this.stopping ??= this.drainAndStop();
    return this.stopping;
  }

  private async drainAndStop(): Promise<void> {
    if (this.stopped) return;
    if (this.timer !== undefined) this.clock.clearTimeout(this.timer);
    this.timer = undefined;
    await this.tickRunning;
    const callbacks = this.callbacks as ShardCallbacks;
    for (const s of this.shards) if (s.state === "held") this.beginRelease(s, callbacks);
    // Rounds go on without acquisitions: they renew the shards still draining, release the drained
    // ones and notice losses, until every shard is free.
    while (!this.stopped && this.shards.some((s) => s.state !== "free")) {
      // A shard whose drain has not begun counts as drained (as a non-promise does in a race).
      const draining = this.shards
        .filter((s) => s.state === "draining" && !s.drained)
        .map((s) => s.drain ?? Promise.resolve());
      await withTimeout(this.clock, this.retryPeriodMs, () => Promise.race(draining));
      await this.tick();
    }
    if (this.stopped) return; // abandoned: nothing is released
    this.stopped = true;
    await this.removeHeartbeat();
  }

  /**
   * Delete our heartbeat as last written (release it when this client cannot delete), within the renew
   * deadline: a silent API server must not hold the stop.
   */
  private async removeHeartbeat(): Promise<void> {
    const resourceVersion = this.heartbeat.resourceVersion();
    const remove = this.client.delete?.bind(this.client);
    try {
      await this.bounded(this.clock.now() + this.renewDeadlineMs, async (signal) => {
        if (remove && this.heartbeat.holdsObserved() && resourceVersion) {
          await remove(Leases, this.heartbeat.name, {
            namespace: this.namespace,
            preconditions: { resourceVersion },
            signal,
          });
          this.logger?.info({ lease: this.heartbeat.name }, "heartbeat lease deleted");
        } else await this.heartbeat.release(signal);
      });
    } catch (err) {
      if (err instanceof NotFoundError) return;
      this.logger?.warn({ err: String(err) }, "could not remove the heartbeat lease");
    }
  }

  /**
   * Delete the heartbeat Leases of replicas gone for longer than their duration plus the grace, each
   * guarded by the resourceVersion listed: a replica that renewed since (it was only cut off) makes the
   * delete fail with a conflict and keeps its heartbeat.
   */
  private async collectDeadMembers(leases: Lease[]): Promise<void> {
    // Forget heartbeats that are gone (deleted by another replica); a failed list never gets here.
    const listed = new Set(leases.map((l) => l.metadata.name ?? ""));
    for (const name of this.members.keys()) if (!listed.has(name)) this.members.delete(name);
    const remove = this.client.delete?.bind(this.client);
    if (!remove) return;
    const now = this.clock.now();
    for (const lease of leases) {
      const name = lease.metadata.name ?? "";
      if (lease.metadata.labels?.[SHARD_ROLE_LABEL] !== "member" || name === this.heartbeat.name) continue;
      const seen = this.members.get(name);
      const resourceVersion = lease.metadata.resourceVersion;
      if (!seen || !resourceVersion || now - seen.at < seen.durationMs + this.deadMemberGraceMs) continue;
      if (this.stopped) return;
      try {
        // Bounded like every Lease request of a round: a hung delete must not delay the next renewals.
        const done = await this.bounded(this.clock.now() + this.retryPeriodMs, (signal) =>
          remove(Leases, name, { namespace: this.namespace, preconditions: { resourceVersion }, signal }),
        );
        if (done === false) continue;
        this.members.delete(name);
        this.logger?.info(
          { lease: name, holder: lease.spec?.holderIdentity ?? "", unchangedMs: Math.round(now - seen.at) },
          "deleted the heartbeat lease of a replica gone",
        );
      } catch (err) {
        if (err instanceof NotFoundError) this.members.delete(name);
        else if (err instanceof ConflictError)
          this.logger?.debug({ lease: name }, "heartbeat lease changed since listed; kept");
        else this.logger?.warn({ lease: name, err: String(err) }, "could not delete a dead heartbeat lease");
      }
    }
  }

  /**
   * Give up at once, e.g. when a stop's grace period ended with work still running: every shard not
   * yet free is `lost` (its work's signals abort) and no Lease is renewed or released any more, so each
   * expires for the others one lease duration after its last renewal. Resolves when a round still in
   * flight has ended.
   */
  async abandon(reason: string): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    if (this.timer !== undefined) this.clock.clearTimeout(this.timer);
    this.timer = undefined;
    const callbacks = this.callbacks as ShardCallbacks;
    for (const s of this.shards) {
      if (s.state === "free") continue;
      s.state = "free";
      this.logger?.warn({ shard: s.index, reason }, "shard abandoned; its Lease expires");
      this.metrics?.handover("lost");
      try {
        callbacks.lost(s.index, reason);
      } catch (err) {
        this.logger?.error({ err: String(err) }, "shard lost callback failed");
      }
    }
    this.reportHeld();
    await this.tickRunning;
  }

  /** One round (exposed for tests that drive rounds themselves). */
  async tick(): Promise<void> {
    if (this.tickRunning) return this.tickRunning;
    this.tickRunning = this.round().finally(() => (this.tickRunning = undefined));
    return this.tickRunning;
  }

  private schedule(delayMs: number): void {
    this.timer = this.clock.setTimeout(() => {
      void this.tick().then(() => {
        if (!this.stopped && !this.stopping) this.schedule(this.retryPeriodMs);
      });
    }, delayMs);
  }

  private async round(): Promise<void> {
    if (this.stopped) return;
    const callbacks = this.callbacks as ShardCallbacks;
    // Renewals do not wait for the heartbeat or the list: a hung request there must not keep a held
    // shard from being renewed, or from being given up at its renew deadline.
    const [leases] = await Promise.all([this.readMembership(), this.renewHeld(callbacks)]);
    // Without a list, what others hold and who is alive is unknown: keep what was last seen (counting
    // no one would make this replica its only member) and take nothing this round.
    if (leases === undefined || this.stopped || this.stopping) return;
    this.observe(leases, this.clock.now());
    await this.collectDeadMembers(leases);
    if (this.stopped || this.stopping) return;

    const fair = fairShare(this.count, this.liveReplicas);
    const held = this.shards.filter((s) => s.state === "held");
    const draining = this.shards.filter((s) => s.state === "draining").length;
    if (held.length > fair) {
      // Hand back the highest-numbered extras; each is released once its work has stopped.
      for (const s of held.slice(fair)) this.beginRelease(s, callbacks);
    } else if (held.length + draining < fair) {
      // A Lease that still names us (a restart with a fixed identity, or an attempt abandoned at its
      // deadline that landed anyway) is ours to renew, as client-go's elector renews its own record.
      const candidates = this.shards.filter(
        (s) => s.state === "free" && (s.lock.takeable(this.clock.now()) || s.lock.holdsObserved()),
      );
      shuffle(candidates, this.random);
      let want = fair - held.length - draining;
      // Acquisitions get one retry period in all, so the next round's renewals are never late for them.
      const phaseEnd = this.clock.now() + this.retryPeriodMs;
      for (const s of candidates) {
        if (want <= 0 || this.stopped || this.clock.now() >= phaseEnd) break;
        const sent = this.clock.now();
        if (!(await this.bounded(phaseEnd, (signal) => s.lock.tryAcquireOrRenew(signal)))) continue;
        s.state = "held";
        s.drained = false;
        // When it was sent, not answered: the server may have applied it at any moment in between.
        s.lastRenew = sent;
        want--;
        this.logger?.info({ shard: s.index, replicas: this.liveReplicas, fair }, "shard acquired");
        this.metrics?.handover("acquired");
        this.reportHeld();
        try {
          callbacks.acquired(s.index);
        } catch (err) {
          this.logger?.error({ err: String(err) }, "shard acquired callback failed");
        }
      }
    }
  }

  /**
   * Renew the heartbeat and list the group's Leases, both within one retry period: the round (and so
   * the next renewal of held shards) never waits longer for them.
   */
  private async readMembership(): Promise<Lease[] | undefined> {
    const deadline = this.clock.now() + this.retryPeriodMs;
    await this.bounded(deadline, (signal) => this.heartbeat.tryAcquireOrRenew(signal));
    try {
      const list = await this.bounded(deadline, (signal) =>
        this.client.list(Leases, {
          namespace: this.namespace,
          labelSelector: `${SHARD_GROUP_LABEL}=${this.group}`,
          signal,
        }),
      );
      if (list === false) throw new Error(`no answer within ${this.retryPeriodMs} ms`);
      return list.items;
    } catch (err) {
      this.logger?.warn({ err: String(err) }, "could not list shard leases; renewing only");
      return undefined;
    }
  }

  /**
   * Renew what we hold; release what finished draining; notice what we lost. Each renewal must land
   * before its shard's renew deadline, counted from the last successful renewal (as client-go's elector
   * counts it; others count the lease duration from when they saw that write, which is later): a
   * request that hangs is abandoned then and the shard is lost, before anyone else can take it.
   */
  private async renewHeld(callbacks: ShardCallbacks): Promise<void> {
    await Promise.all(
      this.shards
        .filter((s) => s.state !== "free")
        .map(async (s) => {
          if (s.state === "draining" && s.drained) return this.releaseShard(s);
          const deadline = s.lastRenew + this.renewDeadlineMs;
          const sent = this.clock.now();
          if (await this.bounded(deadline, (signal) => s.lock.tryAcquireOrRenew(signal))) {
            // When it was sent, not answered: a slow answer must not push the deadline past the Lease.
            s.lastRenew = sent;
            return;
          }
          const holder = s.lock.holder();
          const taken = holder !== "" && holder !== this.identity;
          if (taken || this.clock.now() >= deadline) {
            const reason = taken
              ? `lease is held by ${holder}`
              : `not renewed within ${this.renewDeadlineMs} ms: ${s.lock.lastError || "no answer in time"}`;
            s.state = "free";
            this.logger?.error({ shard: s.index, reason }, "shard lost");
            this.metrics?.handover("lost");
            this.reportHeld();
            try {
              callbacks.lost(s.index, reason);
            } catch (err) {
              this.logger?.error({ err: String(err) }, "shard lost callback failed");
            }
          }
        }),
    );
  }

  /**
   * `attempt` with a signal that aborts at monotonic `deadline`; false when the deadline came first
   * (whether or not the request honoured the signal).
   */
  private async bounded<T>(
    deadline: number,
    attempt: (signal: AbortSignal) => Promise<T>,
  ): Promise<T | false> {
    const result = await withTimeout(this.clock, deadline - this.clock.now(), attempt, {
      reason: () => new Error("lease deadline passed"),
    });
    return result.timedOut ? false : result.value;
  }

  private beginRelease(s: Shard, callbacks: ShardCallbacks): void {
    s.state = "draining";
    s.drained = false;
    this.reportHeld();
    this.logger?.info({ shard: s.index, replicas: this.liveReplicas }, "handing shard back");
    s.drain = Promise.resolve()
      .then(() => callbacks.releasing(s.index))
      .catch((err: unknown) => this.logger?.error({ err: String(err) }, "shard releasing callback failed"))
      .finally(() => {
        s.drained = true;
      });
  }

  private async releaseShard(s: Shard): Promise<void> {
    try {
      const released = await this.bounded(s.lastRenew + this.renewDeadlineMs, (signal) =>
        s.lock.release(signal),
      );
      if (released === false) throw new Error("no answer within the renew deadline");
      this.logger?.info({ shard: s.index }, "shard released");
    } catch (err) {
      this.logger?.warn({ shard: s.index, err: String(err) }, "releasing a shard failed; it expires instead");
    }
    s.state = "free";
    s.drained = false;
    this.metrics?.handover("released");
    this.reportHeld();
  }

  private observe(leases: Lease[], now: number): void {
    const byName = new Map(leases.map((l) => [l.metadata.name ?? "", l]));
    for (const s of this.shards) {
      const lease = byName.get(s.lock.name);
      // A Lease we hold is known better from our own writes than from a list that may predate them.
      if (lease && s.state === "free") s.lock.observe(lease);
    }
    let live = 0;
    for (const lease of leases) {
      if (lease.metadata.labels?.[SHARD_ROLE_LABEL] !== "member") continue;
      const name = lease.metadata.name ?? "";
      const raw = JSON.stringify(lease.spec ?? {});
      const seen = this.members.get(name);
      const durationMs = (lease.spec?.leaseDurationSeconds ?? 0) * 1000;
      if (!seen || seen.raw !== raw) this.members.set(name, { raw, at: now, durationMs });
      const m = this.members.get(name) as { at: number; durationMs: number };
      const holder = lease.spec?.holderIdentity ?? "";
      if (holder === this.identity || (holder !== "" && m.at + m.durationMs > now)) live++;
    }
    // Our own heartbeat counts even if the list predates its creation.
    if (!leases.some((l) => l.metadata.name === this.heartbeat.name)) live++;
    if (live !== this.liveReplicas)
      this.logger?.info({ replicas: live, fair: fairShare(this.count, live) }, "live replicas changed");
    this.liveReplicas = Math.max(1, live);
  }

  private reportHeld(): void {
    this.metrics?.held(this.shards.filter((s) => s.state !== "free").length);
  }
}

function shuffle<T>(items: T[], random: () => number): void {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [items[i], items[j]] = [items[j] as T, items[i] as T];
  }
}
