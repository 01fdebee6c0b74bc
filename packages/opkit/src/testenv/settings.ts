/**
 * The env's settings: defaults fit for scale tests, and the validation of what a user passes to
 * `opkit env up` or `ControlPlane.up` (node count and size, feature gates). Everything a user types is
 * checked here with an error naming the flag, before any process starts. Pure: no I/O except reading
 * the machine's network interfaces for the advertise address.
 */
import { networkInterfaces } from "node:os";
import type { EnvSettings, NodeResources } from "./state.ts";
import { resolveKubernetesVersion } from "./versions.ts";

/** Nodes `up` creates unless told otherwise. */
export const DEFAULT_NODES = 3;
/**
 * A /16: 65,534 Service IPs. The /24 envtest uses runs out at about 250 Services ("failed to allocate a
 * serviceIP"), far below what a scale test creates. The first address (10.0.0.1) is the `kubernetes`
 * Service, which the serving certificate names.
 */
export const DEFAULT_SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/16";
/**
 * kube-controller-manager and kube-scheduler default to 20 qps / burst 30 towards the apiserver, which
 * throttles a 1,000-pod Deployment to minutes; a local apiserver serves ten times that easily.
 */
export const DEFAULT_COMPONENT_QPS = 200;
/** Burst of kube-controller-manager and kube-scheduler towards the API server (twice the qps). */
export const DEFAULT_COMPONENT_BURST = 400;
/** Pods per node by default: 1,000 pods fit on one node (a kubelet's default is 110). */
export const DEFAULT_MAX_PODS = 1000;
/** CPU capacity of each simulated node by default: large, so tests are not limited by it. */
export const DEFAULT_NODE_CPU = "32";
/** Memory capacity of each simulated node by default. */
export const DEFAULT_NODE_MEMORY = "128Gi";

const MAX_NODES = 500;
const MAX_PODS_LIMIT = 100_000;

/** A bad value for one of the env's options; `option` is the flag as the CLI spells it. */
export class InvalidEnvOptionError extends Error {
  /** The option that is wrong, as the CLI spells it, e.g. "--nodes". */
  readonly option: string;
  constructor(option: string, message: string) {
    super(`${option}: ${message}`);
    this.name = "InvalidEnvOptionError";
    this.option = option;
  }
}

/** The knobs of `up` that shape the env (all optional; defaults above). */
export interface EnvOptions {
  /** Simulated nodes created at start (default 3, at most 500). */
  nodes?: number;
  /** Pod capacity of each node (default 1000). */
  maxPods?: number;
  /** CPU capacity of each node as a quantity (default "32"). */
  nodeCpu?: string;
  /** Memory capacity of each node as a quantity (default "128Gi"). */
  nodeMemory?: string;
  /** Feature gates, as a map or as the `Key=true,Other=false` text of `--feature-gates`. */
  featureGates?: Record<string, boolean> | string;
  /**
   * API groups/versions kube-apiserver serves beyond its defaults (or stops serving), as a map or as the
   * `group/version=true,...` text of `--runtime-config`, e.g. `storagemigration.k8s.io/v1beta1=true` for
   * the StorageVersionMigration API, beta and off by default in 1.36.
   */
  runtimeConfig?: Record<string, boolean> | string;
  /**
   * The Kubernetes release: a supported minor ("1.34", its tested patch) or a full version ("v1.34.2");
   * default `$OPKIT_KUBERNETES_VERSION`, else KUBERNETES_VERSION.
   */
  kubernetesVersion?: string;
}

