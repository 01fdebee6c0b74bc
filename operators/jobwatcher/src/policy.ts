/**
 * The deletion policy, as pure functions of a Job and the watchers: which watchers cover a Job, when a
 * finished Job expires, and the merge rule when several watchers cover one Job.
 *
 * Merge rule (deletion cannot be undone, so the most patient watcher wins): a Job's TTL is the longest
 * TTL among the valid watchers that match it, for its outcome (succeeded or failed); a watcher without a
 * TTL for that outcome counts as infinite, so it keeps the Job. A watcher whose spec is invalid deletes
 * nothing and, while it is invalid, holds back every deletion within its reach (its namespace, or every
 * namespace for a ClusterJobWatcher): it may have meant a longer TTL. The watcher whose TTL decided is
 * credited with the deletion (ties: ClusterJobWatchers before JobWatchers, then by namespace and name).
 */
import type { DeepReadonly, Job } from "opkit";
import type { RE2JS } from "re2js";
import { ClusterJobWatcher, type AnyJobWatcher } from "./api/v1/jobwatcher.ts";
import { compilePattern, validateJobWatcherSpec, type FieldError } from "./validation.ts";

export type Outcome = "succeeded" | "failed";

/** Which watcher: enough to find it again and to credit it. */
export interface WatcherRef {
  kind: "JobWatcher" | "ClusterJobWatcher";
  namespace?: string;
  name: string;
  uid: string;
}

/** A watcher ready for matching: patterns compiled once per object version. */
export interface CompiledWatcher {
  ref: WatcherRef;
  /** A JobWatcher's own namespace: it never covers Jobs elsewhere. Undefined for a ClusterJobWatcher. */
  namespace?: string;
  namespacePatterns: RE2JS[];
  jobNamePatterns: RE2JS[];
  ttlSeconds: Record<Outcome, number | undefined>;
  checkIntervalSeconds: number;
  /** Non-empty: the spec is invalid; the watcher deletes nothing and holds back its reach. */
  errors: FieldError[];
}

// Cache objects are frozen and replaced on every change, so the object itself keys its compiled form,
// and the entry goes when the cache drops the object.
const compiledCache = new WeakMap<object, CompiledWatcher>();

export function watcherRef(w: DeepReadonly<AnyJobWatcher>): WatcherRef {
  const cluster = w.kind === ClusterJobWatcher.kind;
  return {
    kind: cluster ? "ClusterJobWatcher" : "JobWatcher",
    namespace: cluster ? undefined : w.metadata.namespace,
    name: w.metadata.name ?? "",
    uid: w.metadata.uid ?? "",
  };
}

export function compileWatcher(w: DeepReadonly<AnyJobWatcher>): CompiledWatcher {
  const hit = compiledCache.get(w);
  if (hit) return hit;
  const ref = watcherRef(w);
  const errors = validateJobWatcherSpec(w.spec);
  const compile = (list: readonly string[] | undefined): RE2JS[] =>
    errors.length > 0
      ? []
      : (list ?? []).map((p) => compilePattern(p)).filter((r): r is RE2JS => typeof r !== "string");
  const out: CompiledWatcher = {
    ref,
    namespace: ref.kind === "JobWatcher" ? w.metadata.namespace : undefined,
    namespacePatterns: compile(w.spec.namespacePatterns),
    jobNamePatterns: compile(w.spec.jobNamePatterns),
    ttlSeconds: { succeeded: w.spec.ttlSecondsAfterSucceeded, failed: w.spec.ttlSecondsAfterFailed },
    checkIntervalSeconds: w.spec.checkIntervalSeconds,
    errors,
  };
  compiledCache.set(w, out);
  return out;
}

/** Whether a watcher may act on Jobs of this namespace at all (the permission boundary). */
export function reaches(w: CompiledWatcher, namespace: string): boolean {
  return w.namespace === undefined || w.namespace === namespace;
}

/** Whether a valid watcher covers this Job (reach, namespace patterns, name patterns). */
export function covers(w: CompiledWatcher, namespace: string, name: string): boolean {
  if (w.errors.length > 0 || !reaches(w, namespace)) return false;
  const any = (ps: RE2JS[], s: string) => ps.length === 0 || ps.some((p) => p.matches(s));
  return any(w.namespacePatterns, namespace) && any(w.jobNamePatterns, name);
}

/** How a finished Job ended and when; undefined while it runs (or has no usable finish time). */
export function finished(job: DeepReadonly<Job>): { outcome: Outcome; at: number } | undefined {
  for (const c of job.status?.conditions ?? []) {
    if (c.status !== "True" || (c.type !== "Complete" && c.type !== "Failed")) continue;
    const when = c.lastTransitionTime ?? (c.type === "Complete" ? job.status?.completionTime : undefined);
    const at = when ? Date.parse(when) : NaN;
    if (Number.isNaN(at)) return undefined;
    return { outcome: c.type === "Complete" ? "succeeded" : "failed", at };
  }
  return undefined;
}

export type Decision =
  | {
      action: "keep";
      why: "deleting" | "suspended" | "running" | "uncovered" | "no-ttl" | "held";
      /** For "held": the invalid watcher that holds the Job back. */
      heldBy?: WatcherRef;
    }
  | {
      action: "delete";
      /** Epoch ms at which the Job expires (finish time + TTL). */
      at: number;
      outcome: Outcome;
      finishedAt: number;
      ttlSeconds: number;
      /** The watcher whose TTL decided (the longest among those that cover the Job). */
      decidedBy: WatcherRef;
    };

function order(a: WatcherRef, b: WatcherRef): number {
  const ka = `${a.kind === "ClusterJobWatcher" ? 0 : 1}/${a.namespace ?? ""}/${a.name}`;
  const kb = `${b.kind === "ClusterJobWatcher" ? 0 : 1}/${b.namespace ?? ""}/${b.name}`;
  return ka < kb ? -1 : ka > kb ? 1 : 0;
}

/** Apply the merge rule to one Job and every watcher that might cover it. */
export function decide(job: DeepReadonly<Job>, watchers: readonly CompiledWatcher[]): Decision {
  if (job.metadata.deletionTimestamp) return { action: "keep", why: "deleting" };
  if (job.spec?.suspend) return { action: "keep", why: "suspended" };
  const done = finished(job);
  if (!done) return { action: "keep", why: "running" };
  const namespace = job.metadata.namespace ?? "";
  const name = job.metadata.name ?? "";
  const invalid = watchers
    .filter((w) => w.errors.length > 0 && reaches(w, namespace))
    .sort((a, b) => order(a.ref, b.ref));
  if (invalid[0]) return { action: "keep", why: "held", heldBy: invalid[0].ref };
  const covering = watchers.filter((w) => covers(w, namespace, name)).sort((a, b) => order(a.ref, b.ref));
  if (covering.length === 0) return { action: "keep", why: "uncovered" };
  let best: CompiledWatcher | undefined;
  for (const w of covering) {
    const ttl = w.ttlSeconds[done.outcome];
    if (ttl === undefined) return { action: "keep", why: "no-ttl" };
    if (!best || ttl > (best.ttlSeconds[done.outcome] ?? 0)) best = w;
  }
  const chosen = best as CompiledWatcher;
  const ttlSeconds = chosen.ttlSeconds[done.outcome] as number;
  return {
    action: "delete",
    at: done.at + ttlSeconds * 1000,
    outcome: done.outcome,
    finishedAt: done.at,
    ttlSeconds,
    decidedBy: chosen.ref,
  };
}
