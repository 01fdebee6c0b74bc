/**
 * The apply memo of `reconcileChildren`: what this process last applied of each child (a digest of the
 * body, the object it stored), so that a child whose body is unchanged and whose cached copy is still
 * that object (or differs only where nobody's apply writes) is not applied again. One memo per cache,
 * bounded: the least recently applied children are forgotten first.
 */
import { hash as digestOf } from "node:crypto";
import type { Cache } from "../cache/cache.ts";
import type { DeepReadonly, KubeObject, ReadonlyKubeObject } from "../client/types.ts";

/** Children remembered per cache (field manager, kind and key → the last apply). */
export const APPLIED_MEMO_LIMIT = 100_000;

/** What this process last applied of each child, by a key naming the field manager, kind and object. */
export class ApplyMemo {
  private readonly records = new Map<string, AppliedRecord>();
  private readonly limit: number;

  constructor(limit = APPLIED_MEMO_LIMIT) {
    this.limit = limit;
  }

  /** Children remembered. */
  get size(): number {
    return this.records.size;
  }

  /** The digest the memo compares bodies by (SHA-256 of the JSON). */
  static digest(body: KubeObject): string {
    return digestOf("sha256", JSON.stringify(body), "base64");
  }

  /**
   * Whether applying `body` (digest `hash`) under `key` again would be a no-op, given the child as
   * cached (see `alreadyApplied`). When it would, foreign keys the cached child no longer has are
   * forgotten. A field dropped from the body changes the hash, a field someone else changed changes the
   * cached child, and a recreated child has another uid: each of those applies.
   */
  upToDate(
    key: string,
    hash: string,
    body: KubeObject,
    cached: DeepReadonly<KubeObject> | undefined,
  ): boolean {
    const last = this.records.get(key);
    if (!alreadyApplied(last, hash, body, cached)) return false;
    if (last && cached) forgetGone(last, cached);
    return true;
  }

  /** Remember an apply of `body` (digest `hash`) that stored `stored`; the most recent goes last. */
  remember(key: string, hash: string, body: KubeObject, stored: KubeObject): void {
    this.records.delete(key);
    if (this.records.size >= this.limit) this.records.delete(this.records.keys().next().value ?? "");
    const foreign = foreignKeys(body, stored);
    this.records.set(key, {
      uid: stored.metadata.uid ?? "",
      hash,
      resourceVersion: stored.metadata.resourceVersion ?? "",
      generation: stored.metadata.generation ?? 0,
      meta: metaOf(stored, foreign),
      foreign,
    });
  }

  /** Whether `key` is remembered. */
  has(key: string): boolean {
    return this.records.has(key);
  }
}

const memos = new WeakMap<Cache, ApplyMemo>();

/** The memo of the children found in `cache` (one per cache: its copies are what the memo is checked against). */
export function applyMemoOf(cache: Cache): ApplyMemo {
  let memo = memos.get(cache);
  if (!memo) memos.set(cache, (memo = new ApplyMemo()));
  return memo;
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
