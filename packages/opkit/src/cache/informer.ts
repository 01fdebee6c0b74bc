/**
 * An informer: a reflector feeding a store, and event handlers told about every change (with the old
 * and new object). Relists are diffed against the store so handlers see adds, updates and the deletes
 * that happened while the watch was down — each exactly once.
 */
import { KubeClient } from "../client/client.ts";
import { objectKey, type DeepReadonly, type KindRef, type KubeObject } from "../client/types.ts";
import { realClock, type Clock, type TimerHandle } from "../clock/index.ts";
import {
  Reflector,
  isPermissionError,
  type ListWatcher,
  type ReflectorOptions,
  type ReflectorState,
} from "./reflector.ts";
import { Store, type IndexFunc, type StoreListOptions } from "./store.ts";
import { errorMessage } from "../client/errors.ts";

/**
 * Told about every change of a kind. Objects are the cache's own, frozen: handlers must not keep
 * expensive work here (they run on the informer's path) and may return a promise, whose rejection is
 * reported, never thrown into the process.
 */
export interface EventHandler<T extends KubeObject> {
  /** `initial` is true for objects delivered by the first list (and by resyncs): low priority. */
  onAdd?(obj: DeepReadonly<T>, initial: boolean): void | Promise<void>;
  /** An object changed; `resync` is true when it is a periodic re-delivery of an unchanged object. */
  onUpdate?(oldObj: DeepReadonly<T>, newObj: DeepReadonly<T>, resync: boolean): void | Promise<void>;
  /** The last known state of the object. After a relist this may be older than the actual deletion. */
  onDelete?(obj: DeepReadonly<T>): void | Promise<void>;
}

/**
 * Restricts an informer to part of its kind (one operator replica's shards): `selector` goes to the server
 * with every list and watch (where it is honoured, the server sends only those objects), and `matches`
 * is applied to everything received either way, so the store and the handlers see the same objects
 * whether or not the server filtered.
 */
export interface InformerFilter {
  /** Sent as the list/watch `shardSelector`; undefined: filter on the client only. */
  selector?: string;
  /** Whether an object belongs in this informer. */
  matches(obj: DeepReadonly<KubeObject>): boolean;
}

/** Options of an Informer: the reflector's, plus the resync period and the clock. */
export interface InformerOptions<T extends KubeObject> extends ReflectorOptions<T> {
  /**
   * Re-deliver every cached object as an update this often, with ±10% jitter (0 or undefined: never).
   * The Cache defaults to controller-runtime's 10 hours.
   */
  resyncPeriodMs?: number;
  clock?: Clock;
}

/** A read of a kind whose cache has not synced yet: its answer would be "not found" for objects that exist. */
export class CacheNotSyncedError extends Error {
  /** The kind whose cache is not synced yet. */
  readonly kind: string;
  /** Resolves when the cache that refused the read has synced. */
  readonly whenSynced: () => Promise<void>;
  constructor(kind: string, whenSynced: () => Promise<void>) {
    super(
      `the cache of ${kind} has not synced yet: a read now could miss existing objects (a reconcile that gets this is requeued once it syncs)`,
    );
    this.name = "CacheNotSyncedError";
    this.kind = kind;
    this.whenSynced = whenSynced;
  }
}

/**
 * What readers and controllers use of an informer: reads of the synced store, event handlers and
 * sync state. One Informer implements it per scope; a cache over several namespaces joins several.
 */
export interface SharedInformer<T extends KubeObject> {
  /** The kind this informer caches. */
  readonly kind: KindRef<T>;
  /** Throws CacheNotSyncedError before the first list completed. */
  get(namespace: string | undefined, name: string): DeepReadonly<T> | undefined;
  /** Throws CacheNotSyncedError before the first list completed. */
  list(opts?: StoreListOptions): DeepReadonly<T>[];
  /** Be told about every change from now on; objects already cached are delivered as adds first. */
  addEventHandler(h: EventHandler<T>): void;
  /** Stop telling this handler about changes. */
  removeEventHandler(h: EventHandler<T>): void;
  /**
   * Add a custom index (e.g. by a referenced Secret) to look objects up by `list({ index })` instead of
   * scanning.
   */
  addIndex(name: string, fn: IndexFunc<T>): void;
  /** True once the first list completed. */
  hasSynced(): boolean;
  /** Resolves when the first list has completed. */
  waitForSync(): Promise<void>;
  /**
   * Resolves once the cache has seen this resourceVersion (from a write's answer) or a later one;
   * `namespace` names the written object's namespace where informers are split by namespace.
   */
  waitForResourceVersion(resourceVersion: string, namespace?: string): Promise<void>;
  /** State of this informer (one entry per watched namespace). */
  health(): InformerHealth[];
  /** Begin listing and watching. */
  start(): void;
  /** Stop watching and wait until the watch is closed. */
  stop(): Promise<void>;
}

