/**
 * A Helm chart from the same objects as the kustomize base. Templates are the generated YAML with a few
 * simple `{{ .Values.x }}` substitutions (image, replicas, resources, namespace, leader election), so
 * rendering with default values yields exactly the kustomize objects. (The helm binary the chart's
 * rendering tests use is built by `opkit/testenv`: generation never runs tools.)
 */
import { join } from "node:path";
import type { KubeObject } from "../client/types.ts";
import type { ResourceRequirements } from "./manifests.ts";
import { helmMonitoringFiles, type MonitoringInput } from "./monitoring.ts";
import { GENERATED_HEADER, removeStale, writeIfChanged } from "./files.ts";
import { groupByFile, toYaml, toYamlStream } from "./manifests.ts";

/** The chart's values.yaml: what users of the chart may change without editing templates. */
export interface HelmValues {
  /** The operator image. */
  image: string;
  /** How many replicas run (leader election decides which one reconciles). */
  replicas: number;
  /** CPU and memory requests and limits of the operator container. */
  resources: ResourceRequirements;
  /** The namespace the operator runs in. */
  namespace: string;
  /** Whether replicas elect a leader (OPKIT_LEADER_ELECT); true by default when replicas > 1. */
  leaderElection: boolean;
}

/**
 * What `writeHelmChart` builds a chart from: the chart's identity and the generated manifests it templates.
 */
export interface HelmChartInput {
  /** The chart name (usually the operator's name). */
  name: string;
  /** Chart version (SemVer). */
  version: string;
  /** The version of the operator the chart deploys (SemVer or an image tag). */
  appVersion: string;
  /** The manifests to template (CRDs go to crds/, the rest to templates/). */
  objects: readonly KubeObject[];
  /** Defaults are read from the Deployment in `objects`; values given here replace them. */
  values?: Partial<HelmValues>;
  /** The chart description in Chart.yaml. */
  description?: string;
  /**
   * The operator's Grafana dashboard and PrometheusRule, rendered only with `monitoring.enabled=true`
   * (default false, so the default rendering is exactly the kustomize objects).
   */
  monitoring?: MonitoringInput;
}

/**
 * The chart could not be built from the given input (e.g. no Deployment to read the values from); the message
 * says what is missing.
 */
export class HelmChartError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "HelmChartError";
  }
}

interface Container {
  name: string;
  image?: string;
  resources?: ResourceRequirements;
  env?: { name: string; value?: string }[];
}

interface Deployment extends KubeObject {
  spec: { replicas?: number; template: { spec: { containers: Container[] } } };
}

function managerDeployment(objects: readonly KubeObject[]): Deployment {
  const deps = objects.filter((o) => o.kind === "Deployment") as Deployment[];
  if (deps.length !== 1) {
    throw new HelmChartError(
      `writeHelmChart: objects contain ${deps.length} Deployments; pass exactly one (the output of manifestsFor)`,
    );
  }
  return deps[0]!;
}

/** Values the chart's objects were generated with. */
export function valuesFromObjects(objects: readonly KubeObject[]): HelmValues {
  const dep = managerDeployment(objects);
  const c = dep.spec.template.spec.containers[0];
  if (!c?.image) throw new HelmChartError("writeHelmChart: the Deployment's first container has no image");
  const replicas = dep.spec.replicas ?? 1;
  const le = c.env?.find((e) => e.name === "OPKIT_LEADER_ELECT")?.value;
  return {
    image: c.image,
    replicas,
    resources: structuredClone(c.resources ?? {}),
    namespace: dep.metadata.namespace ?? "default",
    leaderElection: le === undefined ? replicas > 1 : le === "true",
  };
}

/**
 * Replace the values' places in the objects with unique tokens, serialize, then swap the tokens for
 * template expressions: YAML quoting can never mangle a `{{ }}` that way.
 */
