/**
 * Least-privilege RBAC derived from what controllers declare (`for`, `owns`, `watches`, `rbac`), so the
 * permissions an operator is deployed with can never drift from what its code does. Reading is derived
 * from the watches; writing only from what opkit's helpers do for a controller (children, status,
 * finalizers, Events) and from what the controller declares, since inferring writes from arbitrary code
 * is not reliable. Output is deterministic: the same declarations always yield byte-identical manifests.
 */
import { groupOf, type KindRef, type KubeObject } from "../client/types.ts";
import { knownKind } from "../client/scopes.ts";
import { defaultPlural } from "../api/kind.ts";
import type { ResourceMapping } from "../client/mapping.ts";
import type { ControllerPermission, ExtraPolicyRule, PolicyRule } from "../client/builtins.ts";

export type { ControllerPermission, ExtraPolicyRule, PolicyRule };

/** What RBAC needs to know about a kind: its API group, plural resource and scope. */
export interface ResolvedKind {
  /** The API group ("" for core). */
  group: string;
  /** The plural resource name, e.g. "deployments". */
  resource: string;
  /** Whether the kind is namespaced (decides Role versus ClusterRole). */
  namespaced: boolean;
}

/**
 * Looks up a kind's group, resource and scope: offline from known kinds, or via discovery when a cluster is
 * at hand.
 */
export type KindResolver = (kind: KindRef) => Promise<ResolvedKind> | ResolvedKind;

/** The parts of a Controller that determine its permissions. */
export interface ControllerPermissions {
  /**
   * The reconciled kind: read; when it is one of the operator's own kinds (`RbacInput.ownKinds`) also
   * patch (finalizers) and its status (get, patch); when the controller owns children, update of its
   * `finalizers` subresource (to set blockOwnerDeletion on them).
   */
  forKind: KindRef;
  /** Kinds it creates and owns: read, and what `reconcileChildren` writes (create, patch, delete). */
  ownedKinds: readonly KindRef[];
  /** Kinds it only watches: get, list, watch. */
  watchedKinds: readonly KindRef[];
  /** What its code writes beyond these defaults (`controller(...).rbac([...])`). */
  rbac?: readonly ControllerPermission[];
}

/**
 * What `rbacFor` derives the least-privilege RBAC of an operator from: its controllers' watches, extra rules,
 * leader election and namespace scope.
 */
export interface RbacInput {
  /** Operator name: the ServiceAccount, roles and bindings are named after it. */
  name: string;
  /** Namespace the operator runs in (ServiceAccount, leader-election Lease). */
  namespace: string;
  /** The controllers whose watches imply the permissions. */
  controllers: readonly ControllerPermissions[];
  /** Rules beyond what the watches imply (e.g. reading Nodes without caching them). */
  extraRules?: readonly ExtraPolicyRule[];
  /** Grant Lease access in `namespace` (default true). */
  leaderElection?: boolean;
  /** When set, namespaced kinds are granted by a Role in this namespace instead of a ClusterRole. */
  watchNamespace?: string;
  /** How kinds are resolved to resources and scopes. */
  resolve: KindResolver;
  /**
   * The operator's own kinds (its `defineKind`s). A reconciled (`for`) kind among them may be written:
   * update/patch (finalizers live in its metadata), its status, its finalizers. A reconciled kind that is
   * not the operator's own (a built-in such as Pods, or another project's CRD) is only read, plus
   * `<resource>/finalizers` update when the controller owns children (to set blockOwnerDeletion); any
   * write to it is declared in the controller's `rbac` (or `extraRules`). Compared by group and kind
   * (every version). Omitted: no reconciled kind counts as the operator's own, so none is written.
   */
  ownKinds?: readonly KindRef[];
}

/**
 * RBAC cannot be generated from the input (e.g. no name, or an extra rule without apiGroups and resources);
 * the message says what to set.
 */
export class RbacGenerationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "RbacGenerationError";
  }
}

const READ = ["get", "list", "watch"];
/** What `reconcileChildren` does to children: apply (create, patch) and prune (delete). */
const CHILD_WRITE = ["create", "patch", "delete"];
const RBAC_API = "rbac.authorization.k8s.io/v1";

