/**
 * The built-in schemas against a real API server: the committed files match what the generator makes
 * of this server's OpenAPI; kinds that embed built-in types (an AppService whose spec holds ServicePorts
 * and whose status is a DeploymentStatus, a WebApp with resources, tolerations and a pod template, the
 * README's Memcached) get CRDs the server accepts, and full objects written through it come back
 * unchanged, so a status comparison does not rewrite status on every reconcile. Last, every built-in
 * type of every generated group-version, with every field its OpenAPI declares, makes the same round trip.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import * as Type from "typebox/type";
import { defineKind, type KindDefinition, type ObjectOf } from "../api/kind.ts";
import { conditions, listType, withoutDescriptions } from "../api/k8s.ts";
import * as schemas from "../api/schemas/index.ts";
import * as appsv1 from "../api/schemas/apps/v1.ts";
import * as corev1 from "../api/schemas/core/v1.ts";
import { CustomResourceDefinitions } from "../client/builtins.ts";
import { updateStatusIfChanged } from "../helpers/status.ts";
import { useTestEnv, type TestEnv } from "../testenv/testing.ts";
import { builtinSchemaFiles, fetchBuiltinOpenApi } from "./builtin-schemas.ts";
import { crdFor } from "./crd.ts";
import { fullSample } from "./testdata/full-sample.ts";

const group = "schemas-test.opkit.dev";

const AppService = defineKind({
  group,
  version: "v1",
  kind: "AppService",
  spec: Type.Object({
    image: Type.String(),
    replicas: Type.Integer({ minimum: 0 }),
    // Merged by port and protocol, as in a Service: protocol defaults to TCP, so it may key the list.
    ports: listType(Type.Array(corev1.ServicePort), "map", ["port", "protocol"]),
  }),
  status: appsv1.DeploymentStatus,
});

const WebApp = defineKind({
  group,
  version: "v1",
  kind: "WebApp",
  spec: Type.Object({
    resources: corev1.ResourceRequirements,
    tolerations: Type.Optional(Type.Array(corev1.Toleration)),
    template: Type.Optional(withoutDescriptions(corev1.PodTemplateSpec)),
  }),
  status: Type.Object({ conditions: Type.Optional(conditions()) }),
});

/** The README quickstart's kind, as written there. */
const Memcached = defineKind({
  group,
  version: "v1alpha1",
  kind: "Memcached",
  spec: Type.Object({
    size: Type.Integer({ minimum: 1, maximum: 100, default: 1, description: "How many instances to run." }),
  }),
  status: Type.Object({ conditions: Type.Optional(conditions()) }),
  printerColumns: [{ name: "Size", type: "integer", jsonPath: ".spec.size" }],
});

/** What users wrote by hand before: a ServicePort without appProtocol. The server prunes it. */
const HandWritten = defineKind({
  group,
  version: "v1",
  kind: "HandWritten",
  spec: Type.Object({}),
  status: Type.Object({
    ports: Type.Optional(
      Type.Array(
        Type.Object({
          name: Type.Optional(Type.String()),
          port: Type.Integer(),
          protocol: Type.Optional(Type.String()),
        }),
      ),
    ),
  }),
});

type Json = Record<string, unknown>;

/** The field names a generated schema declares. */
function fieldsOf(schema: unknown): string[] {
  return Object.keys((schema as { properties?: Json }).properties ?? {});
}

/** The built-in types no other type embeds (Pod, Deployment, ...): together they hold every type. */
function rootTypes(): Map<string, [string, Json][]> {
  const all: [string, string, Json][] = [];
  for (const [g, versions] of Object.entries(schemas))
    for (const [v, types] of Object.entries(versions as unknown as Record<string, Record<string, Json>>))
      for (const [name, schema] of Object.entries(types)) all.push([`${g}/${v}`, name, schema]);
  // Each type with fields has its own `properties` object; uses share it (also with their own description).
  const embedded = new Set<unknown>();
  const walk = (node: unknown, top: boolean): void => {
    if (typeof node !== "object" || node === null) return;
    const n = node as Json;
    if (!top && n.properties) {
      if (embedded.has(n.properties)) return;
      embedded.add(n.properties);
    }
    walk(n.items, false);
    walk(n.additionalProperties, false);
    if (typeof n.properties === "object" && n.properties !== null)
      for (const child of Object.values(n.properties)) walk(child, false);
  };
  for (const [, , schema] of all) walk(schema, true);
  const roots = new Map<string, [string, Json][]>();
  for (const [gv, name, schema] of all)
    if (schema.properties && !embedded.has(schema.properties))
      roots.set(gv, [...(roots.get(gv) ?? []), [name, schema]]);
  return roots;
}