function templatize(
  objects: readonly KubeObject[],
  values: HelmValues,
): { objects: KubeObject[]; exprs: Map<string, string> } {
  const exprs = new Map<string, string>();
  const token = (expr: string): string => {
    const t = `OPKITHELMTOKEN${exprs.size}X`;
    exprs.set(t, expr);
    return t;
  };
  const copy = objects.map((o) => structuredClone(o));
  const nsExpr = "{{ .Values.namespace | quote }}";
  // Every `namespace:` equal to the operator's namespace follows `.Values.namespace`: object metadata,
  // binding subjects, webhook service references.
  const walk = (node: unknown): void => {
    if (Array.isArray(node)) node.forEach(walk);
    else if (node && typeof node === "object") {
      const rec = node as Record<string, unknown>;
      for (const [k, v] of Object.entries(rec)) {
        if (k === "namespace" && v === values.namespace) rec[k] = token(nsExpr);
        else walk(v);
      }
    }
  };
  // Webhook certificates name the namespace inside strings: the Service's DNS names and cert-manager's
  // CA-injection annotation ("<namespace>/<certificate>").
  const inString = (parts: [string, string]): string =>
    token(
      `{{ printf "%s%s%s" ${JSON.stringify(parts[0])} .Values.namespace ${JSON.stringify(parts[1])} | quote }}`,
    );
  const svcSuffix = `.${values.namespace}.svc`;
  for (const o of copy) {
    const injectFrom = o.metadata.annotations?.["cert-manager.io/inject-ca-from"];
    if (
      o.kind !== "CustomResourceDefinition" &&
      injectFrom?.startsWith(`${values.namespace}/`) &&
      o.metadata.annotations
    )
      o.metadata.annotations["cert-manager.io/inject-ca-from"] = inString([
        "",
        injectFrom.slice(values.namespace.length),
      ]);
    if (o.kind === "Certificate" && o.apiVersion?.startsWith("cert-manager.io/")) {
      const spec = (o as KubeObject & { spec?: { dnsNames?: string[] } }).spec;
      if (spec?.dnsNames)
        spec.dnsNames = spec.dnsNames.map((n) => {
          const at = n.indexOf(svcSuffix);
          return at < 0 ? n : inString([n.slice(0, at + 1), n.slice(at + 1 + values.namespace.length)]);
        });
    }
    if (o.kind === "Namespace" && o.metadata.name === values.namespace) o.metadata.name = token(nsExpr);
    // CRDs go to the chart's crds/ directory, which Helm never templates.
    if (o.kind !== "CustomResourceDefinition") walk(o);
  }
  const dep = managerDeployment(copy);
  (dep.spec as Record<string, unknown>).replicas = token("{{ .Values.replicas }}");
  const c = dep.spec.template.spec.containers[0]!;
  c.image = token("{{ .Values.image | quote }}");
  const res: Record<string, Record<string, string>> = {};
  for (const [tier, list] of Object.entries(values.resources) as [string, Record<string, string>][]) {
    res[tier] = {};
    for (const r of Object.keys(list)) res[tier][r] = token(`{{ .Values.resources.${tier}.${r} | quote }}`);
  }
  c.resources = res;
  for (const e of c.env ?? []) {
    if (e.name === "OPKIT_LEADER_ELECT") e.value = token("{{ .Values.leaderElection | quote }}");
  }
  return { objects: copy, exprs };
}

/**
 * Write a Helm chart: Chart.yaml, values.yaml, crds/<name>.yaml (installed by Helm before templates) and
 * templates/<file>.yaml grouped like the kustomize base. Returns the files written.
 */
export async function writeHelmChart(dir: string, input: HelmChartInput): Promise<string[]> {
  const values: HelmValues = { ...valuesFromObjects(input.objects), ...input.values };
  const chart = {
    apiVersion: "v2",
    name: input.name,
    description: input.description ?? `The ${input.name} operator`,
    type: "application",
    version: input.version,
    appVersion: input.appVersion,
  };
  const files = new Map<string, string>();
  files.set("Chart.yaml", GENERATED_HEADER + toYaml(chart));
  files.set(
    "values.yaml",
    GENERATED_HEADER + toYaml(input.monitoring ? { ...values, monitoring: { enabled: false } } : values),
  );
  if (input.monitoring)
    for (const [f, content] of helmMonitoringFiles(input.monitoring)) files.set(f, content);

  const { objects, exprs } = templatize(input.objects, values);
  for (const [file, objs] of groupByFile(objects)) {
    if (file.startsWith("crds/")) {
      files.set(file, GENERATED_HEADER + toYamlStream(objs));
      continue;
    }
    let text = toYamlStream(objs);
    for (const [t, expr] of exprs) text = text.split(t).join(expr);
    files.set(`templates/${file}`, GENERATED_HEADER + text);
  }
  for (const [file, content] of files) await writeIfChanged(join(dir, file), content);
  await removeStale(dir, new Set(files.keys()));
  return [...files.keys()];
}
