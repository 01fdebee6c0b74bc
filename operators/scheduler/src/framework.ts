/**
 * One scheduling decision: filter every node through the profile's filters (a node stops at its first
 * failing plugin, as in kube-scheduler), rank the survivors by the weighted sum of the profile's scores,
 * and pick the best; ties go to the first node by name, so a decision can be reproduced. When no node
 * fits, the message counts the reasons across nodes in kube-scheduler's words:
 * "0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, 2 Insufficient cpu."
 */
import type { DeepReadonly, Pod } from "opkit";
import type { Profile } from "./config.ts";
import type { NodeInfo } from "./plugins/types.ts";

/** The outcome of scheduling one pod. */
export type Decision =
  | { kind: "scheduled"; node: string; scores: Readonly<Record<string, number>> }
  | { kind: "unschedulable"; message: string; reasons: Readonly<Record<string, string[]>> };

/** Why each node failed, by node name (its first failing filter's reasons). */
export function filterNodes(
  pod: DeepReadonly<Pod>,
  nodes: readonly NodeInfo[],
  profile: Profile,
): { feasible: NodeInfo[]; reasons: Record<string, string[]> } {
  const feasible: NodeInfo[] = [];
  const reasons: Record<string, string[]> = {};
  for (const n of nodes) {
    let failed: readonly string[] | undefined;
    for (const f of profile.filters) {
      failed = f.filter(pod, n);
      if (failed) break;
    }
    if (failed) reasons[n.node.metadata.name ?? ""] = [...failed];
    else feasible.push(n);
  }
  return { feasible, reasons };
}

/** The weighted total of every score plugin for each feasible node, by node name. */
export function scoreNodes(
  pod: DeepReadonly<Pod>,
  feasible: readonly NodeInfo[],
  profile: Profile,
): Record<string, number> {
  const totals = feasible.map(() => 0);
  for (const { plugin, weight } of profile.scores) {
    plugin.score(pod, feasible).forEach((s, i) => (totals[i] = (totals[i] ?? 0) + s * weight));
  }
  return Object.fromEntries(feasible.map((n, i) => [n.node.metadata.name ?? "", totals[i] ?? 0]));
}

/** kube-scheduler's FitError message for `total` nodes and the per-node reasons. */
export function unschedulableMessage(
  total: number,
  reasons: Readonly<Record<string, readonly string[]>>,
): string {
  if (total === 0) return "no nodes available to schedule pods";
  const counts = new Map<string, number>();
  for (const rs of Object.values(reasons)) for (const r of rs) counts.set(r, (counts.get(r) ?? 0) + 1);
  const parts = [...counts.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([r, c]) => `${c} ${r}`);
  return `0/${total} nodes are available: ${parts.join(", ")}.`;
}

/** Decide where `pod` goes among `nodes` under `profile`. */
export function schedule(pod: DeepReadonly<Pod>, nodes: readonly NodeInfo[], profile: Profile): Decision {
  const { feasible, reasons } = filterNodes(pod, nodes, profile);
  if (feasible.length === 0) {
    return { kind: "unschedulable", message: unschedulableMessage(nodes.length, reasons), reasons };
  }
  const scores = scoreNodes(pod, feasible, profile);
  let best = "";
  for (const name of Object.keys(scores).sort()) {
    if (best === "" || (scores[name] ?? 0) > (scores[best] ?? 0)) best = name;
  }
  return { kind: "scheduled", node: best, scores };
}
