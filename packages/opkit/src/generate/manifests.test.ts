import { test } from "node:test";
import assert from "node:assert/strict";
import { DEFAULT_HEALTH_PORT, DEFAULT_METRICS_PORT } from "../manager/server.ts";
import { DEFAULT_WEBHOOK_PORT } from "../webhook/server.ts";

const PORTS = { metrics: DEFAULT_METRICS_PORT, health: DEFAULT_HEALTH_PORT, webhook: DEFAULT_WEBHOOK_PORT };
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isAlias, isNode, parseAllDocuments, stringify, visit } from "yaml";
import { kindRef, type KubeObject } from "../client/types.ts";
import { builtinResolver, rbacFor } from "./rbac.ts";
import { manifestsFor, writeKustomize, ManifestError } from "./manifests.ts";
import { writeHelmChart } from "./helm.ts";
import { DockerfileError, dockerfile, dockerignore } from "./dockerfile.ts";

async function sample(replicas = 1, webhook?: Record<string, never>): Promise<KubeObject[]> {
  const rbac = await rbacFor({
    name: "copy-op",
    namespace: "copy-system",
    controllers: [
      { forKind: kindRef("v1", "ConfigMap"), ownedKinds: [kindRef("v1", "Secret")], watchedKinds: [] },
    ],
    resolve: builtinResolver(),
  });
  const crd = {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: "widgets.example.com" },
    spec: {
      group: "example.com",
      scope: "Namespaced",
      names: { kind: "Widget", plural: "widgets" },
      versions: [],
    },
  } as KubeObject;
  return manifestsFor({
    ports: PORTS,
    name: "copy-op",
    namespace: "copy-system",
    image: "ghcr.io/example/copy-op:v1.2.3",
    replicas,
    rbac,
    crds: [crd],
    env: { LOG_FORMAT: "json" },
    webhook,
  });
}

type Container = Record<string, unknown> & {
  securityContext: Record<string, unknown>;
  env: { name: string; value?: string; valueFrom?: unknown }[];
  ports: { name: string; containerPort: number }[];
  resources: unknown;
  livenessProbe: { httpGet: unknown };
  readinessProbe: { httpGet: unknown };
};
type Deployment = KubeObject & {
  spec: {
    replicas: number;
    template: { spec: { serviceAccountName: string; securityContext: unknown; containers: Container[] } };
  };
};

test("the Deployment is hardened, probed and wired to the manager's defaults", async () => {
  const objs = await sample();
  assert.deepEqual(
    objs.map((o) => `${o.kind}/${o.metadata.name}`),
    [
      "Namespace/copy-system",
      "CustomResourceDefinition/widgets.example.com",
      "ServiceAccount/copy-op",
      "ClusterRole/copy-op",
      "ClusterRoleBinding/copy-op",
      "Role/copy-op-leader-election",
      "RoleBinding/copy-op-leader-election",
      "Deployment/copy-op",
      "Service/copy-op-metrics",
    ],
  );
  const dep = objs.find((o) => o.kind === "Deployment") as Deployment;
  const pod = dep.spec.template.spec;
  assert.equal(pod.serviceAccountName, "copy-op");
  assert.deepEqual(pod.securityContext, {
    runAsNonRoot: true,
    runAsUser: 65532,
    runAsGroup: 65532,
    fsGroup: 65532,
    seccompProfile: { type: "RuntimeDefault" },
  });
  const c = pod.containers[0]!;
  assert.deepEqual(c.securityContext, {
    allowPrivilegeEscalation: false,
    capabilities: { drop: ["ALL"] },
    readOnlyRootFilesystem: true,
    runAsNonRoot: true,
    runAsUser: 65532,
    runAsGroup: 65532,
    seccompProfile: { type: "RuntimeDefault" },
  });
  assert.deepEqual(c.resources, {
    requests: { cpu: "10m", memory: "64Mi" },
    limits: { cpu: "500m", memory: "256Mi" },
  });
  assert.deepEqual(c.livenessProbe.httpGet, { path: "/healthz", port: "health" });
  assert.deepEqual(c.readinessProbe.httpGet, { path: "/readyz", port: "health" });
  assert.deepEqual(
    c.ports.map((p) => [p.name, p.containerPort]),
    [
      ["metrics", 8080],
      ["health", 8081],
    ],
  );
  assert.deepEqual(c.env, [
    { name: "POD_NAMESPACE", valueFrom: { fieldRef: { fieldPath: "metadata.namespace" } } },
    { name: "OPKIT_LEADER_ELECT", value: "false" },
    { name: "OPKIT_METRICS_BIND_ADDRESS", value: ":8080" },
    { name: "OPKIT_HEALTH_PROBE_BIND_ADDRESS", value: ":8081" },
    { name: "LOG_FORMAT", value: "json" },
  ]);
  const svc = objs.find((o) => o.kind === "Service") as KubeObject & { spec: { ports: unknown[] } };
  assert.deepEqual(svc.spec.ports, [{ name: "metrics", port: 8080, targetPort: "metrics", protocol: "TCP" }]);
});

