/**
 * Score plugins (kube-scheduler's priorities): each ranks the nodes that passed every filter from 0 to
 * 100; the profile's weights combine them. Pure functions of the pod and the candidate NodeInfos.
 */
import type { DeepReadonly, Pod } from "opkit";
import { MAX_NODE_SCORE, scoringRequests, type NodeInfo, type ScorePlugin } from "./types.ts";

export { DEFAULT_CPU_MILLIS, DEFAULT_MEMORY_BYTES } from "./types.ts";

/** The node's requested share of cpu and memory once `pod` is placed there, each in [0, 1]. */
function fractions(pod: DeepReadonly<Pod>, info: NodeInfo): { cpu: number; memory: number } {
  const add = scoringRequests(pod);
  // Already-placed pods count with their non-zero defaults too.
  const share = (r: "cpu" | "memory"): number => {
    const alloc = info.allocatable[r] ?? 0;
    return alloc > 0 ? Math.min(1, (info.nonZeroRequested[r] + add[r]) / alloc) : 1;
  };
  return { cpu: share("cpu"), memory: share("memory") };
}

/** Prefers the emptiest node: the mean free share of cpu and memory after placing the pod. */
export const leastAllocated: ScorePlugin = {
  name: "LeastAllocated",
  score(pod, nodes) {
    return nodes.map((n) => {
      const f = fractions(pod, n);
      return Math.round(((1 - f.cpu + (1 - f.memory)) / 2) * MAX_NODE_SCORE);
    });
  },
};

/** Prefers nodes whose cpu and memory shares stay even after placing the pod (one minus their spread). */
export const balancedAllocation: ScorePlugin = {
  name: "BalancedAllocation",
  score(pod, nodes) {
    return nodes.map((n) => {
      const f = fractions(pod, n);
      // The standard deviation of two values is half their distance.
      return Math.round((1 - Math.abs(f.cpu - f.memory) / 2) * MAX_NODE_SCORE);
    });
  },
};

/** kube-scheduler's image locality thresholds: below 23 MB scores 0, 1000 MB per container scores 100. */
const MIN_IMAGE_BYTES = 23 * 1024 * 1024;
const MAX_IMAGE_BYTES_PER_CONTAINER = 1000 * 1024 * 1024;

/** An image reference with the registry and tag defaults made explicit, as nodes report them. */
export function normalizeImage(image: string): string {
  let ref = image;
  const slash = ref.indexOf("/");
  const first = slash < 0 ? "" : ref.slice(0, slash);
  if (slash < 0) ref = `docker.io/library/${ref}`;
  else if (!first.includes(".") && !first.includes(":") && first !== "localhost") ref = `docker.io/${ref}`;
  const lastPart = ref.slice(ref.lastIndexOf("/") + 1);
  if (!lastPart.includes(":") && !lastPart.includes("@")) ref = `${ref}:latest`;
  return ref;
}

/**
 * Prefers nodes that already hold the pod's images (`status.images`), by their total size between
 * kube-scheduler's thresholds, so that large images are not pulled again.
 */
export const imageLocality: ScorePlugin = {
  name: "ImageLocality",
  score(pod, nodes) {
    const containers = [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])];
    const wanted = new Set(containers.map((c) => normalizeImage(c.image ?? "")));
    const max = MAX_IMAGE_BYTES_PER_CONTAINER * Math.max(1, containers.length);
    return nodes.map((n) => {
      let sum = 0;
      for (const img of n.node.status?.images ?? []) {
        if ((img.names ?? []).some((name) => wanted.has(normalizeImage(name)))) sum += img.sizeBytes ?? 0;
      }
      const clamped = Math.min(Math.max(sum, MIN_IMAGE_BYTES), max);
      return Math.round(((clamped - MIN_IMAGE_BYTES) / (max - MIN_IMAGE_BYTES)) * MAX_NODE_SCORE);
    });
  },
};

/** The uid of the pod's controlling owner (ReplicaSet, StatefulSet, Job...), if any. */
function ownerUid(pod: DeepReadonly<Pod>): string | undefined {
  return pod.metadata.ownerReferences?.find((r) => r.controller)?.uid;
}

/**
 * Spreads pods of the same owner: a node with none of the owner's pods scores 100, the one with the
 * most scores 0. A pod without a controlling owner scores 100 everywhere.
 */
export const ownerSpread: ScorePlugin = {
  name: "OwnerSpread",
  score(pod, nodes) {
    const uid = ownerUid(pod);
    const counts = nodes.map((n) =>
      uid ? n.pods.filter((p) => ownerUid(p) === uid && p.metadata.uid !== pod.metadata.uid).length : 0,
    );
    const most = Math.max(0, ...counts);
    return counts.map((c) =>
      most === 0 ? MAX_NODE_SCORE : Math.round(((most - c) / most) * MAX_NODE_SCORE),
    );
  },
};
