/**
 * Status writes that happen only when something changed. A write of identical status still bumps the
 * resourceVersion, fires a watch event and re-triggers the reconcile that wrote it: the status loop
 * users complain about. Comparing first breaks that loop.
 */
import type { KubeClient } from "../client/client.ts";
import type { DeepReadonly, ReadonlyKubeObject } from "../client/types.ts";
import { jsonEqual, mergePatchDiff } from "./json.ts";

/** The status type of an object type (`unknown` for objects typed without one). */
export type StatusOf<T> = T extends {
  /** The status field whose type is taken. */
  readonly status?: infer S;
}
  ? S
  : unknown;

/**
 * The last status written per object uid, with the resourceVersion of the copy it was computed from.
 * A reconcile that runs again before the cache saw its own write reads that same old copy; without
 * this it would write the same status a second time (a request, and on a busy server a conflict).
 */
const lastWrites = new Map<string, { readRv: string; status: unknown }>();
const LAST_WRITES_LIMIT = 100_000;

/** Options of the status helpers. */
export interface StatusWriteOptions {
  /**
   * The field manager of the status write (default: the client's, which for `ctx.client` is the operator's).
   */
  fieldManager?: string;
}

/**
 * Write `status` through the status subresource when it differs (as JSON) from `obj.status`. The write
 * is a merge patch of the difference (removed keys become null), so it needs no resourceVersion and
 * cannot conflict, and fields another writer added meanwhile survive. Returns whether it wrote.
 *
 * The kind must have the status subresource (CRDs: `subresources.status`); without it the write fails
 * with NotFoundError. A NotFoundError also means the object is gone; callers that do not care use
 * `manageError`/`manageSuccess`, which ignore it.
 */
export async function updateStatusIfChanged<O extends ReadonlyKubeObject>(
  client: KubeClient,
  obj: O,
  status: DeepReadonly<StatusOf<O>> | undefined,
  opts: StatusWriteOptions = {},
): Promise<boolean> {
  const uid = obj.metadata.uid;
  const rv = obj.metadata.resourceVersion;
  let current = (obj as { status?: unknown }).status;
  const last = uid ? lastWrites.get(uid) : undefined;
  if (last && rv !== undefined && last.readRv === rv) {
    // `obj` is the version our last write was based on: a cache that has not seen that write yet. The
    // server holds what the write returned, so compare with that instead of writing the same again.
    current = last.status;
  } else if (last && uid) {
    lastWrites.delete(uid);
  }
  if (jsonEqual(current, status)) return false;
  if (!obj.apiVersion || !obj.kind || !obj.metadata.name) {
    throw new Error("updateStatusIfChanged needs an object with apiVersion, kind and metadata.name");
  }
  const diff = mergePatchDiff(current, status);
  const written = await client.patch(
    { apiVersion: obj.apiVersion, kind: obj.kind },
    obj.metadata.name,
    { status: diff ?? null },
    {
      type: "merge",
      namespace: obj.metadata.namespace,
      subresource: "status",
      fieldManager: opts.fieldManager,
    },
  );
  if (uid && rv !== undefined) {
    lastWrites.delete(uid);
    if (lastWrites.size >= LAST_WRITES_LIMIT) lastWrites.delete(lastWrites.keys().next().value ?? "");
    lastWrites.set(uid, { readRv: rv, status: (written as { status?: unknown }).status });
  }
  return true;
}
