/**
 * The work side of sharding: which shards this replica works on, what its informers cache, and which
 * keys it may reconcile.
 *
 * - A shard acquired from the ShardCoordinator is first added to the informer filters of the sharded
 *   kinds (the server's `shardSelector` where supported, the same FNV-1a test on the client always);
 *   only once those informers listed again is it active: its keys are admitted and every cached object
 *   of it is queued.
 * - A shard being handed back stops admitting keys at once, and `releasing` resolves only when its
 *   in-flight reconciles have finished — the coordinator releases the Lease after that.
 * - A lost shard stops admitting keys and aborts its in-flight reconciles' signals.
 * - Applying the filters can fail (the cache rejects the swap): the error is logged and reported by
 *   `filterError` (readiness shows it), and the application is retried with exponential backoff on the
 *   injected clock until it succeeds; the shards it covers become active only then.
 *
 * It knows nothing of controllers: the gate it hands out has the shape the controller's KeyGate expects.
 */
import type { Cache } from "../cache/cache.ts";
import type { InformerFilter } from "../cache/informer.ts";
import type { KubeClient } from "../client/client.ts";
import { Leases } from "../client/builtins.ts";
import type { DeepReadonly, KindRef, KubeObject } from "../client/types.ts";
import { realClock, type Clock, type TimerHandle } from "../clock/index.ts";
import type { Logger } from "../logging/index.ts";
import type { ShardCallbacks } from "./coordinator.ts";
import { ShardSpace, hex64 } from "./hash.ts";
import { errorMessage } from "../client/errors.ts";

/** The object field a kind is sharded by: its namespace (parents and children together) or its uid. */
export type ShardKeyField = "namespace" | "uid";

/** A kind whose informers cache only this replica's shards, and the field its shard comes from. */
export interface ShardedKind {
  /** The kind. */
  kind: KindRef;
  /** The field hashed into a shard. */
  field: ShardKeyField;
}

/** A key admitted for a reconcile (the controller's KeyAdmission). */
export interface ShardAdmission {
  /** Aborted when the shard is lost. */
  signal: AbortSignal;
  /** Called once the reconcile ended. */
  done(): void;
}

/** Options of a ShardRouter. */
export interface ShardRouterOptions {
  /** The shard count. */
  count: number;
  /** The cache whose informers of `kinds` are filtered to the held shards. */
  cache: Pick<Cache, "setFilter">;
  /** Kinds cached per shard; other kinds stay unsharded. */
  kinds: readonly ShardedKind[];
  /** Whether the API server applies `shardSelector` (see `detectServerSharding`). */
  serverSide: boolean;
  /** Told when a shard became active, so its cached objects can be queued. */
  onActivated?: (shard: number) => void;
  /** Where activation and filter changes are logged. */
  logger?: Logger;
  /** Timers of the retries after a failed filter application. */
  clock?: Clock;
  /** First delay before retrying a failed filter application (default 500 ms); doubles per failure. */
  retryInitialMs?: number;
  /** Longest delay between retries of a failed filter application (default 30 s). */
  retryMaxMs?: number;
}

type State = "activating" | "active" | "draining";

interface Work {
  state: State;
  inflight: number;
  abort: AbortController;
  idle: (() => void)[];
}

/** The value of `field` of an object, as the API server hashes it. */
export function shardFieldValue(obj: DeepReadonly<KubeObject>, field: ShardKeyField): string {
  return field === "uid" ? (obj.metadata.uid ?? "") : (obj.metadata.namespace ?? "");
}

/**
 * A shard selector for a set of shards: adjacent ranges merged, joined with `||`; undefined for an
 * empty set (nothing to ask the server for).
 */
export function shardSelector(
  space: ShardSpace,
  field: ShardKeyField,
  shards: Iterable<number>,
): string | undefined {
  const sorted = [...new Set(shards)].sort((a, b) => a - b);
  const parts: string[] = [];
  let i = 0;
  while (i < sorted.length) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === (sorted[j] as number) + 1) j++;
    const start = space.ranges[sorted[i] as number]?.start ?? 0n;
    const end = space.ranges[sorted[j] as number]?.end ?? 0n;
    parts.push(`shardRange(object.metadata.${field}, '${hex64(start)}', '${hex64(end)}')`);
    i = j + 1;
  }
  return parts.length ? parts.join(" || ") : undefined;
}

