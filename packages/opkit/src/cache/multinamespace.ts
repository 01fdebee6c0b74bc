/**
 * One kind cached in several namespaces: an informer per namespace (each needs only a Role there, not
 * a ClusterRole), joined behind the SharedInformer interface so readers and controllers see one cache.
 */
import type { DeepReadonly, KindRef, KubeObject } from "../client/types.ts";
import {
  CacheNotSyncedError,
  type EventHandler,
  type InformerHealth,
  type SharedInformer,
} from "./informer.ts";
import type { IndexFunc, StoreListOptions } from "./store.ts";

export class MultiNamespaceInformer<T extends KubeObject> implements SharedInformer<T> {
  readonly kind: KindRef<T>;
  private readonly byNamespace: ReadonlyMap<string, SharedInformer<T>>;

  constructor(kind: KindRef<T>, informers: ReadonlyMap<string, SharedInformer<T>>) {
    this.kind = kind;
    this.byNamespace = informers;
  }

  /** The namespaces this informer covers. */
  get namespaces(): string[] {
    return [...this.byNamespace.keys()];
  }

  get(namespace: string | undefined, name: string): DeepReadonly<T> | undefined {
    // Unsynced is an error whichever namespace is asked: "not found" would be a lie.
    if (!this.hasSynced())
      throw new CacheNotSyncedError(`${this.kind.kind}.${this.kind.apiVersion}`, () => this.waitForSync());
    // The Cache checks the scope (and that a namespace is given) before it gets here.
    const inf = namespace === undefined ? undefined : this.byNamespace.get(namespace);
    return inf?.get(namespace, name);
  }

  list(opts: StoreListOptions = {}): DeepReadonly<T>[] {
    if (!this.hasSynced())
      throw new CacheNotSyncedError(`${this.kind.kind}.${this.kind.apiVersion}`, () => this.waitForSync());
    if (opts.namespace !== undefined) return this.byNamespace.get(opts.namespace)?.list(opts) ?? [];
    return [...this.byNamespace.values()].flatMap((i) => i.list(opts));
  }

  addEventHandler(h: EventHandler<T>): void {
    for (const i of this.byNamespace.values()) i.addEventHandler(h);
  }

  removeEventHandler(h: EventHandler<T>): void {
    for (const i of this.byNamespace.values()) i.removeEventHandler(h);
  }

  addIndex(name: string, fn: IndexFunc<T>): void {
    for (const i of this.byNamespace.values()) i.addIndex(name, fn);
  }

  hasSynced(): boolean {
    return [...this.byNamespace.values()].every((i) => i.hasSynced());
  }

  async waitForSync(): Promise<void> {
    await Promise.all([...this.byNamespace.values()].map((i) => i.waitForSync()));
  }

  /**
   * Each namespace's informer advances with its own events (and bookmarks), so a write is seen by the
   * informer of its namespace: wait for that one, or for all of them when no namespace is named.
   */
  async waitForResourceVersion(resourceVersion: string, namespace?: string): Promise<void> {
    const one = namespace === undefined ? undefined : this.byNamespace.get(namespace);
    const targets = namespace === undefined ? [...this.byNamespace.values()] : one ? [one] : [];
    await Promise.all(targets.map((i) => i.waitForResourceVersion(resourceVersion)));
  }

  health(): InformerHealth[] {
    return [...this.byNamespace.values()].flatMap((i) => i.health());
  }

  start(): void {
    for (const i of this.byNamespace.values()) i.start();
  }

  async stop(): Promise<void> {
    await Promise.all([...this.byNamespace.values()].map((i) => i.stop()));
  }
}
