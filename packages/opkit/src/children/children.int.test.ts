/**
 * Declarative children against the real control plane: desired children are applied with the owner
 * reference and labels, undesired ones are pruned (from a live list or from the cache), and a
 * Deployment child becomes ready once kwok runs its pods.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Cache } from "../cache/cache.ts";
import { KubeClient } from "../client/client.ts";
import { NotFoundError } from "../client/errors.ts";
import { kindRef, type KubeObject } from "../client/types.ts";
import { getControllerOf } from "../helpers/ownerrefs.ts";
import { useTestEnv, type TestEnv } from "../testenv/testing.ts";
import { eventually } from "../testenv/eventually.ts";
import { ChildrenSpecError, MANAGER_LABEL, OWNER_UID_LABEL, reconcileChildren } from "./children.ts";

type ConfigMap = KubeObject & { data?: Record<string, string> };
const ConfigMaps = kindRef<ConfigMap>("v1", "ConfigMap");
const Deployments = kindRef<KubeObject>("apps/v1", "Deployment");
const Secrets = kindRef<KubeObject>("v1", "Secret");
const Ingresses = kindRef<KubeObject>("networking.k8s.io/v1", "Ingress");

const cm = (name: string, data: Record<string, string> = { v: "1" }): ConfigMap => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { name },
  data,
});

async function exists(get: () => Promise<unknown>): Promise<boolean> {
  try {
    await get();
    return true;
  } catch (err) {
    if (err instanceof NotFoundError) return false;
    throw err;
  }
}

describe("reconcileChildren against opkit env", () => {
  let env: TestEnv;
  before(async () => {
    env = await useTestEnv();
  });
  after(async () => {
    await env?.cleanup();
  });

  async function parentIn(ns: string): Promise<ConfigMap> {
    return env.client.create<ConfigMap>({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "parent", namespace: ns },
    });
  }

  it("applies [a, b], then prunes b when only [a] is desired", async () => {
    const ns = await env.namespace("children");
    const parent = await parentIn(ns);
    const opts = { fieldManager: "children-test", ownedKinds: [ConfigMaps, Secrets] };

    const first = await reconcileChildren(env.client, parent, [cm("a"), cm("b")], opts);
    assert.deepEqual(
      first.applied.map((o) => o.metadata.name),
      ["a", "b"],
    );
    assert.deepEqual(first.pruned, []);
    assert.equal(first.ready, true);
    const a = await env.client.get(ConfigMaps, "a", { namespace: ns });
    assert.equal(a.metadata.labels?.[OWNER_UID_LABEL], parent.metadata.uid);
    assert.equal(a.metadata.labels?.[MANAGER_LABEL], "children-test");
    assert.equal(getControllerOf(a)?.uid, parent.metadata.uid);
    assert.ok(
      a.metadata.managedFields?.some((f) => f.manager === "children-test" && f.operation === "Apply"),
    );

    // An object with a copied label but no controller reference to the parent is never pruned.
    await env.client.create<ConfigMap>({
      ...cm("impostor"),
      metadata: { name: "impostor", namespace: ns, labels: a.metadata.labels },
    });

    const second = await reconcileChildren(env.client, parent, [cm("a", { v: "2" })], opts);
    assert.deepEqual(second.pruned, [`ConfigMap/${ns}/b`]);
    assert.equal((second.applied[0] as ConfigMap).data?.v, "2");
    assert.equal(await exists(() => env.client.get(ConfigMaps, "b", { namespace: ns })), false);
    assert.equal(await exists(() => env.client.get(ConfigMaps, "impostor", { namespace: ns })), true);

    const third = await reconcileChildren(env.client, parent, [cm("a", { v: "2" })], opts);
    assert.deepEqual(third.pruned, [], "nothing left to prune");

    await assert.rejects(
      reconcileChildren(
        env.client,
        parent,
        [{ apiVersion: "apps/v1", kind: "Deployment", metadata: { name: "d" } }],
        opts,
      ),
      ChildrenSpecError,
    );
  });

  it("finds the children to prune in the cache when given one", async (t) => {
    const ns = await env.namespace("children-cache");
    const parent = await parentIn(ns);
    const cache = new Cache(env.client, { namespace: ns });
    t.after(() => cache.stop());
    cache.informer(ConfigMaps);
    cache.start();
    await cache.waitForSync(30_000);
    const opts = { fieldManager: "children-test", ownedKinds: [ConfigMaps], cache };

    const first = await reconcileChildren(env.client, parent, [cm("a"), cm("b")], opts);
    const rv = first.applied[1]?.metadata.resourceVersion ?? "";
    await cache.waitForResourceVersion(ConfigMaps, rv, { timeoutMs: 30_000 });
    const second = await reconcileChildren(env.client, parent, [cm("b")], opts);
    assert.deepEqual(second.pruned, [`ConfigMap/${ns}/a`]);
    assert.equal(await exists(() => env.client.get(ConfigMaps, "a", { namespace: ns })), false);
  });

  it("with a cache, a converged parent applies nothing again; a changed body or a child edited by hand is applied", async (t) => {
    const ns = await env.namespace("children-noop");
    const parent = await parentIn(ns);
    let applies = 0;
    const counting = await KubeClient.load({
      kubeconfig: env.kubeconfigPath,
      onRequest: (e) => {
        if (e.method === "PATCH") applies++;
      },
    });
    t.after(() => counting.close());
    const cache = new Cache(env.client, { namespace: ns });
    t.after(() => cache.stop());
    cache.informer(ConfigMaps);
    cache.start();
    await cache.waitForSync(30_000);
    const opts = { fieldManager: "children-test", ownedKinds: [ConfigMaps], cache };
    const settle = async (r: { applied: KubeObject[] }) => {
      for (const o of r.applied) {
        await cache.waitForResourceVersion(ConfigMaps, o.metadata.resourceVersion ?? "", {
          timeoutMs: 30_000,
        });
      }
    };

    await settle(await reconcileChildren(counting, parent, [cm("a"), cm("b")], opts));
    assert.equal(applies, 2);
    const again = await reconcileChildren(counting, parent, [cm("a"), cm("b")], opts);
    assert.equal(applies, 2, "a converged parent makes no request");
    assert.deepEqual(
      again.applied.map((o) => [o.metadata.name, (o as ConfigMap).data?.v]),
      [
        ["a", "1"],
        ["b", "1"],
      ],
    );
    Object.assign(again.applied[0] ?? {}, { touched: true }); // a private copy, not the cache's

    await settle(await reconcileChildren(counting, parent, [cm("a"), cm("b", { v: "2" })], opts));
    assert.equal(applies, 3, "only the changed child is applied");

    // Another writer changes a field we own: the next reconcile puts it back.
    const edited = await env.client.patch(
      ConfigMaps,
      "a",
      { data: { v: "hand" } },
      { type: "merge", namespace: ns },
    );
    await cache.waitForResourceVersion(ConfigMaps, edited.metadata.resourceVersion ?? "", {
      timeoutMs: 30_000,
    });
    await reconcileChildren(counting, parent, [cm("a"), cm("b", { v: "2" })], opts);
    assert.equal(applies, 4);
    assert.equal((await env.client.get(ConfigMaps, "a", { namespace: ns })).data?.v, "1");

    // A key dropped from the body is applied (the apply removes it), though the cached child contains the rest.
    await settle(
      await reconcileChildren(counting, parent, [cm("a", { v: "1", w: "x" }), cm("b", { v: "2" })], opts),
    );
    assert.equal(applies, 5);
    await settle(await reconcileChildren(counting, parent, [cm("a"), cm("b", { v: "2" })], opts));
    assert.equal(applies, 6);
    assert.deepEqual((await env.client.get(ConfigMaps, "a", { namespace: ns })).data, { v: "1" });
  });

  it("with a cache, a child another process applied with the same field manager is applied again", async (t) => {
    // Two replicas of one operator (a handover between versions, or a leader failover): B applies a
    // body with one more key under the same field manager; A, whose last apply and cache both still
    // look converged, must apply its own body again, which removes the key, as an apply without the
    // skip would.
    const ns = await env.namespace("children-other");
    const parent = await parentIn(ns);
    const caches = [new Cache(env.client, { namespace: ns }), new Cache(env.client, { namespace: ns })];
    for (const c of caches) {
      t.after(() => c.stop());
      c.informer(ConfigMaps);
      c.start();
      await c.waitForSync(30_000);
    }
    const [a, b] = caches as [Cache, Cache];
    const opts = (cache: Cache) => ({ fieldManager: "children-test", ownedKinds: [ConfigMaps], cache });
    const settle = async (cache: Cache, r: { applied: KubeObject[] }) => {
      for (const o of r.applied)
        await cache.waitForResourceVersion(
          o.kind === "Deployment" ? Deployments : ConfigMaps,
          o.metadata.resourceVersion ?? "",
          { timeoutMs: 30_000 },
        );
    };
    const byA = await reconcileChildren(env.client, parent, [cm("x")], opts(a));
    await settle(a, byA);
    const byB = await reconcileChildren(env.client, parent, [cm("x", { v: "1", w: "b" })], opts(b));
    await settle(a, byB);
    await reconcileChildren(env.client, parent, [cm("x")], opts(a));
    assert.deepEqual((await env.client.get(ConfigMaps, "x", { namespace: ns })).data, { v: "1" });

    // A kind with a generation: a status write by its controller still skips; B's extra label and
    // B's extra spec field are each applied away.
    let applies = 0;
    const counting = await KubeClient.load({
      kubeconfig: env.kubeconfigPath,
      onRequest: (e) => void (e.method === "PATCH" && applies++),
    });
    t.after(() => counting.close());
    for (const c of caches) c.informer(Deployments);
    for (const c of caches) await c.waitForSync(30_000);
    const labels = { app: "web" };
    const deployment = (extra: { label?: string; minReadySeconds?: number } = {}): KubeObject =>
      ({
        apiVersion: "apps/v1",
        kind: "Deployment",
        metadata: { name: "web", ...(extra.label ? { labels: { extra: extra.label } } : {}) },
        spec: {
          replicas: 0,
          ...(extra.minReadySeconds ? { minReadySeconds: extra.minReadySeconds } : {}),
          selector: { matchLabels: labels },
          template: {
            metadata: { labels },
            spec: { containers: [{ name: "main", image: "registry.example/app:1" }] },
          },
        },
      }) as KubeObject;
    const dOpts = (cache: Cache) => ({ fieldManager: "children-test", ownedKinds: [Deployments], cache });
    const live = () => env.client.get(Deployments, "web", { namespace: ns });
    const first = await reconcileChildren(counting, parent, [deployment()], dOpts(a));
    assert.equal(applies, 1);
    await settle(a, first);
    await eventually("the Deployment controller wrote status", async () => {
      const d = (await live()) as KubeObject & { status?: { observedGeneration?: number } };
      if (d.status?.observedGeneration !== 1) return false;
      await a.waitForResourceVersion(Deployments, d.metadata.resourceVersion ?? "", { timeoutMs: 30_000 });
      return true;
    });
    // The controller also annotated it (deployment.kubernetes.io/revision): a key in a prefix Kubernetes
    // reserves for its components, which the body does not state, is no reason to apply.
    assert.ok((await live()).metadata.annotations?.["deployment.kubernetes.io/revision"]);
    await settle(a, await reconcileChildren(counting, parent, [deployment()], dOpts(a)));
    assert.equal(applies, 1, "the controller's revision annotation is not applied over");
    const before = applies;
    await reconcileChildren(counting, parent, [deployment()], dOpts(a));
    assert.equal(applies, before, "a converged child is not applied again");
    // A status-only write (new resourceVersion, same generation and metadata) is no reason to apply.
    const statusWrite = await env.client.patch(
      Deployments,
      "web",
      {
        status: {
          conditions: [{ type: "Reviewed", status: "True", reason: "Test", message: "status only" }],
        },
      },
      { namespace: ns, type: "merge", subresource: "status" },
    );
    await a.waitForResourceVersion(Deployments, statusWrite.metadata.resourceVersion ?? "", {
      timeoutMs: 30_000,
    });
    await reconcileChildren(counting, parent, [deployment()], dOpts(a));
    assert.equal(applies, before, "a status write does not make the child applied again");

    // Another manager's label (as kubectl label writes it): its first appearance costs one apply (it
    // could be a key of our field manager from another process), after which its edits are skipped.
    const label = async (value: string) => {
      const d = await env.client.patch(
        Deployments,
        "web",
        { metadata: { labels: { team: value } } },
        { namespace: ns, type: "merge" },
      );
      await a.waitForResourceVersion(Deployments, d.metadata.resourceVersion ?? "", { timeoutMs: 30_000 });
    };
    await label("one");
    await settle(a, await reconcileChildren(counting, parent, [deployment()], dOpts(a)));
    assert.equal(applies, before + 1, "a new foreign label is applied once");
    for (const value of ["two", "three"]) {
      await label(value);
      await reconcileChildren(counting, parent, [deployment()], dOpts(a));
    }
    assert.equal(applies, before + 1, "edits of a foreign label are not applied");
    assert.equal((await live()).metadata.labels?.team, "three", "the foreign label is kept");

    await settle(a, await reconcileChildren(env.client, parent, [deployment({ label: "b" })], dOpts(b)));
    await reconcileChildren(counting, parent, [deployment()], dOpts(a));
    assert.equal(applies, before + 2);
    assert.equal((await live()).metadata.labels?.extra, undefined, "B's label applied away");

    await settle(
      a,
      await reconcileChildren(env.client, parent, [deployment({ minReadySeconds: 5 })], dOpts(b)),
    );
    await reconcileChildren(counting, parent, [deployment()], dOpts(a));
    assert.equal(applies, before + 3);
    const spec = ((await live()) as KubeObject & { spec?: { minReadySeconds?: number } }).spec;
    assert.equal(spec?.minReadySeconds ?? 0, 0, "B's spec field applied away");
  });

  it("with a cache, what another process writes with our field manager is applied away (a kubernetes.io annotation, a foreign key gone and back), another manager's keys are not", async (t) => {
    // B, a replica of the version before, applies with our field manager what A's body no longer states.
    // An apply of A's body removes it, so A must apply, though its last apply and cache look converged.
    const ns = await env.namespace("children-takeover");
    const parent = await parentIn(ns);
    let applies = 0;
    const counting = await KubeClient.load({
      kubeconfig: env.kubeconfigPath,
      onRequest: (e) => void (e.method === "PATCH" && applies++),
    });
    t.after(() => counting.close());
    const cache = new Cache(env.client, { namespace: ns });
    t.after(() => cache.stop());
    cache.informer(Ingresses);
    cache.start();
    await cache.waitForSync(30_000);
    const opts = { fieldManager: "children-test", ownedKinds: [Ingresses], cache };
    const ingress = (
      metadata: { labels?: Record<string, string>; annotations?: Record<string, string> } = {},
    ) =>
      ({
        apiVersion: "networking.k8s.io/v1",
        kind: "Ingress",
        metadata: { name: "web", ...metadata },
        spec: { defaultBackend: { service: { name: "web", port: { number: 80 } } } },
      }) as KubeObject;
    const seen = async (o: KubeObject | undefined) =>
      cache.waitForResourceVersion(Ingresses, o?.metadata.resourceVersion ?? "", { timeoutMs: 30_000 });
    const byA = async (metadata?: Parameters<typeof ingress>[0]) =>
      (await reconcileChildren(counting, parent, [ingress(metadata)], opts)).applied[0];
    const byB = async (metadata: Parameters<typeof ingress>[0]) =>
      seen(
        (await reconcileChildren(env.client, parent, [ingress(metadata)], { ...opts, cache: undefined }))
          .applied[0],
      );
    const byOther = async (metadata: object) =>
      seen(await env.client.patch(Ingresses, "web", { metadata }, { namespace: ns, type: "merge" }));
    const live = async () => (await env.client.get(Ingresses, "web", { namespace: ns })).metadata;

    await seen(await byA());
    assert.equal(applies, 1);

    // An annotation under a subdomain of kubernetes.io is no control plane's: ingress-nginx reads it.
    await byB({ annotations: { "nginx.ingress.kubernetes.io/rewrite-target": "/" } });
    await seen(await byA());
    assert.equal(applies, 2, "B's kubernetes.io annotation is applied");
    assert.equal((await live()).annotations?.["nginx.ingress.kubernetes.io/rewrite-target"], undefined);

    // Another manager's label: applied once when new, its edits and its removal are not applied.
    await byOther({ labels: { team: "one" } });
    await seen(await byA());
    await byOther({ labels: { team: "two" } });
    await byA();
    await byOther({ labels: { team: null } });
    await byA();
    assert.equal(applies, 3, "a foreign label costs one apply, its edit and removal none");
    // Gone, the key is nobody's: B's key of that name is new, not an edit of the other manager's value.
    await byB({ labels: { team: "b" } });
    await seen(await byA());
    assert.equal(applies, 4, "B's label is applied");
    assert.equal((await live()).labels?.team, undefined, "B's label applied away");

    // A key A stated and another manager applied too (shared) stays when A's body stops stating it
    // (SSA removes a key only when its last manager lets go): it is that manager's now, edits skipped.
    const byX = async (labels: Record<string, string>) => {
      const body = {
        apiVersion: "networking.k8s.io/v1",
        kind: "Ingress",
        metadata: { name: "web", namespace: ns, labels },
      };
      await seen(await env.client.apply(body, { fieldManager: "x", force: true }));
    };
    await seen(await byA({ labels: { tier: "web" } }));
    await byX({ tier: "web" });
    await seen(await byA());
    assert.equal((await live()).labels?.tier, "web", "the shared label stays");
    await byX({ tier: "api" });
    await byA();
    assert.equal(applies, 6, "the other manager's edit of the label it kept is not applied");
    assert.equal((await live()).labels?.tier, "api");
  });

  it("reports a Deployment child ready once its pods run", async () => {
    const ns = await env.namespace("children-deploy");
    const parent = await parentIn(ns);
    const labels = { app: "web" };
    const deployment: KubeObject = {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "web" },
      spec: {
        replicas: 2,
        selector: { matchLabels: labels },
        template: {
          metadata: { labels },
          spec: { containers: [{ name: "main", image: "registry.example/app:1" }] },
        },
      },
    } as KubeObject;
    const opts = { fieldManager: "children-test", ownedKinds: [Deployments, ConfigMaps] };

    const first = await reconcileChildren(env.client, parent, [deployment, cm("config")], opts);
    assert.equal(first.ready, false);
    assert.deepEqual(first.notReady, [`Deployment/${ns}/web`]);

    const deadline = Date.now() + 90_000;
    let result = first;
    while (!result.ready) {
      assert.ok(Date.now() < deadline, `Deployment never became ready: ${JSON.stringify(result.applied[0])}`);
      await new Promise((r) => setTimeout(r, 500));
      result = await reconcileChildren(env.client, parent, [deployment, cm("config")], opts);
    }
    assert.deepEqual(result.notReady, []);
    assert.deepEqual(result.pruned, []);
    const status = (result.applied[0] as KubeObject & { status?: { availableReplicas?: number } }).status;
    assert.equal(status?.availableReplicas, 2);
  });
});
