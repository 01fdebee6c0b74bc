/**
 * Finalizers: the object stays until our cleanup ran. Writes carry the resourceVersion the caller read,
 * so two writers never silently drop each other's finalizer; a stale read surfaces as ConflictError and
 * the reconcile simply runs again on fresh data.
 */
import type { KubeClient } from "../client/client.ts";
import { NotFoundError } from "../client/errors.ts";
import type { KindRef, ReadonlyKubeObject } from "../client/types.ts";

/**
 * What a finalizer step did: added the finalizer, ran the cleanup and removed it, or nothing (already in
 * place).
 */
export type FinalizerOutcome = "added" | "finalized" | "noop";

/** Whether `obj` carries the finalizer `name`. */
export function hasFinalizer(obj: ReadonlyKubeObject, name: string): boolean {
  return obj.metadata.finalizers?.includes(name) ?? false;
}

/**
 * Whether deletion of `obj` has been requested (it has a deletionTimestamp): time to run cleanup and remove
 * your finalizer.
 */
export function isBeingDeleted(obj: ReadonlyKubeObject): boolean {
  return Boolean(obj.metadata.deletionTimestamp);
}

function kindOf(obj: ReadonlyKubeObject): KindRef {
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
/** The server answers with the object as stored: the same kind, so typed as the input's kind. */
async function writeFinalizers<O extends ReadonlyKubeObject>(
  client: KubeClient,
  obj: O,
  finalizers: string[],
): Promise<O> {
  const metadata: Record<string, unknown> = { finalizers };
  if (obj.metadata.resourceVersion) metadata.resourceVersion = obj.metadata.resourceVersion;
  return (await client.patch(
    kindOf(obj),
    obj.metadata.name ?? "",
    { metadata },
    { type: "merge", namespace: obj.metadata.namespace },
  )) as unknown as O;
}

/** Add finalizer `name` unless present. Returns the object as written (or `obj` when unchanged). */
export async function ensureFinalizer<O extends ReadonlyKubeObject>(
  client: KubeClient,
  obj: O,
  name: string,
): Promise<O> {
  if (hasFinalizer(obj, name)) return obj;
  return writeFinalizers(client, obj, [...(obj.metadata.finalizers ?? []), name]);
}

/**
 * Remove finalizer `name` if present. Returns the object as written, `obj` when there was nothing to
 * remove, or undefined when the object is gone (the last finalizer released it, or it was gone already).
 */
export async function removeFinalizer<O extends ReadonlyKubeObject>(
  client: KubeClient,
  obj: O,
  name: string,
): Promise<O | undefined> {
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
export async function handleFinalizer<O extends ReadonlyKubeObject>(
  client: KubeClient,
  obj: O,
  name: string,
  cleanup: (obj: O) => Promise<void>,
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