/** One informer's state, for readiness checks, `opkit top` and the informer metrics. */
export interface InformerHealth {
  /** The kind watched, e.g. "Pod.v1". */
  kind: string;
  /** The namespace this informer watches (absent: all). */
  namespace?: string;
  /** Whether the first list completed. */
  synced: boolean;
  /** What the list/watch loop is doing now. */
  state: ReflectorState;
  /** Objects held. */
  objects: number;
  /** Watch requests opened so far (a reconnect loop shows here). */
  watchRequests: number;
  /** Lists after the first (410 Gone). */
  relists: number;
  /**
   * Objects received from the server so far: list items and watch events, before any client-side
   * filter (with a server-side shard selector, only the shard's).
   */
  received?: number;
  /** The last error, while it is not cleared by a successful list or event. */
  lastError?: string;
  /** Set when the list/watch is forbidden: the message names verb, resource and identity. */
  forbidden?: string;
}

/**
 * The caches did not sync in time; the message names each kind and why (e.g. a Forbidden list), which usually
 * points at missing RBAC or a CRD that is not installed.
 */
export class SyncTimeoutError extends Error {
  /** The kinds that did not sync. */
  readonly kinds: string[];
  constructor(kinds: string[], details: string[]) {
    super(`caches did not sync: ${details.join("; ")}`);
    this.name = "SyncTimeoutError";
    this.kinds = kinds;
  }
}

export class Informer<T extends KubeObject> implements SharedInformer<T> {
  readonly kind: KindRef<T>;
  readonly store: Store<T>;
  private current: Reflector<T>;
  private readonly client: ListWatcher;
  private readonly opts: InformerOptions<T>;
  private filter: InformerFilter | undefined;
  private filterGeneration = 0;
  private filterSynced: { generation: number; resolve: () => void }[] = [];
  /** The namespace watched (undefined: all namespaces, or a cluster-scoped kind). */
  readonly namespace: string | undefined;
  private readonly handlers: EventHandler<T>[] = [];
  private readonly clock: Clock;
  private readonly resyncPeriodMs: number | undefined;
  private resyncTimer: TimerHandle | undefined;
  private synced = false;
  private state: ReflectorState = "idle";
  private lastError: string | undefined;
  private forbidden: string | undefined;
  private resourceVersion = "";
  // One promise for every waiter: each unsynced read hands out a waiter, and thousands of queued keys
  // must not pile up thousands of closures.
  private resolveSynced: () => void = () => undefined;
  private readonly syncedPromise = new Promise<void>((resolve) => (this.resolveSynced = resolve));
  private rvWaiters: { rv: bigint; resolve: () => void }[] = [];
  /** Called on the first error of a kind and on each change of permission state (for logging). */
  onError: ((err: unknown, kind: string) => void) | undefined;
  /** Called when an event handler throws or its promise rejects (default: a process warning). */
  onHandlerError: ((err: unknown, kind: string) => void) | undefined;

  constructor(client: ListWatcher, kind: KindRef<T>, opts: InformerOptions<T> = {}) {
    this.kind = kind;
    this.clock = opts.clock ?? realClock;
    this.resyncPeriodMs = opts.resyncPeriodMs;
    this.namespace = opts.namespace;
    this.client = client;
    this.opts = opts;
    // Without a transform the reflector hands over objects as KubeClient decoded them (another
    // ListWatcher, such as a test's fake, may hand over objects with members frozen at the top only).
    this.store = new Store<T>({
      decodedObjects: opts.transform === undefined && client instanceof KubeClient,
    });
    this.current = new Reflector(client, kind, this.sink(0), opts);
  }

  /** The list/watch loop feeding this informer (replaced when the filter changes). */
  get reflector(): Reflector<T> {
    return this.current;
  }

  /**
   * Restrict (or, with undefined, stop restricting) this informer to the objects `filter` matches. A
   * running informer lists again with the new selector: objects that no longer match are delivered as
   * deletes, newly matching ones as adds. Resolves once that list has replaced the store.
   */
  async setFilter(filter: InformerFilter | undefined): Promise<void> {
    this.filter = filter;
    const generation = ++this.filterGeneration;
    const wasRunning = this.running;
    const old = this.current;
    this.priorWatchRequests += old.watchRequests;
    this.priorRelists += old.relists;
    this.current = new Reflector(this.client, this.kind, this.sink(generation), {
      ...this.opts,
      shardSelector: filter?.selector,
    });
    if (!wasRunning) return;
    const synced = new Promise<void>((resolve) => this.filterSynced.push({ generation, resolve }));
    await old.stop();
    if (this.filterGeneration !== generation || !this.running) return;
    this.current.start();
    await synced;
  }

