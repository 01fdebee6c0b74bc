/**
 * Status conditions with the semantics of apimachinery's `meta.SetStatusCondition`: one condition per
 * type, and `lastTransitionTime` moves only when the status flips, so users can read how long an object
 * has been (un)ready. Every function is pure: inputs are never mutated, and `changed` tells the caller
 * whether a status write is needed at all (writing unchanged status would only churn resourceVersions).
 *
 * The functions read any condition list keyed by type (`ConditionLike`: metav1.Condition, or the older
 * style of Deployments with `lastUpdateTime` and optional reason and message, as `conditions()` in the
 * kind schemas allows); setCondition writes metav1.Condition.
 */

export type ConditionStatus = "True" | "False" | "Unknown";

/** `metav1.Condition` as it travels in JSON. */
export interface Condition {
  /** CamelCase type, e.g. "Ready"; unique within the list. */
  type: string;
  /** Whether the condition holds: "True", "False", or "Unknown" when it cannot be determined yet. */
  status: ConditionStatus;
  /** CamelCase, machine-readable reason for the last transition or update. */
  reason: string;
  /** Human-readable detail; may be empty. */
  message: string;
  /** The `metadata.generation` the condition was computed from. */
  observedGeneration?: number;
  /** RFC 3339 time of the last status change. */
  lastTransitionTime: string;
}

/**
 * Any condition of a list keyed by `type`: metav1.Condition or the older Deployment-style ones (which add
 * `lastUpdateTime` and leave reason and message optional). Extra fields are kept as they are.
 */
export interface ConditionLike {
  /** The condition's type, e.g. "Available". */
  type: string;
  /** "True", "False" or "Unknown". */
  status: string;
  /** Machine-readable reason for the last change (optional in the older condition style). */
  reason?: string;
  /** Human-readable detail. */
  message?: string;
  /** The generation the condition was computed from, if recorded. */
  observedGeneration?: number;
  /** When the status last changed (RFC 3339), if recorded. */
  lastTransitionTime?: string;
}

/** What a caller states; the transition time is managed unless given explicitly. */
export interface NewCondition {
  /** CamelCase type, e.g. "Ready". */
  type: string;
  /** Whether the condition holds. */
  status: ConditionStatus;
  /** CamelCase, machine-readable reason, e.g. "MinimumReplicasUnavailable"; users and tools branch on it. */
  reason: string;
  /** Human-readable detail; default empty. */
  message?: string;
  /** The `metadata.generation` the condition was computed from, so readers know whether it is current. */
  observedGeneration?: number;
  /** Used only when the status flips or the condition is new; defaults to `now`. */
  lastTransitionTime?: string;
}

/** The new list: the conditions that were there (their own type) plus the one set (a metav1.Condition). */
export interface ConditionsResult<C extends ConditionLike = Condition> {
  /** The full list to write back into the status. */
  conditions: (C | Condition)[];
  /** False when the result is identical to the input (no status write needed). */
  changed: boolean;
}

/**
 * `metav1.Time` serializes with whole seconds; producing the same form keeps the value stable across a
 * round trip through Go clients and makes repeated status comparisons exact.
 */
export function formatConditionTime(d: Date): string {
  return d.toISOString().replace(/\.\d+Z$/, "Z");
}

/** Set (add or update) the condition of `c.type`. */
export function setCondition<C extends ConditionLike = Condition>(
  conditions: readonly C[] | undefined,
  c: NewCondition,
  now: Date = new Date(),
): ConditionsResult<C> {
  const list = conditions ?? [];
  const index = list.findIndex((x) => x.type === c.type);
  const existing = index >= 0 ? list[index] : undefined;
  const flipped = existing === undefined || existing.status !== c.status;
  const next: Condition = {
    type: c.type,
    status: c.status,
    reason: c.reason,
    message: c.message ?? "",
    ...(c.observedGeneration !== undefined ? { observedGeneration: c.observedGeneration } : {}),
    lastTransitionTime: flipped
      ? (c.lastTransitionTime ?? formatConditionTime(now))
      : (existing?.lastTransitionTime ?? formatConditionTime(now)),
  };
  if (existing !== undefined && sameCondition(existing, next)) {
    return { conditions: [...list], changed: false };
  }
  const out: (C | Condition)[] = [...list];
  if (index >= 0) out[index] = next;
  else out.push(next);
  return { conditions: out, changed: true };
}

function sameCondition(a: ConditionLike, b: Condition): boolean {
  return (
    a.type === b.type &&
    a.status === b.status &&
    a.reason === b.reason &&
    a.message === b.message &&
    a.observedGeneration === b.observedGeneration &&
    a.lastTransitionTime === b.lastTransitionTime
  );
}

/** The condition of `type` in a list, or undefined; works on both metav1 and Deployment-style conditions. */
export function getCondition<C extends ConditionLike>(
  conditions: readonly C[] | undefined,
  type: string,
): C | undefined {
  return conditions?.find((c) => c.type === type);
}

/** True only for status "True"; a missing condition counts as not true. */
export function isConditionTrue(conditions: readonly ConditionLike[] | undefined, type: string): boolean {
  return getCondition(conditions, type)?.status === "True";
}

/** Remove the condition of `type`, if present. */
export function removeCondition<C extends ConditionLike = Condition>(
  conditions: readonly C[] | undefined,
  type: string,
): ConditionsResult<C> {
  const list = conditions ?? [];
  const out = list.filter((c) => c.type !== type);
  return { conditions: out, changed: out.length !== list.length };
}
