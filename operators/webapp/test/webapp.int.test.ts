/**
 * The WebApp operator against a real control plane (opkit env: kube-controller-manager runs the
 * Deployment, StatefulSet and garbage collector controllers, kwok runs the pods, the env's default
 * StorageClass binds claims), run as its own process under its generated RBAC only, with its
 * generated CRD:
 * - seed 004's sample (example 11-2), applied unchanged, yields the six kinds of children, owned by
 *   the WebApp, with Running pods, `created` and every child's condition True;
 * - the Secret's credentials survive reconciles and an operator restart, and are never logged;
 * - changing replicas or image rolls the Deployment;
 * - dev -> prod replaces the StatefulSet (claim templates cannot change in place) and the claim binds;
 * - deleting the WebApp removes everything, the claim too;
 * - a Secret of the same name it does not own is reported (Conflict) and left untouched;
 * - a spec it cannot act on is reported once (condition and Warning Event) with no retry loop.
 * This file owns `webapps.workloads.apps.acme.com` on the shared control plane.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import {
  ConfigMaps,
  Deployments,
  EventsV1,
  Ingresses,
  PersistentVolumeClaims,
  Pods,
  Secrets,
  Services,
  StatefulSets,
  type KindRef,
  type KubeObject,
  type Pod,
  type Secret,
} from "opkit";
import { eventually, type OperatorProcess, type OperatorProject, type TestEnv } from "opkit/testenv";
import { operatorTest, readSample } from "../../demo/operator-test.ts";
import { WebApp, type WebAppObject } from "../src/api/v1alpha1/webapp.ts";
import { CHILD_CONDITIONS } from "../src/controllers/webapp.ts";

const root = fileURLToPath(new URL("..", import.meta.url));
const NAME = "webapp-sample";

describe("WebApp operator", () => {
  let env: TestEnv;
  let ns: string;
  let project: OperatorProject;
  let op: OperatorProcess;
  /** The output of operator processes stopped by a test. */
  const earlier: string[] = [];
  let uid = "";
  let secretData: Record<string, string> = {};

  operatorTest(root, {
    setup: async (t) => {
      ({ env, project, ns } = t);
      op = await project.start();
    },
  });

  const get = <T extends KubeObject>(kind: KindRef<T>, name: string) =>
    env.client.getOptional(kind, name, { namespace: ns });

  /** The Running, not terminating pods of one component of the sample. */
  async function running(component: "app" | "database"): Promise<Pod[]> {
    const pods = await env.client.list(Pods, {
      namespace: ns,
      labelSelector: `app.kubernetes.io/instance=${NAME},app.kubernetes.io/component=${component}`,
    });
    return pods.items.filter((p) => p.status?.phase === "Running" && !p.metadata.deletionTimestamp);
  }

  /** The WebApp once its status describes its current generation with Ready True. */
  async function ready(name = NAME, timeoutMs = 30_000) {
    return eventually(
      `${name} Ready for its generation`,
      async () => {
        const w = await env.client.get(WebApp, name, { namespace: ns });
        const r = w.status?.conditions?.find((c) => c.type === "Ready");
        return r?.status === "True" && r.observedGeneration === w.metadata.generation ? w : undefined;
      },
      timeoutMs,
    );
  }

  async function secret() {
    const s = await get(Secrets, `${NAME}-db-credentials`);
    return { ...(s?.data ?? {}) };
  }

  it("the seed's sample yields the six kinds of children, Running pods and a ready status", async () => {
    const sample = await readSample<WebAppObject>(
      { dir: root, namespace: ns },
      "workloads_v1alpha1_webapp.yaml",
    );
    uid = (await env.client.create(sample)).metadata.uid ?? "";

    const children = await eventually("all seven children", async () => {
      const c = {
        deployment: await get(Deployments, NAME),
        statefulSet: await get(StatefulSets, `${NAME}-db`),
        configMap: await get(ConfigMaps, `${NAME}-config`),
        secret: await get(Secrets, `${NAME}-db-credentials`),
        service: await get(Services, NAME),
        databaseService: await get(Services, `${NAME}-db`),
        ingress: await get(Ingresses, NAME),
      };
      return Object.values(c).every(Boolean) ? c : undefined;
    });
    for (const [role, obj] of Object.entries(children)) {
      assert.equal(obj?.metadata.ownerReferences?.find((r) => r.controller)?.uid, uid, `${role} is owned`);
    }
    const pod = children.deployment?.spec?.template.spec;
    assert.equal(pod?.containers[0]?.image, "registry.acme.com/app/app:v1.4");
    assert.equal(children.deployment?.spec?.replicas, 2);
    assert.equal(pod?.volumes?.find((v) => v.configMap)?.configMap?.name, `${NAME}-config`);
    assert.ok(
      pod?.containers[0]?.env?.some((e) => e.valueFrom?.secretKeyRef?.name === `${NAME}-db-credentials`),
      "the app reads its database credentials from the Secret",
    );
    assert.match(children.configMap?.data?.["config.yaml"] ?? "", /hostname: app\.acme\.com/);
    assert.equal(children.databaseService?.spec?.clusterIP, "None");
    assert.equal(children.statefulSet?.spec?.serviceName, `${NAME}-db`);
    assert.deepEqual(children.statefulSet?.spec?.volumeClaimTemplates ?? [], [], "dev: ephemeral storage");
    assert.equal(children.ingress?.spec?.rules?.[0]?.host, "app.acme.com");
    assert.equal(children.ingress?.spec?.rules?.[0]?.http?.paths[0]?.backend.service?.name, NAME);

    await eventually("2 app pods and 1 database pod Running", async () => {
      return (await running("app")).length === 2 && (await running("database")).length === 1;
    });
    const w = await ready();
    assert.equal(w.status?.created, true);
    for (const type of Object.values(CHILD_CONDITIONS)) {
      assert.equal(w.status?.conditions?.find((c) => c.type === type)?.status, "True", type);
    }
    secretData = await secret();
    assert.ok(secretData.password && secretData.username);
  });

  it("changing replicas or image rolls the Deployment; the Secret survives reconciles and a restart", async () => {
    await env.client.patch(WebApp, NAME, { spec: { webAppReplicas: 3 } }, { type: "merge", namespace: ns });
    await eventually("3 app pods Running", async () => (await running("app")).length === 3);
    await ready();

    const image = "registry.acme.com/app/app:v1.5";
    await env.client.patch(WebApp, NAME, { spec: { webAppImage: image } }, { type: "merge", namespace: ns });
    await eventually("the Deployment rolled every pod onto the new image", async () => {
      const d = await get(Deployments, NAME);
      const pods = await running("app");
      return (
        d?.spec?.template.spec?.containers[0]?.image === image &&
        d.status?.updatedReplicas === 3 &&
        d.status.replicas === 3 &&
        pods.length === 3 &&
        pods.every((p) => p.spec?.containers[0]?.image === image)
      );
    });
    await ready();
    assert.deepEqual(await secret(), secretData, "the credentials are the ones generated first");

    // A new operator process has nothing in memory: it reads the credentials back, never makes new ones.
    earlier.push(...op.output);
    await op.stop();
    op = await project.start();
    await env.client.patch(WebApp, NAME, { spec: { webAppReplicas: 2 } }, { type: "merge", namespace: ns });
    await eventually("2 app pods Running", async () => (await running("app")).length === 2);
    await ready();
    assert.deepEqual(await secret(), secretData, "the credentials survive an operator restart");
    const password = Buffer.from(secretData.password ?? "", "base64").toString();
    assert.ok(password.length >= 32);
    assert.deepEqual(
      [...earlier, ...op.output].filter((l) => l.includes(password)),
      [],
      "the password never appears in the operator's output",
    );
  });

  it("dev -> prod replaces the StatefulSet, its claim binds and the database runs on it; back to dev keeps the claim", async () => {
    const before = await get(StatefulSets, `${NAME}-db`);
    await env.client.patch(
      WebApp,
      NAME,
      { spec: { deploymentTier: "prod" } },
      { type: "merge", namespace: ns },
    );
    const after = await eventually("a new StatefulSet with a claim template", async () => {
      const s = await get(StatefulSets, `${NAME}-db`);
      return s && s.metadata.uid !== before?.metadata.uid && s.spec?.volumeClaimTemplates?.length
        ? s
        : undefined;
    });
    assert.equal(after.spec?.volumeClaimTemplates?.[0]?.spec?.resources?.requests?.storage, "20Gi");
    const claim = await eventually(
      "the claim is Bound",
      async () => {
        const c = await get(PersistentVolumeClaims, `data-${NAME}-db-0`);
        return c?.status?.phase === "Bound" ? c : undefined;
      },
      30_000,
    );
    assert.equal(
      claim.metadata.ownerReferences?.[0]?.uid,
      after.metadata.uid,
      "the claim follows its StatefulSet",
    );
    await eventually("the database pod runs on the claim", async () => {
      const [pod] = await running("database");
      return pod?.spec?.volumes?.some((v) => v.persistentVolumeClaim?.claimName === `data-${NAME}-db-0`);
    });
    await ready(NAME, 45_000);
    const events = (await env.client.list(EventsV1, { namespace: ns })).items;
    assert.ok(events.some((e) => e.regarding.uid === uid && e.reason === "ReplacingStatefulSet"));
    assert.deepEqual(await secret(), secretData, "the credentials are kept across the replacement");

    // Back to dev: the claim template goes, the claim stays with its data and is handed to the WebApp.
    await env.client.patch(
      WebApp,
      NAME,
      { spec: { deploymentTier: "dev" } },
      { type: "merge", namespace: ns },
    );
    await eventually("a new StatefulSet without claim templates", async () => {
      const s = await get(StatefulSets, `${NAME}-db`);
      return s && s.metadata.uid !== after.metadata.uid && !s.spec?.volumeClaimTemplates?.length;
    });
    await ready(NAME, 45_000);
    const kept = await get(PersistentVolumeClaims, `data-${NAME}-db-0`);
    assert.equal(kept?.status?.phase, "Bound", "the claim and its data are kept");
    assert.deepEqual(
      kept.metadata.ownerReferences?.map((r) => r.uid),
      [uid],
      "owned by the WebApp alone",
    );
  });

  it("deleting the WebApp removes everything, the claim too", async () => {
    await env.client.delete(WebApp, NAME, { namespace: ns });
    // Garbage collection cascades (WebApp → StatefulSet → Pod, then the claim once no pod uses it). On a
    // control plane where the WebApp CRD is new, the garbage collector only starts to watch WebApps at its
    // next discovery resync (every 30 s), so the first deletion can take over 30 s (36 s measured on a fresh
    // env, 0.1–0.3 s afterwards): allow 120 s, and say what is left.
    let remaining = "";
    await eventually(
      "every child garbage-collected",
      async () => {
        const left = [
          await get(Deployments, NAME),
          await get(StatefulSets, `${NAME}-db`),
          await get(ConfigMaps, `${NAME}-config`),
          await get(Secrets, `${NAME}-db-credentials`),
          await get(Services, NAME),
          await get(Services, `${NAME}-db`),
          await get(Ingresses, NAME),
          await get(PersistentVolumeClaims, `data-${NAME}-db-0`),
        ].filter(Boolean);
        const pods = (
          await env.client.list(Pods, { namespace: ns, labelSelector: `app.kubernetes.io/instance=${NAME}` })
        ).items;
        remaining = [...left, ...pods]
          .map(
            (o) =>
              `${o!.kind ?? "Pod"}/${o!.metadata.name}${o!.metadata.finalizers?.length ? ` finalizers ${o!.metadata.finalizers.join(",")}` : ""}`,
          )
          .join(", ");
        return left.length === 0 && pods.length === 0;
      },
      120_000,
    ).catch((err: unknown) => {
      throw new Error(`${String(err)}; still there: ${remaining}`);
    });
  });

  it("a Secret of the same name that it does not own: Conflict, and the Secret is left as it is", async () => {
    const theirs = await env.client.create<Secret>({
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "taken-db-credentials", namespace: ns },
      data: { password: Buffer.from("not yours").toString("base64") },
    });
    const app = await env.client.create(
      WebApp.new(
        "taken",
        { deploymentTier: "dev", webAppHostname: "taken.acme.com", webAppImage: "nginx:1.27" },
        { namespace: ns },
      ),
    );
    const w = await eventually("the Conflict condition", async () => {
      const live = await env.client.get(WebApp, "taken", { namespace: ns });
      return live.status?.conditions?.some((c) => c.type === "Conflict" && c.status === "True")
        ? live
        : undefined;
    });
    assert.equal(w.status?.conditions?.find((c) => c.type === "Ready")?.reason, "Conflict");
    await eventually("a Warning Event", async () =>
      (await env.client.list(EventsV1, { namespace: ns })).items.some(
        (e) => e.regarding.uid === app.metadata.uid && e.type === "Warning" && e.reason === "Conflict",
      ),
    );
    const now = await env.client.get(Secrets, "taken-db-credentials", { namespace: ns });
    assert.equal(now.metadata.resourceVersion, theirs.metadata.resourceVersion, "not written to");
    assert.equal(now.metadata.ownerReferences, undefined);
    assert.equal(await get(StatefulSets, "taken-db"), undefined, "nothing is built on credentials it lacks");
    await env.client.delete(WebApp, "taken", { namespace: ns });
  });

  it("a spec it cannot act on: condition and one Warning Event, no children, no retry loop", async () => {
    const app = await env.client.create(
      WebApp.new(
        "bad-host",
        { deploymentTier: "dev", webAppHostname: "Not_A_Host!", webAppImage: "nginx:1.27" },
        { namespace: ns },
      ),
    );
    const w = await eventually("Ready False, InvalidSpec", async () => {
      const live = await env.client.get(WebApp, "bad-host", { namespace: ns });
      const r = live.status?.conditions?.find((c) => c.type === "Ready");
      return r?.reason === "InvalidSpec" ? live : undefined;
    });
    assert.match(
      w.status?.conditions?.find((c) => c.type === "Ready")?.message ?? "",
      /webAppHostname "Not_A_Host!"/,
    );
    await new Promise((r) => setTimeout(r, 3_000));
    const later = await env.client.get(WebApp, "bad-host", { namespace: ns });
    assert.equal(later.metadata.resourceVersion, w.metadata.resourceVersion, "no status churn");
    const warnings = (await env.client.list(EventsV1, { namespace: ns })).items.filter(
      (e) => e.regarding.uid === app.metadata.uid && e.type === "Warning",
    );
    assert.equal(warnings.length, 1);
    assert.equal(warnings[0]?.reason, "InvalidSpec");
    assert.equal(warnings[0]?.series, undefined, "reported once, not repeated");
    assert.equal(await get(Deployments, "bad-host"), undefined);
    assert.equal(await get(Secrets, "bad-host-db-credentials"), undefined);
  });

  it("ran with its generated RBAC and was never refused", () => {
    assert.deepEqual(
      [...earlier, ...op.output].filter((l) => /forbidden/i.test(l)),
      [],
    );
  });
});