// resource.Quantity's syntax: a decimal number with an optional binary or decimal suffix or exponent.
const QUANTITY_RE = /^(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|[KMGTPE]i|[mkMGTPE]|n|u)?$/;
const GATE_RE = /^[A-Za-z][A-Za-z0-9]{0,99}$/;
// A resource name: an optional DNS-style prefix and a name (e.g. "cpu", "example.com/gpu").
const RESOURCE_RE =
  /^([a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?\/)?[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$/;

/** A Kubernetes quantity (e.g. "4", "500m", "16Gi"), trimmed; throws naming `option` otherwise. */
export function checkQuantity(option: string, value: string | number): string {
  const text = String(value).trim();
  if (text.length > 40 || !QUANTITY_RE.test(text)) {
    throw new InvalidEnvOptionError(
      option,
      `"${text.slice(0, 40)}" is not a Kubernetes quantity: use a number with an optional suffix such as 500m, 8, 16Gi`,
    );
  }
  return text;
}

function checkInteger(option: string, value: number, min: number, max: number): number {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new InvalidEnvOptionError(option, `must be a whole number from ${min} to ${max}, got ${value}`);
  }
  return value;
}

/**
 * Parse `--feature-gates` text (`Key=true,Other=false`, as the Kubernetes components take it) into a
 * map. Keys must be gate names, values true or false; a key given twice is an error, not a silent
 * last-wins.
 */
export function parseFeatureGates(text: string): Record<string, boolean> {
  const gates: Record<string, boolean> = {};
  for (const raw of text.split(",")) {
    const item = raw.trim();
    if (!item) continue;
    const eq = item.indexOf("=");
    const key = (eq < 0 ? item : item.slice(0, eq)).trim();
    const value =
      eq < 0
        ? ""
        : item
            .slice(eq + 1)
            .trim()
            .toLowerCase();
    if (!GATE_RE.test(key)) {
      throw new InvalidEnvOptionError(
        "--feature-gates",
        `"${key.slice(0, 100)}" is not a feature gate name (letters and digits, e.g. ShardedListAndWatch)`,
      );
    }
    if (value !== "true" && value !== "false") {
      throw new InvalidEnvOptionError(
        "--feature-gates",
        `give ${key}=true or ${key}=false, got "${item.slice(0, 120)}"`,
      );
    }
    if (key in gates) throw new InvalidEnvOptionError("--feature-gates", `${key} is given twice`);
    gates[key] = value === "true";
  }
  return gates;
}

/** Check a feature-gate map given in code: gate names as keys, booleans as values. */
export function checkFeatureGates(gates: Record<string, boolean>): Record<string, boolean> {
  const out: Record<string, boolean> = {};
  for (const [key, value] of Object.entries(gates)) {
    if (!GATE_RE.test(key)) {
      throw new InvalidEnvOptionError("featureGates", `"${key.slice(0, 100)}" is not a feature gate name`);
    }
    if (typeof value !== "boolean") {
      throw new InvalidEnvOptionError(
        "featureGates",
        `${key} must be true or false, got ${JSON.stringify(value)}`,
      );
    }
    out[key] = value;
  }
  return out;
}

// An API group/version of --runtime-config: "api/all", "v1", or "<group>/<version>".
const API_VERSION_RE = /^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?\/)?[a-z0-9]{1,63}$/;

/**
 * Parse the `--runtime-config` text (`storagemigration.k8s.io/v1beta1=true,...`) into a map; the errors
 * name the flag and the entry.
 */
export function parseRuntimeConfig(text: string): Record<string, boolean> {
  const out: Record<string, boolean> = {};
  for (const item of text
    .split(",")
    .map((i) => i.trim())
    .filter(Boolean)) {
    const [key = "", value = "true"] = item.split("=");
    if (!API_VERSION_RE.test(key) || (value !== "true" && value !== "false"))
      throw new InvalidEnvOptionError(
        "--runtime-config",
        `give <group>/<version>=true or =false (e.g. storagemigration.k8s.io/v1beta1=true), got "${item.slice(0, 120)}"`,
      );
    out[key] = value === "true";
  }
  return out;
}

/** Check a runtime-config map given in code: API group/versions as keys, booleans as values. */
export function checkRuntimeConfig(config: Record<string, boolean>): Record<string, boolean> {
  const out: Record<string, boolean> = {};
  for (const [key, value] of Object.entries(config)) {
    if (!API_VERSION_RE.test(key))
      throw new InvalidEnvOptionError("runtimeConfig", `"${key.slice(0, 100)}" is not an API group/version`);
    if (typeof value !== "boolean")
      throw new InvalidEnvOptionError(
        "runtimeConfig",
        `${key} must be true or false, got ${JSON.stringify(value)}`,
      );
    out[key] = value;
  }
  return out;
}

/** Feature gates as the components' `--feature-gates` value, sorted so the flag is stable. */
export function formatFeatureGates(gates: Record<string, boolean>): string {
  return Object.keys(gates)
    .sort()
    .map((k) => `${k}=${gates[k] ? "true" : "false"}`)
    .join(",");
}

