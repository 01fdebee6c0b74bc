/**
 * Declarative children (Metacontroller's composite controller, java-operator-sdk's dependent
 * resources): the reconcile states the children it wants; this applies them, prunes the ones no longer
 * wanted and says whether all are ready. Children are found again by a label carrying the parent's UID
 * and the field manager, and only objects the parent also controls (owner reference) are ever deleted,
 * so a copied label cannot make us delete someone else's object.
 */
import { createHash } from "node:crypto";
import type { Cache } from "../cache/cache.ts";
import { OWNER_INDEX } from "../cache/store.ts";
import type { KubeClient } from "../client/client.ts";
import { ConflictError, NotFoundError } from "../client/errors.ts";
import {
  deepCopy,
  groupKindKey,
  objectKey,
  type DeepReadonly,
  type KindRef,
  type KubeObject,
  type ReadonlyKubeObject,
} from "../client/types.ts";
import {
  describeObject,
  isControlledBy,
  OwnerReferenceError,
  setControllerReference,
} from "../helpers/ownerrefs.ts";
import { applyMemoOf, ApplyMemo } from "./memo.ts";
import { isChildReady, type ReadinessRule } from "./readiness.ts";

/** Label on every child: the UID of its parent. */
export const OWNER_UID_LABEL = "opkit.dev/owner-uid";
/** Label on every child: which field manager applied it, so two controllers never prune each other's. */
export const MANAGER_LABEL = "opkit.dev/manager";

/**
 * Options of `reconcileChildren`: who applies the children, which kinds may be children (and so pruned),
 * where to find the existing ones, and how readiness is judged.
 */
export interface ReconcileChildrenOptions {
  /**
   * The field manager the children are applied as; also written into MANAGER_LABEL so two controllers never
   * prune each other's children.
   */
  fieldManager: string;
  /**
   * The kinds this parent's children may have. Only these are pruned, and a desired child of another
   * kind is refused: it could never be pruned and would leak until the parent is deleted.
   */
  ownedKinds: readonly KindRef[];
  /**
   * Find existing children in this cache (by the controller-owner index) instead of listing from the
   * API server. It may lag behind: a child created moments ago is pruned on a later reconcile.
   */
  cache?: Cache;
  /** Readiness per kind, tried before the built-in rules. */
  readiness?: readonly ReadinessRule[];
  /** Take over fields other managers own (default true). */
  force?: boolean;
  /** Default true; see ControllerReferenceOptions. */
  blockOwnerDeletion?: boolean;
}

/**
 * What `reconcileChildren` did: the children as stored, the ones pruned, and whether all are ready, so a
 * reconcile can set its Ready condition from it.
 */
export interface ChildrenResult {
  /** The children as the server stored them, in the order desired. */
  applied: KubeObject[];
  /** "Kind/namespace/name" of each child deleted because it is no longer desired. */
  pruned: string[];
  /** Every applied child is ready. */
  ready: boolean;
  /** "Kind/namespace/name" of each child not ready yet. */
  notReady: string[];
}

/** The desired children cannot be reconciled as stated (a kind not owned, a child listed twice). */
export class ChildrenSpecError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

/** The field manager as a label value; names that cannot be one (too long, other characters) are hashed. */
export function managerLabelValue(fieldManager: string): string {
  if (fieldManager.length <= 63 && LABEL_VALUE.test(fieldManager)) return fieldManager;
  return `fm-${createHash("sha256").update(fieldManager).digest("hex").slice(0, 40)}`;
}

function describeChild(kind: string, obj: ReadonlyKubeObject): string {
  return `${kind}/${objectKey(obj)}`;
}

/** The parent's cached children by "group/Kind/namespace/name"; empty when a kind's cache is not ready. */
function cachedChildrenOf(
  cache: Cache,
  kinds: readonly KindRef[],
  uid: string,
): Map<string, DeepReadonly<KubeObject>> {
  const out = new Map<string, DeepReadonly<KubeObject>>();
  for (const kind of kinds) {
    let objs: DeepReadonly<KubeObject>[];
    try {
      objs = cache.list(kind, { index: { name: OWNER_INDEX, value: uid } });
    } catch {
      continue; // not synced or out of scope: apply, as without a cache
    }
    for (const o of objs) out.set(`${groupKindKey(kind)}/${objectKey(o)}`, o);
  }
  return out;
}

