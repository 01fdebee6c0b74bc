/**
 * Generated manifests against opkit env: every object passes server-side dry-run with strict field
 * validation; the copy operator runs with nothing but its generated RBAC (impersonating its
 * ServiceAccount) and converges; without `create` on Secrets it logs a Forbidden naming verb and
 * resource; `helm template` of the chart yields exactly the kustomize objects.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { DEFAULT_HEALTH_PORT, DEFAULT_METRICS_PORT } from "../manager/server.ts";
import { DEFAULT_WEBHOOK_PORT } from "../webhook/server.ts";

const PORTS = { metrics: DEFAULT_METRICS_PORT, health: DEFAULT_HEALTH_PORT, webhook: DEFAULT_WEBHOOK_PORT };
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parse, parseAllDocuments, stringify } from "yaml";
import { kindRef, type KubeObject } from "../client/types.ts";
import { useTestEnv, type TestEnv } from "../testenv/testing.ts";
import { eventually } from "../testenv/eventually.ts";
import { rbacFor, resolverFromClient, type PolicyRule } from "./rbac.ts";
import { manifestsFor, writeKustomize } from "./manifests.ts";
import { writeHelmChart } from "./helm.ts";
import { grafanaDashboard, prometheusRule } from "./monitoring.ts";
import { ensureHelm, helmTemplate } from "../testenv/helm.ts";

const script = fileURLToPath(new URL("../manager/testdata/copy-operator.ts", import.meta.url));
const ConfigMaps = kindRef("v1", "ConfigMap");
const Secrets = kindRef("v1", "Secret");

const widgetCrd = {
  apiVersion: "apiextensions.k8s.io/v1",
  kind: "CustomResourceDefinition",
  metadata: { name: "genwidgets.gen.opkit.dev" },
  spec: {
    group: "gen.opkit.dev",
    scope: "Namespaced",
    names: { kind: "GenWidget", listKind: "GenWidgetList", plural: "genwidgets", singular: "genwidget" },
    versions: [
      {
        name: "v1",
        served: true,
        storage: true,
        schema: { openAPIV3Schema: { type: "object", "x-kubernetes-preserve-unknown-fields": true } },
        subresources: { status: {} },
      },
    ],
  },
} as KubeObject;

interface Proc {
  child: ChildProcess;
  output: string[];
  exited: Promise<number | null>;
}

/** A kubeconfig with the admin's credentials that acts as the ServiceAccount (client-node maps `as`). */
async function impersonatingKubeconfig(env: TestEnv, dir: string, user: string): Promise<string> {
  const kc = parse(await readFile(env.kubeconfigPath, "utf8")) as {
    users: { user: Record<string, unknown> }[];
  };
  for (const u of kc.users) u.user.as = user;
  const path = join(dir, `kubeconfig-${user.replace(/[^a-z0-9-]/g, "_")}`);
  await writeFile(path, stringify(kc));
  return path;
}

