/**
 * The scheduling framework's vocabulary, shared by the filter and score plugins: a node with what is
 * already placed on it (`NodeInfo`), a pod's resource requests, and the plugin contracts. Plugins are
 * pure functions of these values: no I/O, no cache, no clock, so each is unit-tested on its own.
 */
import type { DeepReadonly, Node, Pod } from "opkit";
import { resourceAmount } from "../quantity.ts";

/** Resource amounts by name: CPU in millicores, memory in bytes, `pods` and extended resources as counts. */
export type Resources = Record<string, number>;

/** A node and the pods bound (or assumed bound) to it. */
export interface NodeInfo {
  node: DeepReadonly<Node>;
  /** Non-terminal pods on the node: bound in the cache, or bound by this scheduler and not seen yet. */
  pods: readonly DeepReadonly<Pod>[];
  /** The sum of those pods' requests (`pods`: their number). */
  requested: Resources;
  /**
   * The sum of those pods' cpu and memory requests as the scores count them: a pod that asks for none
   * counts kube-scheduler's non-zero defaults (`DEFAULT_CPU_MILLIS`, `DEFAULT_MEMORY_BYTES`).
   */
  nonZeroRequested: { cpu: number; memory: number };
  /** `status.allocatable` in the scheduler's units. */
  allocatable: Resources;
}

/** A filter's verdict on one node: undefined when the node fits, else the reasons it does not. */
export type FilterResult = undefined | readonly string[];

/** Decides whether a pod may run on a node at all (kube-scheduler's Filter extension point). */
export interface FilterPlugin {
  readonly name: string;
  filter(pod: DeepReadonly<Pod>, node: NodeInfo): FilterResult;
}

/**
 * Ranks the nodes that passed every filter (kube-scheduler's Score with NormalizeScore): a score from
 * 0 to 100 per node, in the order given. A plugin sees all candidates at once, so relative scores
 * (spreading) need no second pass.
 */
export interface ScorePlugin {
  readonly name: string;
  score(pod: DeepReadonly<Pod>, nodes: readonly NodeInfo[]): number[];
}

/** The highest score a plugin gives (kube-scheduler's MaxNodeScore). */
export const MAX_NODE_SCORE = 100;

/**
 * What a pod without requests counts as when scoring (kube-scheduler's non-zero defaults: 100m CPU,
 * 200 MiB), so that pods without requests still spread instead of piling onto one node.
 */
export const DEFAULT_CPU_MILLIS = 100;
export const DEFAULT_MEMORY_BYTES = 200 * 2 ** 20;

/**
 * The requests of frozen pods (the cache's objects, which never change: an update is a new object), so
 * that each is parsed once rather than at every decision that counts it.
 */
const requestsOfFrozen = new WeakMap<object, Readonly<Resources>>();

/**
 * A pod's requests as the node sees them (kube-scheduler's computePodResourceRequest): the sum over
 * its containers, at least the largest init container's, plus the pod overhead; `pods` is 1. The
 * result is shared for a frozen pod: callers must not change it.
 */
export function podRequests(pod: DeepReadonly<Pod>): Readonly<Resources> {
  const known = requestsOfFrozen.get(pod);
  if (known) return known;
  const sum = computeRequests(pod);
  if (Object.isFrozen(pod)) requestsOfFrozen.set(pod, Object.freeze(sum));
  return sum;
}

/** The cpu and memory a pod counts as when scoring: its requests, or the non-zero defaults. */
export function scoringRequests(pod: DeepReadonly<Pod>): { cpu: number; memory: number } {
  const r = podRequests(pod);
  return { cpu: r.cpu || DEFAULT_CPU_MILLIS, memory: r.memory || DEFAULT_MEMORY_BYTES };
}

function computeRequests(pod: DeepReadonly<Pod>): Resources {
  const sum: Resources = {};
  for (const c of pod.spec?.containers ?? []) {
    for (const [r, q] of Object.entries(c.resources?.requests ?? {})) {
      sum[r] = (sum[r] ?? 0) + resourceAmount(r, q);
    }
  }
  for (const c of pod.spec?.initContainers ?? []) {
    for (const [r, q] of Object.entries(c.resources?.requests ?? {})) {
      sum[r] = Math.max(sum[r] ?? 0, resourceAmount(r, q));
    }
  }
  for (const [r, q] of Object.entries(pod.spec?.overhead ?? {})) {
    sum[r] = (sum[r] ?? 0) + resourceAmount(r, q);
  }
  sum.pods = 1;
  return sum;
}

/** The allocatable resources of a node in the scheduler's units. */
export function nodeAllocatable(node: DeepReadonly<Node>): Resources {
  const out: Resources = {};
  for (const [r, q] of Object.entries(node.status?.allocatable ?? {})) out[r] = resourceAmount(r, q);
  return out;
}

/** A NodeInfo from a node and the pods on it. */
export function nodeInfo(node: DeepReadonly<Node>, pods: readonly DeepReadonly<Pod>[]): NodeInfo {
  const requested: Resources = {};
  const nonZeroRequested = { cpu: 0, memory: 0 };
  for (const p of pods) {
    for (const [r, v] of Object.entries(podRequests(p))) requested[r] = (requested[r] ?? 0) + v;
    const s = scoringRequests(p);
    nonZeroRequested.cpu += s.cpu;
    nonZeroRequested.memory += s.memory;
  }
  return { node, pods, requested, nonZeroRequested, allocatable: nodeAllocatable(node) };
}
