/**
 * Finalizers: the object stays until our cleanup ran. Writes carry the resourceVersion the caller read,
 * so two writers never silently drop each other's finalizer; a stale read surfaces as ConflictError and
 * the reconcile simply runs again on fresh data.
 */
import type { KubeClient } from "../client/client.ts";
import { NotFoundError } from "../client/errors.ts";
import type { KindRef, KubeObject } from "../client/types.ts";

export type FinalizerOutcome = "added" | "finalized" | "noop";

export function hasFinalizer(obj: KubeObject, name: string): boolean {
  return obj.metadata.finalizers?.includes(name) ?? false;
}

export function isBeingDeleted(obj: KubeObject): boolean {
  return Boolean(obj.metadata.deletionTimestamp);
}

function kindOf<T extends KubeObject>(obj: T): KindRef<T> {
  if (!obj.apiVersion || !obj.kind || !obj.metadata.name) {
    throw new Error(`finalizers need an object with apiVersion, kind and metadata.name`);
  }
  return { apiVersion: obj.apiVersion, kind: obj.kind };
}

/**
 * A merge patch of the whole finalizer list guarded by the resourceVersion the caller read: the API
 * server answers 409 Conflict (ConflictError) when the object changed since, instead of overwriting a
 * list someone else just extended.
 */
function writeFinalizers<T extends KubeObject>(client: KubeClient, obj: T, finalizers: string[]): Promise<T> {
  const metadata: Record<string, unknown> = { finalizers };
  if (obj.metadata.resourceVersion) metadata.resourceVersion = obj.metadata.resourceVersion;
  return client.patch(
    kindOf(obj),
    obj.metadata.name ?? "",
    { metadata },
    { type: "merge", namespace: obj.metadata.namespace },
  );
}

/** Add finalizer `name` unless present. Returns the object as written (or `obj` when unchanged). */
export async function ensureFinalizer<T extends KubeObject>(
  client: KubeClient,
  obj: T,
  name: string,
): Promise<T> {
  if (hasFinalizer(obj, name)) return obj;
  return writeFinalizers(client, obj, [...(obj.metadata.finalizers ?? []), name]);
}

/**
 * Remove finalizer `name` if present. Returns the object as written, `obj` when there was nothing to
 * remove, or undefined when the object is gone (the last finalizer released it, or it was gone already).
 */
export async function removeFinalizer<T extends KubeObject>(
  client: KubeClient,
  obj: T,
  name: string,
): Promise<T | undefined> {
  if (!hasFinalizer(obj, name)) return obj;
  try {
    return await writeFinalizers(
      client,
      obj,
      (obj.metadata.finalizers ?? []).filter((f) => f !== name),
    );
  } catch (err) {
    if (err instanceof NotFoundError) return undefined;
    throw err;
  }
}

/**
 * The whole finalizer protocol in one call, at the start of a reconcile:
 * - not being deleted, finalizer missing → add it ("added"); present → "noop", carry on reconciling;
 * - being deleted with our finalizer → run `cleanup`, then remove the finalizer ("finalized");
 * - being deleted without it → "noop": nothing of ours left to do.
 *
 * A failing cleanup rejects with its error and the finalizer stays, so the controller retries with
 * backoff and the object cannot disappear before its external resources are released. Cleanup must be
 * idempotent: it runs again if removing the finalizer fails after it succeeded.
 */
export async function handleFinalizer<T extends KubeObject>(
  client: KubeClient,
  obj: T,
  name: string,
  cleanup: (obj: T) => Promise<void>,
): Promise<FinalizerOutcome> {
  if (!isBeingDeleted(obj)) {
    if (hasFinalizer(obj, name)) return "noop";
    await ensureFinalizer(client, obj, name);
    return "added";
  }
  if (!hasFinalizer(obj, name)) return "noop";
  await cleanup(obj);
  await removeFinalizer(client, obj, name);
  return "finalized";
}
