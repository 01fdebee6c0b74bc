/**
 * The scheduler against a real control plane (opkit env) with kwok nodes of different sizes, labels and
 * taints, run as its own process under its generated RBAC only, with leader election and three profiles
 * from a `--config` file:
 * - pods land only on the node that passes every filter (readiness/cordon, taints, nodeSelector and
 *   required affinity, resource fit counting the pods already placed, seed 004's label presence), and a
 *   pod tolerating a taint may use the tainted node;
 * - with two candidates the profile's weights decide: the same pod goes to the emptier node under a
 *   profile weighing LeastAllocated, to the evener one under a profile weighing BalancedAllocation;
 * - an impossible pod gets PodScheduled=False (Unschedulable) with kube-scheduler's per-node message
 *   and a FailedScheduling Warning Event, and is placed once a bound pod goes and makes room;
 * - pods for the default scheduler, or for another scheduler, are left alone;
 * - a wrong `--config` stops it at start with the field named; a standby replica takes over when the
 *   leader stops.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { EventsV1, Leases, Pods, type Pod } from "opkit";
import {
  eventually,
  startOperatorProcess,
  type OperatorProcess,
  type OperatorProject,
  type TestEnv,
} from "opkit/testenv";
import { operatorTest } from "../../demo/operator-test.ts";

const root = fileURLToPath(new URL("..", import.meta.url));

const CONFIG = `
apiVersion: opkit.dev/v1alpha1
kind: SchedulerConfiguration
profiles:
  - schedulerName: opkit-scheduler
    plugins:
      filter:
        enabled: [{ name: LabelPresence }]
    pluginConfig:
      - name: LabelPresence
        args: { labels: [selectable], presence: true }
  - schedulerName: opkit-least
    plugins:
      score:
        enabled: [{ name: LeastAllocated, weight: 5 }]
  - schedulerName: opkit-balanced
    plugins:
      score:
        enabled: [{ name: BalancedAllocation, weight: 5 }]
`;

describe("opkit-scheduler", () => {
  let env: TestEnv;
  let ns: string;
  let project: OperatorProject;
  let op: OperatorProcess;
  let dir: string;

  operatorTest(root, {
    setup: async (t) => {
      ({ env, project, ns } = t);
      const filter = { "sched-test": "filter", zone: "a", selectable: "" };
      const size = (cpu: string, memory: string) => ({ cpu, memory });
      await env.addNodes([
        { name: "sched-fit", labels: filter, capacity: size("4", "8Gi") },
        {
          name: "sched-taint",
          labels: filter,
          capacity: size("4", "8Gi"),
          taints: [{ key: "dedicated", value: "gpu", effect: "NoSchedule" }],
        },
        { name: "sched-small", labels: filter, capacity: size("1", "8Gi") },
        {
          name: "sched-unlabelled",
          labels: { "sched-test": "filter", zone: "a" },
          capacity: size("4", "8Gi"),
        },
        { name: "sched-cordoned", labels: filter, capacity: size("4", "8Gi"), unschedulable: true },
        { name: "sched-zone-b", labels: { ...filter, zone: "b" }, capacity: size("4", "8Gi") },
        // A has memory to spare, B cpu and memory in proportion.
        { name: "sched-a", labels: { "sched-test": "score" }, capacity: size("4", "64Gi") },
        { name: "sched-b", labels: { "sched-test": "score" }, capacity: size("4", "4Gi") },
        { name: "sched-burst", labels: { "sched-test": "burst" }, capacity: size("4", "8Gi") },
      ]);
      dir = await mkdtemp(join(tmpdir(), "opkit-scheduler-"));
      await writeFile(join(dir, "config.yaml"), CONFIG);
      // The Lease lives where the pod would run (the generated Deployment sets POD_NAMESPACE).
      process.env.POD_NAMESPACE = ns;
      op = await project.start(["--leader-elect", "--config", join(dir, "config.yaml")]);
      await op.waitForLine(/became leader/);
    },
    afterCleanup: async () => {
      if (dir) await rm(dir, { recursive: true, force: true });
    },
  });

  function newPod(
    name: string,
    o: { scheduler?: string; cpu?: string; memory?: string; selector?: Record<string, string> } & Partial<
      NonNullable<Pod["spec"]>
    > = {},
  ): Pod {
    const { scheduler, cpu, memory, selector, ...spec } = o;
    const requests: Record<string, string> = {};
    if (cpu) requests.cpu = cpu;
    if (memory) requests.memory = memory;
    return {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name, namespace: ns },
      spec: {
        schedulerName: scheduler,
        nodeSelector: selector,
        containers: [{ name: "app", image: "registry.example/app:1", resources: { requests } }],
        ...spec,
      },
    };
  }

  const zoneA = {
    nodeAffinity: {
      requiredDuringSchedulingIgnoredDuringExecution: {
        nodeSelectorTerms: [{ matchExpressions: [{ key: "zone", operator: "In" as const, values: ["a"] }] }],
      },
    },
  };

  const nodeOf = (name: string, timeoutMs = 20_000) =>
    eventually(
      `${name} bound`,
      async () => (await env.client.get(Pods, name, { namespace: ns })).spec?.nodeName,
      timeoutMs,
    );

  it("places pods only on the node that passes every filter; a tolerating pod may use the tainted node", async () => {
    const filterPod = (name: string) =>
      newPod(name, {
        scheduler: "opkit-scheduler",
        cpu: "1500m",
        selector: { "sched-test": "filter" },
        affinity: zoneA,
      });
    await env.client.create(filterPod("filtered-1"));
    await env.client.create(filterPod("filtered-2"));
    await env.client.create(
      newPod("tolerating", {
        scheduler: "opkit-scheduler",
        selector: { "kubernetes.io/hostname": "sched-taint" },
        tolerations: [{ key: "dedicated", operator: "Equal", value: "gpu", effect: "NoSchedule" }],
      }),
    );
    assert.equal(await nodeOf("filtered-1"), "sched-fit");
    assert.equal(await nodeOf("filtered-2"), "sched-fit");
    assert.equal(await nodeOf("tolerating"), "sched-taint");
    const bound = await env.client.get(Pods, "filtered-1", { namespace: ns });
    assert.equal(bound.status?.conditions?.find((c) => c.type === "PodScheduled")?.status, "True");
    const scheduled = await eventually(
      "a Scheduled Event",
      async () =>
        (await env.client.list(EventsV1, { namespace: ns })).items.find(
          (e) => e.regarding?.name === "filtered-1" && e.reason === "Scheduled",
        ),
      10_000,
    );
    assert.equal(scheduled.reportingController, "opkit.dev/scheduler");
    assert.equal(scheduled.note, `Successfully assigned ${ns}/filtered-1 to sched-fit`);
  });

  it("an impossible pod says why on every node, with an Event, and is placed once room is made", async (t) => {
    await env.client.create(
      newPod("impossible", {
        scheduler: "opkit-scheduler",
        cpu: "2",
        selector: { "sched-test": "filter" },
        affinity: zoneA,
      }),
    );
    const message = await eventually(
      "PodScheduled=False",
      async () => {
        const p = await env.client.get(Pods, "impossible", { namespace: ns });
        const c = p.status?.conditions?.find((x) => x.type === "PodScheduled");
        return c?.status === "False" && c.reason === "Unschedulable" ? c.message : undefined;
      },
      20_000,
    );
    t.diagnostic(`PodScheduled=False: ${message}`);
    assert.match(message ?? "", /^0\/\d+ nodes are available: /);
    // sched-fit holds 3 of its 4 cpus, sched-small has 1; each other test node fails one filter.
    for (const part of [
      "2 Insufficient cpu",
      "1 node(s) had untolerated taint {dedicated: gpu}",
      "1 node(s) didn't have the requested labels",
      "1 node(s) were unschedulable",
      "node(s) didn't match Pod's node affinity/selector",
    ]) {
      assert.ok(message?.includes(part), `"${part}" in "${message}"`);
    }
    const event = await eventually(
      "a FailedScheduling Event",
      async () =>
        (await env.client.list(EventsV1, { namespace: ns })).items.find(
          (e) => e.regarding?.name === "impossible" && e.reason === "FailedScheduling",
        ),
      10_000,
    );
    assert.equal(event.type, "Warning");
    assert.equal(event.note, message);
    assert.equal((await env.client.get(Pods, "impossible", { namespace: ns })).spec?.nodeName, undefined);

    // A bound pod goes: 2.5 cpus free on sched-fit.
    const freed = Date.now();
    await env.client.delete(Pods, "filtered-2", { namespace: ns, gracePeriodSeconds: 0 });
    assert.equal(await nodeOf("impossible", 30_000), "sched-fit");
    t.diagnostic(`placed ${Date.now() - freed} ms after the bound pod was deleted`);
  });

  it("the profile's weights decide between candidates", async (t) => {
    const scored = (name: string, scheduler: string) =>
      newPod(name, { scheduler, cpu: "2", memory: "2Gi", selector: { "sched-test": "score" } });
    await env.client.create(scored("least", "opkit-least"));
    assert.equal(await nodeOf("least"), "sched-a", "LeastAllocated x5: the emptier node");
    await env.client.delete(Pods, "least", { namespace: ns, gracePeriodSeconds: 0 });
    await eventually(
      "least gone",
      async () => !(await env.client.getOptional(Pods, "least", { namespace: ns })),
    );
    await env.client.create(scored("balanced", "opkit-balanced"));
    assert.equal(await nodeOf("balanced"), "sched-b", "BalancedAllocation x5: the evener node");
    // The log line may reach us a moment after the binding does.
    const decisions = () =>
      op.output.filter((l) => l.includes('"bound"') && /"opkit-(least|balanced)"/.test(l));
    await eventually("each decision is logged with its scores", () => decisions().length === 2);
    const lines = decisions();
    for (const l of lines) {
      const { profile, node, scores } = JSON.parse(l) as { profile: string; node: string; scores: object };
      t.diagnostic(`${profile} → ${node} ${JSON.stringify(scores)}`);
    }
  });

  it("leaves pods for the default scheduler and for other schedulers alone", async () => {
    await env.client.create(newPod("for-default", { selector: { "sched-test": "score" } }));
    await env.client.create(
      newPod("for-nobody", { scheduler: "nobody-scheduler", selector: { "sched-test": "score" } }),
    );
    await nodeOf("for-default");
    const scheduledBy = await eventually(
      "the default scheduler's Scheduled Event",
      async () =>
        (await env.client.list(EventsV1, { namespace: ns })).items.find(
          (e) => e.regarding?.name === "for-default" && e.reason === "Scheduled",
        )?.reportingController,
      10_000,
    );
    assert.equal(scheduledBy, "default-scheduler");
    // The scheduler has bound other pods since "for-nobody" was created (it sees every pod event).
    await env.client.create(
      newPod("after-nobody", { scheduler: "opkit-least", selector: { "sched-test": "score" } }),
    );
    await nodeOf("after-nobody");
    const nobody = await env.client.get(Pods, "for-nobody", { namespace: ns });
    assert.equal(nobody.spec?.nodeName, undefined);
    assert.equal(
      nobody.status?.conditions?.find((c) => c.type === "PodScheduled"),
      undefined,
    );
    const ours = (await env.client.list(EventsV1, { namespace: ns })).items.filter(
      (e) =>
        e.reportingController === "opkit.dev/scheduler" &&
        /for-(default|nobody)/.test(e.regarding?.name ?? ""),
    );
    assert.deepEqual(ours, []);
  });

  it("a burst of pods decided by concurrent workers never overfills a node", async () => {
    // 12 one-cpu pods at once for a 4-cpu node: bindings run in parallel, so only the assumption made
    // with each decision keeps the others from counting the node as emptier than it is.
    const names = Array.from({ length: 12 }, (_, i) => `burst-${i}`);
    await Promise.all(
      names.map((n) =>
        env.client.create(
          newPod(n, { scheduler: "opkit-least", cpu: "1", selector: { "sched-test": "burst" } }),
        ),
      ),
    );
    const settled = await eventually(
      "every burst pod bound or Unschedulable",
      async () => {
        const pods = (await env.client.list(Pods, { namespace: ns })).items.filter((p) =>
          names.includes(p.metadata.name ?? ""),
        );
        const bound = pods.filter((p) => p.spec?.nodeName).length;
        const refused = pods.filter((p) =>
          p.status?.conditions?.some((c) => c.type === "PodScheduled" && c.reason === "Unschedulable"),
        ).length;
        return bound + refused === names.length ? { bound, refused } : undefined;
      },
      30_000,
    );
    assert.deepEqual(settled, { bound: 4, refused: 8 }, "exactly the node's 4 cpus were used");
    await Promise.all(names.map((n) => env.client.delete(Pods, n, { namespace: ns, gracePeriodSeconds: 0 })));
  });

  it("refuses a wrong --config at start, naming the field, with exit code 2", async () => {
    await writeFile(
      join(dir, "bad.yaml"),
      "profiles:\n  - schedulerName: x\n    plugins: { score: { enabled: [{ name: LeastAllocated, weight: 0 }] } }\n",
    );
    const bad = startOperatorProcess(join(root, "src", "main.ts"), {
      args: [
        "--kubeconfig",
        project.session.kubeconfigPath,
        "--metrics-bind-address=0",
        "--health-probe-bind-address=0",
        "--config",
        join(dir, "bad.yaml"),
      ],
    });
    assert.equal(await bad.exited, 2);
    assert.ok(
      bad.output.some((l) =>
        l.includes(
          "profiles[0].plugins.score.enabled[0].weight: must be a whole number from 1 to 100, got 0",
        ),
      ),
      bad.output.join("\n"),
    );
  });

  it("a standby replica takes over when the leader stops; neither was ever refused by its RBAC", async () => {
    const lease = await env.client.get(Leases, "opkit-scheduler", { namespace: ns });
    assert.ok(lease.spec?.holderIdentity, "a holder");
    const standby = await project.start(["--leader-elect", "--config", join(dir, "config.yaml")]);
    await standby.waitForLine(/waiting for leadership/);
    await env.client.create(
      newPod("before-failover", { scheduler: "opkit-least", selector: { "sched-test": "score" } }),
    );
    await nodeOf("before-failover");
    assert.equal(standby.output.filter((l) => l.includes('"bound"')).length, 0, "the standby binds nothing");
    await op.stop();
    await standby.waitForLine(/became leader/, 30_000);
    await env.client.create(
      newPod("after-failover", { scheduler: "opkit-least", selector: { "sched-test": "score" } }),
    );
    await nodeOf("after-failover");
    assert.ok(standby.output.some((l) => l.includes('"bound"') && l.includes("after-failover")));
    assert.deepEqual(
      [...op.output, ...standby.output].filter((l) => /forbidden/i.test(l)),
      [],
    );
  });
});
