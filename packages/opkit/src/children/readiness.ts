/**
 * When is a child "ready"? Built-in answers for the workload kinds whose status says so, and "it
 * exists" for everything else (a ConfigMap is as ready as it will ever be once stored). Rules are
 * keyed by API group and kind, not version, because every version of a kind describes the same object.
 */
import {
  groupOf,
  type DeepReadonly,
  type KindRef,
  type KubeObject,
  type ReadonlyKubeObject,
} from "../client/types.ts";

/**
 * How to tell whether a child of one kind is ready; add your own for custom kinds whose readiness is in their
 * status.
 */
export interface ReadinessRule {
  /** The API group of the kind ("" for the core group). */
  group: string;
  /** The kind the rule is for. */
  kind: string;
  /**
   * True when the child is ready (e.g. its status reports the wanted replicas for the current generation).
   */
  isReady: (obj: ReadonlyKubeObject) => boolean;
}

/** A rule for one kind, typed by its kind reference: `readinessRule(WebApps, (w) => w.status?.ok)`. */
export function readinessRule<T extends KubeObject>(
  kind: KindRef<T>,
  isReady: (obj: DeepReadonly<T>) => boolean,
): ReadinessRule {
  return {
    group: groupOf(kind.apiVersion),
    kind: kind.kind,
    isReady: (obj) => isReady(obj as DeepReadonly<T>),
  };
}

type Workload = DeepReadonly<WorkloadShape>;
interface WorkloadShape extends KubeObject {
  spec?: {
    replicas?: number;
    updateStrategy?: { type?: string; rollingUpdate?: { partition?: number } };
  };
  status?: {
    observedGeneration?: number;
    replicas?: number;
    updatedReplicas?: number;
    readyReplicas?: number;
    availableReplicas?: number;
    currentRevision?: string;
    updateRevision?: string;
    conditions?: { type: string; status: string }[];
  };
}

/** The controller has seen the current spec; counts from an older generation prove nothing. */
function observedCurrent(obj: Workload): boolean {
  return (obj.status?.observedGeneration ?? 0) >= (obj.metadata.generation ?? 0);
}

function wanted(obj: Workload): number {
  return obj.spec?.replicas ?? 1;
}

function conditionTrue(obj: Workload, type: string): boolean {
  return obj.status?.conditions?.some((c) => c.type === type && c.status === "True") ?? false;
}

/**
 * The readiness rules for the built-in workloads (Deployments, StatefulSets, DaemonSets, Jobs, ...): ready
 * means the status reports the current generation rolled out. Kinds without a rule are ready once they exist.
 */
export const BUILTIN_READINESS: readonly ReadinessRule[] = [
  {
    group: "apps",
    kind: "Deployment",
    // Updated as well as available: during a rollout the old pods alone can still count as available.
    isReady: (d: Workload) =>
      observedCurrent(d) &&
      (d.status?.updatedReplicas ?? 0) >= wanted(d) &&
      (d.status?.availableReplicas ?? 0) >= wanted(d),
  },
  {
    group: "apps",
    kind: "StatefulSet",
    // As `kubectl rollout status`, and the pods must be of the update revision (above the partition):
    // counting ready pods alone calls a StatefulSet ready whose old pods are ready but never replaced.
    isReady: (s: Workload) => {
      if (!observedCurrent(s) || (s.status?.readyReplicas ?? 0) < wanted(s)) return false;
      if ((s.spec?.updateStrategy?.type ?? "RollingUpdate") !== "RollingUpdate") return true;
      const partition = s.spec?.updateStrategy?.rollingUpdate?.partition ?? 0;
      if ((s.status?.updatedReplicas ?? 0) < wanted(s) - partition) return false;
      return partition > 0 || s.status?.updateRevision === s.status?.currentRevision;
    },
  },
  { group: "batch", kind: "Job", isReady: (j: Workload) => conditionTrue(j, "Complete") },
  { group: "", kind: "Pod", isReady: (p: Workload) => conditionTrue(p, "Ready") },
];

/** Whether `obj` is ready: the first matching rule of `overrides`, then the built-ins, else true. */
export function isChildReady(obj: ReadonlyKubeObject, overrides: readonly ReadinessRule[] = []): boolean {
  const group = groupOf(obj.apiVersion ?? "");
  const rule = [...overrides, ...BUILTIN_READINESS].find((r) => r.group === group && r.kind === obj.kind);
  return rule ? rule.isReady(obj) : true;
}
