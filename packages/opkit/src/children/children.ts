/**
 * Declarative children (Metacontroller's composite controller, java-operator-sdk's dependent
 * resources): the reconcile states the children it wants; this applies them, prunes the ones no longer
 * wanted and says whether all are ready. Children are found again by a label carrying the parent's UID
 * and the field manager, and only objects the parent also controls (owner reference) are ever deleted,
 * so a copied label cannot make us delete someone else's object.
 */
import { createHash, hash as digestOf } from "node:crypto";
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

/** What a child's last apply by this process stored: which object, which body, which version. */
interface AppliedRecord {
  uid: string;
  /** SHA-256 of the applied body. */
  hash: string;
  resourceVersion: string;
  /** metadata.generation after the apply (0 for kinds without one). */
  generation: number;
  /** Labels, annotations, owner references and finalizers after the apply, less the foreign keys. */
  meta: string;
  /**
   * Label and annotation keys another manager held after the apply: the stored child had them though
   * the body does not state them (SSA would have removed them had only our manager owned them).
   */
  foreign: ForeignKeys;
}

interface ForeignKeys {
  labels: ReadonlySet<string>;
  annotations: ReadonlySet<string>;
  /** Annotation keys the body states (a control-plane one the body does not state is never ours). */
  stated: ReadonlySet<string>;
}

/**
 * Annotations the control plane writes onto an object it did not create, after its creation: the
 * Deployment controller's revision appears right after our first apply of a Deployment. Only these, not
 * every key under the kubernetes.io and k8s.io prefixes: operators and people write many of those
 * (nginx.ingress.kubernetes.io/*, service.beta.kubernetes.io/*, kubectl.kubernetes.io/*), and one that
 * another process writes with our field manager (a replica of the version before) must be applied away.
 */
const CONTROL_PLANE_ANNOTATIONS: ReadonlySet<string> = new Set(["deployment.kubernetes.io/revision"]);

/** Children remembered per cache (field manager, kind and key → the last apply). */
const APPLIED_MEMO_LIMIT = 100_000;
const appliedMemos = new WeakMap<Cache, Map<string, AppliedRecord>>();

function appliedMemo(cache: Cache): Map<string, AppliedRecord> {
  let memo = appliedMemos.get(cache);
  if (!memo) appliedMemos.set(cache, (memo = new Map<string, AppliedRecord>()));
  return memo;
}

function foreignKeys(body: KubeObject, stored: KubeObject): ForeignKeys {
  const extra = (
    have: Readonly<Record<string, string>> | undefined,
    want: Record<string, string> | undefined,
  ) => new Set(Object.keys(have ?? {}).filter((k) => !Object.hasOwn(want ?? {}, k)));
  return {
    labels: extra(stored.metadata.labels, body.metadata.labels),
    annotations: extra(stored.metadata.annotations, body.metadata.annotations),
    stated: new Set(Object.keys(body.metadata.annotations ?? {})),
  };
}

/**
 * The metadata an apply of ours decides, as one string: labels and annotations less the keys another
 * manager held (their values are that manager's business; a foreign label edit must not cost a
 * re-apply) and less the control plane's annotations the body does not state (the revision the
 * Deployment controller adds after our first apply), owner references and finalizers. Any
 * other key nobody held at our last apply counts: it may be another process's apply with our field
 * manager, which our next apply removes.
 */
function metaOf(obj: ReadonlyKubeObject, foreign: ForeignKeys): string {
  const m = obj.metadata;
  // Entries, so that no map and a map of skipped keys only read the same.
  const labels = Object.entries(m.labels ?? {}).filter(([k]) => !foreign.labels.has(k));
  const annotations = Object.entries(m.annotations ?? {}).filter(
    ([k]) => !foreign.annotations.has(k) && (foreign.stated.has(k) || !CONTROL_PLANE_ANNOTATIONS.has(k)),
  );
  return JSON.stringify([labels, annotations, m.ownerReferences, m.finalizers]);
}

