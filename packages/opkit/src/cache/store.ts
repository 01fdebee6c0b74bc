/**
 * The in-memory store behind an informer: objects by key, an index by namespace, and any number of
 * custom field indexes. `replace` builds the new content aside and swaps it in one step, so readers
 * never see a half-built list after a relist.
 *
 * Objects are deep-frozen once when they enter, and handed out typed as deeply readonly: every reader
 * shares them, so a reconcile that edited one would silently change the cache and leave its indexes
 * stale. Freezing once costs less than controller-runtime's copy on every read for read-heavy
 * reconciles; `deepCopy` gives a mutable copy where one is needed.
 */
import { labelMatcher } from "../client/labels.ts";
import { objectKey, type DeepReadonly, type KubeObject } from "../client/types.ts";

/** Computes the index values of an object (an object may have several, or none). */
export type IndexFunc<T extends KubeObject> = (obj: DeepReadonly<T>) => string[];

/** Which cached objects a `list` returns. */
export interface StoreListOptions {
  /** Only objects in this namespace. */
  namespace?: string;
  /** Only objects whose labels match this selector. */
  labelSelector?: string;
  /** Select by a custom index: `{ name: "spec.secretRef", value: "ns/secret" }`. */
  index?: {
    /** The index's name, as registered with `indexField()`. */
    name: string;
    /** The index value to look up. */
    value: string;
  };
}

/** The built-in index of objects by namespace (what namespace-scoped lists use). */
export const NAMESPACE_INDEX = "namespace";
/**
 * The built-in index of objects by their controller owner's uid: finds an owner's children without a scan.
 */
export const OWNER_INDEX = "controllerOwnerUid";

/**
 * A list named an index that was never registered; register it with `indexField()` before the cache starts.
 */
export class UnknownIndexError extends Error {
  constructor(name: string) {
    super(`no index named "${name}": register it with indexField() before starting the cache`);
    this.name = "UnknownIndexError";
  }
}

type IndexMap = Map<string, Set<string>>;

/** Freezes an object and everything inside it, in place; returns it typed as deeply readonly. */
export function deepFreeze<T>(obj: T): DeepReadonly<T> {
  if (typeof obj === "object" && obj !== null && !Object.isFrozen(obj)) freezeObject(obj);
  return obj as DeepReadonly<T>;
}

/**
 * deepFreeze for an object whose members, when frozen, are frozen all the way down: what the client's
 * decoders hand over, fresh from JSON.parse (nothing frozen) or from protobuf with freezeNested (all
 * below the top frozen as it was built). Walking such members again was most of the cost of filling the
 * store with a protobuf list.
 */
function freezeDecoded<T>(obj: T): DeepReadonly<T> {
  if (typeof obj !== "object" || obj === null || Object.isFrozen(obj) || Array.isArray(obj))
    return deepFreeze(obj);
  const record = obj as Record<string, unknown>;
  for (const key in record) {
    const v = record[key];
    if (typeof v === "object" && v !== null && !Object.isFrozen(v)) freezeObject(v);
  }
  Object.freeze(obj);
  return obj as DeepReadonly<T>;
}

// Children first, so a half-frozen tree is never observable. Indexed and keyed loops that step over
// primitives: an initial list freezes millions of values, and Object.values' array per object and a call
// per string or number were most of the time of filling the store. Children are not asked
// Object.isFrozen (a call into the runtime per object, about 10% of the freeze of a fresh Pod): the
// objects come fresh from JSON.parse, and re-freezing an already frozen child is a harmless no-op.
function freezeObject(value: object): void {
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const v: unknown = value[i];
      if (typeof v === "object" && v !== null) freezeObject(v);
    }
  } else {
    const record = value as Record<string, unknown>;
    for (const key in record) {
      const v = record[key];
      if (typeof v === "object" && v !== null) freezeObject(v);
    }
  }
  Object.freeze(value);
}

/** How a Store freezes what enters it. */
export interface StoreOptions {
  /**
   * The objects come straight from the client's decoders (no transform of the caller's in between), so
   * a member found frozen is frozen all the way down and is not walked again. Default false: every
   * object is walked whole, in case something froze only the top of a member.
   */
  decodedObjects?: boolean;
}

export class Store<T extends KubeObject> {
  private items = new Map<string, DeepReadonly<T>>();
  private readonly freeze: <U>(obj: U) => DeepReadonly<U>;
  private readonly indexers = new Map<string, IndexFunc<T>>();
  private indexes = new Map<string, IndexMap>();