/** The definition name of a generated type in the server's OpenAPI. */
function openApiKey(gv: string, name: string): string {
  const [g, v] = gv.split("/") as [string, string];
  if (g === "meta") return `io.k8s.apimachinery.pkg.apis.meta.${v}.${name}`;
  if (g === "apiextensions") return `io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.${v}.${name}`;
  return `io.k8s.api.${g}.${v}.${name}`;
}

/** One kind per group-version whose spec holds each root type (without descriptions: size). */
const everyKinds = [...rootTypes()].map(([gv, types]) => {
  const [g, v] = gv.split("/") as [string, string];
  const fields: Record<string, unknown> = {};
  const keys: Record<string, string> = {};
  for (const [name, schema] of types) {
    const field = `${name[0]?.toLowerCase() ?? ""}${name.slice(1)}`;
    fields[field] = Type.Optional(withoutDescriptions(schema as never));
    keys[field] = openApiKey(gv, name);
  }
  const kind = defineKind({
    group,
    version: "v1",
    kind: `Every${g[0]?.toUpperCase() ?? ""}${g.slice(1)}${v.toUpperCase()}`,
    spec: Type.Object(fields as never),
  }) as unknown as KindDefinition;
  return { kind, keys };
});

describe("built-in schemas on the API server", () => {
  let env: TestEnv;
  let ns: string;
  let openApi: Awaited<ReturnType<typeof fetchBuiltinOpenApi>>;
  const crds = [AppService, WebApp, Memcached, HandWritten, ...everyKinds.map((e) => e.kind)].map((k) =>
    crdFor(k),
  );

  before(async () => {
    env = await useTestEnv();
    ns = await env.namespace("schemas");
    openApi = await fetchBuiltinOpenApi(env.client);
    await env.installCrds(crds);
  });
  after(async () => {
    // The shared env stays as it was: these CRDs are large, and every CRD adds to the server's OpenAPI.
    for (const crd of crds) await env?.client.delete(CustomResourceDefinitions, crd.metadata.name ?? "");
    await env?.cleanup();
  });

  it("the committed files are what the generator makes of this server's OpenAPI", async () => {
    const { kubernetesVersion, documents } = openApi;
    const files = builtinSchemaFiles(documents, { kubernetesVersion });
    const src = join(import.meta.dirname, "..");
    const stale: string[] = [];
    for (const [path, content] of files) {
      const committed = await readFile(join(src, path), "utf8").catch(() => "");
      if (committed !== content) stale.push(path);
    }
    assert.deepEqual(stale, [], `out of step with kube-apiserver ${kubernetesVersion}: run \`make schemas\``);
  });

  it("AppService: ServicePorts in spec and a DeploymentStatus in status come back unchanged", async () => {
    const ports: ObjectOf<typeof AppService>["spec"]["ports"] = [
      {
        name: "http",
        protocol: "TCP",
        appProtocol: "kubernetes.io/h2c",
        port: 80,
        targetPort: 8080,
        nodePort: 30080,
      },
      {
        name: "metrics",
        protocol: "UDP",
        appProtocol: "prometheus",
        port: 9090,
        targetPort: "metrics",
        nodePort: 30090,
      },
    ];
    for (const field of fieldsOf(corev1.ServicePort))
      assert.ok(field in (ports[0] as unknown as Json), `the test object sets ServicePort.${field}`);
    const app = AppService.new("web", { image: "nginx:1.27", replicas: 3, ports }, { namespace: ns });
    const created = await env.client.create(app);
    assert.deepEqual(created.spec, app.spec);

    const status: appsv1.DeploymentStatus = {
      observedGeneration: 4,
      replicas: 3,
      updatedReplicas: 3,
      readyReplicas: 2,
      availableReplicas: 2,
      unavailableReplicas: 1,
      terminatingReplicas: 1,
      collisionCount: 1,
      conditions: [
        {
          type: "Available",
          status: "True",
          reason: "MinimumReplicasAvailable",
          message: "Deployment has minimum availability.",
          lastUpdateTime: "2026-01-02T03:04:05Z",
          lastTransitionTime: "2026-01-02T03:04:05Z",
        },
        {
          type: "Progressing",
          status: "True",
          reason: "NewReplicaSetAvailable",
          message: 'ReplicaSet "web-7d9c" has successfully progressed.',
          lastUpdateTime: "2026-01-02T03:05:00Z",
          lastTransitionTime: "2026-01-02T03:04:00Z",
        },
      ],
    };
    for (const field of fieldsOf(appsv1.DeploymentStatus))
      assert.ok(field in status, `the test object sets DeploymentStatus.${field}`);
    assert.equal(await updateStatusIfChanged(env.client, created, status), true);
    const read = await env.client.get(AppService, "web", { namespace: ns });
    assert.deepEqual(read.spec, app.spec);
    assert.deepEqual(read.status, status);
    // The reconcile that wrote it sees nothing to write: no status loop.
    assert.equal(await updateStatusIfChanged(env.client, read, status), false);
  });

  it("a hand-written schema missing a field loses it, and the same comparison then writes every time", async () => {
    const obj = HandWritten.new("hw", {}, { namespace: ns });
    const created = await env.client.create(obj);
    const status = { ports: [{ name: "http", port: 80, protocol: "TCP", appProtocol: "http" }] };
    await updateStatusIfChanged(env.client, created, status as never);
    const read = await env.client.get(HandWritten, "hw", { namespace: ns });
    assert.deepEqual(read.status, { ports: [{ name: "http", port: 80, protocol: "TCP" }] });
    assert.equal(await updateStatusIfChanged(env.client, read, status as never), true);
  });

  it("WebApp: resource requirements, tolerations and a pod template come back unchanged", async () => {
    const spec: ObjectOf<typeof WebApp>["spec"] = {
      resources: {
        limits: { cpu: "500m", memory: "1Gi", "nvidia.com/gpu": 1 },
        requests: { cpu: "250m", memory: "512Mi" },
        claims: [{ name: "gpu", request: "large" }],
      },
      tolerations: [
        { key: "dedicated", operator: "Equal", value: "web", effect: "NoSchedule" },
        {
          key: "node.kubernetes.io/unreachable",
          operator: "Exists",
          effect: "NoExecute",
          tolerationSeconds: 300,
        },
      ],
      template: {
        metadata: { labels: { app: "web" }, annotations: { "a/b": "c" } },
        spec: {
          containers: [
            {
              name: "web",
              image: "nginx:1.27",
              ports: [{ name: "http", containerPort: 8080, protocol: "TCP" }],
              env: [{ name: "MODE", value: "prod" }],
              resources: { limits: { cpu: "1" } },
              readinessProbe: { httpGet: { path: "/healthz", port: "http" }, periodSeconds: 5 },
              livenessProbe: { tcpSocket: { port: 8080 } },
            },
          ],
          imagePullSecrets: [{ name: "registry" }],
          tolerations: [{ key: "k", operator: "Exists" }],
        },
      },
    };
    for (const field of fieldsOf(corev1.Toleration))
      assert.ok(
        spec.tolerations?.some((t) => field in t),
        `the test object sets Toleration.${field}`,
      );
    const created = await env.client.create(WebApp.new("web", spec, { namespace: ns }));
    assert.deepEqual(created.spec, spec);
  });

  it("the README's Memcached keeps metav1 and Deployment-style conditions", async () => {
    const created = await env.client.create(Memcached.new("mc", { size: 2 }, { namespace: ns }));
    const status: NonNullable<ObjectOf<typeof Memcached>["status"]> = {
      conditions: [
        {
          type: "Ready",
          status: "True",
          reason: "ReconcileSucceeded",
          message: "",
          observedGeneration: 1,
          lastTransitionTime: "2026-01-02T03:04:05Z",
        },
        // Copied from a Deployment: lastUpdateTime, and no message.
        {
          type: "Available",
          status: "False",
          reason: "MinimumReplicasUnavailable",
          lastUpdateTime: "2026-01-02T03:04:06Z",
          lastTransitionTime: "2026-01-02T03:04:05Z",
        },
      ],
    };
    assert.equal(await updateStatusIfChanged(env.client, created, status), true);
    const read = await env.client.get(Memcached, "mc", { namespace: ns });
    assert.deepEqual(read.status, status);
    assert.equal(await updateStatusIfChanged(env.client, read, status), false);
  });

  it("every built-in type, with every field the server's OpenAPI declares, comes back unchanged", async () => {
    const components: Record<string, unknown> = {};
    for (const doc of Object.values(openApi.documents)) Object.assign(components, doc.components?.schemas);
    // An embedded ObjectMeta keeps what the server keeps for embedded objects (as controller-gen's
    // generateEmbeddedObjectMeta): name, namespace, labels, annotations, finalizers. Sample only those.
    const META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
    const meta = components[META] as Json & { properties: Json };
    components[META] = {
      ...meta,
      properties: Object.fromEntries(
        Object.entries(meta.properties).filter(([k]) =>
          ["name", "namespace", "labels", "annotations", "finalizers"].includes(k),
        ),
      ),
    };
    for (const { kind, keys } of everyKinds) {
      // Sampled from the server's own description of each type, not from the generated schema: a field
      // the generator left out would be pruned and show up as a difference.
      const spec: Json = {};
      for (const [field, key] of Object.entries(keys))
        spec[field] = fullSample(components[key], { components });
      assert.deepEqual(
        kind.validate({ spec }),
        [],
        `${kind.kind}: the sample is valid for the TypeBox schema`,
      );
      const obj = {
        apiVersion: kind.apiVersion,
        kind: kind.kind,
        metadata: { name: "full", namespace: ns },
        spec,
      };
      const created = await env.client.create(obj);
      assert.deepEqual(created.spec, spec, `${kind.kind}: what the server stored`);
    }
  });
});