/** What the steps of `reconcileChildren` share about the parent. */
interface ParentContext {
  parent: ReadonlyKubeObject;
  uid: string;
  parentNamespaced: boolean;
  /** The labels every child carries (owner UID and field manager). */
  labels: Record<string, string>;
  /** Whether a kind is namespaced, asked of the REST mapping once per group/kind. */
  namespaced(kind: KindRef): Promise<boolean>;
}

/**
 * Apply every desired child (controller reference to `parent`, the owner labels, the field manager),
 * then — only when all applies succeeded — delete (propagation Background) the children of
 * `ownedKinds` that carry this parent's labels and controller reference but are no longer desired.
 * Namespaced children without a namespace go into the parent's namespace.
 */
export async function reconcileChildren(
  client: KubeClient,
  parent: ReadonlyKubeObject,
  desired: readonly ReadonlyKubeObject[],
  opts: ReconcileChildrenOptions,
): Promise<ChildrenResult> {
  const ctx = await parentContext(client, parent, opts);
  const { bodies, wantedKeys } = await childBodies(ctx, desired, opts);
  const applied = await applyChildren(client, ctx, bodies, opts);
  const pruned = await pruneChildren(client, ctx, wantedKeys, opts);
  const notReady = applied
    .filter((obj) => !isChildReady(obj, opts.readiness))
    .map((obj) => describeChild(obj.kind ?? "", obj));
  return { applied, pruned, ready: notReady.length === 0, notReady };
}

async function parentContext(
  client: KubeClient,
  parent: ReadonlyKubeObject,
  opts: ReconcileChildrenOptions,
): Promise<ParentContext> {
  const uid = parent.metadata.uid;
  if (!uid || !parent.apiVersion || !parent.kind) {
    throw new OwnerReferenceError(
      describeObject(parent),
      "its children",
      "a parent needs apiVersion, kind and metadata.uid (read it from the API server first)",
    );
  }
  const scopes = new Map<string, Promise<boolean>>();
  const namespaced = (kind: KindRef): Promise<boolean> => {
    const key = groupKindKey(kind);
    let p = scopes.get(key);
    if (!p) scopes.set(key, (p = client.mapping(kind).then((m) => m.namespaced)));
    return p;
  };
  const parentNamespaced = await namespaced({ apiVersion: parent.apiVersion, kind: parent.kind });
  const labels = { [OWNER_UID_LABEL]: uid, [MANAGER_LABEL]: managerLabelValue(opts.fieldManager) };
  return { parent, uid, parentNamespaced, labels, namespaced };
}

/**
 * Validate the desired children and build the bodies to apply (namespace, labels, controller reference),
 * with the "group/Kind/namespace/name" key of each.
 */
async function childBodies(
  ctx: ParentContext,
  desired: readonly ReadonlyKubeObject[],
  opts: ReconcileChildrenOptions,
): Promise<{ bodies: KubeObject[]; wantedKeys: Set<string> }> {
  const owned = new Map(opts.ownedKinds.map((k) => [groupKindKey(k), k]));
  const bodies: KubeObject[] = [];
  const wantedKeys = new Set<string>();
  for (const child of desired) {
    if (!child.apiVersion || !child.kind || !child.metadata.name) {
      throw new ChildrenSpecError(
        `a desired child needs apiVersion, kind and metadata.name: ${describeObject(child)}`,
      );
    }
    const kind = { apiVersion: child.apiVersion, kind: child.kind };
    const gk = groupKindKey(kind);
    if (!owned.has(gk)) {
      throw new ChildrenSpecError(
        `${describeObject(child)} is of a kind not in ownedKinds (${[...owned.keys()].join(", ")}); add ${gk} so it can be pruned`,
      );
    }
    // Only the metadata is changed below, so only it is copied (a deep copy of every desired child on
    // every reconcile cost more than the comparison it feeds); the caller's objects stay untouched.
    const { managedFields: _dropped, ...meta } = child.metadata;
    const body = { ...child, metadata: meta } as KubeObject;
    const childNamespaced = await ctx.namespaced(kind);
    if (childNamespaced && !body.metadata.namespace && ctx.parentNamespaced) {
      body.metadata.namespace = ctx.parent.metadata.namespace;
    }
    body.metadata.labels = { ...body.metadata.labels, ...ctx.labels };
    setControllerReference(ctx.parent, body, {
      ownerNamespaced: ctx.parentNamespaced,
      childNamespaced,
      blockOwnerDeletion: opts.blockOwnerDeletion,
    });
    const key = `${gk}/${objectKey(body)}`;
    if (wantedKeys.has(key)) throw new ChildrenSpecError(`${describeObject(body)} is desired twice`);
    wantedKeys.add(key);
    bodies.push(body);
  }
  return { bodies, wantedKeys };
}

