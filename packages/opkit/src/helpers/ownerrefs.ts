/**
 * Controller owner references with the garbage collector's rules checked up front. The API server
 * accepts an owner reference it cannot honour (a cross-namespace owner, a namespaced owner of a
 * cluster-scoped object) and the garbage collector then deletes the child or ignores the reference
 * later, far from the bug; failing here names both objects and the rule at the line that broke it.
 */
import type { KubeClient } from "../client/client.ts";
import { kindScope } from "../client/scopes.ts";
import {
  groupOf,
  objectKey,
  type DeepReadonly,
  type KubeObject,
  type OwnerReference,
} from "../client/types.ts";

/** A rule of ownership was broken; the message names owner, child and the rule. */
export class OwnerReferenceError extends Error {
  /** "Kind namespace/name" of the would-be owner. */
  readonly owner: string;
  /** "Kind namespace/name" of the child. */
  readonly child: string;
  /** The ownership rule that was broken, e.g. that a namespaced owner cannot own a cluster-scoped child. */
  readonly rule: string;
  constructor(owner: string, child: string, rule: string) {
    super(`${owner} cannot own ${child}: ${rule}`);
    this.name = new.target.name;
    this.owner = owner;
    this.child = child;
    this.rule = rule;
  }
}

/** The child already has a different controller; an object has at most one. */
export class AlreadyOwnedError extends OwnerReferenceError {
  /** The controller reference already on the child. */
  readonly existing: DeepReadonly<OwnerReference>;
  constructor(owner: string, child: string, existing: DeepReadonly<OwnerReference>) {
    super(
      owner,
      child,
      `it is already controlled by ${existing.kind} ${existing.name} (uid ${existing.uid}); an object has at most one controller`,
    );
    this.existing = existing;
  }
}

/**
 * Whether owner and child are namespaced, for checking ownership without asking the server (a cluster-scoped
 * child cannot have a namespaced owner).
 */
export interface OwnerScopes {
  /** Whether the owner's kind is namespaced. */
  ownerNamespaced: boolean;
  /** Whether the child's kind is namespaced. */
  childNamespaced: boolean;
}

/** Options of setting a controller reference. */
export interface ControllerReferenceOptions {
  /**
   * Foreground deletion of the owner waits for this child. Default true, as controller-runtime sets it;
   * it needs the `update` permission on the owner's `finalizers` subresource.
   */
  blockOwnerDeletion?: boolean;
}

/** "Kind namespace/name" for messages. */
export function describeObject(obj: DeepReadonly<KubeObject>): string {
  return `${obj.kind ?? "object"} ${objectKey(obj) || "(unnamed)"}`;
}

/** The owner reference that marks `owner` as the controller of another object. */
export function controllerReferenceTo(
  owner: DeepReadonly<KubeObject>,
  opts: ControllerReferenceOptions = {},
): OwnerReference {
  const { apiVersion, kind } = owner;
  const { name, uid } = owner.metadata;
  if (!apiVersion || !kind || !name || !uid) {
    throw new OwnerReferenceError(
      describeObject(owner),
      "another object",
      "an owner needs apiVersion, kind, metadata.name and metadata.uid (read it from the API server before using it as an owner)",
    );
  }
  return {
    apiVersion,
    kind,
    name,
    uid,
    controller: true,
    blockOwnerDeletion: opts.blockOwnerDeletion ?? true,
  };
}

/**
 * Whether an object's kind is namespaced: the caller's answer if given, else what this process knows of
 * the kind (built-in kinds, `defineKind`, discovery), else whether the object carries a namespace (an
 * object read from the server carries one exactly when its kind is namespaced).
 */
function namespacedOf(obj: DeepReadonly<KubeObject>, given: boolean | undefined): boolean {
  if (given !== undefined) return given;
  const known =
    obj.apiVersion && obj.kind ? kindScope({ apiVersion: obj.apiVersion, kind: obj.kind }) : undefined;
  if (known) return known === "Namespaced";
  return Boolean(obj.metadata.namespace);
}

/**
 * Make `owner` the controller of `child`, checking the garbage collector's rules. Mutates
 * `child.metadata.ownerReferences` (like controller-runtime) and returns `child`. A reference to the
 * same owner (same group, kind and name) is replaced, so a recreated owner takes over its children.
 * Scopes come from `opts` when given, else from the kinds opkit knows (see `kindScope`).
 */
export function setControllerReference<T extends KubeObject>(
  owner: DeepReadonly<KubeObject>,
  child: T,
  opts: Partial<OwnerScopes> & ControllerReferenceOptions = {},
): T {
  const ownerName = describeObject(owner);
  const childName = describeObject(child);
  const ref = controllerReferenceTo(owner, opts);
  if (namespacedOf(owner, opts.ownerNamespaced)) {
    if (!namespacedOf(child, opts.childNamespaced)) {
      throw new OwnerReferenceError(
        ownerName,
        childName,
        "a namespaced owner cannot own a cluster-scoped object (the garbage collector would delete the child)",
      );
    }
    if (!child.metadata.namespace || child.metadata.namespace !== owner.metadata.namespace) {
      throw new OwnerReferenceError(
        ownerName,
        childName,
        `cross-namespace owner references are not allowed: the child must be in the owner's namespace "${owner.metadata.namespace ?? ""}"`,
      );
    }
  }
  const refs = child.metadata.ownerReferences ?? [];
  const current = refs.find((r) => r.controller);
  if (current && !sameOwner(current, ref)) throw new AlreadyOwnedError(ownerName, childName, current);
  const kept = refs.filter((r) => !sameOwner(r, ref));
  child.metadata.ownerReferences = [...kept, ref];
  return child;
}

/** Like `setControllerReference`, with both scopes looked up through the client's discovery. */
export async function setControllerReferenceAsync<T extends KubeObject>(
  client: KubeClient,
  owner: DeepReadonly<KubeObject>,
  child: T,
  opts: ControllerReferenceOptions = {},
): Promise<T> {
  const [ownerNamespaced, childNamespaced] = await Promise.all([
    isNamespaced(client, owner),
    isNamespaced(client, child),
  ]);
  return setControllerReference(owner, child, { ...opts, ownerNamespaced, childNamespaced });
}

async function isNamespaced(client: KubeClient, obj: DeepReadonly<KubeObject>): Promise<boolean> {
  if (!obj.apiVersion || !obj.kind) {
    throw new Error(`${describeObject(obj)} has no apiVersion/kind: set both to resolve its scope`);
  }
  return (await client.mapping({ apiVersion: obj.apiVersion, kind: obj.kind })).namespaced;
}

/** Same object for ownership purposes: group, kind and name (the version may differ). */
function sameOwner(a: DeepReadonly<OwnerReference>, b: DeepReadonly<OwnerReference>): boolean {
  return groupOf(a.apiVersion) === groupOf(b.apiVersion) && a.kind === b.kind && a.name === b.name;
}

/** The controller owner reference of `obj`, if any. */
export function getControllerOf(obj: DeepReadonly<KubeObject>): DeepReadonly<OwnerReference> | undefined {
  return obj.metadata.ownerReferences?.find((r) => r.controller === true);
}

/** Whether `owner` (by UID) is the controller of `obj`. */
export function isControlledBy(obj: DeepReadonly<KubeObject>, owner: DeepReadonly<KubeObject>): boolean {
  const uid = owner.metadata.uid;
  return uid !== undefined && getControllerOf(obj)?.uid === uid;
}
