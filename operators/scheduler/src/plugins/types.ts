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
 * A pod's requests as the node sees them (kube-scheduler's computePodResourceRequest): the sum over
 * its containers, at least the largest init container's, plus the pod overhead; `pods` is 1.
 */
export function podRequests(pod: DeepReadonly<Pod>): Resources {
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
  for (const p of pods) {
    for (const [r, v] of Object.entries(podRequests(p))) requested[r] = (requested[r] ?? 0) + v;
  }
  return { node, pods, requested, allocatable: nodeAllocatable(node) };
}
