/**
 * The Cache: one shared informer per (kind, namespaces, selectors, metadata-only) no matter how many
 * controllers read or watch that kind, with per-kind options keyed by kind references (namespaces,
 * selectors, transform, metadata-only), custom field indexes, a sync wait that names what did not sync
 * and why, and read-your-writes help.
 *
 * Reads are synchronous and never lie: a kind whose informer has not synced throws CacheNotSyncedError
 * (the controller requeues such a reconcile once it has), and a namespace outside the kind's scope is
 * an error naming the scope, never an empty answer.
 */
import { versionKindKey, type DeepReadonly, type KindRef, type KubeObject } from "../client/types.ts";
import { kindScope } from "../client/scopes.ts";
import { realClock, withTimeout, type Clock } from "../clock/index.ts";
import {
  Informer,
  SyncTimeoutError,
  type InformerFilter,
  type InformerHealth,
  type SharedInformer,
} from "./informer.ts";
import { MultiNamespaceInformer } from "./multinamespace.ts";
import type { ListWatcher } from "./reflector.ts";
import type { IndexFunc, StoreListOptions } from "./store.ts";

/** controller-runtime's default resync period: 10 hours (each informer jitters it by ±10%). */
export const DEFAULT_RESYNC_PERIOD_MS = 10 * 60 * 60 * 1000;

/**
 * How one kind is cached: which namespaces, which objects (selectors), how much of each (metadata only, a
 * transform). Narrow the cache where you can: less memory, and a narrower scope needs narrower RBAC.
 */
export interface KindCacheOptions<T extends KubeObject = KubeObject> {
  /** Watch only this namespace (least privilege: a Role instead of a ClusterRole suffices). */
  namespace?: string;
  /** Watch these namespaces (one informer each, read as one cache). */
  namespaces?: readonly string[];
  /**
   * Cache only objects whose labels match, e.g. `app.kubernetes.io/managed-by=my-operator`; objects outside
   * it are invisible to reads and watches.
   */
  labelSelector?: string;
  /**
   * Cache only objects whose fields match, e.g. `spec.nodeName=n1` (the server supports few fields per kind).
   */
  fieldSelector?: string;
  /** Keep only metadata (PartialObjectMetadata), stamped with the kind's apiVersion and kind. */
  metadataOnly?: boolean;
  /** Applied to each object before it is stored (and frozen); the default drops metadata.managedFields. */
  transform?(obj: T): T;
}

/** Cache options of one kind, named by its reference (so a typo is a compile error, not silence). */
export interface KindCacheEntry<T extends KubeObject = KubeObject> extends KindCacheOptions<T> {
  /** The kind these options apply to. */
  kind: KindRef<T>;
}

/** Typed cache options for a kind: `cacheKind(ConfigMaps, { labelSelector: "copy=yes" })`. */
export function cacheKind<T extends KubeObject>(
  kind: KindRef<T>,
  opts: KindCacheOptions<T>,
): KindCacheEntry<T> {
  return { ...opts, kind };
}

/**
 * The options of a `Cache` (the manager's `cache` option): per-kind scopes and selectors, a default namespace
 * scope, the resync period, and where errors go.
 */
export interface CacheOptions {
  /** Per-kind options. A kind may appear once. */
  kinds?: readonly KindCacheEntry[];
  /** Scope every namespaced kind without its own scope to this namespace. */
  namespace?: string;
  /** Scope every namespaced kind without its own scope to these namespaces. */
  namespaces?: readonly string[];
  /** Re-deliver cached objects this often (default 10 h, ±10% jitter; 0 disables). */
  resyncPeriodMs?: number;
  /**
   * Use the streaming initial list (watch-list) where the server supports it (default false: a list, decoded
   * item by item as it arrives, costs the API server less CPU over JSON; see ReflectorOptions).
   */
  streamingList?: boolean;
  /** How long a watch may stay silent before it is treated as dead (default 50 s; see ReflectorOptions). */
  progressDeadlineMs?: number;
  /** Time source for resyncs and backoff; a FakeClock in tests. */
  clock?: Clock;
  /** Told once per kind about list/watch failures (the manager logs them). */
  onError?: (err: unknown, kind: string) => void;
  /** Told when an event handler throws or rejects (the manager logs it; default: a process warning). */
  onHandlerError?: (err: unknown, kind: string) => void;
}

/** How long `waitForSync` waits for every informer by default (120 s). */
export const DEFAULT_CACHE_SYNC_TIMEOUT_MS = 120_000;

