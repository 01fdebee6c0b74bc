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
export function objectKey(obj: { metadata: ObjectMeta }): string {
  const ns = obj.metadata.namespace;
  return ns ? `${ns}/${obj.metadata.name ?? ""}` : (obj.metadata.name ?? "");
}

/** The API group of an apiVersion: "apps" for "apps/v1", "" for the core "v1". */
export function groupOf(apiVersion: string): string {
  const i = apiVersion.indexOf("/");
  return i < 0 ? "" : apiVersion.slice(0, i);
}

/** A `metav1.MicroTime` string (RFC 3339 with microseconds), as Leases and events.k8s.io Events require. */
export function microTime(date: Date): string {
  return date.toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");
}
