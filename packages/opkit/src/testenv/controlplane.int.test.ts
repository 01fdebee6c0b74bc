/**
 * The local control plane does what a real cluster does for operators: the pinned release answers,
 * nodes are Ready, workloads run, Jobs complete or fail on demand, garbage collection and namespace
 * deletion finish, and the fault hooks (restart, compaction) behave as in a cluster.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { GoneError, NotFoundError } from "../client/errors.ts";
import { kindRef, type KubeObject } from "../client/types.ts";
import { useTestEnv, type TestEnv } from "./testing.ts";
import { KUBERNETES_VERSION } from "./versions.ts";
import { SIMULATE_EXIT_CODE_ANNOTATION } from "./stages.ts";
import { eventually } from "./eventually.ts";

type Obj = KubeObject & { spec?: Record<string, unknown>; status?: Record<string, unknown> };
const Nodes = kindRef<Obj>("v1", "Node");
const Pods = kindRef<Obj & { status?: { phase?: string } }>("v1", "Pod");
const Deployments = kindRef<Obj>("apps/v1", "Deployment");
const ReplicaSets = kindRef<Obj>("apps/v1", "ReplicaSet");
const Jobs = kindRef<
  Obj & { status?: { succeeded?: number; failed?: number; conditions?: { type: string; status: string }[] } }
>("batch/v1", "Job");
const ConfigMaps = kindRef<Obj>("v1", "ConfigMap");
const Namespaces = kindRef<Obj>("v1", "Namespace");

function podTemplate(
  labels: Record<string, string>,
  annotations: Record<string, string> = {},
  restartPolicy = "Always",
): unknown {
  return {
    metadata: { labels, annotations },
    spec: { restartPolicy, containers: [{ name: "main", image: "registry.example/app:1" }] },
  };
}

describe("opkit env control plane", () => {
  let env: TestEnv;
  let ns: string;
  before(async () => {
    env = await useTestEnv();
    ns = await env.namespace("controlplane");
  });
  after(async () => {
    await env?.cleanup();
  });

  it("reports the pinned Kubernetes release", async () => {
    const v = await env.client.raw<{ gitVersion: string }>("GET", "/version");
    assert.equal(v.gitVersion, KUBERNETES_VERSION);
  });

  it("has Ready simulated nodes", async () => {
    const nodes = await env.client.list(Nodes);
    const ready = nodes.items.filter((n) =>
      (n.status?.conditions as { type: string; status: string }[] | undefined)?.some(
        (c) => c.type === "Ready" && c.status === "True",
      ),
    );
    assert.ok(ready.length >= 3, `expected ≥ 3 Ready nodes, got ${ready.length}`);
  });

  it("runs a Deployment's pods and garbage-collects them when it is deleted", async () => {
    const labels = { app: "web" };
    await env.client.create({
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "web", namespace: ns },
      spec: { replicas: 2, selector: { matchLabels: labels }, template: podTemplate(labels) },
    });
    await eventually("2 Running pods", async () => {
      const pods = await env.client.list(Pods, { namespace: ns, labelSelector: "app=web" });
      return pods.items.filter((p) => p.status?.phase === "Running").length === 2;
    });
    const rs = await env.client.list(ReplicaSets, { namespace: ns });
    assert.equal(rs.items.length, 1);

    await env.client.delete(Deployments, "web", { namespace: ns, propagationPolicy: "Background" });
    await eventually("ReplicaSet and pods collected", async () => {
      const [r, p] = await Promise.all([
        env.client.list(ReplicaSets, { namespace: ns }),
        env.client.list(Pods, { namespace: ns, labelSelector: "app=web" }),
      ]);
      return r.items.length === 0 && p.items.length === 0;
    });
  });

  it("completes a Job, and fails one whose pod simulates a non-zero exit code", async () => {
    const job = (name: string, annotations: Record<string, string>): Obj => ({
      apiVersion: "batch/v1",
      kind: "Job",
      metadata: { name, namespace: ns },
      spec: { backoffLimit: 0, template: podTemplate({ job: name }, annotations, "Never") },
    });
    await env.client.create(job("ok", {}));
    await env.client.create(job("bad", { [SIMULATE_EXIT_CODE_ANNOTATION]: "3" }));
    const condition = (
      j: { status?: { conditions?: { type: string; status: string }[] } },
      type: string,
    ): boolean => (j.status?.conditions ?? []).some((c) => c.type === type && c.status === "True");
    await eventually("Job ok Complete", async () =>
      condition(await env.client.get(Jobs, "ok", { namespace: ns }), "Complete"),
    );
    await eventually("Job bad Failed", async () =>
      condition(await env.client.get(Jobs, "bad", { namespace: ns }), "Failed"),
    );
    const pods = await env.client.list(Pods, { namespace: ns, labelSelector: "job=bad" });
    const statuses = pods.items[0]?.status?.containerStatuses as {
      state: { terminated?: { exitCode: number } };
    }[];
    assert.equal(statuses[0]?.state.terminated?.exitCode, 3);
  });

  it("finishes deleting a namespace that has workloads", async () => {
    const name = await env.namespace("doomed");
    const labels = { app: "x" };
    await env.client.create({
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "x", namespace: name },
      spec: { replicas: 1, selector: { matchLabels: labels }, template: podTemplate(labels) },
    });
    await eventually(
      "pod running",
      async () => (await env.client.list(Pods, { namespace: name })).items.length === 1,
    );
    await env.client.delete(Namespaces, name);
    await eventually("namespace gone", async () => {
      try {
        await env.client.get(Namespaces, name);
        return false;
      } catch (err) {
        return err instanceof NotFoundError;
      }
    });
  });

  it("keeps every object across a kube-apiserver restart, and compaction makes old watches 410", async () => {
    const before: Obj = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "before", namespace: ns } };
    const first = await env.client.create(before);
    const oldRv = first.metadata.resourceVersion;
    for (let i = 0; i < 5; i++) {
      await env.client.create({
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: `more-${i}`, namespace: ns },
      });
    }
    const beforeList = await env.client.list(ConfigMaps, { namespace: ns });

    await env.restart("kube-apiserver");
    const afterList = await env.client.list(ConfigMaps, { namespace: ns });
    assert.deepEqual(
      afterList.items.map((c) => c.metadata.uid).sort(),
      beforeList.items.map((c) => c.metadata.uid).sort(),
    );

    const { revision } = await env.compact();
    assert.ok(revision > Number(oldRv));
    await assert.rejects(async () => {
      const events = await env.client.watch(ConfigMaps, {
        namespace: ns,
        resourceVersion: oldRv,
        timeoutSeconds: 5,
      });
      for await (const _ of events) {
        // any event before the error would mean history was served from before the compaction
      }
    }, GoneError);
  });
});