/** Check a node's resources (names and quantities); `option` names where they came from. */
export function checkResources(option: string, resources: Record<string, string | number>): NodeResources {
  const out: NodeResources = {};
  for (const [name, value] of Object.entries(resources)) {
    if (!RESOURCE_RE.test(name)) {
      throw new InvalidEnvOptionError(
        option,
        `"${name.slice(0, 80)}" is not a resource name (e.g. cpu, memory, pods, example.com/gpu)`,
      );
    }
    out[name] = checkQuantity(`${option} ${name}`, value);
  }
  if (out.pods !== undefined && !/^\d+$/.test(out.pods)) {
    throw new InvalidEnvOptionError(option, `pods must be a whole number, got "${out.pods}"`);
  }
  return out;
}

/**
 * Validate the options and fill in the defaults: the node count, the Kubernetes release and the settings
 * recorded in the state.
 */
export function resolveSettings(opts: EnvOptions = {}): {
  nodes: number;
  kubernetesVersion: string;
  settings: EnvSettings;
} {
  const kubernetesVersion = resolveKubernetesVersion(opts.kubernetesVersion);
  const nodes = checkInteger("--nodes", opts.nodes ?? DEFAULT_NODES, 0, MAX_NODES);
  const maxPods = checkInteger("--max-pods", opts.maxPods ?? DEFAULT_MAX_PODS, 1, MAX_PODS_LIMIT);
  const featureGates =
    typeof opts.featureGates === "string"
      ? parseFeatureGates(opts.featureGates)
      : checkFeatureGates(opts.featureGates ?? {});
  const runtimeConfig =
    typeof opts.runtimeConfig === "string"
      ? parseRuntimeConfig(opts.runtimeConfig)
      : checkRuntimeConfig(opts.runtimeConfig ?? {});
  return {
    nodes,
    kubernetesVersion,
    settings: {
      serviceClusterIPRange: DEFAULT_SERVICE_CLUSTER_IP_RANGE,
      featureGates,
      ...(Object.keys(runtimeConfig).length ? { runtimeConfig } : {}),
      componentQps: DEFAULT_COMPONENT_QPS,
      componentBurst: DEFAULT_COMPONENT_BURST,
      nodeCapacity: {
        cpu: checkQuantity("--node-cpu", opts.nodeCpu ?? DEFAULT_NODE_CPU),
        memory: checkQuantity("--node-memory", opts.nodeMemory ?? DEFAULT_NODE_MEMORY),
        pods: String(maxPods),
      },
    },
  };
}

/**
 * The settings of a running env that differ from the ones requested, as `flag: running → requested`
 * lines; `up` on a running env keeps it as it is, so callers say so instead of silently ignoring flags.
 */
export function settingsDiff(
  running: { nodes: number; kubernetesVersion: string; settings: EnvSettings },
  requested: { nodes: number; kubernetesVersion: string; settings: EnvSettings },
): string[] {
  const diffs: string[] = [];
  const cmp = (flag: string, a: string, b: string): void => {
    if (a !== b) diffs.push(`${flag}: running ${a || "(none)"}, requested ${b || "(none)"}`);
  };
  cmp("--kubernetes-version", running.kubernetesVersion, requested.kubernetesVersion);
  cmp("--nodes", String(running.nodes), String(requested.nodes));
  for (const [flag, key] of [
    ["--node-cpu", "cpu"],
    ["--node-memory", "memory"],
    ["--max-pods", "pods"],
  ] as const) {
    cmp(flag, running.settings.nodeCapacity[key] ?? "", requested.settings.nodeCapacity[key] ?? "");
  }
  cmp(
    "--feature-gates",
    formatFeatureGates(running.settings.featureGates),
    formatFeatureGates(requested.settings.featureGates),
  );
  cmp(
    "--runtime-config",
    formatFeatureGates(running.settings.runtimeConfig ?? {}),
    formatFeatureGates(requested.settings.runtimeConfig ?? {}),
  );
  return diffs;
}

/**
 * kube-apiserver refuses a loopback advertise address; any non-loopback IPv4 address of the machine
 * will do since nothing connects to it. `OPKIT_ADVERTISE_ADDRESS` overrides.
 */
export function advertiseAddress(): string {
  if (process.env.OPKIT_ADVERTISE_ADDRESS) return process.env.OPKIT_ADVERTISE_ADDRESS;
  for (const addrs of Object.values(networkInterfaces())) {
    for (const a of addrs ?? []) if (a.family === "IPv4" && !a.internal) return a.address;
  }
  throw new Error(
    "kube-apiserver needs a non-loopback IPv4 address for --advertise-address and this machine has none: " +
      "set OPKIT_ADVERTISE_ADDRESS to any address (e.g. 10.0.0.10)",
  );
}
