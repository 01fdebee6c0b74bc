/**
 * Event handlers: how an event on a watched object becomes reconcile keys. The reconciled kind maps to
 * its own key, an owned child to its controller owner's key, and any other kind through a user map
 * function (one event may fan out to many keys). Pure functions of the object, so they run
 * synchronously in the informer's event path.
 */
import { groupOf, type DeepReadonly, type KindRef, type KubeObject } from "../client/types.ts";
import type { Cache } from "../cache/cache.ts";
import type { Predicate } from "./predicates.ts";
import type { Request } from "./reconcile.ts";

/**
 * What a map function may use besides the object: the manager's cache, for lookups such as "every
 * AppService that references this Secret" (an index read). Reads are synchronous; a read of a kind not
 * synced yet throws CacheNotSyncedError, and the controller maps the event again once it has synced.
 */
export interface MapContext {
  /** The manager's cache, to look up which objects an event concerns (e.g. by an index). */
  readonly cache: Cache;
}

/** A user's mapping from an object of a watched kind (the cache's own, read-only) to the keys it wakes. */
export type MapFn<S extends KubeObject> = (obj: DeepReadonly<S>, ctx: MapContext) => Request[];

/** One watch of a controller: a kind, its predicates, and how its events become keys. */
export interface Watch {
  kind: KindRef;
  predicates: Predicate[];
  /** Keys for an event on this object; `forNamespaced` is the scope of the reconciled kind. */
  map: (obj: DeepReadonly<KubeObject>, forNamespaced: boolean, ctx: MapContext) => Request[];
}

/** The object's own key (controller-runtime's EnqueueRequestForObject). */
export function enqueueForObject(obj: DeepReadonly<KubeObject>): Request[] {
  return [{ namespace: obj.metadata.namespace, name: obj.metadata.name ?? "" }];
}

/**
 * The key of the object's controller owner when that owner is of `owner`'s kind (any version of its
 * group), else nothing (controller-runtime's EnqueueRequestForOwner with OnlyControllerOwner).
 */
export function enqueueForOwner(owner: KindRef): Watch["map"] {
  const group = groupOf(owner.apiVersion);
  return (obj, forNamespaced) => {
    const ref = obj.metadata.ownerReferences?.find((r) => r.controller);
    if (!ref || ref.kind !== owner.kind || groupOf(ref.apiVersion) !== group) return [];
    return [{ namespace: forNamespaced ? obj.metadata.namespace : undefined, name: ref.name }];
  };
}

/** A user map function as a watch mapping (controller-runtime's EnqueueRequestsFromMapFunc). */
export function enqueueMapped<S extends KubeObject>(map: MapFn<S>): Watch["map"] {
  return (obj, _forNamespaced, ctx) => map(obj as DeepReadonly<S>, ctx);
}
