/** Pods and nodes for the pure tests, with only the fields the plugins read. */
import type { Node, Pod } from "opkit";
import { nodeInfo, type NodeInfo } from "../src/plugins/types.ts";

export interface NodeOpts {
  cpu?: string;
  memory?: string;
  pods?: string;
  labels?: Record<string, string>;
  taints?: { key: string; value?: string; effect: string }[];
  unschedulable?: boolean;
  ready?: boolean;
  images?: { names: string[]; sizeBytes: number }[];
}

export function node(name: string, o: NodeOpts = {}): Node {
  return {
    apiVersion: "v1",
    kind: "Node",
    metadata: { name, labels: o.labels ?? {} },
    spec: { taints: o.taints, unschedulable: o.unschedulable },
    status: {
      allocatable: { cpu: o.cpu ?? "4", memory: o.memory ?? "8Gi", pods: o.pods ?? "110" },
      conditions: [{ type: "Ready", status: o.ready === false ? "False" : "True" }],
      images: o.images,
    },
  } as Node;
}

export interface PodOpts {
  cpu?: string;
  memory?: string;
  image?: string;
  nodeName?: string;
  owner?: string;
  uid?: string;
  nodeSelector?: Record<string, string>;
  tolerations?: { key?: string; operator?: string; value?: string; effect?: string }[];
  affinity?: NonNullable<Pod["spec"]>["affinity"];
}

let n = 0;
export function pod(o: PodOpts = {}): Pod {
  const requests: Record<string, string> = {};
  if (o.cpu) requests.cpu = o.cpu;
  if (o.memory) requests.memory = o.memory;
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: `p${++n}`,
      namespace: "ns",
      uid: o.uid ?? `uid-${n}`,
      ownerReferences: o.owner
        ? [{ apiVersion: "apps/v1", kind: "ReplicaSet", name: o.owner, uid: o.owner, controller: true }]
        : undefined,
    },
    spec: {
      nodeName: o.nodeName,
      nodeSelector: o.nodeSelector,
      tolerations: o.tolerations,
      affinity: o.affinity,
      containers: [{ name: "c", image: o.image ?? "app:1", resources: { requests } }],
    },
  } as Pod;
}

export function info(n: Node, pods: Pod[] = []): NodeInfo {
  return nodeInfo(n, pods);
}