/** Wrong cache options (a kind configured twice, both namespace and namespaces, ...). */
export class CacheConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CacheConfigError";
  }
}

/** A read named a namespace this kind is not cached in: the cache cannot answer it. */
export class NamespaceNotCachedError extends Error {
  /** The kind that was read. */
  readonly kind: string;
  /** The namespace the read asked for ("" for a read across all namespaces). */
  readonly namespace: string;
  /** The namespaces the kind is cached in. */
  readonly scope: readonly string[];
  constructor(kind: string, namespace: string | undefined, scope: readonly string[]) {
    super(
      `${kind} is cached only in namespace${scope.length > 1 ? "s" : ""} ${scope.join(", ")}; ` +
        `a read ${namespace === undefined ? "across all namespaces" : `in "${namespace}"`} cannot be answered from it ` +
        `(add the namespace to the cache options, or read it with the client)`,
    );
    this.name = "NamespaceNotCachedError";
    this.kind = kind;
    this.namespace = namespace ?? "";
    this.scope = scope;
  }
}

/** A read of a namespaced kind by name without a namespace: the name alone does not identify an object. */
export class NamespaceRequiredError extends Error {
  /** The kind that was read. */
  readonly kind: string;
  /** The name that was asked for without a namespace. */
  readonly objectName: string;
  constructor(kind: string, name: string) {
    super(
      `${kind} is namespaced: cache.get of "${name}" needs { namespace } (use cache.list to read across namespaces)`,
    );
    this.name = "NamespaceRequiredError";
    this.kind = kind;
    this.objectName = name;
  }
}

function kindName(kind: KindRef): string {
  return `${kind.kind}.${kind.apiVersion}`;
}

/** A namespace-or-list option as a sorted list (empty: all namespaces). */
function scopeOf(o: { namespace?: string; namespaces?: readonly string[] }, what: string): string[] {
  if (o.namespace !== undefined && o.namespaces !== undefined)
    throw new CacheConfigError(`${what}: set either namespace or namespaces, not both`);
  const list = o.namespaces ?? (o.namespace !== undefined ? [o.namespace] : []);
  if (list.some((n) => !n)) throw new CacheConfigError(`${what}: namespaces must not be empty strings`);
  return [...new Set(list)].sort();
}

/**
 * The shared informer cache that controllers read from: one list+watch per kind and scope however many
 * controllers use it, synchronous frozen reads, custom indexes and read-your-writes waits. The manager owns
 * one (`mgr.cache`); reconcilers read through it instead of the API server, which keeps the server's load
 * independent of the reconcile rate.
 */
export class Cache {
  /** The client informers list and watch with. */
  readonly client: ListWatcher;
  private readonly opts: CacheOptions;
  private readonly clock: Clock;
  private readonly kindOptionsByKey = new Map<string, KindCacheOptions>();
  private readonly informers = new Map<string, SharedInformer<KubeObject>>();
  private readonly indexers: { kind: string; name: string; fn: IndexFunc<KubeObject> }[] = [];
  private readonly filters = new Map<string, InformerFilter>();
  private started = false;

  constructor(client: ListWatcher, opts: CacheOptions = {}) {
    this.client = client;
    this.opts = opts;
    this.clock = opts.clock ?? realClock;
    scopeOf(opts, "cache options");
    for (const entry of opts.kinds ?? []) {
      const key = versionKindKey(entry.kind);
      if (this.kindOptionsByKey.has(key))
        throw new CacheConfigError(
          `cache options name ${kindName(entry.kind)} twice: merge them into one entry`,
        );
      const { kind: _kind, ...rest } = entry;
      scopeOf(rest, `cache options of ${kindName(entry.kind)}`);
      this.kindOptionsByKey.set(key, rest);
    }
  }

  /**
   * The options a kind is cached with: its own, else the cache-wide namespaces (which apply only to
   * namespaced kinds: a cluster-scoped kind is always cached cluster-wide).
   */
  kindOptions<T extends KubeObject>(kind: KindRef<T>): KindCacheOptions<T> {
    const own = this.kindOptionsByKey.get(versionKindKey(kind)) as KindCacheOptions<T> | undefined;
    if (own && (own.namespace !== undefined || own.namespaces !== undefined)) return { ...own };
    if (kindScope(kind) === "Cluster") return { ...own };
    return { namespace: this.opts.namespace, namespaces: this.opts.namespaces, ...own };
  }

  /** The namespaces a kind is cached in (empty: all). */
  scopeOf(kind: KindRef): string[] {
    return scopeOf(this.kindOptions(kind), kindName(kind));
  }

