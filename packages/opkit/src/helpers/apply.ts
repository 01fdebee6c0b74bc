/**
 * Writing children and other objects the operator manages. Server-side apply is the default: the
 * operator states the fields it owns and the API server merges, so server-side defaults and fields
 * owned by others are left alone. `createOrUpdate` is the read-modify-write alternative for callers
 * that must compute from the live object; it compares against the live object so it never fights
 * server-side defaults with needless updates.
 */
import type { KubeClient } from "../client/client.ts";
import { NotFoundError } from "../client/errors.ts";
import type { KindRef, KubeObject, ReadonlyKubeObject } from "../client/types.ts";
import { jsonEqual } from "./json.ts";
import { describeObject, setControllerReferenceAsync, type ControllerReferenceOptions } from "./ownerrefs.ts";

/**
 * Options of `applyOwned`: the field manager, whether to take over fields, and the owner reference's
 * blockOwnerDeletion.
 */
export interface ApplyOwnedOptions extends ControllerReferenceOptions {
  /**
   * The field manager of the write (default: the client's, which for `ctx.client` is the operator's
   * name): one per operator keeps ownership of fields readable.
   */
  fieldManager?: string;
  /** Take fields over from other managers (default true: the controller is the source of truth). */
  force?: boolean;
}

/** A copy fit for an apply body: the server rejects managedFields in an apply request. */
export function applyBody<T extends ReadonlyKubeObject>(obj: T): KubeObject & T {
  const copy = structuredClone(obj) as KubeObject & T;
  delete copy.metadata.managedFields;
  return copy;
}

/**
 * Set `owner` as the controller of `child` (rules checked, scopes from discovery) and server-side apply
 * the child. `child` is not modified. Returns the object the server stored.
 */
export async function applyOwned<T extends ReadonlyKubeObject>(
  client: KubeClient,
  owner: ReadonlyKubeObject,
  child: T,
  opts: ApplyOwnedOptions = {},
): Promise<T> {
  const body = await setControllerReferenceAsync(client, owner, applyBody(child), opts);
  return client.apply(body, { fieldManager: opts.fieldManager, force: opts.force ?? true });
}

/** What `createOrUpdate` did, e.g. to log it or record an Event only when something changed. */
export type OperationResult = "created" | "updated" | "unchanged";

/** `mutate` changed the name or namespace of the object it was asked to edit. */
export class MutationIdentityError extends Error {
  constructor(what: string) {
    super(`createOrUpdate: the mutate function must not change the name or namespace of ${what}`);
    this.name = new.target.name;
  }
}

/**
 * Get the object named by `obj`; if absent, apply `mutate` to a copy of `obj` and create it; else apply
 * `mutate` to a copy of the live object and update only when that changed something. The update carries
 * the live resourceVersion, so a concurrent write fails with ConflictError instead of being lost.
 */
export async function createOrUpdate<T extends KubeObject>(
  client: KubeClient,
  obj: T,
  mutate: (obj: T) => void | Promise<void>,
): Promise<{
  /** The object as the server stored it (or the live one when unchanged). */
  object: T;
  /** Whether it was created, updated or left unchanged. */
  result: OperationResult;
}> {
  if (!obj.apiVersion || !obj.kind || !obj.metadata.name) {
    throw new Error(`createOrUpdate needs apiVersion, kind and metadata.name on ${describeObject(obj)}`);
  }
  const kind: KindRef<T> = { apiVersion: obj.apiVersion, kind: obj.kind };
  const { name, namespace } = obj.metadata;
  let live: T | undefined;
  try {
    live = await client.get(kind, name, { namespace });
  } catch (err) {
    if (!(err instanceof NotFoundError)) throw err;
  }
  const draft = structuredClone(live ?? obj);
  await mutate(draft);
  if (draft.metadata.name !== name || (draft.metadata.namespace ?? "") !== (namespace ?? "")) {
    throw new MutationIdentityError(describeObject(obj));
  }
  if (!live) return { object: await client.create(draft), result: "created" };
  if (jsonEqual(live, draft)) return { object: live, result: "unchanged" };
  return { object: await client.update(draft), result: "updated" };
}
