/**
 * The AcmeNamespace operator against a real control plane (opkit env), run as its own process under its
 * generated RBAC only, with its generated CRD and its defaulting webhook registered, and a real local
 * HTTP server as the billing system:
 * - the seed's sample (`tenancy.acme.com/v1alapha1`, applied unchanged) draws the deprecation warning
 *   naming v1alpha1 and yields the Namespace (label admin), the tier's ResourceQuota, the LimitRange, the
 *   NetworkPolicy and the RoleBinding `namespace-admin` to ClusterRole admin, and phase Created;
 *   deleting it calls billing exactly once, then everything is removed;
 * - killed mid-creation (a RoleBinding admission that refuses holds it half-way) and started again, the
 *   operator completes from what exists: the same Namespace and children, nothing twice;
 * - a tier change replaces the quota, an admin change updates binding and label, namespaceName is
 *   immutable;
 * - on a CRD without the schema's default, the operator's mutating webhook sets the tier to dev;
 * - while billing fails the finalizer stays, with a condition, a Warning Event and growing delays;
 * - a namespace that exists and is not owned gives Conflict and is left exactly as it was.
 * AcmeNamespaces are cluster-scoped: every name here starts with `int-` or is the sample's `team-x`.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import {
  EventsV1,
  InvalidError,
  KubeClient,
  LimitRanges,
  LocalWebhooks,
  Namespaces,
  NetworkPolicies,
  ResourceQuotas,
  RoleBindings,
  kindRef,
  type KindRef,
  type KubeObject,
  type Namespace,
  type RoleBinding,
} from "opkit";
import {
  eventually,
  readManifests,
  sleep,
  type OperatorProcess,
  type OperatorProject,
  type TestEnv,
} from "opkit/testenv";
import { operatorTest, readSample } from "../../demo/operator-test.ts";
import { AcmeNamespace, type AcmeNamespaceObject } from "../src/api/v1alpha1/acmenamespace.ts";
import type { BillingNotice } from "../src/billing.ts";
import operator from "../src/operator.ts";

const root = fileURLToPath(new URL("..", import.meta.url));
const ValidatingWebhooks = kindRef<KubeObject>(
  "admissionregistration.k8s.io/v1",
  "ValidatingWebhookConfiguration",
);

/** The billing system: records every POST; answers `status` (changeable by the test). */
interface Billing {
  server: Server;
  url: string;
  calls: { at: number; status: number; notice: BillingNotice }[];
  status: number;
}

async function startBilling(): Promise<Billing> {
  const billing: Billing = { server: createServer(), url: "", calls: [], status: 200 };
  billing.server.on("request", (req, res) => {
    let body = "";
    req.on("data", (d: Buffer) => (body += d.toString()));
    req.on("end", () => {
      const status = billing.status;
      billing.calls.push({ at: Date.now(), status, notice: JSON.parse(body) as BillingNotice });
      res.writeHead(status).end(status === 200 ? "recorded" : "billing is down");
    });
  });
  await new Promise<void>((r) => billing.server.listen(0, "127.0.0.1", r));
  billing.url = `http://127.0.0.1:${(billing.server.address() as AddressInfo).port}/notices`;
  return billing;
}

