export { groupOf } from "./scopes.ts";

/**
 * The shapes every Kubernetes object shares, as they travel in JSON (timestamps are RFC 3339 strings).
 */

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

export interface ManagedFieldsEntry {
  manager?: string;
  operation?: string;
  apiVersion?: string;
  time?: string;
  fieldsType?: string;
  fieldsV1?: Record<string, unknown>;
  subresource?: string;
}

export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  deletionGracePeriodSeconds?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: OwnerReference[];
  finalizers?: string[];
  managedFields?: ManagedFieldsEntry[];
}

export interface ListMeta {
  resourceVersion?: string;
  continue?: string;
  remainingItemCount?: number;
}

/** Any Kubernetes object. Kinds narrow it with their own spec and status. */
export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
}

export interface KubeList<T extends KubeObject> {
  apiVersion?: string;
  kind?: string;
  metadata: ListMeta;
  items: T[];
}

/**
 * Names a kind. The type parameter carries the object's TypeScript type from the kind definition to
 * `get`, `list`, `apply` and the cache, so callers never cast.
 */
export interface KindRef<T extends KubeObject = KubeObject> {
  apiVersion: string;
  kind: string;
  /** Phantom field: never set at run time, only carries T. */
  readonly __type?: T;
}

/** Declare a kind reference with its object type: `const Pods = kindRef<Pod>("v1", "Pod")`. */
export function kindRef<T extends KubeObject>(apiVersion: string, kind: string): KindRef<T> {
  return { apiVersion, kind };
}

export type WatchEventType = "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR";

export interface WatchEvent<T extends KubeObject = KubeObject> {
  type: WatchEventType;
  object: T;
}

/** "namespace/name" for namespaced objects, "name" for cluster-scoped ones (client-go's key format). */
export function objectKey(obj: {
  readonly metadata: { readonly namespace?: string; readonly name?: string };
}): string {
  const ns = obj.metadata.namespace;
  return ns ? `${ns}/${obj.metadata.name ?? ""}` : (obj.metadata.name ?? "");
}

/** A `metav1.MicroTime` string (RFC 3339 with microseconds), as Leases and events.k8s.io Events require. */
export function microTime(date: Date): string {
  return date.toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");
}

/**
 * A deeply readonly view of T: what the cache hands out. Cached objects are shared by every reader and
 * frozen, so writing to one is a compile-time error here and a TypeError at run time. `deepCopy` gives a
 * mutable copy to edit and send back.
 */
export type DeepReadonly<T> = T extends (...args: never[]) => unknown
  ? T
  : T extends object
    ? { readonly [K in keyof T]: DeepReadonly<T[K]> }
    : T;

/** Any object, mutable or read from the cache: what helpers that only read an object accept. */
export type ReadonlyKubeObject = DeepReadonly<KubeObject>;

/**
 * A mutable deep copy of an object (controller-runtime's DeepCopy), e.g. of a cached object to change
 * and write back: `const d = deepCopy(cache.get(Deployments, name, { namespace }))`.
 */
export function deepCopy<O>(obj: O): DeepMutable<O> {
  return structuredClone(obj) as DeepMutable<O>;
}

/** The mutable counterpart of a (deeply) readonly type: what `deepCopy` returns. */
export type DeepMutable<T> = T extends (...args: never[]) => unknown
  ? T
  : T extends object
    ? { -readonly [K in keyof T]: DeepMutable<T[K]> }
    : T;
