/**
 * The Cache: one shared informer per (kind, namespace, selectors, metadata-only) no matter how many
 * controllers read or watch that kind, with per-kind defaults (namespace scoping, selectors,
 * transform, metadata-only), custom field indexes, a sync wait that names what did not sync and why,
 * and read-your-writes help.
 */
import type { KubeClient } from "../client/client.ts";
import type { KindRef, KubeObject } from "../client/types.ts";
import type { Clock } from "../clock/index.ts";
import { Informer, SyncTimeoutError, type InformerHealth } from "./informer.ts";
import type { IndexFunc, StoreListOptions } from "./store.ts";

export interface KindCacheOptions<T extends KubeObject = KubeObject> {
  /** Watch only this namespace (least privilege: a Role instead of a ClusterRole suffices). */
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
  /** Keep only metadata (PartialObjectMetadata). */
  metadataOnly?: boolean;
  /** Applied to each object before it is stored; the default drops metadata.managedFields. */
  transform?: (obj: T) => T;
}

export interface CacheOptions {
  /** Per-kind defaults, keyed `"<apiVersion>/<kind>"`, e.g. `"v1/Secret"` or `"apps/v1/Deployment"`. */
  kinds?: Record<string, KindCacheOptions>;
  /** Scope every kind without its own namespace to this namespace. */
  namespace?: string;
  resyncPeriodMs?: number;
  streamingList?: boolean;
  clock?: Clock;
  /** Told once per kind about list/watch failures (the manager logs them). */
  onError?: (err: unknown, kind: string) => void;
}

function kindKey(kind: KindRef): string {
  return `${kind.apiVersion}/${kind.kind}`;
}

export class Cache {
  readonly client: KubeClient;
  private readonly opts: CacheOptions;
  private readonly informers = new Map<string, Informer<KubeObject>>();
  private readonly indexers: { kind: string; name: string; fn: IndexFunc<KubeObject> }[] = [];
  private started = false;

  constructor(client: KubeClient, opts: CacheOptions = {}) {
    this.client = client;
    this.opts = opts;
  }

  /** The options a kind is cached with: its own, else the cache-wide namespace. */
  kindOptions<T extends KubeObject>(kind: KindRef<T>): KindCacheOptions<T> {
    const own = (this.opts.kinds?.[kindKey(kind)] ?? {}) as unknown as KindCacheOptions<T>;
    return { namespace: this.opts.namespace, ...own };
  }

  /** The shared informer for a kind (created on first use; started if the cache runs). */
  informer<T extends KubeObject>(kind: KindRef<T>, override?: KindCacheOptions<T>): Informer<T> {
    const o = { ...this.kindOptions(kind), ...override };
    const key = [
      kindKey(kind),
      o.namespace ?? "",
      o.labelSelector ?? "",
      o.fieldSelector ?? "",
      o.metadataOnly ? "m" : "",
    ].join("|");
    let inf = this.informers.get(key) as Informer<T> | undefined;
    if (!inf) {
      inf = new Informer<T>(this.client, kind, {
        ...o,
        resyncPeriodMs: this.opts.resyncPeriodMs,
        streamingList: this.opts.streamingList,
        clock: this.opts.clock,
      });
      inf.onError = this.opts.onError;
      for (const ix of this.indexers) if (ix.kind === kindKey(kind)) inf.addIndex(ix.name, ix.fn);
      this.informers.set(key, inf as unknown as Informer<KubeObject>);
      if (this.started) inf.start();
    }
    return inf;
  }

  /** Register a field index for a kind: `indexField(Pods, "spec.nodeName", p => [p.spec.nodeName])`. */
  indexField<T extends KubeObject>(kind: KindRef<T>, name: string, fn: IndexFunc<T>): void {
    this.indexers.push({ kind: kindKey(kind), name, fn: fn as IndexFunc<KubeObject> });
    for (const inf of this.informers.values()) {
      if (kindKey(inf.kind) === kindKey(kind)) inf.addIndex(name, fn as IndexFunc<KubeObject>);
    }
  }

  get<T extends KubeObject>(
    kind: KindRef<T>,
    name: string,
    opts: { namespace?: string } = {},
  ): T | undefined {
    return this.informer(kind).get(opts.namespace, name);
  }

  list<T extends KubeObject>(kind: KindRef<T>, opts: StoreListOptions = {}): T[] {
    return this.informer(kind).list(opts);
  }

  start(): void {
    this.started = true;
    for (const inf of this.informers.values()) inf.start();
  }

  async stop(): Promise<void> {
    this.started = false;
    await Promise.all([...this.informers.values()].map((i) => i.stop()));
  }

  synced(): boolean {
    return [...this.informers.values()].every((i) => i.hasSynced());
  }

  health(): InformerHealth[] {
    return [...this.informers.values()].map((i) => i.health());
  }

  /**
   * Wait until every informer has synced. On timeout the error names each kind that did not sync and
   * why (a Forbidden list names the verb, resource and identity) instead of a bare timeout.
   */
  async waitForSync(timeoutMs = 120_000): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<"timeout">((r) => (timer = setTimeout(() => r("timeout"), timeoutMs)));
    try {
      const all = Promise.all([...this.informers.values()].map((i) => i.waitForSync()));
      if ((await Promise.race([all, timeout])) !== "timeout") return;
    } finally {
      clearTimeout(timer);
    }
    const pending = [...this.informers.values()].filter((i) => !i.hasSynced()).map((i) => i.health());
    throw new SyncTimeoutError(
      pending.map((h) => h.kind),
      pending.map(
        (h) =>
          `${h.kind}: ${h.forbidden ? `forbidden: ${h.forbidden}` : (h.lastError ?? `still ${h.state}`)}`,
      ),
    );
  }

  /** Read-your-writes: wait until the kind's informer has seen the resourceVersion a write returned. */
  async waitForResourceVersion<T extends KubeObject>(
    kind: KindRef<T>,
    resourceVersion: string,
    timeoutMs = 30_000,
  ): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        this.informer(kind).waitForResourceVersion(resourceVersion),
        new Promise((_, reject) => {
          timer = setTimeout(
            () =>
              reject(
                new Error(
                  `cache for ${kindKey(kind)} did not reach resourceVersion ${resourceVersion} within ${timeoutMs} ms`,
                ),
              ),
            timeoutMs,
          );
        }),
      ]);
    } finally {
      clearTimeout(timer);
    }
  }
}