/**
 * Whether the API server applies shard selectors (the `ShardedListAndWatch` feature gate): a list with
 * one answers with `metadata.shardInfo` only then. Lists Leases, which a sharded operator may read.
 */
export async function detectServerSharding(
  client: Pick<KubeClient, "list">,
  namespace: string,
): Promise<boolean> {
  const list = await client.list(Leases, {
    namespace,
    limit: 1,
    shardSelector: `shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')`,
  });
  return list.metadata.shardInfo !== undefined;
}

/** Routes a sharded operator's work to the shards it holds (see the module comment). */
export class ShardRouter {
  /** The shard key space. */
  readonly space: ShardSpace;
  private readonly cache: Pick<Cache, "setFilter">;
  private readonly kinds: readonly ShardedKind[];
  private readonly serverSide: boolean;
  private readonly onActivated: ((shard: number) => void) | undefined;
  private readonly logger: Logger | undefined;
  private readonly work = new Map<number, Work>();
  private applying: Promise<void> = Promise.resolve();
  private queued: Promise<void> | undefined;
  private readonly clock: Clock;
  private readonly retryInitialMs: number;
  private readonly retryMaxMs: number;
  private failures = 0;
  private lastFilterError: string | undefined;
  private retryTimer: TimerHandle | undefined;
  private stopped = false;

  constructor(options: ShardRouterOptions) {
    this.space = new ShardSpace(options.count);
    this.cache = options.cache;
    this.kinds = options.kinds;
    this.serverSide = options.serverSide;
    this.onActivated = options.onActivated;
    this.logger = options.logger;
    this.clock = options.clock ?? realClock;
    this.retryInitialMs = options.retryInitialMs ?? 500;
    this.retryMaxMs = options.retryMaxMs ?? 30_000;
  }

  /** The shard an object falls into by `field`. */
  shardOf(obj: DeepReadonly<KubeObject>, field: ShardKeyField): number {
    return this.space.shardOf(shardFieldValue(obj, field));
  }

  /** Shards whose keys are admitted now. */
  active(): number[] {
    return [...this.work].filter(([, w]) => w.state === "active").map(([s]) => s);
  }

  /** True when every held shard is active (its informers listed with it): the readiness check. */
  ready(): boolean {
    return [...this.work.values()].every((w) => w.state !== "activating");
  }

  /**
   * Why the last application of the shard filters failed, while no later one succeeded (it is being
   * retried); undefined when the filters are applied or applying.
   */
  filterError(): string | undefined {
    return this.lastFilterError;
  }

  /** Set the informer filters for no shard yet, before the cache starts. */
  initialize(): Promise<void> {
    return this.refilter();
  }

  /** Stop retrying and applying filters (the manager is stopping). */
  stop(): void {
    this.stopped = true;
    if (this.retryTimer !== undefined) this.clock.clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
  }

  /**
   * A gate for one controller: `shardOfKey` names the shard of a queue key (undefined: the key is not
   * this replica's to decide, e.g. the object is not cached, and it is dropped).
   */
  gate(shardOfKey: (key: string) => number | undefined): {
    /** Admits a key whose shard is active here (call `done()` once its reconcile ended); undefined drops it. */
    admit(key: string): ShardAdmission | undefined;
  } {
    return {
      admit: (key) => {
        const shard = shardOfKey(key);
        if (shard === undefined) return undefined;
        const w = this.work.get(shard);
        if (!w || w.state !== "active") return undefined;
        w.inflight++;
        let done = false;
        return {
          signal: w.abort.signal,
          done: () => {
            if (done) return;
            done = true;
            w.inflight--;
            if (w.inflight === 0) for (const resolve of w.idle.splice(0)) resolve();
          },
        };
      },
    };
  }