/**
 * Whether applying `body` again would be a no-op: the same body as our last apply, and the cached child
 * is the object that apply stored, or differs from it only where nobody's apply writes (its status:
 * the generation, which every other change of a kind that has one raises, is unchanged, and so is the
 * metadata but for the values of keys another manager held at our last apply) and still holds every
 * field of the body. Another writer's change, also one by another process with our field manager (a
 * replica of another version), fails one of these; a new foreign label costs one apply, after which its
 * edits are skipped, and once a reconcile saw it gone (forgetGone) it is new again. A key that changes
 * hands from another manager to our field manager in another process between two reconciles (its value
 * written over, or a key both held that the other manager lets go) is the one case not seen until
 * something else makes us apply: without managedFields in the cache it reads as another manager's edit.
 */
function alreadyApplied(
  last: AppliedRecord | undefined,
  hash: string,
  body: KubeObject,
  cached: DeepReadonly<KubeObject> | undefined,
): boolean {
  if (!last || !cached || last.hash !== hash || last.uid !== cached.metadata.uid) return false;
  if (last.resourceVersion === cached.metadata.resourceVersion) return true;
  return (
    last.generation > 0 &&
    cached.metadata.generation === last.generation &&
    metaOf(cached, last.foreign) === last.meta &&
    containsJson(body, cached)
  );
}

/**
 * Forget the foreign keys the cached child no longer has: nobody holds a key that is gone, so when it
 * comes back it is a new key, which costs one apply (it may be our field manager's, written by another
 * process), not an edit of another manager's value.
 */
function forgetGone(last: AppliedRecord, cached: DeepReadonly<KubeObject>): void {
  const labels = held(last.foreign.labels, cached.metadata.labels);
  const annotations = held(last.foreign.annotations, cached.metadata.annotations);
  if (labels !== last.foreign.labels || annotations !== last.foreign.annotations) {
    last.foreign = { ...last.foreign, labels, annotations };
  }
}

