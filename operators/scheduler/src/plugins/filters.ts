/**
 * Filter plugins (kube-scheduler's predicates): each says whether a pod may run on a node and, when
 * not, why, in kube-scheduler's words so that the "0/3 nodes are available: ..." message reads the same.
 * Pure functions of the pod and the NodeInfo.
 */
import type { DeepReadonly, Pod } from "opkit";
import { podRequests, type FilterPlugin, type NodeInfo } from "./types.ts";

type Taint = { key: string; value?: string; effect: string };
type Toleration = { key?: string; operator?: string; value?: string; effect?: string };
type Requirement = { key: string; operator: string; values?: readonly string[] };

/** The taint kube's node controller puts on a cordoned node; a pod tolerating it may still go there. */
const UNSCHEDULABLE_TAINT: Taint = { key: "node.kubernetes.io/unschedulable", effect: "NoSchedule" };

/** Whether one toleration tolerates one taint (core/v1 Toleration.ToleratesTaint). */
export function tolerates(t: DeepReadonly<Toleration>, taint: DeepReadonly<Taint>): boolean {
  if (t.effect && t.effect !== taint.effect) return false;
  // An empty key with Exists tolerates every taint.
  if (t.key && t.key !== taint.key) return false;
  if (!t.key && t.operator !== "Exists") return false;
  if (t.operator === "Exists") return true;
  return (t.value ?? "") === (taint.value ?? "");
}

function toleratedBy(pod: DeepReadonly<Pod>, taint: DeepReadonly<Taint>): boolean {
  return (pod.spec?.tolerations ?? []).some((t) => tolerates(t, taint));
}

/** The node is Ready and not cordoned (unless the pod tolerates the cordon). */
export const nodeReady: FilterPlugin = {
  name: "NodeReady",
  filter(pod, { node }) {
    const ready = (node.status?.conditions ?? []).some((c) => c.type === "Ready" && c.status === "True");
    if (!ready) return ["node(s) were not ready"];
    if (node.spec?.unschedulable && !toleratedBy(pod, UNSCHEDULABLE_TAINT)) {
      return ["node(s) were unschedulable"];
    }
    return undefined;
  },
};

/** Every NoSchedule and NoExecute taint of the node is tolerated (PreferNoSchedule only matters to scores). */
export const taintToleration: FilterPlugin = {
  name: "TaintToleration",
  filter(pod, { node }) {
    const bad = (node.spec?.taints ?? []).find(
      (taint) => (taint.effect === "NoSchedule" || taint.effect === "NoExecute") && !toleratedBy(pod, taint),
    );
    return bad ? [`node(s) had untolerated taint {${bad.key}: ${bad.value ?? ""}}`] : undefined;
  },
};

/** Whether a value set satisfies one node selector requirement (In, NotIn, Exists, DoesNotExist, Gt, Lt). */
export function matchesRequirement(
  values: Readonly<Record<string, string>>,
  req: DeepReadonly<Requirement>,
): boolean {
  const has = Object.hasOwn(values, req.key);
  const v = values[req.key];
  switch (req.operator) {
    case "In":
      return has && (req.values ?? []).includes(v ?? "");
    case "NotIn":
      return !has || !(req.values ?? []).includes(v ?? "");
    case "Exists":
      return has;
    case "DoesNotExist":
      return !has;
    case "Gt":
    case "Lt": {
      // Both sides must be integers; anything else matches nothing (as kube-scheduler).
      const want = req.values?.length === 1 ? req.values[0] : undefined;
      if (!has || want === undefined || !/^-?\d+$/.test(v ?? "") || !/^-?\d+$/.test(want)) return false;
      return req.operator === "Gt" ? Number(v) > Number(want) : Number(v) < Number(want);
    }
    default:
      return false;
  }
}

/**
 * `spec.nodeSelector` (every label equal) and required node affinity (any term whose expressions and
 * fields all match; an empty term list matches nothing, as the API defines).
 */
export const nodeAffinity: FilterPlugin = {
  name: "NodeAffinity",
  filter(pod, { node }) {
    const labels = node.metadata.labels ?? {};
    const selectorOk = Object.entries(pod.spec?.nodeSelector ?? {}).every(([k, v]) => labels[k] === v);
    const required = pod.spec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution;
    const fields = { "metadata.name": node.metadata.name ?? "" };
    const affinityOk =
      !required ||
      required.nodeSelectorTerms.some(
        (term) =>
          ((term.matchExpressions?.length ?? 0) > 0 || (term.matchFields?.length ?? 0) > 0) &&
          (term.matchExpressions ?? []).every((r) => matchesRequirement(labels, r)) &&
          (term.matchFields ?? []).every((r) => matchesRequirement(fields, r)),
      );
    return selectorOk && affinityOk ? undefined : ["node(s) didn't match Pod's node affinity/selector"];
  },
};

/** The requests of frozen pods by name, sorted (the reasons' order), once per pod rather than per node. */
const sortedOfFrozen = new WeakMap<object, readonly (readonly [string, number])[]>();

function sortedRequests(pod: DeepReadonly<Pod>): readonly (readonly [string, number])[] {
  const requests = podRequests(pod);
  const known = sortedOfFrozen.get(requests);
  if (known) return known;
  const sorted = Object.entries(requests).sort(([a], [b]) => a.localeCompare(b));
  if (Object.isFrozen(requests)) sortedOfFrozen.set(requests, sorted);
  return sorted;
}

/**
 * The pod's requests fit in what the node has left: allocatable minus the requests of the pods on it,
 * for every resource the pod asks for (cpu, memory, extended resources) and one more pod.
 */
export const nodeResourcesFit: FilterPlugin = {
  name: "NodeResourcesFit",
  filter(pod, info: NodeInfo) {
    const reasons: string[] = [];
    for (const [r, want] of sortedRequests(pod)) {
      if (want <= 0) continue;
      if ((info.requested[r] ?? 0) + want > (info.allocatable[r] ?? 0)) {
        reasons.push(r === "pods" ? "Too many pods" : `Insufficient ${r}`);
      }
    }
    return reasons.length ? reasons : undefined;
  },
};

/** Arguments of the label-presence filter (seed 004, example 11-17's `labelsPresence`). */
export interface LabelPresenceArgs {
  /** Label keys to look for on the node. */
  labels: readonly string[];
  /** true: the node must carry every one of them; false: none of them. */
  presence: boolean;
}

/** Seed 004's label-presence predicate: a node qualifies only if it has (or lacks) all the labels. */
export function labelPresence(args: LabelPresenceArgs): FilterPlugin {
  return {
    name: "LabelPresence",
    filter(_pod, { node }) {
      const labels = node.metadata.labels ?? {};
      const ok = args.labels.every((k) => Object.hasOwn(labels, k) === args.presence);
      if (ok) return undefined;
      return [
        args.presence ? "node(s) didn't have the requested labels" : "node(s) had labels that must be absent",
      ];
    },
  };
}