test("replicas > 1 turn on leader election; a webhook adds its port and Service", async () => {
  const objs = await sample(3, {});
  const dep = objs.find((o) => o.kind === "Deployment") as Deployment;
  assert.equal(dep.spec.replicas, 3);
  const c = dep.spec.template.spec.containers[0]!;
  assert.deepEqual(
    c.env.find((e) => e.name === "OPKIT_LEADER_ELECT"),
    { name: "OPKIT_LEADER_ELECT", value: "true" },
  );
  assert.deepEqual(c.ports.at(-1), { name: "webhook", containerPort: 9443, protocol: "TCP" });
  assert.equal(objs.at(-1)?.metadata.name, "copy-op-webhook");
  assert.throws(
    () =>
      manifestsFor({
        ports: PORTS,
        name: "Bad_Name",
        namespace: "x",
        image: "i",
        rbac: [],
      }),
    (e: unknown) => e instanceof ManifestError && /name "Bad_Name" must be a DNS label/.test(e.message),
  );
});

async function filesUnder(dir: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const e of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (e.isFile()) {
      const p = join(e.parentPath, e.name);
      out.set(p.slice(dir.length + 1), await readFile(p, "utf8"));
    }
  }
  return out;
}

/** Anchors (`&a1`) and aliases (`*a1`) in a YAML stream, as the yaml parser sees them. */
function anchorsAndAliases(text: string): string[] {
  const found: string[] = [];
  for (const doc of parseAllDocuments(text)) {
    visit(doc, (_key, node) => {
      if (isAlias(node)) found.push(`*${node.source}`);
      else if (isNode(node) && node.anchor) found.push(`&${node.anchor}`);
    });
  }
  return found;
}

test("generated YAML is plain: no anchors or aliases, though objects are shared", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "opkit-gen-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const objs = await sample(3, {});
  await writeKustomize(join(dir, "config"), objs);
  await writeHelmChart(join(dir, "chart"), {
    name: "copy-op",
    version: "0.1.0",
    appVersion: "1",
    objects: objs,
  });
  const files = new Map([
    ...[...(await filesUnder(join(dir, "config")))].map(([f, c]) => [`config/${f}`, c] as const),
    ...[...(await filesUnder(join(dir, "chart")))].map(([f, c]) => [`chart/${f}`, c] as const),
  ]);
  assert.ok(files.size >= 10, `expected the whole layout, got ${[...files.keys()].join(", ")}`);
  for (const [f, content] of files) assert.deepEqual(anchorsAndAliases(content), [], f);
  // The detector itself sees what the yaml library writes for shared objects by default.
  const shared = { type: "RuntimeDefault" };
  assert.deepEqual(anchorsAndAliases(stringify({ a: shared, b: shared })), ["&a1", "*a1"]);
});