function startOperator(kubeconfig: string, ns: string): Proc {
  const child = spawn(process.execPath, ["--conditions=opkit-source", script], {
    env: {
      ...process.env,
      KUBECONFIG: kubeconfig,
      NAMESPACE: ns,
      LEASE: "copy-operator",
      IDENTITY: `gen-${ns}`,
      OPKIT_LOG_LEVEL: "info",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const output: string[] = [];
  child.stdout?.on("data", (d: Buffer) => output.push(...d.toString().split("\n").filter(Boolean)));
  child.stderr?.on("data", (d: Buffer) => output.push(...d.toString().split("\n").filter(Boolean)));
  const exited = new Promise<number | null>((r) => child.on("exit", (code) => r(code)));
  return { child, output, exited };
}

async function stop(p: Proc): Promise<void> {
  if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill("SIGKILL");
  await p.exited;
}

/** SA + generated RBAC for the copy operator's shape, created for real in `ns`. */
async function installCopyOperatorRbac(
  env: TestEnv,
  ns: string,
  edit: (rules: PolicyRule[]) => PolicyRule[] = (r) => r,
): Promise<KubeObject[]> {
  const rbac = await rbacFor({
    name: "copy-operator",
    namespace: ns,
    watchNamespace: ns,
    leaderElection: true,
    controllers: [{ forKind: ConfigMaps, ownedKinds: [Secrets], watchedKinds: [] }],
    resolve: resolverFromClient(env.client),
  });
  const objs = [
    {
      apiVersion: "v1",
      kind: "ServiceAccount",
      metadata: { name: "copy-operator", namespace: ns },
    } as KubeObject,
    ...rbac.map((o) => {
      if (o.kind !== "Role" || o.metadata.name !== "copy-operator") return o;
      const role = o as KubeObject & { rules: PolicyRule[] };
      return { ...role, rules: edit(role.rules) } as KubeObject;
    }),
  ];
  for (const o of objs) await env.client.create(o);
  return objs;
}

function copyOf(env: TestEnv, ns: string, name: string): Promise<KubeObject | undefined> {
  return env.client.getOptional(Secrets, `${name}-copy`, { namespace: ns });
}

const sourceCm = (ns: string, name: string): KubeObject =>
  ({
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name, namespace: ns, labels: { "opkit-test/source": "true" } },
    data: { k: "v" },
  }) as KubeObject;

describe("generated manifests", () => {
  let env: TestEnv;
  let dir: string;
  before(async () => {
    env = await useTestEnv();
    dir = await mkdtemp(join(tmpdir(), "opkit-gen-int-"));
  });
  after(async () => {
    await env?.cleanup();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  async function fullManifests(ns: string): Promise<KubeObject[]> {
    const name = `gen-op-${ns.slice(-6)}`;
    const rbac = await rbacFor({
      name,
      namespace: ns,
      controllers: [
        { forKind: ConfigMaps, ownedKinds: [Secrets, kindRef("apps/v1", "Deployment")], watchedKinds: [] },
      ],
      extraRules: [{ apiGroups: [""], resources: ["nodes"], verbs: ["get", "list"] }],
      resolve: resolverFromClient(env.client),
    });
    return manifestsFor({
      ports: PORTS,
      name,
      namespace: ns,
      image: "ghcr.io/example/gen-op:v0.1.0",
      replicas: 2,
      rbac,
      crds: [widgetCrd],
      env: { EXTRA: "1" },
      args: ["--zap-devel"],
      webhook: {},
    });
  }

  it("every generated object passes server-side dry-run with strict field validation", async (t) => {
    const ns = await env.namespace("gen");
    const objs = await fullManifests(ns);
    for (const o of objs) {
      const what = `${o.kind}/${o.metadata.name}`;
      // The namespace already exists for real (created above); apply is the dry-run that accepts that.
      if (o.kind === "Namespace")
        await env.client.apply(o, { dryRun: true, force: true, fieldValidation: "Strict" });
      else
        await env.client.create(o, { dryRun: true, fieldValidation: "Strict" }).catch((err: unknown) => {
          throw new Error(`${what} failed dry-run: ${String(err)}`);
        });
    }
    t.diagnostic(`${objs.length} objects accepted: ${objs.map((o) => o.kind).join(", ")}`);
  });

  it("the copy operator converges with only its generated RBAC", async (t) => {
    const ns = await env.namespace("rbac-ok");
    await installCopyOperatorRbac(env, ns);
    const kubeconfig = await impersonatingKubeconfig(env, dir, `system:serviceaccount:${ns}:copy-operator`);
    const op = startOperator(kubeconfig, ns);
    t.after(() => stop(op));
    for (const n of ["a", "b", "c"]) await env.client.create(sourceCm(ns, n));
    await eventually(
      "Secret copies made by the impersonated operator",
      async () => (await Promise.all(["a", "b", "c"].map((n) => copyOf(env, ns, n)))).every(Boolean),
      60_000,
    ).catch((err: unknown) => {
      throw new Error(`${String(err)}\noperator output:\n${op.output.slice(-30).join("\n")}`);
    });
    const copy = await copyOf(env, ns, "a");
    const managers = copy?.metadata.managedFields?.map((m) => m.manager);
    assert.ok(
      managers?.includes("copy-operator"),
      `written by the operator (managers: ${managers?.join(", ")})`,
    );
    const denied = op.output.filter((l) => /forbidden/i.test(l));
    assert.deepEqual(denied, [], "no permission errors with the generated RBAC");
  });

  it("without `create` on secrets the operator logs a Forbidden naming verb and resource", async (t) => {
    const ns = await env.namespace("rbac-deny");
    await installCopyOperatorRbac(env, ns, (rules) =>
      rules.map((r) =>
        r.resources?.includes("secrets") ? { ...r, verbs: r.verbs.filter((v) => v !== "create") } : r,
      ),
    );
    const kubeconfig = await impersonatingKubeconfig(env, dir, `system:serviceaccount:${ns}:copy-operator`);
    const op = startOperator(kubeconfig, ns);
    t.after(() => stop(op));
    await env.client.create(sourceCm(ns, "denied"));
    // The API server's own wording, JSON-escaped in the log line: `cannot create resource "secrets"`.
    const line = await eventually(
      "a Forbidden log line naming create and secrets",
      () => op.output.find((l) => /Forbidden/.test(l) && /cannot create resource \\?"secrets\\?"/.test(l)),
      30_000,
    ).catch((err: unknown) => {
      throw new Error(`${String(err)}\noperator output:\n${op.output.slice(-30).join("\n")}`);
    });
    t.diagnostic(
      `operator logged: ${line.slice(line.indexOf("ForbiddenError"), line.indexOf("ForbiddenError") + 400)}`,
    );
    assert.equal(await copyOf(env, ns, "denied"), undefined);
  });

  it(
    "helm template with default values renders exactly the kustomize objects",
    { timeout: 900_000 },
    async (t) => {
      const helm = await ensureHelm({ onProgress: (l) => t.diagnostic(l) });
      const ns = await env.namespace("helm");
      const objs = await fullManifests(ns);
      await writeKustomize(join(dir, "config"), objs);
      await writeHelmChart(join(dir, "chart"), {
        name: "gen-op",
        version: "0.1.0",
        appVersion: "v0.1.0",
        objects: objs,
        monitoring: { name: "gen-op", namespace: ns },
      });
      const kustomization = parse(await readFile(join(dir, "config", "kustomization.yaml"), "utf8")) as {
        resources: string[];
      };
      const fromKustomize: KubeObject[] = [];
      for (const f of kustomization.resources) {
        for (const d of parseAllDocuments(await readFile(join(dir, "config", f), "utf8")))
          fromKustomize.push(d.toJS() as KubeObject);
      }
      // A different release namespace must not matter: the chart's namespace comes from values.
      const rendered = await helmTemplate(helm, join(dir, "chart"), {
        release: "r1",
        namespace: "elsewhere",
      });
      const fromHelm = parseAllDocuments(rendered)
        .map((d) => d.toJS() as KubeObject | null)
        .filter((o): o is KubeObject => o !== null);
      const key = (o: KubeObject) => `${o.kind}/${o.metadata.namespace ?? ""}/${o.metadata.name}`;
      const sort = (l: KubeObject[]) =>
        [...l].sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
      assert.deepEqual(sort(fromHelm), sort(fromKustomize));
      assert.deepEqual(sort(fromKustomize), sort(objs));
      t.diagnostic(`${fromHelm.length} objects identical from helm ${helm} and kustomize`);

      // Values really drive the templates.
      const custom = await helmTemplate(helm, join(dir, "chart"), {
        set: { image: "other:v2", replicas: "5", namespace: "prod", "resources.limits.memory": "1Gi" },
      });
      const dep = parseAllDocuments(custom)
        .map(
          (d) =>
            d.toJS() as KubeObject & {
              spec?: {
                replicas?: number;
                template?: {
                  spec: { containers: { image: string; resources: { limits: { memory: string } } }[] };
                };
              };
            },
        )
        .find((o) => o?.kind === "Deployment");
      assert.equal(dep?.metadata.namespace, "prod");
      assert.equal(dep?.spec?.replicas, 5);
      assert.equal(dep?.spec?.template?.spec.containers[0]?.image, "other:v2");
      assert.equal(dep?.spec?.template?.spec.containers[0]?.resources.limits.memory, "1Gi");

      // monitoring.enabled adds the dashboard ConfigMap (the very JSON of config/) and the PrometheusRule.
      const monitored = parseAllDocuments(
        await helmTemplate(helm, join(dir, "chart"), {
          set: { "monitoring.enabled": "true", namespace: "prod" },
        }),
      )
        .map((d) => d.toJS() as (KubeObject & { data?: Record<string, string> }) | null)
        .filter((o): o is KubeObject & { data?: Record<string, string> } => o !== null);
      assert.equal(monitored.length, fromHelm.length + 2);
      const cm = monitored.find((o) => o.kind === "ConfigMap" && o.metadata.name === "gen-op-dashboard");
      assert.equal(cm?.metadata.namespace, "prod");
      assert.deepEqual(
        JSON.parse(cm?.data?.["gen-op.json"] ?? "{}"),
        grafanaDashboard({ name: "gen-op", namespace: ns }),
      );
      const rule = monitored.find((o) => o.kind === "PrometheusRule");
      assert.equal(rule?.metadata.namespace, "prod");
      // Prometheus' own templates in the alerts come out of Helm untouched.
      assert.deepEqual(rule, {
        ...prometheusRule({ name: "gen-op", namespace: ns }),
        metadata: { ...rule?.metadata },
      });
    },
  );
});
