/**
 * The AppService operator against a real control plane (opkit env), run as its own process under its
 * generated RBAC only, with its generated CRD:
 * - seed 001's example_appservice.yaml, applied unchanged, converges: a Deployment of 2 nginx pods that
 *   go Running, a NodePort Service on 30002, and a status that mirrors the Deployment;
 * - changing size, image and ports updates the children and keeps the Service's ClusterIP; a child
 *   edited by hand is put back, a deleted Service is recreated;
 * - deleting the AppService removes its children.
 * NodePort 30002 is unique in the cluster: only the sample uses it, and other AppServices here let the
 * API server allocate one.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { Deployments, Pods, Services, type KindRef } from "opkit";
import { eventually, type OperatorProcess, type OperatorProject, type TestEnv } from "opkit/testenv";
import { operatorTest, readSample } from "../../demo/operator-test.ts";
import { AppService, type AppServiceObject } from "../src/api/v1/appservice.ts";

const root = fileURLToPath(new URL("..", import.meta.url));

async function gone(env: TestEnv, kind: KindRef, name: string, namespace: string): Promise<boolean> {
  return (await env.client.getOptional(kind, name, { namespace })) === undefined;
}

describe("AppService operator", () => {
  let env: TestEnv;
  let ns: string;
  let project: OperatorProject;
  let op: OperatorProcess;

  operatorTest(root, {
    setup: async (t) => {
      ({ env, project, ns } = t);
      op = await project.start();
    },
  });

  it("the seed's sample converges: Deployment, NodePort Service 30002, Running pods, status; deleting it removes them", async () => {
    // `kubectl apply -n <ns> -f example_appservice.yaml`: the file as the seed wrote it.
    const sample = await readSample<AppServiceObject>(
      { dir: root, namespace: ns },
      "example_appservice.yaml",
    );
    const created = await env.client.create(sample);
    const name = "appservice-sample";

    const dep = await eventually("the Deployment", () =>
      env.client.get(Deployments, name, { namespace: ns }),
    );
    assert.equal(dep.spec?.replicas, 2);
    const container = dep.spec?.template.spec?.containers[0];
    assert.equal(container?.image, "nginx:1.7.9");
    assert.deepEqual(
      container?.ports?.map((p) => p.containerPort),
      [80],
    );
    assert.deepEqual(dep.spec?.selector.matchLabels, { app: name });
    const owner = dep.metadata.ownerReferences?.find((r) => r.controller);
    assert.equal(owner?.uid, created.metadata.uid);

    // The Deployment is applied first: the Service may follow a moment later.
    const svc = await eventually("the Service", () => env.client.get(Services, name, { namespace: ns }));
    assert.equal(svc.spec?.type, "NodePort");
    assert.deepEqual(
      svc.spec?.ports?.map((p) => [p.port, p.targetPort, p.nodePort, p.protocol]),
      [[80, 80, 30002, "TCP"]],
    );
    assert.deepEqual(svc.spec?.selector, { app: name });
    assert.equal(svc.metadata.ownerReferences?.find((r) => r.controller)?.uid, created.metadata.uid);

    await eventually("two pods Running", async () => {
      const pods = await env.client.list(Pods, { namespace: ns, labelSelector: `app=${name}` });
      return pods.items.filter((p) => p.status?.phase === "Running").length === 2;
    });
    const app = await eventually("status mirrors the Deployment", async () => {
      const live = await env.client.get(AppService, name, { namespace: ns });
      const s = live.status;
      return s?.readyReplicas === 2 &&
        s.availableReplicas === 2 &&
        s.updatedReplicas === 2 &&
        s.replicas === 2
        ? live
        : undefined;
    });
    assert.equal(app.status?.observedGeneration, app.metadata.generation);
    const types = app.status?.conditions?.map((c) => `${c.type}=${c.status}`).sort();
    assert.ok(
      types?.includes("Available=True"),
      `the Deployment's conditions are merged in: ${types?.join(", ")}`,
    );
    assert.ok(types?.includes("Ready=True"), `and the operator's own: ${types?.join(", ")}`);

    await env.client.delete(AppService, name, { namespace: ns });
    await eventually(
      "the Deployment and Service are garbage-collected",
      async () => (await gone(env, Deployments, name, ns)) && (await gone(env, Services, name, ns)),
    );
  });

  it("follows size, image and ports; keeps the ClusterIP; restores edited and deleted children", async () => {
    const name = "web";
    await env.client.create(
      AppService.new(
        name,
        {
          size: 1,
          image: "nginx:1.25",
          ports: [{ name: "http", port: 8080, targetPort: 80, protocol: "TCP" }],
        },
        { namespace: ns },
      ),
    );
    const before = await eventually("the Service", () => env.client.get(Services, name, { namespace: ns }));
    const clusterIP = before.spec?.clusterIP;
    assert.ok(clusterIP);
    await eventually("Ready", async () => {
      const live = await env.client.get(AppService, name, { namespace: ns });
      return live.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True");
    });

    await env.client.patch(
      AppService,
      name,
      {
        spec: {
          size: 3,
          image: "nginx:1.27",
          ports: [
            { name: "http", port: 8080, targetPort: 80, protocol: "TCP" },
            { name: "https", port: 8443, targetPort: 443, protocol: "TCP" },
          ],
        },
      },
      { type: "merge", namespace: ns },
    );
    await eventually("the Deployment follows size, image and ports", async () => {
      const d = await env.client.get(Deployments, name, { namespace: ns });
      const c = d.spec?.template.spec?.containers[0];
      return (
        d.spec?.replicas === 3 &&
        c?.image === "nginx:1.27" &&
        JSON.stringify(c.ports?.map((p) => p.containerPort)) === "[80,443]"
      );
    });
    const svc = await eventually("the Service follows the ports", async () => {
      const s = await env.client.get(Services, name, { namespace: ns });
      return s.spec?.ports?.length === 2 ? s : undefined;
    });
    assert.equal(svc.spec?.clusterIP, clusterIP, "the ClusterIP is kept");
    assert.deepEqual(
      svc.spec?.ports?.map((p) => [p.name, p.port, p.targetPort]),
      [
        ["http", 8080, 80],
        ["https", 8443, 443],
      ],
    );
    await eventually("status follows: 3 ready", async () => {
      const live = await env.client.get(AppService, name, { namespace: ns });
      return live.status?.readyReplicas === 3 && live.status.observedGeneration === live.metadata.generation;
    });

    // Someone scales the Deployment by hand: the spec wins.
    await env.client.patch(Deployments, name, { spec: { replicas: 5 } }, { type: "merge", namespace: ns });
    await eventually("the edit is undone", async () => {
      const d = await env.client.get(Deployments, name, { namespace: ns });
      return d.spec?.replicas === 3 && (d.metadata.generation ?? 0) > 2;
    });

    const oldUid = svc.metadata.uid;
    await env.client.delete(Services, name, { namespace: ns });
    const recreated = await eventually("the Service is recreated", async () => {
      const s = await env.client.get(Services, name, { namespace: ns }).catch(() => undefined);
      return s && s.metadata.uid !== oldUid ? s : undefined;
    });
    assert.equal(recreated.spec?.type, "NodePort");
    assert.equal(recreated.spec?.ports?.length, 2);
  });

  it("once converged, a foreign edit of a child costs at most that child's apply, then the operator is quiet", async () => {
    const port = Number(/"metrics":(\d+)/.exec(await op.waitForLine(/serving metrics/))?.[1]);
    const scrape = async () => {
      const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      let writes = 0;
      let reconciles = 0;
      for (const m of text.matchAll(/^rest_client_requests_total\{([^}]*)\} (\d+)/gm)) {
        if (!/method="(GET|WATCH)"/.test(m[1] ?? "")) writes += Number(m[2]);
      }
      for (const m of text.matchAll(/^controller_runtime_reconcile_total\{([^}]*)\} (\d+)/gm)) {
        reconciles += Number(m[2]);
      }
      return { writes, reconciles };
    };
    const name = "quiet";
    await env.client.create(
      AppService.new(
        name,
        { size: 1, image: "nginx:1.25", ports: [{ port: 80, targetPort: 80, protocol: "TCP" }] },
        { namespace: ns },
      ),
    );
    await eventually("the AppService converged", async () => {
      const a = await env.client.get(AppService, name, { namespace: ns });
      return a.status?.availableReplicas === 1 &&
        a.status.conditions?.some((c) => c.type === "Ready" && c.status === "True")
        ? a
        : undefined;
    });
    // Wait until the operator is quiet (its last reconciles of the convergence are done).
    let before = await scrape();
    await eventually("the operator idle", async () => {
      await new Promise((r) => setTimeout(r, 1_000));
      const now = await scrape();
      const idle = now.writes === before.writes && now.reconciles === before.reconciles;
      before = now;
      return idle;
    });
    // An edit of the Deployment that touches nothing the operator states triggers a reconcile (owns). A
    // label, not an annotation: a Deployment's annotations bump its generation, and until the Deployment
    // controller observes it the child is rightly not ready. The cached child is no longer what the last
    // apply stored, and without managedFields in the cache an edit by another writer with the same field
    // manager (which the next apply must undo) looks the same: the child is applied once more (a no-op on
    // the server, so no new event and no further reconcile); the AppService's status is not written.
    await env.client.patch(
      Deployments,
      name,
      { metadata: { labels: { "example.com/note": "hello" } } },
      { type: "merge", namespace: ns },
    );
    const after = await eventually("a reconcile of the edited Deployment", async () => {
      const now = await scrape();
      return now.reconciles > before.reconciles ? now : undefined;
    });
    await new Promise((r) => setTimeout(r, 1_000));
    const settled = await scrape();
    assert.ok(
      settled.writes - before.writes <= 1,
      `at most the Deployment's apply, no status write: ${settled.writes - before.writes} writes`,
    );
    assert.ok(after.reconciles > before.reconciles);
    // And quiet from then on: that apply changed nothing, so nothing wakes the operator again.
    await new Promise((r) => setTimeout(r, 2_000));
    assert.deepEqual(await scrape(), settled, "no further reconcile or write");
  });

  it("ran with its generated RBAC and was never refused", () => {
    assert.deepEqual(
      op.output.filter((l) => /forbidden/i.test(l)),
      [],
    );
  });
});
