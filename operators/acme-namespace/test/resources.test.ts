/** The desired children per tier, the billing client and the tier default, as pure code (no control plane). */
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import { AcmeNamespace, type AcmeNamespaceObject } from "../src/api/v1alpha1/acmenamespace.ts";
import { BillingConfigError, BillingError, billingClient, type BillingNotice } from "../src/billing.ts";
import { tierDefaulter } from "../src/operator.ts";
import { TIER_SETTINGS, desiredNamespace, desiredNamespaceChildren } from "../src/resources.ts";

const acme = (tier: "dev" | "stg" | "prod") =>
  AcmeNamespace.new("team-x", { namespaceName: "app-y", adminUsername: "sam", deploymentTier: tier });

test("the Namespace carries the admin label (seed 004)", () => {
  const ns = desiredNamespace(acme("dev"));
  assert.equal(ns.metadata.name, "app-y");
  assert.deepEqual(ns.metadata.labels, { admin: "sam" });
});

test("quota per tier: the seed's dev and prod, stg between", () => {
  const quota = (tier: "dev" | "stg" | "prod") => {
    const [q] = desiredNamespaceChildren(acme(tier));
    assert.equal(q.metadata.name, tier, "named after the tier, as in the seed");
    assert.equal(q.metadata.namespace, "app-y");
    return q.spec?.hard;
  };
  assert.deepEqual(quota("dev"), { cpu: "5", memory: "10Gi", pods: "10" });
  assert.deepEqual(quota("prod"), { cpu: "500", memory: "200Gi", pods: "100" });
  const stg = TIER_SETTINGS.stg.quota;
  assert.ok(Number(stg.cpu) > 5 && Number(stg.cpu) < 500 && Number(stg.pods) > 10 && Number(stg.pods) < 100);
});

test("limits, network policy and the admin binding", () => {
  const [, limits, policy, binding] = desiredNamespaceChildren(acme("prod"));
  assert.deepEqual(limits.spec?.limits[0]?.default, { cpu: "2", memory: "2Gi" });
  assert.deepEqual(limits.spec?.limits[0]?.defaultRequest, { cpu: "500m", memory: "512Mi" });
  // Ingress from pods of the same namespace only: an empty podSelector in `from` means "this namespace".
  assert.deepEqual(policy.spec?.podSelector, {});
  assert.deepEqual(policy.spec?.ingress, [{ from: [{ podSelector: {} }] }]);
  assert.equal(binding.metadata.name, "namespace-admin");
  assert.deepEqual(binding.roleRef, {
    apiGroup: "rbac.authorization.k8s.io",
    kind: "ClusterRole",
    name: "admin",
  });
  assert.deepEqual(binding.subjects, [{ apiGroup: "rbac.authorization.k8s.io", kind: "User", name: "sam" }]);
});

test("the defaulting webhook sets tier dev when it is missing and keeps a given one", async () => {
  const bare = {
    ...acme("dev"),
    spec: { namespaceName: "a", adminUsername: "b" },
  } as unknown as AcmeNamespaceObject;
  assert.equal((await tierDefaulter.applyDefaults(bare)).spec.deploymentTier, "dev");
  assert.equal((await tierDefaulter.applyDefaults(acme("prod"))).spec.deploymentTier, "prod");
});

test("billing: one POST with the notice as JSON and the UID as idempotency key; non-2xx is a BillingError", async (t) => {
  const seen: { method?: string; key?: string | string[]; body: unknown }[] = [];
  let status = 200;
  const server = createServer((req: IncomingMessage, res) => {
    let body = "";
    req.on("data", (d: Buffer) => (body += d.toString()));
    req.on("end", () => {
      seen.push({ method: req.method, key: req.headers["idempotency-key"], body: JSON.parse(body) });
      res.writeHead(status).end(status === 200 ? "ok" : "down for maintenance");
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => server.close());
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/notices?token=secret`;
  const billing = billingClient(url);
  assert.ok(!billing.url.includes("secret"), "the query (tokens) never reaches logs");
  const notice: BillingNotice = {
    event: "NamespaceDeleted",
    acmeNamespace: "team-x",
    uid: "u-1",
    namespace: "app-y",
    tier: "dev",
    adminUsername: "sam",
  };
  await billing.notify(notice);
  assert.deepEqual(seen, [{ method: "POST", key: "u-1", body: notice }]);
  status = 503;
  await assert.rejects(
    billing.notify(notice),
    (err: unknown) =>
      err instanceof BillingError && err.status === 503 && /answered 503: down/.test(err.message),
  );
  server.close();
  await assert.rejects(
    billing.notify(notice),
    (err: unknown) => err instanceof BillingError && /unreachable/.test(err.message),
  );
});

test("a --billing-url that is not an http(s) URL fails at start-up", () => {
  assert.throws(() => billingClient("billing.acme.com"), BillingConfigError);
  assert.throws(() => billingClient("ftp://billing.acme.com/x"), /must be an http or https URL/);
});