/**
 * Apply the bodies one at a time and in order: a failure stops before later children and before any
 * pruning, so a half-applied state never deletes what the previous state still relies on. With a cache,
 * a child the memo shows as already applied is not applied again.
 */
async function applyChildren(
  client: KubeClient,
  ctx: ParentContext,
  bodies: KubeObject[],
  opts: ReconcileChildrenOptions,
): Promise<KubeObject[]> {
  const cachedChildren = opts.cache ? cachedChildrenOf(opts.cache, opts.ownedKinds, ctx.uid) : undefined;
  const memo = opts.cache ? applyMemoOf(opts.cache) : undefined;
  const applied: KubeObject[] = [];
  for (const body of bodies) {
    const childKey = `${groupKindKey({ apiVersion: body.apiVersion ?? "", kind: body.kind ?? "" })}/${objectKey(body)}`;
    const key = `${opts.fieldManager}|${childKey}`;
    const hash = memo ? ApplyMemo.digest(body) : "";
    const cached = cachedChildren?.get(childKey);
    if (memo?.upToDate(key, hash, body, cached)) {
      applied.push(deepCopy(cached) as KubeObject);
      continue;
    }
    const stored = await client.apply(body, { fieldManager: opts.fieldManager, force: opts.force ?? true });
    memo?.remember(key, hash, body, stored);
    applied.push(stored);
  }
  return applied;
}

/** Delete the children of `ownedKinds` this parent controls that are not wanted; returns what went. */
async function pruneChildren(
  client: KubeClient,
  ctx: ParentContext,
  wantedKeys: ReadonlySet<string>,
  opts: ReconcileChildrenOptions,
): Promise<string[]> {
  const selector = Object.entries(ctx.labels)
    .map(([k, v]) => `${k}=${v}`)
    .join(",");
  const pruned: string[] = [];
  for (const kind of opts.ownedKinds) {
    const childNamespaced = await ctx.namespaced(kind);
    const namespace = ctx.parentNamespaced && childNamespaced ? ctx.parent.metadata.namespace : undefined;
    const existing = opts.cache
      ? opts.cache.list(kind, { index: { name: OWNER_INDEX, value: ctx.uid }, labelSelector: selector })
      : (await client.listAll(kind, { namespace, labelSelector: selector })).items;
    for (const obj of existing) {
      if (!isControlledBy(obj, ctx.parent) || obj.metadata.deletionTimestamp) continue;
      if (wantedKeys.has(`${groupKindKey(kind)}/${objectKey(obj)}`)) continue;
      try {
        await client.delete(kind, obj.metadata.name ?? "", {
          namespace: obj.metadata.namespace,
          propagationPolicy: "Background",
          // Never delete a newer object that took the name after our read.
          preconditions: obj.metadata.uid ? { uid: obj.metadata.uid } : undefined,
        });
        pruned.push(describeChild(kind.kind, obj));
      } catch (err) {
        if (!(err instanceof NotFoundError) && !(err instanceof ConflictError)) throw err;
      }
    }
  }
  return pruned;
}