test("kustomize and helm layouts are complete and re-running changes nothing", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "opkit-gen-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const objs = await sample(1, {});
  const kdir = join(dir, "config");
  const hdir = join(dir, "chart");
  // A stale generated file is removed; a hand-written one stays.
  await writeKustomize(kdir, objs);
  await writeFile(
    join(kdir, "crds", "old.example.com.yaml"),
    "# Generated by opkit. Do not edit: regenerate instead.\n{}\n",
  );
  await writeFile(join(kdir, "mine.yaml"), "kind: Mine\n");
  await writeKustomize(kdir, objs);
  await writeHelmChart(hdir, { name: "copy-op", version: "0.1.0", appVersion: "v1.2.3", objects: objs });

  const k1 = await filesUnder(kdir);
  assert.deepEqual([...k1.keys()].sort(), [
    "crds/widgets.example.com.yaml",
    "kustomization.yaml",
    "manager.yaml",
    "mine.yaml",
    "namespace.yaml",
    "rbac.yaml",
    "service.yaml",
  ]);
  const kust = parseAllDocuments(k1.get("kustomization.yaml")!)[0]!.toJS() as { resources: string[] };
  assert.deepEqual(kust.resources, [
    "namespace.yaml",
    "crds/widgets.example.com.yaml",
    "rbac.yaml",
    "manager.yaml",
    "service.yaml",
  ]);
  const fromFiles = kust.resources.flatMap((f) =>
    parseAllDocuments(k1.get(f)!).map((d) => d.toJS() as KubeObject),
  );
  assert.deepEqual(fromFiles, objs, "the kustomize files hold exactly the objects");

  const h1 = await filesUnder(hdir);
  assert.deepEqual([...h1.keys()].sort(), [
    "Chart.yaml",
    "crds/widgets.example.com.yaml",
    "templates/manager.yaml",
    "templates/namespace.yaml",
    "templates/rbac.yaml",
    "templates/service.yaml",
    "values.yaml",
  ]);
  const values = parseAllDocuments(h1.get("values.yaml")!)[0]!.toJS() as unknown;
  assert.deepEqual(values, {
    image: "ghcr.io/example/copy-op:v1.2.3",
    replicas: 1,
    resources: { requests: { cpu: "10m", memory: "64Mi" }, limits: { cpu: "500m", memory: "256Mi" } },
    namespace: "copy-system",
    leaderElection: false,
  });
  const manager = h1.get("templates/manager.yaml")!;
  assert.match(manager, /replicas: \{\{ \.Values\.replicas \}\}/);
  assert.match(manager, /image: \{\{ \.Values\.image \| quote \}\}/);
  assert.match(manager, /namespace: \{\{ \.Values\.namespace \| quote \}\}/);
  assert.match(manager, /cpu: \{\{ \.Values\.resources\.limits\.cpu \| quote \}\}/);
  assert.doesNotMatch(manager, /copy-system|ghcr\.io/, "no literal left for a templated value");
  assert.match(h1.get("templates/rbac.yaml")!, /namespace: \{\{ \.Values\.namespace \| quote \}\}/);

  const mtimes = async (d: string) =>
    Promise.all([...(await filesUnder(d)).keys()].map(async (f) => (await stat(join(d, f))).mtimeMs));
  const before = [await mtimes(kdir), await mtimes(hdir)];
  await writeKustomize(kdir, await sample(1, {}));
  await writeHelmChart(hdir, {
    name: "copy-op",
    version: "0.1.0",
    appVersion: "v1.2.3",
    objects: await sample(1, {}),
  });
  assert.deepEqual(await filesUnder(kdir), k1);
  assert.deepEqual(await filesUnder(hdir), h1);
  assert.deepEqual([await mtimes(kdir), await mtimes(hdir)], before, "unchanged files are not rewritten");
});

test("Dockerfile: two node:24-slim stages, production deps only at run time, non-root user", () => {
  const text = dockerfile();
  assert.ok(text.startsWith("# syntax=docker/dockerfile:1\n"));
  const froms = text.split("\n").filter((l) => l.startsWith("FROM "));
  assert.deepEqual(froms, ["FROM node:24-slim AS build", "FROM node:24-slim"]);
  const runtime = text.slice(text.lastIndexOf("FROM "));
  assert.match(text.slice(0, text.lastIndexOf("FROM ")), /RUN npm ci\nCOPY \. \.\nRUN npm run build/);
  assert.match(runtime, /RUN npm ci --omit=dev/);
  assert.match(runtime, /COPY --from=build \/app\/dist \.\/dist/);
  assert.match(runtime, /USER 65532:65532/);
  assert.ok(
    runtime
      .trimEnd()
      .endsWith('ENTRYPOINT ["node", "--max-semi-space-size=8", "--liftoff-only", "dist/main.js"]'),
  );
  assert.match(dockerignore(), /^node_modules$/m);
  assert.match(dockerignore(), /^\.git$/m);
  assert.match(dockerignore(), /^chart\/$/m);
  assert.doesNotMatch(dockerignore(), /vendor/, "vendored tarballs are part of the build context");
});

test("Dockerfile: vendored tarballs are copied before npm ci in both stages; bad paths are refused", () => {
  const text = dockerfile({ installFiles: ["vendor"], copy: ["src"], entrypoint: "src/main.ts" });
  const stages = text.split(/^FROM /m).slice(1);
  assert.equal(stages.length, 2);
  for (const stage of stages) {
    assert.match(stage, /COPY package\.json package-lock\.json \.\/\nCOPY vendor \.\/vendor\nRUN npm ci/);
  }
  assert.match(stages[1]!, /COPY --from=build \/app\/src \.\/src\n/);
  for (const bad of ["../outside", "/abs", "a b", 'x"y', "vendor/../../etc"]) {
    assert.throws(() => dockerfile({ installFiles: [bad] }), DockerfileError, bad);
  }
  assert.throws(
    () => dockerfile({ copy: ["dist\nRUN rm -rf /"] }),
    /must be a relative path inside the project/,
  );
});