/** Verbs in the order kubectl and kubebuilder print them, so generated rules read naturally. */
const VERB_ORDER = ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"];

/** Accumulates verbs per (group, resource) for one role, then merges into compact sorted rules. */
class RuleSet {
  private readonly verbs = new Map<string, Set<string>>();
  private readonly special: PolicyRule[] = [];

  add(group: string, resource: string, verbs: readonly string[]): void {
    const key = `${group}\u0000${resource}`;
    let set = this.verbs.get(key);
    if (!set) this.verbs.set(key, (set = new Set()));
    for (const v of verbs) set.add(v);
  }

  addRule(rule: PolicyRule): void {
    // resourceNames and nonResourceURLs narrow a rule; merging them with broad rules would widen them.
    if (rule.resourceNames?.length || rule.nonResourceURLs?.length) {
      this.special.push(normalizeRule(rule));
      return;
    }
    if (!rule.apiGroups?.length || !rule.resources?.length) {
      throw new RbacGenerationError(
        `extra rule ${JSON.stringify(rule)} needs apiGroups and resources (or nonResourceURLs): set both`,
      );
    }
    for (const g of rule.apiGroups) for (const r of rule.resources) this.add(g, r, rule.verbs);
  }

  get empty(): boolean {
    return this.verbs.size === 0 && this.special.length === 0;
  }

  rules(): PolicyRule[] {
    // Resources of one group with identical verbs share a rule, as controller-gen does.
    const byGroupVerbs = new Map<string, { group: string; verbs: string[]; resources: string[] }>();
    for (const [key, set] of this.verbs) {
      const [group, resource] = key.split("\u0000") as [string, string];
      const verbs = sortVerbs([...set]);
      const k = `${group}\u0000${verbs.join(",")}`;
      const entry = byGroupVerbs.get(k) ?? { group, verbs, resources: [] };
      entry.resources.push(resource);
      byGroupVerbs.set(k, entry);
    }
    const merged: PolicyRule[] = [...byGroupVerbs.values()].map((e) => ({
      apiGroups: [e.group],
      resources: e.resources.sort(),
      verbs: e.verbs,
    }));
    merged.sort((a, b) => compare(ruleKey(a), ruleKey(b)));
    const seen = new Set<string>();
    const special = this.special
      .filter((r) => {
        const k = JSON.stringify(r);
        if (seen.has(k)) return false;
        seen.add(k);
        return true;
      })
      .sort((a, b) => compare(JSON.stringify(a), JSON.stringify(b)));
    return [...merged, ...special];
  }
}

