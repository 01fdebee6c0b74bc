/**
 * Deployment manifests for an operator (Namespace, ServiceAccount, RBAC, hardened Deployment, Services)
 * and a kustomize layout for them. Everything is deterministic: the same input yields byte-identical
 * files, so regenerating in CI shows a diff only when something really changed.
 */
import { mkdir, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { stringify } from "yaml";
import type { KubeObject } from "../client/types.ts";

export interface ResourceList {
  cpu?: string;
  memory?: string;
}

export interface ResourceRequirements {
  requests?: ResourceList;
  limits?: ResourceList;
}

/** A container env entry: a literal value, or a downward-API / Secret / ConfigMap reference. */
export interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: Record<string, unknown>;
}

export interface ManifestsInput {
  /** Operator name (DNS label): Deployment, ServiceAccount and Services are named after it. */
  name: string;
  namespace: string;
  image: string;
  replicas?: number;
  /** RBAC objects from `rbacFor`. */
  rbac: readonly KubeObject[];
  crds?: readonly KubeObject[];
  resources?: ResourceRequirements;
  env?: readonly EnvVar[] | Record<string, string>;
  args?: readonly string[];
  metricsPort?: number;
  healthPort?: number;
  webhook?: { port: number };
}

export class ManifestError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ManifestError";
  }
}

/** Small enough for a idle operator, with headroom for an informer cache of a few thousand objects. */
export const DEFAULT_RESOURCES: ResourceRequirements = {
  requests: { cpu: "10m", memory: "64Mi" },
  limits: { cpu: "500m", memory: "256Mi" },
};

/** The distroless "nonroot" uid: no passwd entry needed, never root. */
export const NONROOT_UID = 65532;

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/**
 * All objects needed to run the operator, in apply order: Namespace, CRDs, ServiceAccount, RBAC,
 * Deployment, metrics Service, webhook Service.
 */
export function manifestsFor(input: ManifestsInput): KubeObject[] {
  const { name, namespace, image } = input;
  if (!DNS_LABEL.test(name)) {
    throw new ManifestError(
      `manifestsFor: name "${name}" must be a DNS label (lowercase letters, digits, '-')`,
    );
  }
  if (!DNS_LABEL.test(namespace)) {
    throw new ManifestError(`manifestsFor: namespace "${namespace}" must be a DNS label`);
  }
  if (!image) throw new ManifestError("manifestsFor: image is empty: pass the operator's container image");
  const replicas = input.replicas ?? 1;
  if (!Number.isInteger(replicas) || replicas < 0) {
    throw new ManifestError(`manifestsFor: replicas ${replicas} must be a non-negative integer`);
  }
  const metricsPort = input.metricsPort ?? 8080;
  const healthPort = input.healthPort ?? 8081;
  const labels = { "app.kubernetes.io/name": name };
  const selector = { "app.kubernetes.io/name": name, "app.kubernetes.io/component": "manager" };

  const env: EnvVar[] = [
    // The manager puts its Lease in the pod's namespace.
    { name: "POD_NAMESPACE", valueFrom: { fieldRef: { fieldPath: "metadata.namespace" } } },
    // With more than one replica only the Lease holder may reconcile.
    { name: "OPKIT_LEADER_ELECT", value: replicas > 1 ? "true" : "false" },
  ];
  if (metricsPort !== 8080) env.push({ name: "OPKIT_METRICS_PORT", value: String(metricsPort) });
  if (healthPort !== 8081) env.push({ name: "OPKIT_HEALTH_PORT", value: String(healthPort) });
  const userEnv = Array.isArray(input.env)
    ? (input.env as readonly EnvVar[])
    : Object.entries((input.env ?? {}) as Record<string, string>)
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .map(([n, value]) => ({ name: n, value }));
  for (const e of userEnv) {
    const i = env.findIndex((x) => x.name === e.name);
    if (i >= 0) env[i] = { ...e };
    else env.push({ ...e });
  }

  const ports: object[] = [
    { name: "metrics", containerPort: metricsPort, protocol: "TCP" },
    { name: "health", containerPort: healthPort, protocol: "TCP" },
  ];
  if (input.webhook) ports.push({ name: "webhook", containerPort: input.webhook.port, protocol: "TCP" });

  const seccompProfile = { type: "RuntimeDefault" };
  const container: Record<string, unknown> = {
    name: "manager",
    image,
    imagePullPolicy: "IfNotPresent",
    ...(input.args?.length ? { args: [...input.args] } : {}),
    env,
    ports,
    livenessProbe: {
      httpGet: { path: "/healthz", port: "health" },
      initialDelaySeconds: 5,
      periodSeconds: 10,
    },
    readinessProbe: {
      httpGet: { path: "/readyz", port: "health" },
      initialDelaySeconds: 2,
      periodSeconds: 5,
    },
    resources: structuredClone(input.resources ?? DEFAULT_RESOURCES),
    securityContext: {
      allowPrivilegeEscalation: false,
      capabilities: { drop: ["ALL"] },
      readOnlyRootFilesystem: true,
      runAsNonRoot: true,
      runAsUser: NONROOT_UID,
      runAsGroup: NONROOT_UID,
      seccompProfile,
    },
    // The root filesystem is read-only; Node and libraries still want a writable temp directory.
    volumeMounts: [{ name: "tmp", mountPath: "/tmp" }],
  };

  const out: KubeObject[] = [
    { apiVersion: "v1", kind: "Namespace", metadata: { name: namespace, labels } },
    ...(input.crds ?? []).map((c) => structuredClone(c)),
    { apiVersion: "v1", kind: "ServiceAccount", metadata: { name, namespace, labels } },
    ...input.rbac.map((o) => structuredClone(o)),
    {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name, namespace, labels },
      spec: {
        replicas,
        selector: { matchLabels: selector },
        template: {
          metadata: { labels: { ...labels, ...selector } },
          spec: {
            serviceAccountName: name,
            securityContext: {
              runAsNonRoot: true,
              runAsUser: NONROOT_UID,
              runAsGroup: NONROOT_UID,
              fsGroup: NONROOT_UID,
              seccompProfile,
            },
            // Matches the manager's default graceful shutdown so in-flight reconciles can finish.
            terminationGracePeriodSeconds: 30,
            containers: [container],
            volumes: [{ name: "tmp", emptyDir: {} }],
          },
        },
      },
    } as KubeObject,
    {
      apiVersion: "v1",
      kind: "Service",
      metadata: { name: `${name}-metrics`, namespace, labels },
      spec: {
        selector,
        ports: [{ name: "metrics", port: metricsPort, targetPort: "metrics", protocol: "TCP" }],
      },
    } as KubeObject,
  ];
  if (input.webhook) {
    out.push({
      apiVersion: "v1",
      kind: "Service",
      metadata: { name: `${name}-webhook`, namespace, labels },
      spec: {
        selector,
        ports: [{ name: "webhook", port: 443, targetPort: "webhook", protocol: "TCP" }],
      },
    } as KubeObject);
  }
  return out;
}