describe("AcmeNamespace operator", () => {
  let env: TestEnv;
  let project: OperatorProject;
  let hooks: LocalWebhooks;
  let billing: Billing;
  const ops: OperatorProcess[] = [];
  const created = new Set<string>();
  const start = async () => {
    const op = await project.start([
      `--webhook-bind-address=127.0.0.1:${hooks.port}`,
      `--webhook-cert-dir=${hooks.certDir}`,
      `--billing-url=${billing.url}`,
    ]);
    ops.push(op);
    return op;
  };

  operatorTest(root, {
    setup: async (t) => {
      ({ env, project } = t);
      hooks = await LocalWebhooks.prepare();
      billing = await startBilling();
      await start();
      await hooks.register(env.client, "acme-namespace-test", operator.webhooks ?? []);
    },
    // Webhook first (nothing serves it once the operator stops), then whatever a failed test left.
    beforeCleanup: async () => {
      await hooks?.unregister(env.client, "acme-namespace-test").catch(() => undefined);
      await env?.client.delete(ValidatingWebhooks, "acme-namespace-test-refuse").catch(() => undefined);
    },
    afterCleanup: async () => {
      for (const name of created) {
        await env.client.delete(AcmeNamespace, name).catch(() => undefined);
        await env.client
          .patch(AcmeNamespace, name, { metadata: { finalizers: null } }, { type: "merge" })
          .catch(() => undefined);
      }
      for (const ns of ["int-taken", "int-probe"])
        await env?.client.delete(Namespaces, ns).catch(() => undefined);
      billing?.server.closeAllConnections();
      billing?.server.close();
      await hooks?.dispose();
    },
  });

  const get = (name: string) => env.client.getOptional(AcmeNamespace, name);
  const inNs = <T extends KubeObject>(kind: KindRef<T>, namespace: string) =>
    env.client.list(kind, { namespace }).then((l) => l.items);
  async function createdPhase(name: string): Promise<AcmeNamespaceObject> {
    return eventually(`${name} phase Created`, async () => {
      const a = await get(name);
      return a?.status?.phase === "Created" &&
        a.status.observedGeneration === a.metadata.generation &&
        a.status.conditions?.some((c) => c.type === "Ready" && c.status === "True")
        ? a
        : undefined;
    });
  }
  function newAcme(
    name: string,
    spec: { namespaceName: string; adminUsername: string; deploymentTier?: string },
  ) {
    created.add(name);
    return env.client.create({
      apiVersion: AcmeNamespace.apiVersion,
      kind: "AcmeNamespace",
      metadata: { name },
      spec,
    } as KubeObject);
  }

  it("the seed's v1alapha1 sample applies with a warning naming v1alpha1 and yields every child and phase Created; deletion bills once and removes everything", async (t) => {
    // What `kubectl apply -f` of the book's manifest does, with the server's warnings collected.
    const warnings: string[] = [];
    const client = await KubeClient.load({
      kubeconfig: env.kubeconfigPath,
      onWarning: (w) => warnings.push(w.text),
    });
    t.after(() => client.close());
    const sample = await readSample<AcmeNamespaceObject>(
      { dir: root, namespace: "" },
      "tenancy_v1alapha1_acmenamespace.yaml",
      false,
    );
    assert.equal(sample.apiVersion, "tenancy.acme.com/v1alapha1", "the book's spelling, unchanged");
    created.add("team-x");
    const made = await client.create(sample);
    assert.ok(
      warnings.some((w) => /v1alapha1 is a misspelling of tenancy\.acme\.com\/v1alpha1/.test(w)),
      `the deprecation warning names v1alpha1: ${JSON.stringify(warnings)}`,
    );

    const a = await createdPhase("team-x");
    assert.equal(a.metadata.uid, made.metadata.uid);
    assert.ok(a.metadata.finalizers?.includes("namespace.finalizer.tenancy.acme.com"));
    const ns = await env.client.get(Namespaces, "app-y");
    assert.equal(ns.metadata.labels?.admin, "sam");
    assert.equal(ns.metadata.ownerReferences?.find((r) => r.controller)?.uid, made.metadata.uid);
    const [quota, ...moreQuotas] = await inNs(ResourceQuotas, "app-y");
    assert.equal(moreQuotas.length, 0);
    assert.equal(quota?.metadata.name, "dev");
    assert.deepEqual(quota?.spec?.hard, { cpu: "5", memory: "10Gi", pods: "10" });
    const limits = await inNs(LimitRanges, "app-y");
    assert.deepEqual(
      limits.map((l) => l.spec?.limits[0]?.default),
      [{ cpu: "500m", memory: "512Mi" }],
    );
    const policies = await inNs(NetworkPolicies, "app-y");
    assert.deepEqual(
      policies.map((p) => p.spec?.ingress),
      [[{ from: [{ podSelector: {} }] }]],
    );
    const binding = await env.client.get(RoleBindings, "namespace-admin", { namespace: "app-y" });
    assert.deepEqual(
      [binding.roleRef.kind, binding.roleRef.name, binding.subjects?.map((s) => `${s.kind}:${s.name}`)],
      ["ClusterRole", "admin", ["User:sam"]],
    );
    for (const child of [quota, ...limits, ...policies, binding])
      assert.equal(child?.metadata.ownerReferences?.find((r) => r.controller)?.uid, made.metadata.uid);

    // Deletion: billing hears of it once, then the AcmeNamespace, the Namespace and its contents go.
    const before = billing.calls.length;
    await env.client.delete(AcmeNamespace, "team-x");
    await eventually("team-x gone", async () => (await get("team-x")) === undefined);
    const calls = billing.calls.slice(before).filter((c) => c.notice.uid === made.metadata.uid);
    assert.deepEqual(
      calls.map((c) => [c.status, c.notice.namespace, c.notice.tier, c.notice.adminUsername]),
      [[200, "app-y", "dev", "sam"]],
    );
    await eventually(
      "namespace app-y removed",
      async () => (await env.client.getOptional(Namespaces, "app-y")) === undefined,
      60_000,
    );
    await sleep(1000);
    assert.equal(
      billing.calls.filter((c) => c.notice.uid === made.metadata.uid).length,
      1,
      "billing was called exactly once",
    );
    created.delete("team-x");
  });

  it("killed mid-creation and started again, it completes from what exists without creating anything twice", async () => {
    // A RoleBinding admission that cannot be reached (failurePolicy Fail) holds creation half-way.
    await env.client.create({
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "ValidatingWebhookConfiguration",
      metadata: { name: "acme-namespace-test-refuse" },
      webhooks: [
        {
          name: "refuse.rolebindings.test.opkit.dev",
          clientConfig: { url: "https://127.0.0.1:1/refuse" },
          rules: [
            {
              apiGroups: ["rbac.authorization.k8s.io"],
              apiVersions: ["v1"],
              resources: ["rolebindings"],
              operations: ["CREATE", "UPDATE"],
            },
          ],
          namespaceSelector: {
            matchExpressions: [
              { key: "kubernetes.io/metadata.name", operator: "In", values: ["int-crash-ns", "int-probe"] },
            ],
          },
          failurePolicy: "Fail",
          sideEffects: "None",
          admissionReviewVersions: ["v1"],
          timeoutSeconds: 2,
        },
      ],
    } as KubeObject);
    // The API server loads webhook configurations asynchronously: wait until a probe is refused.
    await env.client.create<Namespace>({
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: "int-probe" },
    });
    await eventually("the refusing admission is in effect", async () => {
      try {
        await env.client.create<RoleBinding>({
          apiVersion: "rbac.authorization.k8s.io/v1",
          kind: "RoleBinding",
          metadata: { generateName: "probe-", namespace: "int-probe" },
          roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "view" },
          subjects: [{ apiGroup: "rbac.authorization.k8s.io", kind: "User", name: "probe" }],
        });
        return false;
      } catch (err) {
        return /refuse/.test((err as Error).message);
      }
    });
    const made = await newAcme("int-crash", {
      namespaceName: "int-crash-ns",
      adminUsername: "kim",
      deploymentTier: "stg",
    });
    const half = await eventually(
      "half-way: CreationInProgress, the namespace's other children, no RoleBinding",
      async () => {
        const a = await get("int-crash");
        const ready = a?.status?.conditions?.find((c) => c.type === "Ready");
        if (
          a?.status?.phase !== "CreationInProgress" ||
          ready?.status !== "False" ||
          !/refuse/.test(ready.message ?? "")
        )
          return undefined;
        const [ns, quotas, limits, policies, bindings] = await Promise.all([
          env.client.getOptional(Namespaces, "int-crash-ns"),
          inNs(ResourceQuotas, "int-crash-ns"),
          inNs(LimitRanges, "int-crash-ns"),
          inNs(NetworkPolicies, "int-crash-ns"),
          inNs(RoleBindings, "int-crash-ns"),
        ]);
        return ns &&
          quotas.length === 1 &&
          limits.length === 1 &&
          policies.length === 1 &&
          bindings.length === 0
          ? { ns, quota: quotas[0], limit: limits[0], policy: policies[0] }
          : undefined;
      },
    );
    const crashed = ops.at(-1);
    await crashed?.kill(); // SIGKILL: nothing of its shutdown runs
    await env.client.delete(ValidatingWebhooks, "acme-namespace-test-refuse");
    await start();

    const a = await createdPhase("int-crash");
    assert.equal(a.metadata.uid, made.metadata.uid);
    const ns = await env.client.get(Namespaces, "int-crash-ns");
    assert.equal(ns.metadata.uid, half.ns.metadata.uid, "the same Namespace, not a new one");
    const [quotas, limits, policies, bindings] = await Promise.all([
      inNs(ResourceQuotas, "int-crash-ns"),
      inNs(LimitRanges, "int-crash-ns"),
      inNs(NetworkPolicies, "int-crash-ns"),
      inNs(RoleBindings, "int-crash-ns"),
    ]);
    assert.deepEqual(
      [quotas, limits, policies].map((l) => l.map((o) => o.metadata.uid)),
      [[half.quota?.metadata.uid], [half.limit?.metadata.uid], [half.policy?.metadata.uid]],
      "each child once, the very one made before the crash",
    );
    assert.deepEqual(
      bindings.map((b) => [b.metadata.name, b.subjects?.[0]?.name]),
      [["namespace-admin", "kim"]],
    );
    assert.equal(quotas[0]?.metadata.name, "stg");
  });

  it("a tier change replaces the quota; an admin change updates binding and label; namespaceName is immutable", async () => {
    // No tier: the schema (and the webhook) make it dev.
    await newAcme("int-tier", { namespaceName: "int-tier-ns", adminUsername: "ana" });
    const a = await createdPhase("int-tier");
    assert.equal(a.spec.deploymentTier, "dev");
    await env.client.patch(
      AcmeNamespace,
      "int-tier",
      { spec: { deploymentTier: "prod", adminUsername: "bo" } },
      { type: "merge" },
    );
    await eventually("the prod quota alone, bo bound and labelled", async () => {
      const quotas = await inNs(ResourceQuotas, "int-tier-ns");
      const binding = await env.client.getOptional(RoleBindings, "namespace-admin", {
        namespace: "int-tier-ns",
      });
      const ns = await env.client.get(Namespaces, "int-tier-ns");
      return (
        JSON.stringify(quotas.map((q) => [q.metadata.name, q.spec?.hard?.cpu, q.spec?.hard?.pods])) ===
          JSON.stringify([["prod", "500", "100"]]) &&
        binding?.subjects?.[0]?.name === "bo" &&
        ns.metadata.labels?.admin === "bo"
      );
    });
    const limits = await inNs(LimitRanges, "int-tier-ns");
    assert.deepEqual(limits[0]?.spec?.limits[0]?.default, { cpu: "2", memory: "2Gi" });
    await assert.rejects(
      env.client.patch(
        AcmeNamespace,
        "int-tier",
        { spec: { namespaceName: "elsewhere" } },
        { type: "merge" },
      ),
      (err: unknown) => err instanceof InvalidError && /namespaceName is immutable/.test(err.message),
    );
  });

  it("the mutating webhook defaults the tier to dev when the CRD's own default is absent", async (t) => {
    // The schema defaults the tier before admission, so the webhook only matters for a CRD without that
    // default (installed by an older release, or edited by hand): show it on such a CRD.
    const strip = (node: unknown): unknown => {
      if (Array.isArray(node)) return node.map(strip);
      if (typeof node !== "object" || node === null) return node;
      return Object.fromEntries(
        Object.entries(node)
          .filter(([k]) => k !== "default")
          .map(([k, v]) => [k, strip(v)]),
      );
    };
    const crd = (
      await readManifests(`${root}/config/crds/acmenamespaces.tenancy.acme.com.yaml`)
    )[0] as KubeObject;
    await env.installCrds([strip(crd) as KubeObject]);
    t.after(() => env.installCrds([crd]));
    await newAcme("int-default", { namespaceName: "int-default-ns", adminUsername: "eve" });
    const a = await env.client.get(AcmeNamespace, "int-default");
    assert.equal(a.spec.deploymentTier, "dev", "set by the webhook: the CRD in place has no default");
    await createdPhase("int-default");
    const quotas = await inNs(ResourceQuotas, "int-default-ns");
    assert.deepEqual(
      quotas.map((q) => q.metadata.name),
      ["dev"],
    );
  });

  it("while billing fails the finalizer stays, with a condition, a Warning Event and growing delays; then it completes", async (t) => {
    const made = await newAcme("int-billing", { namespaceName: "int-billing-ns", adminUsername: "cy" });
    await createdPhase("int-billing");
    billing.status = 503;
    const mine = () => billing.calls.filter((c) => c.notice.uid === made.metadata.uid);
    await env.client.delete(AcmeNamespace, "int-billing");
    await eventually("three refused notices", () => mine().length >= 3, 30_000);
    const a = await get("int-billing");
    assert.ok(a, "still there");
    assert.ok(a.metadata.finalizers?.includes("namespace.finalizer.tenancy.acme.com"), "the finalizer stays");
    const cond = a.status?.conditions?.find((c) => c.type === "BillingNotified");
    assert.equal(cond?.status, "False");
    assert.equal(cond.reason, "BillingUnavailable");
    assert.match(cond.message ?? "", /answered 503: billing is down/);
    const events = await env.client.list(EventsV1);
    assert.ok(
      events.items.some(
        (e) =>
          e.regarding?.name === "int-billing" && e.type === "Warning" && e.reason === "BillingUnavailable",
      ),
      "a Warning Event says why",
    );
    const [c1, c2, c3] = mine();
    const [g1, g2] = [(c2?.at ?? 0) - (c1?.at ?? 0), (c3?.at ?? 0) - (c2?.at ?? 0)];
    assert.ok(g1 >= 700 && g2 >= 1.5 * g1, `delays grow: ${g1} ms, then ${g2} ms`);
    t.diagnostic(`billing refused; retried after ${g1} ms, then ${g2} ms`);

    billing.status = 200;
    await eventually("billed and gone", async () => (await get("int-billing")) === undefined, 30_000);
    assert.deepEqual(
      mine().map((c) => c.status),
      [
        ...mine()
          .slice(0, -1)
          .map(() => 503),
        200,
      ],
      "refused until billing was back, then accepted once",
    );
    created.delete("int-billing");
  });

  it("a namespace that exists and is not owned gives Conflict and is left exactly as it was", async () => {
    const taken = await env.client.create<Namespace>({
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: "int-taken", labels: { team: "other" } },
    });
    await newAcme("int-conflict", { namespaceName: "int-taken", adminUsername: "dee" });
    const a = await eventually("Conflict", async () => {
      const x = await get("int-conflict");
      return x?.status?.conditions?.some((c) => c.type === "Conflict" && c.status === "True") ? x : undefined;
    });
    assert.match(
      a.status?.conditions?.find((c) => c.type === "Conflict")?.message ?? "",
      /int-taken already exists/,
    );
    await eventually("a Warning Event", async () =>
      (await env.client.list(EventsV1)).items.some(
        (e) => e.regarding?.name === "int-conflict" && e.type === "Warning" && e.reason === "Conflict",
      ),
    );
    await sleep(500);
    const after = await env.client.get(Namespaces, "int-taken");
    assert.equal(
      after.metadata.resourceVersion,
      taken.metadata.resourceVersion,
      "the namespace was not written",
    );
    assert.deepEqual(await inNs(ResourceQuotas, "int-taken"), []);
    assert.deepEqual(await inNs(RoleBindings, "int-taken"), []);
    assert.equal(a.status?.phase, undefined, "nothing was created");
    assert.equal(a.metadata.finalizers, undefined, "no finalizer: nothing to bill");
    await env.client.delete(AcmeNamespace, "int-conflict");
    await eventually("deleted at once", async () => (await get("int-conflict")) === undefined);
    created.delete("int-conflict");
  });

  it("ran with its generated RBAC and was never refused", () => {
    assert.deepEqual(
      ops.flatMap((op) => op.output.filter((l) => /forbidden/i.test(l))),
      [],
    );
  });
});