  private running = false;
  private received = 0;
  // Totals of the reflectors a filter change replaced, so the counters never go down.
  private priorWatchRequests = 0;
  private priorRelists = 0;

  get kindName(): string {
    return `${this.kind.kind}.${this.kind.apiVersion}`;
  }

  addEventHandler(h: EventHandler<T>): void {
    this.handlers.push(h);
    // A handler added after sync still learns about every object, as in client-go.
    if (this.synced)
      for (const key of this.store.keys()) {
        const obj = this.store.getByKey(key);
        if (obj) this.safely(() => h.onAdd?.(obj, true));
      }
  }

  removeEventHandler(h: EventHandler<T>): void {
    const i = this.handlers.indexOf(h);
    if (i >= 0) this.handlers.splice(i, 1);
  }

  addIndex(name: string, fn: IndexFunc<T>): void {
    this.store.addIndex(name, fn);
  }

  start(): void {
    this.running = true;
    this.current.start();
    if (this.resyncPeriodMs) this.scheduleResync(this.resyncPeriodMs);
  }

  async stop(): Promise<void> {
    this.running = false;
    if (this.resyncTimer !== undefined) this.clock.clearTimeout(this.resyncTimer);
    await this.current.stop();
  }

  hasSynced(): boolean {
    return this.synced;
  }

  health(): InformerHealth[] {
    return [
      {
        kind: this.kindName,
        namespace: this.namespace,
        synced: this.synced,
        state: this.state,
        lastError: this.lastError,
        forbidden: this.forbidden,
        objects: this.store.size,
        watchRequests: this.priorWatchRequests + this.reflector.watchRequests,
        relists: this.priorRelists + this.reflector.relists,
        received: this.received,
      },
    ];
  }

  get lastResourceVersion(): string {
    return this.resourceVersion;
  }

  waitForSync(): Promise<void> {
    return this.syncedPromise;
  }

  /**
   * Resolves once the cache has seen `resourceVersion` (from a write's response) or a later one, so a
   * read right after a write does not see the old object. Relies on resourceVersions being etcd
   * revisions, which holds for kube-apiserver.
   */
  waitForResourceVersion(resourceVersion: string): Promise<void> {
    const target = toBigInt(resourceVersion);
    const current = toBigInt(this.resourceVersion);
    if (target === undefined || (current !== undefined && current >= target)) return Promise.resolve();
    return new Promise((resolve) => this.rvWaiters.push({ rv: target, resolve }));
  }

  get(namespace: string | undefined, name: string): DeepReadonly<T> | undefined {
    if (!this.synced) throw new CacheNotSyncedError(this.kindName, () => this.waitForSync());
    return this.store.get(namespace, name);
  }

  list(opts?: StoreListOptions): DeepReadonly<T>[] {
    if (!this.synced) throw new CacheNotSyncedError(this.kindName, () => this.waitForSync());
    return this.store.list(opts);
  }

  private sink(generation: number) {
    // A reflector replaced by a filter change may still deliver while it stops: ignore it.
    const stale = (): boolean => generation !== this.filterGeneration;
    const keep = (obj: T): boolean => !this.filter || this.filter.matches(obj);
    return {
      replace: (all: T[], rv: string): void => {
        if (stale()) return;
        this.received += all.length;
        const initial = !this.synced;
        const items = this.filter ? all.filter(keep) : all;
        const { old, items: fresh } = this.store.replace(items);
        for (const change of diffRelist(old, fresh.values())) {
          if (change.type === "add") this.emitAdd(change.obj, initial);
          else if (change.type === "update") this.emitUpdate(change.old, change.obj, false);
          else this.emitDelete(change.obj);
        }
        this.clearError();
        this.advance(rv);
        if (!this.synced) {
          this.synced = true;
          this.resolveSynced();
        }
        const due = this.filterSynced.filter((w) => w.generation <= generation);
        this.filterSynced = this.filterSynced.filter((w) => w.generation > generation);
        for (const w of due) w.resolve();
      },
      event: (type: "ADDED" | "MODIFIED" | "DELETED", obj: T): void => {
        if (stale()) return;
        this.received++;
        this.clearError();
        if (!keep(obj)) {
          // Not ours (the server did not filter): never stored, so nothing to tell, unless it was.
          const prev = this.store.remove(objectKey(obj));
          if (prev) this.emitDelete(prev);
          return;
        }
        if (type === "DELETED") {
          const prev = this.store.remove(objectKey(obj));
          this.emitDelete(prev ?? (obj as DeepReadonly<T>));
          return;
        }
        const { obj: stored, old } = this.store.upsert(obj);
        if (old) this.emitUpdate(old, stored, false);
        else this.emitAdd(stored, false);
      },
      progress: (rv: string): void => {
        if (!stale()) this.advance(rv);
      },
      error: (err: unknown): void => {
        if (stale()) return;
        const message = errorMessage(err);
        if (isPermissionError(err)) {
          if (this.forbidden !== message) this.onError?.(err, this.kindName);
          this.forbidden = message;
        } else if (this.lastError === undefined) {
          this.onError?.(err, this.kindName);
        }
        this.lastError = message;
      },
      state: (s: ReflectorState): void => {
        if (!stale()) this.state = s;
      },
    };
  }

