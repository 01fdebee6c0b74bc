/**
 * A Helm chart from the same objects as the kustomize base. Templates are the generated YAML with a few
 * simple `{{ .Values.x }}` substitutions (image, replicas, resources, namespace, leader election), so
 * rendering with default values yields exactly the kustomize objects. Also `ensureHelm`, which builds a
 * pinned helm from the Go module proxy for the chart's rendering tests (no helm binary is assumed).
 */
import { spawn } from "node:child_process";
import { access, mkdir, mkdtemp, rename, rm, writeFile } from "node:fs/promises";
import { constants } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify } from "yaml";
import type { KubeObject } from "../client/types.ts";
import { cacheDir } from "../testenv/versions.ts";
import type { ResourceRequirements } from "./manifests.ts";
import { GENERATED_HEADER, groupByFile, removeStale, toYamlStream, writeIfChanged } from "./manifests.ts";

export interface HelmValues {
  image: string;
  replicas: number;
  resources: ResourceRequirements;
  namespace: string;
  /** Whether replicas elect a leader (OPKIT_LEADER_ELECT); true by default when replicas > 1. */
  leaderElection: boolean;
}

export interface HelmChartInput {
  name: string;
  /** Chart version (SemVer). */
  version: string;
  appVersion: string;
  objects: readonly KubeObject[];
  /** Defaults are read from the Deployment in `objects`; values given here replace them. */
  values?: Partial<HelmValues>;
  description?: string;
}

export class HelmError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "HelmError";
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
    throw new HelmError(
      `writeHelmChart: objects contain ${deps.length} Deployments; pass exactly one (the output of manifestsFor)`,
    );
  }
  return deps[0]!;
}

/** Values the chart's objects were generated with. */
export function valuesFromObjects(objects: readonly KubeObject[]): HelmValues {
  const dep = managerDeployment(objects);
  const c = dep.spec.template.spec.containers[0];
  if (!c?.image) throw new HelmError("writeHelmChart: the Deployment's first container has no image");
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
  for (const o of copy) {
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
  files.set("Chart.yaml", GENERATED_HEADER + stringify(chart));
  files.set("values.yaml", GENERATED_HEADER + stringify(values));

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

/** The helm release `ensureHelm` builds; pinned so test results do not change under us. */
export const HELM_VERSION = "v3.22.0";

export function helmPath(version = HELM_VERSION): string {
  return join(cacheDir(), "tools", `helm-${version}`, "helm");
}

function run(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let all = "";
    child.stdout.on("data", (d: Buffer) => ((stdout += d.toString()), (all += d.toString())));
    child.stderr.on("data", (d: Buffer) => (all += d.toString()));
    child.on("error", (err) => reject(err));
    // Resolves with stdout only (callers parse it); failures carry both streams' tail.
    child.on("exit", (code) =>
      code === 0
        ? resolve(stdout)
        : reject(new HelmError(`${cmd} ${args.join(" ")} exited ${code}:\n${all.slice(-4000)}`)),
    );
  });
}

/**
 * Path to a helm binary: `$OPKIT_HELM` if set, else a cached build of HELM_VERSION, else build one with
 * the local Go toolchain from the module proxy (a few minutes, once). Progress goes to `onProgress`.
 */
export async function ensureHelm(
  opts: { version?: string; onProgress?: (line: string) => void } = {},
): Promise<string> {
  if (process.env.OPKIT_HELM) return process.env.OPKIT_HELM;
  const version = opts.version ?? HELM_VERSION;
  const target = helmPath(version);
  const progress = opts.onProgress ?? ((l: string) => process.stderr.write(`opkit: ${l}\n`));
  if (
    await access(target, constants.X_OK).then(
      () => true,
      () => false,
    )
  )
    return target;

  const env = { ...process.env, GOTOOLCHAIN: "local", CGO_ENABLED: "0", GOFLAGS: "-mod=mod" };
  try {
    await run("go", ["version"], tmpdir(), env);
  } catch (err) {
    throw new HelmError(
      `building helm ${version} needs the Go toolchain on PATH (${err instanceof Error ? err.message : String(err)}): install Go, or set OPKIT_HELM to a helm binary`,
    );
  }
  const work = await mkdtemp(join(tmpdir(), "opkit-helm-"));
  const started = Date.now();
  try {
    await writeFile(join(work, "go.mod"), "module opkit.dev/helm-build\n\ngo 1.24\n");
    // A blank import keeps the wrapper module's requirements pinned to helm's own go.mod.
    await writeFile(
      join(work, "tools.go"),
      '//go:build tools\n\npackage tools\n\nimport _ "helm.sh/helm/v3/cmd/helm"\n',
    );
    progress(`building helm ${version}: resolving modules from the Go module proxy`);
    await run("go", ["get", `helm.sh/helm/v3/cmd/helm@${version}`], work, env);
    progress(`building helm ${version}: compiling (takes a few minutes the first time)`);
    await mkdir(join(target, ".."), { recursive: true });
    const tmp = `${target}.tmp-${process.pid}`;
    // helm reports its version from an ldflag, as its own Makefile sets it.
    const ldflags = `-X helm.sh/helm/v3/internal/version.version=${version}`;
    await run("go", ["build", "-ldflags", ldflags, "-o", tmp, "helm.sh/helm/v3/cmd/helm"], work, env);
    // Rename is atomic: a concurrent caller sees either no binary or a complete one.
    await rename(tmp, target);
    progress(`built helm ${version} in ${Math.round((Date.now() - started) / 1000)} s: ${target}`);
    return target;
  } catch (err) {
    if (err instanceof HelmError) {
      throw new HelmError(
        `could not build helm ${version} (needs network access to the Go module proxy): ${err.message}`,
      );
    }
    throw err;
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

/** Run `helm template` on a chart directory; returns the rendered YAML stream. */
export async function helmTemplate(
  helm: string,
  chartDir: string,
  opts: { release?: string; namespace?: string; includeCrds?: boolean; set?: Record<string, string> } = {},
): Promise<string> {
  const args = ["template", opts.release ?? "release", chartDir];
  if (opts.namespace) args.push("--namespace", opts.namespace);
  if (opts.includeCrds ?? true) args.push("--include-crds");
  for (const [k, v] of Object.entries(opts.set ?? {})) args.push("--set", `${k}=${v}`);
  return run(helm, args, process.cwd(), {
    ...process.env,
    HELM_CACHE_HOME: join(tmpdir(), "opkit-helm-cache"),
  });
}