function ruleKey(r: PolicyRule): string {
  return `${r.apiGroups?.[0] ?? ""}\u0000${(r.resources ?? []).join(",")}`;
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function sortVerbs(verbs: string[]): string[] {
  const rank = (v: string) => {
    const i = VERB_ORDER.indexOf(v);
    return i < 0 ? VERB_ORDER.length : i;
  };
  return [...new Set(verbs)].sort((a, b) => rank(a) - rank(b) || compare(a, b));
}

function normalizeRule(rule: PolicyRule): PolicyRule {
  const out: PolicyRule = { verbs: sortVerbs(rule.verbs) };
  if (rule.apiGroups) out.apiGroups = [...new Set(rule.apiGroups)].sort();
  if (rule.resources) out.resources = [...new Set(rule.resources)].sort();
  if (rule.resourceNames) out.resourceNames = [...new Set(rule.resourceNames)].sort();
  if (rule.nonResourceURLs) out.nonResourceURLs = [...new Set(rule.nonResourceURLs)].sort();
  return out;
}

/**
 * RBAC objects for an operator: ServiceAccount subject `<name>` in `<namespace>`, a ClusterRole and/or
 * a Role in `watchNamespace`, and a leader-election Role for Leases in the operator's own namespace.
 * The ServiceAccount itself is not included (see `manifestsFor`).
 */
export async function rbacFor(input: RbacInput): Promise<KubeObject[]> {
  // Long on purpose: one pass over the controllers fills one map of verbs per kind, then the rules are written from it.
  if (!input.name) throw new RbacGenerationError("rbacFor: `name` is empty: pass the operator's name");
  if (!input.namespace) {
    throw new RbacGenerationError("rbacFor: `namespace` is empty: pass the namespace the operator runs in");
  }
  const cluster = new RuleSet();
  const watched = new RuleSet();
  const scoped = (namespaced: boolean): RuleSet => (namespaced && input.watchNamespace ? watched : cluster);

  type Use = { kind: KindRef; role: "for" | "owns" | "watches"; ownsChildren?: boolean };
  const roles = new Map<string, Use[]>();
  const note = (use: Use) => {
    const key = `${use.kind.apiVersion}/${use.kind.kind}`;
    const list = roles.get(key) ?? [];
    list.push(use);
    roles.set(key, list);
  };
  // By group and kind: every version of an own kind is the operator's own.
  const groupKind = (k: KindRef) =>
    `${k.apiVersion.includes("/") ? k.apiVersion.split("/")[0] : ""}/${k.kind}`;
  const own = new Set((input.ownKinds ?? []).map(groupKind));
  for (const c of input.controllers) {
    note({ kind: c.forKind, role: "for", ownsChildren: c.ownedKinds.length > 0 });
    for (const k of c.ownedKinds) note({ kind: k, role: "owns" });
    for (const k of c.watchedKinds) note({ kind: k, role: "watches" });
  }
  const resolveKind = async (kind: KindRef): Promise<ResolvedKind> => {
    try {
      return await input.resolve(kind);
    } catch (err) {
      throw new RbacGenerationError(
        `cannot resolve ${kind.apiVersion} ${kind.kind} to a resource: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
  };

  for (const uses of [...roles.values()]) {
    const kind = uses[0]!.kind;
    const r = await resolveKind(kind);
    const set = scoped(r.namespaced);
    // Every cached kind is listed and watched by the informer and read by reconcilers.
    set.add(r.group, r.resource, READ);
    const ours = own.has(groupKind(kind));
    for (const u of uses) {
      if (u.role === "for" && ours) {
        // What the helpers write: finalizers (ensureFinalizer/removeFinalizer patch the object) and the
        // status (updateStatus patches the subresource).
        set.add(r.group, r.resource, ["patch"]);
        set.add(r.group, `${r.resource}/status`, ["get", "patch"]);
      }
      // Needed to set blockOwnerDeletion on children (OwnerReferencesPermissionEnforcement), whoever
      // owns the reconciled kind.
      if (u.role === "for" && u.ownsChildren) set.add(r.group, `${r.resource}/finalizers`, ["update"]);
      if (u.role === "owns") set.add(r.group, r.resource, CHILD_WRITE);
    }
  }

  // What the controllers declare they write beyond the defaults.
  for (const c of input.controllers) {
    for (const p of c.rbac ?? []) {
      if ("kind" in p) {
        const r = await resolveKind(p.kind);
        const resource = p.subresource ? `${r.resource}/${p.subresource}` : r.resource;
        scoped(r.namespaced).add(r.group, resource, p.verbs);
      } else {
        const { namespaced, ...plain } = p;
        scoped(namespaced === true).addRule(plain);
      }
    }
  }

  // The recorder writes events.k8s.io/v1 Events; core Events are granted too for libraries that still
  // use the old API. Events live in the namespace of the object they describe.
  const events = scoped(true);
  events.add("events.k8s.io", "events", ["create", "patch"]);
  events.add("", "events", ["create", "patch"]);

  for (const rule of input.extraRules ?? []) {
    const { namespaced, ...plain } = rule;
    scoped(namespaced === true).addRule(plain);
  }

  const subject = [{ kind: "ServiceAccount", name: input.name, namespace: input.namespace }];
  const labels = { "app.kubernetes.io/name": input.name };
  const out: KubeObject[] = [];
  if (!cluster.empty) {
    out.push(
      {
        apiVersion: RBAC_API,
        kind: "ClusterRole",
        metadata: { name: input.name, labels },
        rules: cluster.rules(),
      } as KubeObject,
      {
        apiVersion: RBAC_API,
        kind: "ClusterRoleBinding",
        metadata: { name: input.name, labels },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: input.name },
        subjects: subject,
      } as KubeObject,
    );
  }
  if (input.watchNamespace && !watched.empty) {
    out.push(...roleAndBinding(input.name, input.watchNamespace, watched.rules(), subject, labels));
  }
  if (input.leaderElection ?? true) {
    const le = new RuleSet();
    // list: sharded operators count live replicas from their heartbeat Leases; delete: they remove their
    // own heartbeat on a clean stop and those of replicas long gone.
    le.add("coordination.k8s.io", "leases", ["get", "list", "create", "update", "delete"]);
    out.push(
      ...roleAndBinding(`${input.name}-leader-election`, input.namespace, le.rules(), subject, labels),
    );
  }
  return out;
}

function roleAndBinding(
  name: string,
  namespace: string,
  rules: PolicyRule[],
  subjects: object[],
  labels: Record<string, string>,
): KubeObject[] {
  return [
    { apiVersion: RBAC_API, kind: "Role", metadata: { name, namespace, labels }, rules } as KubeObject,
    {
      apiVersion: RBAC_API,
      kind: "RoleBinding",
      metadata: { name, namespace, labels },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name },
      subjects,
    } as KubeObject,
  ];
}

/** Resolve kinds with the cluster's discovery (the kinds' CRDs must be installed). */
export function resolverFromClient(client: {
  mapping(kind: KindRef): Promise<ResourceMapping>;
}): KindResolver {
  return async (kind) => {
    const m = await client.mapping(kind);
    return { group: m.group, resource: m.resource, namespaced: m.namespaced };
  };
}

/** A custom kind's RBAC-relevant facts: `{group, kind, plural, scope}`, or a CustomResourceDefinition. */
export type CustomKindSource =
  | {
      /** The kind's API group. */
      group: string;
      /** The lowercase plural resource name. */
      plural: string;
      /** Whether objects are namespaced (Role) or cluster-scoped (ClusterRole). */
      scope: "Namespaced" | "Cluster";
      /** The kind name, to resolve references by kind. */
      kind?: string;
    }
  | KubeObject;

interface CustomEntry {
  group: string;
  kind?: string;
  plural: string;
  namespaced: boolean;
}

function customEntry(src: CustomKindSource): CustomEntry {
  if ("spec" in src && src.spec && typeof src.spec === "object") {
    const spec = src.spec as {
      group?: string;
      scope?: string;
      names?: { kind?: string; plural?: string };
    };
    if (!spec.group || !spec.names?.plural || !spec.names.kind) {
      throw new RbacGenerationError(
        `CustomResourceDefinition ${(src as KubeObject).metadata?.name ?? "(unnamed)"} lacks spec.group, spec.names.kind or spec.names.plural: generate it with generate/crd`,
      );
    }
    return {
      group: spec.group,
      kind: spec.names.kind,
      plural: spec.names.plural,
      namespaced: spec.scope !== "Cluster",
    };
  }
  const d = src as { group?: string; plural?: string; scope?: string; kind?: string };
  if (typeof d.group !== "string" || !d.plural) {
    throw new RbacGenerationError(
      `custom kind definition ${JSON.stringify(d)} needs string fields group and plural (and scope "Namespaced" or "Cluster")`,
    );
  }
  return { group: d.group, kind: d.kind, plural: d.plural, namespaced: d.scope !== "Cluster" };
}

/**
 * Offline resolver (no cluster): a table of common built-in kinds, plus the custom kinds given as CRDs
 * or `{group, kind, plural, scope}` objects. Definitions without `kind` match the kind whose regular
 * English plural they carry.
 */
export function builtinResolver(custom: readonly CustomKindSource[] = []): KindResolver {
  const entries = custom.map(customEntry);
  return (kind) => {
    const group = groupOf(kind.apiVersion);
    const c =
      entries.find((e) => e.group === group && e.kind === kind.kind) ??
      entries.find((e) => e.group === group && !e.kind && e.plural === defaultPlural(kind.kind));
    if (c) return { group, resource: c.plural, namespaced: c.namespaced };
    const b = knownKind(kind);
    if (b) return { group, resource: b.resource, namespaced: b.scope === "Namespaced" };
    throw new RbacGenerationError(
      `unknown kind ${kind.apiVersion} ${kind.kind}: pass its CRD or {group, kind, plural, scope} to builtinResolver, or resolve against a cluster with resolverFromClient`,
    );
  };
}