  constructor(opts: StoreOptions = {}) {
    this.freeze = opts.decodedObjects ? freezeDecoded : deepFreeze;
    this.indexers.set(NAMESPACE_INDEX, (o) => [o.metadata.namespace ?? ""]);
    this.indexers.set(OWNER_INDEX, (o) => {
      const owner = o.metadata.ownerReferences?.find((r) => r.controller);
      return owner ? [owner.uid] : [];
    });
    for (const name of this.indexers.keys()) this.indexes.set(name, new Map());
  }

  addIndex(name: string, fn: IndexFunc<T>): void {
    if (this.indexers.has(name)) throw new Error(`index "${name}" is already registered`);
    this.indexers.set(name, fn);
    const map: IndexMap = new Map();
    for (const [key, obj] of this.items) addToIndex(map, fn(obj), key);
    this.indexes.set(name, map);
  }

  get size(): number {
    return this.items.size;
  }

  getByKey(key: string): DeepReadonly<T> | undefined {
    return this.items.get(key);
  }

  get(namespace: string | undefined, name: string): DeepReadonly<T> | undefined {
    return this.items.get(namespace ? `${namespace}/${name}` : name);
  }

  keys(): IterableIterator<string> {
    return this.items.keys();
  }

  /** Insert or replace one object (frozen on the way in); returns it and the previous version. */
  upsert(input: T): { obj: DeepReadonly<T>; old: DeepReadonly<T> | undefined } {
    const obj = this.freeze(input);
    const key = objectKey(obj);
    const old = this.items.get(key);
    this.items.set(key, obj);
    for (const [name, fn] of this.indexers) {
      const map = this.indexes.get(name) as IndexMap;
      const values = fn(obj);
      if (old) {
        // Most updates keep every index value (same namespace, same owner): the key is already there.
        const before = fn(old);
        if (sameValues(before, values)) continue;
        removeFromIndex(map, before, key);
      }
      addToIndex(map, values, key);
    }
    return { obj, old };
  }

  /** Remove one object by key; returns it. */
  remove(key: string): DeepReadonly<T> | undefined {
    const old = this.items.get(key);
    if (old) {
      this.unindex(key, old);
      this.items.delete(key);
    }
    return old;
  }

  /**
   * Swap in a complete new content (after a list, frozen on the way in); returns the old content for
   * diffing, and the new one.
   */
  replace(objs: Iterable<T>): { old: Map<string, DeepReadonly<T>>; items: Map<string, DeepReadonly<T>> } {
    const items = new Map<string, DeepReadonly<T>>();
    const indexes = new Map<string, IndexMap>();
    for (const name of this.indexers.keys()) indexes.set(name, new Map());
    for (const input of objs) {
      const obj = this.freeze(input);
      const key = objectKey(obj);
      items.set(key, obj);
      for (const [name, fn] of this.indexers) addToIndex(indexes.get(name) as IndexMap, fn(obj), key);
    }
    const old = this.items;
    this.items = items;
    this.indexes = indexes;
    return { old, items };
  }

  list(opts: StoreListOptions = {}): DeepReadonly<T>[] {
    const match = labelMatcher(opts.labelSelector);
    let keys: Iterable<string>;
    if (opts.index) {
      const idx = this.indexes.get(opts.index.name);
      if (!idx) throw new UnknownIndexError(opts.index.name);
      keys = idx.get(opts.index.value) ?? [];
    } else if (opts.namespace !== undefined) {
      keys = this.indexes.get(NAMESPACE_INDEX)?.get(opts.namespace) ?? [];
    } else {
      keys = this.items.keys();
    }
    const out: DeepReadonly<T>[] = [];
    for (const key of keys) {
      const obj = this.items.get(key);
      if (!obj) continue;
      if (opts.namespace !== undefined && (obj.metadata.namespace ?? "") !== opts.namespace) continue;
      if (!match(obj.metadata.labels)) continue;
      out.push(obj);
    }
    return out;
  }

  private unindex(key: string, obj: DeepReadonly<T>): void {
    for (const [name, fn] of this.indexers) removeFromIndex(this.indexes.get(name) as IndexMap, fn(obj), key);
  }
}

function sameValues(a: string[], b: string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function removeFromIndex(map: IndexMap, values: string[], key: string): void {
  for (const v of values) {
    const set = map.get(v);
    if (!set) continue;
    set.delete(key);
    if (set.size === 0) map.delete(v);
  }
}

function addToIndex(map: IndexMap, values: string[], key: string): void {
  for (const v of values) {
    let set = map.get(v);
    if (!set) map.set(v, (set = new Set()));
    set.add(key);
  }
}