/** Header of every generated file; also marks files `writeKustomize` may delete when they become stale. */
export const GENERATED_HEADER = "# Generated by opkit. Do not edit: regenerate instead.\n";

/**
 * One object as plain YAML with stable formatting. `aliasDuplicateObjects: false` because the generators
 * reuse objects (one seccompProfile for pod and container): the yaml library would otherwise write
 * them once as an anchor (`&a1`) and then as aliases (`*a1`), which kubectl accepts but many Kubernetes
 * tools (kustomize patches, helm post-renderers, linters, diff tools) do not.
 */
export function toYaml(value: unknown): string {
  return stringify(value, { lineWidth: 0, indent: 2, aliasDuplicateObjects: false });
}

/** Serialize objects as a YAML stream (`---` between documents) of plain YAML. */
export function toYamlStream(objects: readonly KubeObject[]): string {
  return objects.map((o) => toYaml(o)).join("---\n");
}

/** Which file of the layout an object belongs to (CRDs get one file each under crds/). */
export function fileFor(obj: KubeObject): string {
  switch (obj.kind) {
    case "Namespace":
      return "namespace.yaml";
    case "CustomResourceDefinition":
      return `crds/${obj.metadata.name ?? "unnamed"}.yaml`;
    case "ServiceAccount":
    case "ClusterRole":
    case "ClusterRoleBinding":
    case "Role":
    case "RoleBinding":
      return "rbac.yaml";
    case "Deployment":
      return "manager.yaml";
    case "Service":
      return "service.yaml";
    case "MutatingWebhookConfiguration":
    case "ValidatingWebhookConfiguration":
      return "webhook.yaml";
    default:
      return "other.yaml";
  }
}

const FILE_ORDER = [
  "namespace.yaml",
  "crds/",
  "rbac.yaml",
  "manager.yaml",
  "service.yaml",
  "webhook.yaml",
  "other.yaml",
];

/** Group objects into files, files in apply order, objects in their given order. */
export function groupByFile(objects: readonly KubeObject[]): Map<string, KubeObject[]> {
  const files = new Map<string, KubeObject[]>();
  for (const o of objects) {
    const f = fileFor(o);
    const list = files.get(f) ?? [];
    list.push(o);
    files.set(f, list);
  }
  const rank = (f: string) => FILE_ORDER.findIndex((p) => (p.endsWith("/") ? f.startsWith(p) : f === p));
  return new Map([...files].sort(([a], [b]) => rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0)));
}

/** Write only when the content differs, so re-running leaves timestamps (and make) alone. */
export async function writeIfChanged(path: string, content: string): Promise<boolean> {
  const old = await readFile(path, "utf8").catch(() => undefined);
  if (old === content) return false;
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, content);
  return true;
}

/** Delete generated YAML files under `dir` (recursively) that are not in `keep`. Hand-written files stay. */
export async function removeStale(dir: string, keep: ReadonlySet<string>, sub = ""): Promise<void> {
  const entries = await readdir(join(dir, sub), { withFileTypes: true }).catch(() => []);
  for (const e of entries) {
    const rel = sub ? `${sub}/${e.name}` : e.name;
    if (e.isDirectory()) await removeStale(dir, keep, rel);
    else if (e.name.endsWith(".yaml") && !keep.has(rel)) {
      const text = await readFile(join(dir, rel), "utf8");
      if (text.startsWith(GENERATED_HEADER)) await rm(join(dir, rel));
    }
  }
}

/**
 * Write a kustomize base: one YAML file per object group (namespace.yaml, crds/<name>.yaml, rbac.yaml,
 * manager.yaml, service.yaml, …) and a kustomization.yaml listing them. Returns the files written.
 */
export async function writeKustomize(dir: string, objects: readonly KubeObject[]): Promise<string[]> {
  const files = groupByFile(objects);
  const written: string[] = [];
  for (const [file, objs] of files) {
    await writeIfChanged(join(dir, file), GENERATED_HEADER + toYamlStream(objs));
    written.push(file);
  }
  const kustomization = {
    apiVersion: "kustomize.config.k8s.io/v1beta1",
    kind: "Kustomization",
    resources: written,
  };
  await writeIfChanged(join(dir, "kustomization.yaml"), GENERATED_HEADER + toYaml(kustomization));
  await removeStale(dir, new Set([...written, "kustomization.yaml"]));
  return [...written, "kustomization.yaml"];
}