  /** The callbacks to start a ShardCoordinator with. */
  callbacks(): ShardCallbacks {
    return {
      acquired: (shard) => {
        const w: Work = { state: "activating", inflight: 0, abort: new AbortController(), idle: [] };
        this.work.set(shard, w);
        // Active once a filter application that includes it succeeded (see refilter).
        void this.refilter();
      },
      releasing: async (shard) => {
        const w = this.work.get(shard);
        if (!w) return;
        w.state = "draining";
        if (w.inflight > 0) await new Promise<void>((resolve) => w.idle.push(resolve));
        if (this.work.get(shard) === w) this.work.delete(shard);
        void this.refilter();
      },
      lost: (shard, reason) => {
        const w = this.work.get(shard);
        if (!w) return;
        this.work.delete(shard);
        w.abort.abort(new Error(`shard ${shard} lost: ${reason}`));
        for (const resolve of w.idle.splice(0)) resolve();
        void this.refilter();
      },
    };
  }

  /**
   * Apply the filters of the shards held now to every sharded kind; on success, the shards it covered
   * that are still activating become active. Calls that arrive while one is applying are folded into
   * one next application, so a burst of acquisitions costs one relist. Never rejects: a failure is
   * logged, kept for `filterError` and retried with backoff.
   */
  private refilter(): Promise<void> {
    if (this.queued) return this.queued;
    const next = this.applying.then(async () => {
      this.queued = undefined;
      if (this.stopped) return;
      const applied = new Map(this.work);
      const shards = new Set(applied.keys());
      try {
        await Promise.all(this.kinds.map((k) => this.cache.setFilter(k.kind, this.filter(k.field, shards))));
      } catch (err) {
        this.failed(err);
        return;
      }
      this.succeeded();
      this.logger?.debug({ shards: [...shards].sort((a, b) => a - b) }, "informer filters applied");
      for (const [shard, w] of applied) {
        if (this.work.get(shard) !== w || w.state !== "activating") continue;
        w.state = "active";
        this.logger?.info({ shard }, "shard active: caches listed, reconciling its keys");
        try {
          this.onActivated?.(shard);
        } catch (err) {
          this.logger?.error({ shard, err: String(err) }, "queueing an activated shard's keys failed");
        }
      }
    });
    this.queued = next;
    this.applying = next;
    return next;
  }

  private failed(err: unknown): void {
    this.failures++;
    this.lastFilterError = errorMessage(err);
    const delayMs = Math.min(this.retryMaxMs, this.retryInitialMs * 2 ** Math.min(this.failures - 1, 30));
    const waiting = [...this.work].filter(([, w]) => w.state === "activating").map(([s]) => s);
    this.logger?.error(
      { err: this.lastFilterError, failures: this.failures, retryInMs: delayMs, notActive: waiting },
      "applying shard filters failed; retrying",
    );
    if (this.stopped || this.retryTimer !== undefined) return;
    this.retryTimer = this.clock.setTimeout(() => {
      this.retryTimer = undefined;
      void this.refilter();
    }, delayMs);
  }

  private succeeded(): void {
    if (this.failures > 0)
      this.logger?.info({ failures: this.failures }, "shard filters applied after failures");
    this.failures = 0;
    this.lastFilterError = undefined;
    if (this.retryTimer !== undefined) this.clock.clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
  }

  private filter(field: ShardKeyField, shards: ReadonlySet<number>): InformerFilter {
    // No shard: ask the server for the smallest range there is (the client test drops even that).
    const selector = this.serverSide
      ? (shardSelector(this.space, field, shards) ??
        `shardRange(object.metadata.${field}, '0x0000000000000000', '0x0000000000000001')`)
      : undefined;
    return {
      selector,
      matches: (obj) => shards.has(this.space.shardOf(shardFieldValue(obj, field))),
    };
  }

  /** Objects cached per active shard, from `list` (the reconciled kinds' cached objects and their fields). */
  keysPerShard(
    objects: Iterable<{ obj: DeepReadonly<KubeObject>; field: ShardKeyField }>,
  ): Map<number, number> {
    const counts = new Map<number, number>();
    for (const s of this.work.keys()) counts.set(s, 0);
    for (const { obj, field } of objects) {
      const s = this.shardOf(obj, field);
      if (counts.has(s)) counts.set(s, (counts.get(s) ?? 0) + 1);
    }
    return counts;
  }
}