/** The keys `map` still has: `keys` itself when it has all (the common case allocates nothing). */
function held(
  keys: ReadonlySet<string>,
  map: Readonly<Record<string, string>> | undefined,
): ReadonlySet<string> {
  let gone = false;
  for (const k of keys) gone ||= !map || !Object.hasOwn(map, k);
  return gone ? new Set([...keys].filter((k) => map && Object.hasOwn(map, k))) : keys;
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

/**
 * Every value `want` states is in `have` (arrays element by element, same length); what the server
 * added (defaults, status, other managers' fields) is ignored. Anything else, e.g. a quantity the server
 * normalized, counts as different, so in doubt the child is applied.
 */
export function containsJson(want: unknown, have: unknown): boolean {
  if (want === undefined) return true;
  if (typeof want !== "object" || want === null) return want === have;
  if (Array.isArray(want)) {
    return (
      Array.isArray(have) && have.length === want.length && want.every((w, i) => containsJson(w, have[i]))
    );
  }
  if (typeof have !== "object" || have === null || Array.isArray(have)) return false;
  const h = have as Record<string, unknown>;
  return Object.entries(want).every(([k, v]) => containsJson(v, h[k]));
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
  const owned = new Map(opts.ownedKinds.map((k) => [groupKindKey(k), k]));
  const labels = { [OWNER_UID_LABEL]: uid, [MANAGER_LABEL]: managerLabelValue(opts.fieldManager) };

  const bodies: KubeObject[] = [];
  const wantedKeys = new Set<string>();
  for (const child of desired) {
    if (!child.apiVersion || !child.kind || !child.metadata.name) {
      throw new ChildrenSpecError(
        `a desired child needs apiVersion, kind and metadata.name: ${describeObject(child)}`,
      );
    }
    const gk = groupKindKey({ apiVersion: child.apiVersion, kind: child.kind });
    if (!owned.has(gk)) {
      throw new ChildrenSpecError(
        `${describeObject(child)} is of a kind not in ownedKinds (${[...owned.keys()].join(", ")}); add ${gk} so it can be pruned`,
      );
    }
    // Only the metadata is changed below, so only it is copied (a deep copy of every desired child on
    // every reconcile cost more than the comparison it feeds); the caller's objects stay untouched.
    const { managedFields: _dropped, ...meta } = child.metadata;
    const body = { ...child, metadata: meta } as KubeObject;
    const childNamespaced = await namespaced({ apiVersion: child.apiVersion, kind: child.kind });
    if (childNamespaced && !body.metadata.namespace && parentNamespaced) {
      body.metadata.namespace = parent.metadata.namespace;
    }
    body.metadata.labels = { ...body.metadata.labels, ...labels };
    setControllerReference(parent, body, {
      ownerNamespaced: parentNamespaced,
      childNamespaced,
      blockOwnerDeletion: opts.blockOwnerDeletion,
    });
    const key = `${gk}/${objectKey(body)}`;
    if (wantedKeys.has(key)) throw new ChildrenSpecError(`${describeObject(body)} is desired twice`);
    wantedKeys.add(key);
    bodies.push(body);
  }

  // One at a time and in order: a failure stops before later children and before any pruning, so a
  // half-applied state never deletes what the previous state still relies on.
  const cachedChildren = opts.cache ? cachedChildrenOf(opts.cache, opts.ownedKinds, uid) : undefined;
  const memo = opts.cache ? appliedMemo(opts.cache) : undefined;
  const applied: KubeObject[] = [];
  for (const body of bodies) {
    const key = `${opts.fieldManager}|${groupKindKey({ apiVersion: body.apiVersion ?? "", kind: body.kind ?? "" })}/${objectKey(body)}`;
    const hash = memo ? digestOf("sha256", JSON.stringify(body), "base64") : "";
    const cached = cachedChildren?.get(key.slice(opts.fieldManager.length + 1));
    // A field dropped from the body changes the hash, a field someone else changed changes the cached
    // child, and a recreated child has another uid: each of those applies.
    const last = memo?.get(key);
    if (alreadyApplied(last, hash, body, cached)) {
      if (last && cached) forgetGone(last, cached);
      applied.push(deepCopy(cached) as KubeObject);
      continue;
    }
    const stored = await client.apply(body, { fieldManager: opts.fieldManager, force: opts.force ?? true });
    if (memo) {
      memo.delete(key);
      if (memo.size >= APPLIED_MEMO_LIMIT) memo.delete(memo.keys().next().value ?? "");
      const foreign = foreignKeys(body, stored);
      memo.set(key, {
        uid: stored.metadata.uid ?? "",
        hash,
        resourceVersion: stored.metadata.resourceVersion ?? "",
        generation: stored.metadata.generation ?? 0,
        meta: metaOf(stored, foreign),
        foreign,
      });
    }
    applied.push(stored);
  }

  const selector = Object.entries(labels)
    .map(([k, v]) => `${k}=${v}`)
    .join(",");
  const pruned: string[] = [];
  for (const kind of opts.ownedKinds) {
    const childNamespaced = await namespaced(kind);
    const namespace = parentNamespaced && childNamespaced ? parent.metadata.namespace : undefined;
    const existing = opts.cache
      ? opts.cache.list(kind, { index: { name: OWNER_INDEX, value: uid }, labelSelector: selector })
      : (await client.listAll(kind, { namespace, labelSelector: selector })).items;
    for (const obj of existing) {
      if (!isControlledBy(obj, parent) || obj.metadata.deletionTimestamp) continue;
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

  const notReady = applied
    .filter((obj) => !isChildReady(obj, opts.readiness))
    .map((obj) => describeChild(obj.kind ?? "", obj));
  return { applied, pruned, ready: notReady.length === 0, notReady };
}