  /** The shared informer for a kind (created on first use; started if the cache runs). */
  informer<T extends KubeObject>(kind: KindRef<T>, override?: KindCacheOptions<T>): SharedInformer<T> {
    const o = override ? { ...this.kindOptions(kind), ...override } : this.kindOptions(kind);
    if (override?.namespace !== undefined) delete o.namespaces;
    if (override?.namespaces !== undefined) delete o.namespace;
    const namespaces = scopeOf(o, kindName(kind));
    const key = this.informerKey(kind, namespaces, o);
    let inf = this.informers.get(key) as SharedInformer<T> | undefined;
    if (inf) return inf;
    const make = (namespace: string | undefined): Informer<T> => {
      const i = new Informer<T>(this.client, kind, {
        namespace,
        labelSelector: o.labelSelector,
        fieldSelector: o.fieldSelector,
        metadataOnly: o.metadataOnly,
        transform: o.transform?.bind(o),
        resyncPeriodMs: this.opts.resyncPeriodMs ?? DEFAULT_RESYNC_PERIOD_MS,
        streamingList: this.opts.streamingList,
        progressDeadlineMs: this.opts.progressDeadlineMs,
        clock: this.opts.clock,
      });
      i.onError = this.opts.onError;
      i.onHandlerError = this.opts.onHandlerError;
      const filter = this.filters.get(versionKindKey(kind));
      if (filter) void i.setFilter(filter);
      return i;
    };
    inf =
      namespaces.length > 1
        ? new MultiNamespaceInformer(kind, new Map(namespaces.map((n) => [n, make(n)])))
        : make(namespaces[0]);
    for (const ix of this.indexers) if (ix.kind === versionKindKey(kind)) inf.addIndex(ix.name, ix.fn);
    this.informers.set(key, inf);
    if (this.started) inf.start();
    return inf;
  }

  /**
   * Stop and drop the informer of a kind (with the same options as `informer`), e.g. when a controller
   * no longer needs a kind it watched. Its handlers are dropped with it. Returns whether one existed.
   */
  async removeInformer<T extends KubeObject>(
    kind: KindRef<T>,
    override?: KindCacheOptions<T>,
  ): Promise<boolean> {
    const o = override ? { ...this.kindOptions(kind), ...override } : this.kindOptions(kind);
    const key = this.informerKey(kind, scopeOf(o, kindName(kind)), o);
    const inf = this.informers.get(key);
    if (!inf) return false;
    this.informers.delete(key);
    await inf.stop();
    return true;
  }

  private informerKey(kind: KindRef, namespaces: string[], o: KindCacheOptions): string {
    return [
      versionKindKey(kind),
      namespaces.join(","),
      o.labelSelector ?? "",
      o.fieldSelector ?? "",
      o.metadataOnly ? "m" : "",
    ].join("|");
  }

  /** Register a field index for a kind: `indexField(Pods, "spec.nodeName", p => [p.spec.nodeName])`. */
  indexField<T extends KubeObject>(kind: KindRef<T>, name: string, fn: IndexFunc<T>): void {
    this.indexers.push({ kind: versionKindKey(kind), name, fn: fn as IndexFunc<KubeObject> });
    for (const inf of this.informers.values()) {
      if (versionKindKey(inf.kind) === versionKindKey(kind)) inf.addIndex(name, fn as IndexFunc<KubeObject>);
    }
  }

  /**
   * Restrict every informer of `kind` (existing and future) to the objects `filter` matches, e.g. the
   * shards this replica holds; undefined lifts the restriction. Running informers list again; resolves
   * when they all have. Informers split over several namespaces are not filtered.
   */
  async setFilter<T extends KubeObject>(kind: KindRef<T>, filter: InformerFilter | undefined): Promise<void> {
    if (filter) this.filters.set(versionKindKey(kind), filter);
    else this.filters.delete(versionKindKey(kind));
    const changes: Promise<void>[] = [];
    for (const inf of this.informers.values()) {
      if (versionKindKey(inf.kind) === versionKindKey(kind) && inf instanceof Informer)
        changes.push(inf.setFilter(filter));
    }
    await Promise.all(changes);
  }

