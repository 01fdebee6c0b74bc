/**
 * The local control plane does what a real cluster does for operators: the pinned release answers,
 * nodes are Ready, workloads run, Jobs complete or fail on demand, garbage collection and namespace
 * deletion finish, and the fault hooks (restart, compaction) behave as in a cluster. It is fit for
 * scale tests (hundreds of Services, more than 110 pods per node), takes nodes of any size, labels and
 * taints after start, binds volume claims through its local provisioner, and runs with the feature
 * gates it was started with (ShardedListAndWatch in test runs) across restarts.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { randomBytes } from "node:crypto";
import {
  Nodes,
  Pods,
  PersistentVolumeClaims,
  Services,
  StatefulSets,
  type PersistentVolumeClaim,
  type Service,
} from "../client/builtins.ts";
import { GoneError, NotFoundError } from "../client/errors.ts";
import { kindRef, type KubeObject } from "../client/types.ts";
import { useTestEnv, type TestEnv } from "./testing.ts";
import { resolveKubernetesVersion } from "./versions.ts";
import { SIMULATE_EXIT_CODE_ANNOTATION } from "./stages.ts";
import { eventually } from "./eventually.ts";
import { DEFAULT_STORAGE_CLASS } from "./storage.ts";
import { PersistentVolumes } from "../client/builtins.ts";

type Obj = KubeObject & { spec?: Record<string, unknown>; status?: Record<string, unknown> };
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

  it("reports the Kubernetes release it was started with", async () => {
    const v = await env.client.raw<{ gitVersion: string }>("GET", "/version");
    assert.equal(v.gitVersion, env.kubernetesVersion);
    assert.equal(
      env.kubernetesVersion,
      resolveKubernetesVersion(),
      "OPKIT_KUBERNETES_VERSION or the default",
    );
  });

  it("has Ready simulated nodes", async () => {
    const nodes = await env.client.list(Nodes);
    const ready = nodes.items.filter((n) =>
      n.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True"),
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

  it("allocates ClusterIPs to 300 Services, beyond the 250 a /24 holds", async () => {
    const name = await env.namespace("services");
    const created: Service[] = [];
    for (let batch = 0; batch < 300; batch += 25) {
      created.push(
        ...(await Promise.all(
          Array.from({ length: 25 }, (_, i) =>
            env.client.create<Service>({
              apiVersion: "v1",
              kind: "Service",
              metadata: { name: `svc-${batch + i}`, namespace: name },
              spec: { selector: { app: "none" }, ports: [{ port: 80 }] },
            }),
          ),
        )),
      );
    }
    const ips = new Set(created.map((s) => s.spec?.clusterIP));
    assert.equal(ips.size, 300, "every Service has its own ClusterIP");
    for (const ip of ips) assert.match(ip ?? "", /^10\.0\.\d+\.\d+$/);
    assert.equal((await env.client.listAll(Services, { namespace: name })).items.length, 300);
  });

  it("runs more than 110 pods on one node", async () => {
    const node = await env.client.get(Nodes, "opkit-node-0");
    const podCapacity = Number(String(node.status?.allocatable?.pods ?? "0").replace(/k$/, "000"));
    assert.ok(podCapacity >= 1000, `default node pod capacity ${podCapacity}`);
    const name = await env.namespace("dense");
    const labels = { app: "dense" };
    const template = podTemplate(labels) as { spec: Record<string, unknown> };
    template.spec.nodeSelector = { "kubernetes.io/hostname": "opkit-node-0" };
    await env.client.create({
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "dense", namespace: name },
      spec: { replicas: 120, selector: { matchLabels: labels }, template },
    });
    await eventually(
      "120 Running pods on opkit-node-0",
      async () => {
        const pods = await env.client.listAll(Pods, { namespace: name });
        return (
          pods.items.filter((p) => p.status?.phase === "Running" && p.spec?.nodeName === "opkit-node-0")
            .length === 120
        );
      },
      120_000,
      500,
    );
  });

  it("adds nodes of other sizes, labels and taints that the scheduler honours", async () => {
    const pool = `pool-${randomBytes(3).toString("hex")}`;
    const taint = { key: "opkit.dev/test-pool", value: pool, effect: "NoSchedule" as const };
    const [small, big] = [`${pool}-small`, `${pool}-big`];
    const added = await env.addNodes([
      { name: small, labels: { pool }, taints: [taint], capacity: { cpu: "2", memory: "4Gi", pods: 3 } },
      { name: big, labels: { pool }, taints: [taint], capacity: { cpu: "16", "example.com/gpu": "2" } },
    ]);
    assert.deepEqual(added.map((n) => n.metadata.name).sort(), [big, small].sort());
    const live = await env.client.get(Nodes, small);
    assert.equal(live.status?.allocatable?.cpu, "2");
    assert.equal(live.metadata.labels?.pool, pool);
    // The node lifecycle controller may still hold its own node.kubernetes.io/not-ready taint for a
    // moment after the node is added (kwok marks it Ready right after): only ours is asserted.
    assert.deepEqual(
      live.spec?.taints?.map((t) => t.key).filter((k) => !k.startsWith("node.kubernetes.io/")),
      [taint.key],
    );

    const name = await env.namespace("sizes");
    const pod = (podName: string, requests: Record<string, string>, tolerate = true): Obj => ({
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: podName, namespace: name },
      spec: {
        nodeSelector: { pool },
        tolerations: tolerate
          ? [{ key: taint.key, operator: "Equal", value: pool, effect: "NoSchedule" }]
          : [],
        containers: [
          { name: "main", image: "registry.example/app:1", resources: { requests, limits: requests } },
        ],
      },
    });
    await env.client.create(pod("gpu", { cpu: "1", "example.com/gpu": "1" }));
    await env.client.create(pod("too-big", { cpu: "20" }));
    await env.client.create(pod("intolerant", { cpu: "100m" }, false));
    await eventually("the gpu pod Running on the big node", async () => {
      const p = await env.client.get(Pods, "gpu", { namespace: name });
      return p.status?.phase === "Running" && p.spec?.nodeName === big;
    });
    const unschedulable = async (podName: string, reason: RegExp): Promise<void> => {
      await eventually(`${podName} reported unschedulable`, async () => {
        const p = await env.client.get(Pods, podName, { namespace: name });
        const c = (
          p.status?.conditions as { type: string; reason?: string; message?: string }[] | undefined
        )?.find((x) => x.type === "PodScheduled");
        return c?.reason === "Unschedulable" && reason.test(c.message ?? "");
      });
      assert.equal((await env.client.get(Pods, podName, { namespace: name })).spec?.nodeName, undefined);
    };
    await unschedulable("too-big", /Insufficient cpu/);
    await unschedulable("intolerant", /untolerated taint/);
  });

  it("binds a StatefulSet's claims to local volumes and deletes a volume with its claim", async () => {
    const name = await env.namespace("storage");
    const labels = { app: "db" };
    await env.client.create({
      apiVersion: "apps/v1",
      kind: "StatefulSet",
      metadata: { name: "db", namespace: name },
      spec: {
        replicas: 2,
        serviceName: "db",
        selector: { matchLabels: labels },
        template: podTemplate(labels),
        volumeClaimTemplates: [
          {
            metadata: { name: "data" },
            spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } } },
          },
        ],
      },
    });
    await eventually("2 Running StatefulSet pods", async () => {
      const pods = await env.client.list(Pods, { namespace: name, labelSelector: "app=db" });
      return pods.items.filter((p) => p.status?.phase === "Running").length === 2;
    });
    const claims = (await env.client.list(PersistentVolumeClaims, { namespace: name })).items;
    assert.deepEqual(claims.map((c) => c.metadata.name).sort(), ["data-db-0", "data-db-1"]);
    for (const c of claims) {
      assert.equal(c.status?.phase, "Bound", c.metadata.name);
      assert.equal(c.spec?.storageClassName, DEFAULT_STORAGE_CLASS, "the default class applies");
      const pv = await env.client.get(PersistentVolumes, c.spec?.volumeName ?? "");
      assert.equal(pv.spec?.persistentVolumeReclaimPolicy, "Delete");
      assert.ok(existsSync(pv.spec?.hostPath?.path ?? "/nonexistent"), "the volume's directory exists");
    }

    // The provisioner is a component like the others: it survives a restart and keeps provisioning.
    await env.restart("local-provisioner");
    await env.client.create<PersistentVolumeClaim>({
      apiVersion: "v1",
      kind: "PersistentVolumeClaim",
      metadata: { name: "extra", namespace: name },
      spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "10Mi" } } },
    });
    const extra = await eventually("the extra claim Bound", async () => {
      const c = await env.client.get(PersistentVolumeClaims, "extra", { namespace: name });
      return c.status?.phase === "Bound" ? c : undefined;
    });

    await env.client.delete(StatefulSets, "db", { namespace: name });
    const volume = await env.client.get(PersistentVolumes, extra.spec?.volumeName ?? "");
    await env.client.delete(PersistentVolumeClaims, "extra", { namespace: name });
    await eventually("the released volume deleted", async () => {
      try {
        await env.client.get(PersistentVolumes, volume.metadata.name ?? "");
        return false;
      } catch (err) {
        return err instanceof NotFoundError;
      }
    });
    assert.equal(existsSync(volume.spec?.hostPath?.path ?? ""), false, "its directory is gone too");
  });

  it("runs with its feature gates, also after a restart: sharded lists with ShardedListAndWatch", async (t) => {
    if (!env.requires(t, { featureGate: "ShardedListAndWatch", what: "server-side shard selectors" })) return;
    await env.restart("kube-apiserver");
    const args = (await env.controlPlane.state())?.components["kube-apiserver"]?.args ?? [];
    assert.ok(
      args.includes("--feature-gates=ShardedListAndWatch=true"),
      `the restarted apiserver got the gate: ${args.join(" ")}`,
    );

    const name = await env.namespace("shards");
    for (let i = 0; i < 20; i++) {
      await env.client.create({
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: `c-${i}`, namespace: name },
      });
    }
    const shard = (from: string, to: string): string => `shardRange(object.metadata.uid, '${from}', '${to}')`;
    const list = (
      selector: string,
    ): Promise<{ metadata: { shardInfo?: { selector: string } }; items: Obj[] }> =>
      env.client.raw(
        "GET",
        `/api/v1/namespaces/${name}/configmaps?shardSelector=${encodeURIComponent(selector)}`,
      );
    const lower = await list(shard("0x0000000000000000", "0x8000000000000000"));
    const upper = await list(shard("0x8000000000000000", "0x10000000000000000"));
    const all = await env.client.list(ConfigMaps, { namespace: name });
    // Only a server with the gate on filters and says so in shardInfo; without it the parameter is ignored.
    assert.equal(lower.metadata.shardInfo?.selector, shard("0x0000000000000000", "0x8000000000000000"));
    const uids = (l: { items: Obj[] }): string[] => l.items.map((c) => c.metadata.uid ?? "").sort();
    assert.deepEqual([...uids(lower), ...uids(upper)].sort(), uids(all), "the two shards partition the list");
    assert.ok(lower.items.length > 0 && upper.items.length > 0, "20 objects land in both halves");
  });
});
