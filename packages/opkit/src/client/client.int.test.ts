/**
 * KubeClient against the real control plane: typed errors from real requests, server-side apply
 * conflicts and force, discovery of a CRD installed after the client started, dry-run, deleteAllOf,
 * preconditions, subresources and retries of throttled reads.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { KubeConfig } from "@kubernetes/client-node";
import { KubeClient } from "./client.ts";
import {
  AlreadyExistsError,
  ConflictError,
  ForbiddenError,
  GoneError,
  InvalidError,
  NotFoundError,
  ServerError,
  TimeoutError,
  TooManyRequestsError,
  UnknownKindError,
} from "./errors.ts";
import { kindRef, type KubeObject } from "./types.ts";
import { Deployments, type Deployment } from "./builtins.ts";
import { useTestEnv, type TestEnv } from "../testenv/testing.ts";
import * as Type from "typebox/type";
import { defineKind } from "../api/kind.ts";
import { crdFor } from "../generate/crd.ts";

type ConfigMap = KubeObject & { data?: Record<string, string> };
const ConfigMaps = kindRef<ConfigMap>("v1", "ConfigMap");
const group = `w${Date.now().toString(36)}.test.opkit.dev`;
// Test kinds are defined the way operators define theirs: the CRD comes from the definition.
const Widgets = defineKind({
  group,
  version: "v1",
  kind: "Widget",
  spec: Type.Object({ size: Type.Integer({ minimum: 1 }) }),
  status: Type.Object({ ready: Type.Optional(Type.Boolean()) }),
});
const widgetCrd = crdFor(Widgets) as unknown as KubeObject;

async function impersonating(
  env: TestEnv,
  user: string,
  opts: { maxRetries?: number; onRequest?: () => void } = {},
): Promise<KubeClient> {
  const kc = new KubeConfig();
  kc.loadFromFile(env.kubeconfigPath);
  (kc.getCurrentUser() as { impersonateUser?: string }).impersonateUser = user;
  return KubeClient.fromConfig(kc, {
    maxRetries: opts.maxRetries,
    onRequest: opts.onRequest,
    sleep: async () => undefined,
  });
}

describe("KubeClient against opkit env", () => {
  let env: TestEnv;
  let ns: string;
  before(async () => {
    env = await useTestEnv();
    ns = await env.namespace("client");
  });
  after(async () => {
    await env?.cleanup();
  });

  const cm = (name: string, data: Record<string, string> = {}): ConfigMap => ({
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name, namespace: ns },
    data,
  });

  it("raises NotFound, AlreadyExists, Conflict and Invalid from real requests", async () => {
    await assert.rejects(env.client.get(ConfigMaps, "missing", { namespace: ns }), (e: unknown) => {
      assert.ok(e instanceof NotFoundError);
      assert.equal(e.request.method, "GET");
      assert.match(e.message, /configmaps "missing" not found/);
      return true;
    });
    const created = await env.client.create(cm("one"));
    await assert.rejects(env.client.create(cm("one")), AlreadyExistsError);

    await env.client.update({ ...created, data: { a: "1" } });
    await assert.rejects(env.client.update({ ...created, data: { a: "2" } }), (e: unknown) => {
      assert.ok(e instanceof ConflictError, "a stale resourceVersion is a Conflict");
      assert.match(e.message, /the object has been modified/);
      return true;
    });

    await assert.rejects(env.client.create(cm("Bad_Name")), (e: unknown) => {
      assert.ok(e instanceof InvalidError);
      assert.ok(
        e.causes.some((c) => c.field === "metadata.name"),
        JSON.stringify(e.causes),
      );
      return true;
    });
  });

  it("raises Forbidden naming the verb, resource and user", async () => {
    const nobody = await impersonating(env, "opkit-nobody");
    try {
      await assert.rejects(nobody.list(ConfigMaps, { namespace: ns }), (e: unknown) => {
        assert.ok(e instanceof ForbiddenError);
        assert.match(e.message, /User "opkit-nobody" cannot list resource "configmaps"/);
        return true;
      });
    } finally {
      await nobody.close();
    }
  });

  it("raises Gone for a watch from a resourceVersion older than the server keeps", async () => {
    await assert.rejects(async () => {
      for await (const _ of await env.client.watch(ConfigMaps, {
        namespace: ns,
        resourceVersion: "1",
        timeoutSeconds: 5,
      })) {
        // no event may arrive from a compacted history
      }
    }, GoneError);
  });

  it("raises TooManyRequests when an eviction would break a PodDisruptionBudget", async () => {
    const labels = { app: "guarded" };
    await env.client.create({
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "guarded", namespace: ns, labels },
      spec: { containers: [{ name: "c", image: "registry.example/app:1" }] },
    } as KubeObject);
    await env.client.create({
      apiVersion: "policy/v1",
      kind: "PodDisruptionBudget",
      metadata: { name: "guard", namespace: ns },
      spec: { minAvailable: 1, selector: { matchLabels: labels } },
    } as KubeObject);
    const Pdbs = kindRef<KubeObject & { status?: { currentHealthy?: number; disruptionsAllowed?: number } }>(
      "policy/v1",
      "PodDisruptionBudget",
    );
    // Wait until the pod runs and the disruption controller has counted it against the budget.
    for (let i = 0; i < 150; i++) {
      const pdb = await env.client.get(Pdbs, "guard", { namespace: ns });
      if (pdb.status?.currentHealthy === 1 && pdb.status.disruptionsAllowed === 0) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    const eviction = {
      apiVersion: "policy/v1",
      kind: "Eviction",
      metadata: { name: "guarded", namespace: ns },
    };
    const last = await env.client
      .raw("POST", `/api/v1/namespaces/${ns}/pods/guarded/eviction`, eviction)
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    assert.ok(last instanceof TooManyRequestsError, `expected 429, got ${String(last)}`);
    assert.match(last.message, /disruption budget/);
  });

  it("server-side apply: a conflict between managers, then force takes ownership", async () => {
    await env.client.apply(cm("ssa", { owner: "alpha" }), { fieldManager: "alpha" });
    await assert.rejects(
      env.client.apply(cm("ssa", { owner: "beta" }), { fieldManager: "beta" }),
      (e: unknown) => {
        assert.ok(e instanceof ConflictError);
        assert.match(e.message, /conflict with "alpha"/);
        return true;
      },
    );
    const forced = await env.client.apply(cm("ssa", { owner: "beta" }), {
      fieldManager: "beta",
      force: true,
    });
    assert.equal(forced.data?.owner, "beta");
    assert.ok(forced.metadata.managedFields?.some((m) => m.manager === "beta"));
  });

  it("dry-run writes change nothing; preconditions and deleteAllOf work", async () => {
    await env.client.create(cm("dry"), { dryRun: true });
    await assert.rejects(env.client.get(ConfigMaps, "dry", { namespace: ns }), NotFoundError);

    const pre = await env.client.create(cm("pre"));
    await assert.rejects(
      env.client.delete(ConfigMaps, "pre", { namespace: ns, preconditions: { uid: "wrong-uid" } }),
      ConflictError,
    );
    await env.client.delete(ConfigMaps, "pre", { namespace: ns, preconditions: { uid: pre.metadata.uid } });

    for (const n of ["g1", "g2", "g3"]) {
      await env.client.create({
        ...cm(n),
        metadata: { name: n, namespace: ns, labels: { group: "doomed" } },
      });
    }
    await env.client.deleteAllOf(ConfigMaps, { namespace: ns, labelSelector: "group=doomed" });
    const left = await env.client.list(ConfigMaps, { namespace: ns, labelSelector: "group=doomed" });
    assert.equal(left.items.length, 0);
  });

  it("serves a kind whose CRD is installed after the client started, with its status subresource", async () => {
    const fresh = await KubeClient.load(env.kubeconfigPath);
    try {
      await assert.rejects(fresh.list(Widgets, { namespace: ns }), UnknownKindError);
      await env.installCrds([widgetCrd]);
      const w = await fresh.create({
        apiVersion: `${group}/v1`,
        kind: "Widget",
        metadata: { name: "w", namespace: ns },
        spec: { size: 2 },
      });
      assert.equal(w.spec?.size, 2);
      const withStatus = await fresh.patch(
        Widgets,
        "w",
        { status: { ready: true } },
        { namespace: ns, type: "merge", subresource: "status" },
      );
      assert.deepEqual((withStatus as { status?: unknown }).status, { ready: true });
      await assert.rejects(
        fresh.create({
          apiVersion: `${group}/v1`,
          kind: "Widget",
          metadata: { name: "bad", namespace: ns },
          spec: { size: 0 },
        }),
        (e: unknown) => e instanceof InvalidError && e.causes.some((c) => c.field === "spec.size"),
      );
    } finally {
      await fresh.close();
      await env.client.delete(
        kindRef("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
        `widgets.${group}`,
      );
    }
  });

  it("types built-in kinds, and patches with strategic-merge, merge and JSON patch semantics", async () => {
    const d: Deployment = {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "typed", namespace: ns },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: "typed" } },
        template: {
          metadata: { labels: { app: "typed" } },
          spec: {
            containers: [
              { name: "a", image: "x:1" },
              { name: "b", image: "y:1" },
            ],
          },
        },
      },
    };
    const created = await env.client.create(d);
    assert.equal(typeof created.metadata.creationTimestamp, "string", "timestamps stay RFC 3339 strings");
    const images = (x: Deployment): string[] =>
      (x.spec?.template.spec?.containers ?? []).map((c) => `${c.name}=${c.image}`);
    const containers = (list: { name: string; image: string }[]): unknown => ({
      spec: { template: { spec: { containers: list } } },
    });
    // Strategic merge keys containers by name: "a" stays, "b" changes.
    const strategic = await env.client.patch(
      Deployments,
      "typed",
      containers([{ name: "b", image: "y:2" }]),
      {
        namespace: ns,
        type: "strategic",
      },
    );
    assert.deepEqual(images(strategic), ["a=x:1", "b=y:2"]);
    // A JSON merge patch replaces the list.
    const merged = await env.client.patch(Deployments, "typed", containers([{ name: "b", image: "y:3" }]), {
      namespace: ns,
      type: "merge",
    });
    assert.deepEqual(images(merged), ["b=y:3"]);
    const json = await env.client.patch(
      Deployments,
      "typed",
      [{ op: "replace", path: "/spec/replicas", value: 3 }],
      {
        namespace: ns,
        type: "json",
      },
    );
    assert.equal(json.spec?.replicas, 3);
  });

  it("raises Timeout when the server gives up, and ServerError (retried first) when an API is unavailable", async () => {
    // The apiserver's timeout filter answers 504 once a request outlives its ?timeout.
    await assert.rejects(env.client.raw("GET", "/api/v1/configmaps?timeout=1ns"), TimeoutError);

    // An aggregated API whose backing Service does not exist answers 503 from the aggregator.
    const name = `v1.${ns}.unavailable.opkit.dev`;
    const APIServices = kindRef("apiregistration.k8s.io/v1", "APIService");
    await env.client.create({
      apiVersion: "apiregistration.k8s.io/v1",
      kind: "APIService",
      metadata: { name },
      spec: {
        group: `${ns}.unavailable.opkit.dev`,
        version: "v1",
        groupPriorityMinimum: 100,
        versionPriority: 10,
        insecureSkipTLSVerify: true,
        service: { namespace: "default", name: "does-not-exist" },
      },
    } as KubeObject);
    let requests = 0;
    const kc = new KubeConfig();
    kc.loadFromFile(env.kubeconfigPath);
    const client = await KubeClient.fromConfig(kc, {
      maxRetries: 1,
      sleep: async () => undefined,
      onRequest: () => requests++,
    });
    try {
      let last: unknown;
      for (let i = 0; i < 50 && !(last instanceof ServerError); i++) {
        requests = 0;
        last = await client.raw("GET", `/apis/${ns}.unavailable.opkit.dev/v1`).then(
          () => undefined,
          (e: unknown) => e,
        );
        if (!(last instanceof ServerError)) await new Promise((r) => setTimeout(r, 200));
      }
      assert.ok(last instanceof ServerError, `expected 503, got ${String(last)}`);
      assert.equal(last.code, 503);
      assert.equal(requests, 2, "a safe request is retried (here once) before the error is raised");
    } finally {
      await client.close();
      await env.client.delete(APIServices, name);
    }
  });
});