  /**
   * The cached object, or undefined when it does not exist. Throws CacheNotSyncedError while the
   * kind's cache is still filling (the first read of a kind starts its informer), and
   * NamespaceNotCachedError for a namespace outside the kind's scope, NamespaceRequiredError for a
   * namespaced kind read without a namespace. A cluster-scoped kind ignores `namespace`.
   */
  get<T extends KubeObject>(
    kind: KindRef<T>,
    name: string,
    opts: { namespace?: string } = {},
  ): DeepReadonly<T> | undefined {
    // As controller-runtime's reader: a cluster-scoped kind ignores a namespace; a namespaced kind needs one.
    const scope = kindScope(kind);
    if (scope === "Cluster") return this.informer(kind).get(undefined, name);
    if (scope === "Namespaced" && opts.namespace === undefined)
      throw new NamespaceRequiredError(kindName(kind), name);
    this.checkScope(kind, opts.namespace);
    return this.informer(kind).get(opts.namespace, name);
  }

  /** Cached objects; same errors as `get`. Without a namespace: every cached namespace. */
  list<T extends KubeObject>(kind: KindRef<T>, opts: StoreListOptions = {}): DeepReadonly<T>[] {
    this.checkScope(kind, opts.namespace);
    return this.informer(kind).list(opts);
  }

  /**
   * A read in a namespace outside the kind's cached namespaces is an error. A read without a namespace
   * is a cluster-scoped get, or a list of everything cached (as controller-runtime's scoped caches do).
   */
  private checkScope(kind: KindRef, namespace: string | undefined): void {
    if (namespace === undefined) return;
    const scope = this.scopeOf(kind);
    if (scope.length > 0 && !scope.includes(namespace))
      throw new NamespaceNotCachedError(kindName(kind), namespace, scope);
  }

  /** Start every informer created so far; informers created later start at once. The manager calls it. */
  start(): void {
    this.started = true;
    for (const inf of this.informers.values()) inf.start();
  }

  /** Stop every informer and wait until their watches are closed. */
  async stop(): Promise<void> {
    this.started = false;
    await Promise.all([...this.informers.values()].map((i) => i.stop()));
  }

  /** True once every informer has completed its first list (reads no longer throw CacheNotSyncedError). */
  synced(): boolean {
    return [...this.informers.values()].every((i) => i.hasSynced());
  }

  /**
   * Per-informer state (synced, objects held, watch restarts, relists, the last error), for readiness checks
   * and diagnostics.
   */
  health(): InformerHealth[] {
    return [...this.informers.values()].flatMap((i) => i.health());
  }

  /**
   * Wait until every informer has synced. On timeout the error names each kind that did not sync and
   * why (a Forbidden list names the verb, resource and identity) instead of a bare timeout. `signal`
   * gives up early (rejecting with its reason) and leaves no timer behind to hold the process.
   */
  async waitForSync(
    timeoutMs = DEFAULT_CACHE_SYNC_TIMEOUT_MS,
    opts: { signal?: AbortSignal } = {},
  ): Promise<void> {
    const all = Promise.all([...this.informers.values()].map((i) => i.waitForSync()));
    if ((await this.raceTimeout(all, timeoutMs, opts.signal)) !== TIMED_OUT) return;
    const pending = this.health().filter((h) => !h.synced);
    throw new SyncTimeoutError(
      pending.map((h) => h.kind),
      pending.map(
        (h) =>
          `${h.kind}${h.namespace ? ` in ${h.namespace}` : ""}: ${h.forbidden ? `forbidden: ${h.forbidden}` : (h.lastError ?? `still ${h.state}`)}`,
      ),
    );
  }

  /**
   * Read-your-writes: wait until the kind's cache has seen the resourceVersion a write returned (pass
   * the written object's namespace when the kind is cached per namespace).
   */
  async waitForResourceVersion<T extends KubeObject>(
    kind: KindRef<T>,
    resourceVersion: string,
    opts: { namespace?: string; timeoutMs?: number } = {},
  ): Promise<void> {
    const timeoutMs = opts.timeoutMs ?? 30_000;
    const seen = this.informer(kind).waitForResourceVersion(resourceVersion, opts.namespace);
    if ((await this.raceTimeout(seen, timeoutMs)) === TIMED_OUT)
      throw new Error(
        `cache for ${kindName(kind)} did not reach resourceVersion ${resourceVersion} within ${timeoutMs} ms`,
      );
  }

  /** `p`, or TIMED_OUT after `ms` on the cache's clock; rejects with `signal`'s reason once it aborts. */
  private async raceTimeout<R>(
    p: Promise<R>,
    ms: number,
    signal?: AbortSignal,
  ): Promise<R | typeof TIMED_OUT> {
    signal?.throwIfAborted();
    const result = await withTimeout(this.clock, ms, () => p, { signal });
    return result.timedOut ? TIMED_OUT : result.value;
  }
}

const TIMED_OUT = Symbol("timed out");
