/**
 * Simulated nodes: the Node objects kwok keeps Ready. `up` creates the default ones; tests add nodes of
 * other sizes, labels and taints later (custom schedulers, taints and tolerations, bin packing). A node
 * is an API object plus kwok's annotation; kwok then plays its kubelet (status, heartbeats, pods).
 */
import { realClock, type Clock } from "../clock/index.ts";
import type { KubeClient } from "../client/client.ts";
import { Nodes, type Node } from "../client/builtins.ts";
import { sleep } from "./eventually.ts";
import { NODE_ANNOTATION } from "./flags.ts";
import { ComponentError } from "./launch.ts";
import { InvalidEnvOptionError, checkResources } from "./settings.ts";
import type { NodeResources } from "./state.ts";

/** A node taint (core/v1 Taint without the timestamp). */
export interface NodeTaint {
  /** The taint key. */
  key: string;
  /** The taint value (optional). */
  value?: string;
  /** What happens to pods that do not tolerate it: not scheduled, scheduled only if needed, or evicted. */
  effect: "NoSchedule" | "PreferNoSchedule" | "NoExecute";
}

/** A simulated node to create. */
export interface NodeSpec {
  /** The node name (a DNS subdomain). */
  name: string;
  /** Labels on top of the standard ones (hostname, os, arch, `type: kwok`). */
  labels?: Record<string, string>;
  /** Taints, e.g. so that only a test's own pods (which tolerate it) land on its nodes. */
  taints?: NodeTaint[];
  /**
   * Capacity (and allocatable) over the env's default node size: `cpu`, `memory`, `pods` and extended
   * resources such as `example.com/gpu`, as quantities.
   */
  capacity?: Record<string, string | number>;
  /** Mark the node unschedulable (cordoned). */
  unschedulable?: boolean;
}

const DNS_SUBDOMAIN_RE = /^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$/;
const EFFECTS = ["NoSchedule", "PreferNoSchedule", "NoExecute"];

/** The Node object for `spec` with `defaults` as its size; throws InvalidEnvOptionError on bad input. */
export function nodeObject(spec: NodeSpec, defaults: NodeResources): Node {
  const name = String(spec.name ?? "");
  if (!DNS_SUBDOMAIN_RE.test(name)) {
    throw new InvalidEnvOptionError(
      "node name",
      `"${name.slice(0, 80)}" is not a valid node name (lowercase letters, digits, '-' and '.')`,
    );
  }
  const resources = { ...defaults, ...checkResources(`node ${name} capacity`, spec.capacity ?? {}) };
  for (const t of spec.taints ?? []) {
    if (!t.key || !EFFECTS.includes(t.effect)) {
      throw new InvalidEnvOptionError(
        `node ${name} taints`,
        `each taint needs a key and an effect of ${EFFECTS.join(", ")}, got ${JSON.stringify(t)}`,
      );
    }
  }
  return {
    apiVersion: "v1",
    kind: "Node",
    metadata: {
      name,
      annotations: { [NODE_ANNOTATION]: "fake", "node.alpha.kubernetes.io/ttl": "0" },
      labels: {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "node-role.kubernetes.io/worker": "",
        type: "kwok",
        ...spec.labels,
      },
    },
    spec: {
      taints: spec.taints?.map((t) => ({ key: t.key, value: t.value, effect: t.effect })),
      unschedulable: spec.unschedulable || undefined,
    },
    status: { allocatable: resources, capacity: resources },
  };
}

/** The names of the nodes `up` creates: opkit-node-0 … opkit-node-(count-1). */
export function defaultNodeSpecs(count: number): NodeSpec[] {
  return Array.from({ length: count }, (_, i) => ({ name: `opkit-node-${i}` }));
}

function isReady(n: Node): boolean {
  return (n.status?.conditions ?? []).some((c) => c.type === "Ready" && c.status === "True");
}

/**
 * Create the nodes and wait until kwok reports every one Ready. The objects are built (and validated)
 * before the first is created, so bad input creates nothing.
 */
export async function createNodes(
  client: KubeClient,
  specs: NodeSpec[],
  defaults: NodeResources,
  wait: { timeoutMs: number; kwokLog: string; clock?: Clock },
): Promise<Node[]> {
  const objects = specs.map((s) => nodeObject(s, defaults));
  const names = new Set<string>();
  for (const o of objects) {
    if (names.has(o.metadata.name ?? "")) {
      throw new InvalidEnvOptionError("node name", `"${o.metadata.name}" is given twice`);
    }
    names.add(o.metadata.name ?? "");
  }
  for (const o of objects) await client.create(o);
  const clock = wait.clock ?? realClock;
  const deadline = clock.now() + wait.timeoutMs;
  for (;;) {
    const ready = (await client.list(Nodes)).items.filter(
      (n) => names.has(n.metadata.name ?? "") && isReady(n),
    );
    if (ready.length === names.size) return ready;
    if (clock.now() > deadline) {
      throw new ComponentError(
        "kwok",
        `made ${ready.length} of ${names.size} nodes Ready within ${wait.timeoutMs / 1000}s`,
        wait.kwokLog,
      );
    }
    await sleep(250, clock);
  }
}