  private clearError(): void {
    this.lastError = undefined;
    this.forbidden = undefined;
  }

  private advance(rv: string): void {
    this.resourceVersion = rv;
    // Checked before parsing: every watch event lands here, and there is rarely anyone waiting.
    if (this.rvWaiters.length === 0) return;
    const now = toBigInt(rv);
    if (now === undefined) return;
    const due = this.rvWaiters.filter((w) => w.rv <= now);
    this.rvWaiters = this.rvWaiters.filter((w) => w.rv > now);
    for (const w of due) w.resolve();
  }

  private scheduleResync(ms: number): void {
    // ±10% jitter, as controller-runtime does, so informers do not resync in step.
    const delay = ms * (0.9 + Math.random() * 0.2);
    this.resyncTimer = this.clock.setTimeout(() => {
      if (this.synced)
        for (const key of this.store.keys()) {
          const obj = this.store.getByKey(key);
          if (obj) this.emitUpdate(obj, obj, true);
        }
      this.scheduleResync(ms);
    }, delay);
  }

  private emitAdd(obj: DeepReadonly<T>, initial: boolean): void {
    for (const h of this.handlers) this.safely(() => h.onAdd?.(obj, initial));
  }
  private emitUpdate(oldObj: DeepReadonly<T>, newObj: DeepReadonly<T>, resync: boolean): void {
    for (const h of this.handlers) this.safely(() => h.onUpdate?.(oldObj, newObj, resync));
  }
  private emitDelete(obj: DeepReadonly<T>): void {
    for (const h of this.handlers) this.safely(() => h.onDelete?.(obj));
  }

  /**
   * A throwing handler, or one whose promise rejects, must stop neither the informer, nor the other
   * handlers, nor the process (an unhandled rejection would end it).
   */
  private safely(fn: () => void | Promise<void> | undefined): void {
    const report = (err: unknown): void => (this.onHandlerError ?? warn)(err, this.kindName);
    try {
      const result = fn();
      if (result && typeof result.then === "function") result.then(undefined, report);
    } catch (err) {
      report(err);
    }
  }
}

/** Where handler failures go without an `onHandlerError`: a process warning with the stack. */
function warn(err: unknown, kind: string): void {
  process.emitWarning(
    `opkit informer event handler for ${kind} failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`,
  );
}

function toBigInt(rv: string): bigint | undefined {
  return /^\d+$/.test(rv) ? BigInt(rv) : undefined;
}

export type RelistChange<T> =
  { type: "add"; obj: T } | { type: "update"; old: T; obj: T } | { type: "delete"; obj: T };

/**
 * What a relist changed compared with the store before it: new objects are adds, objects with another
 * resourceVersion updates, and objects missing from the list deletes (carrying their last known state).
 */
export function diffRelist<T extends DeepReadonly<KubeObject>>(
  old: Map<string, T>,
  items: Iterable<T>,
): RelistChange<T>[] {
  const changes: RelistChange<T>[] = [];
  const fresh = new Set<string>();
  for (const obj of items) {
    const key = objectKey(obj);
    fresh.add(key);
    const prev = old.get(key);
    if (!prev) changes.push({ type: "add", obj });
    else if (prev.metadata.resourceVersion !== obj.metadata.resourceVersion)
      changes.push({ type: "update", old: prev, obj });
  }
  for (const [key, prev] of old) if (!fresh.has(key)) changes.push({ type: "delete", obj: prev });
  return changes;
}
