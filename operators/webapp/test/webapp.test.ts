/** The desired children, the credentials and the spec checks as pure functions (no control plane). */
import { test } from "node:test";
import assert from "node:assert/strict";
import { WebApp, type WebAppObject } from "../src/api/v1alpha1/webapp.ts";
import { credentialsFrom, generateCredentials } from "../src/credentials.ts";
import {
  CONFIG_HASH_ANNOTATION,
  claimTemplates,
  desiredDeployment,
  desiredIngress,
  desiredSecret,
  desiredStatefulSet,
  storageSignature,
} from "../src/resources.ts";
import { specProblems } from "../src/validation.ts";

const app = (spec: Partial<WebAppObject["spec"]> = {}, name = "shop") =>
  WebApp.new(
    name,
    {
      deploymentTier: "dev",
      webAppHostname: "app.acme.com",
      webAppImage: "registry.acme.com/app/app:v1.4",
      webAppReplicas: 2,
      ...spec,
    },
    { namespace: "team" },
  );

test("the Deployment: replicas and image from the spec, config file mounted, credentials from the Secret", () => {
  const d = desiredDeployment(app({ webAppReplicas: 3 }));
  assert.equal(d.spec?.replicas, 3);
  const pod = d.spec?.template.spec;
  const c = pod?.containers[0];
  assert.equal(c?.image, "registry.acme.com/app/app:v1.4");
  assert.equal(pod?.volumes?.[0]?.configMap?.name, "shop-config");
  assert.equal(c?.volumeMounts?.[0]?.mountPath, "/etc/webapp");
  const fromSecret = c?.env?.filter((e) => e.valueFrom?.secretKeyRef?.name === "shop-db-credentials");
  assert.deepEqual(
    fromSecret?.map((e) => [e.name, e.valueFrom?.secretKeyRef?.key]),
    [
      ["DB_USER", "username"],
      ["DB_PASSWORD", "password"],
    ],
  );
  assert.ok(!JSON.stringify(d).includes('password":"'), "no credential value in the Deployment");
});

test("the tier chooses resources, storage and the config (a new config rolls the pods)", () => {
  const dev = app();
  const prod = app({ deploymentTier: "prod" });
  assert.deepEqual(claimTemplates(dev), []);
  assert.equal(desiredStatefulSet(dev).spec?.template.spec?.volumes?.[0]?.emptyDir?.sizeLimit, "1Gi");
  const sts = desiredStatefulSet(prod);
  assert.equal(sts.spec?.template.spec?.volumes, undefined);
  assert.equal(sts.spec?.volumeClaimTemplates?.[0]?.spec?.resources?.requests?.storage, "20Gi");
  assert.notEqual(
    desiredDeployment(dev).spec?.template.spec?.containers[0]?.resources?.limits?.memory,
    desiredDeployment(prod).spec?.template.spec?.containers[0]?.resources?.limits?.memory,
  );
  assert.notEqual(
    desiredDeployment(dev).spec?.template.metadata?.annotations?.[CONFIG_HASH_ANNOTATION],
    desiredDeployment(prod).spec?.template.metadata?.annotations?.[CONFIG_HASH_ANNOTATION],
  );
});

test("storage signatures: equal for the same claims, different across dev, stg and prod", () => {
  const sig = (tier: "dev" | "stg" | "prod") =>
    storageSignature(claimTemplates(app({ deploymentTier: tier })));
  assert.equal(sig("dev"), "");
  assert.equal(sig("stg"), "data=5Gi");
  assert.equal(sig("prod"), "data=20Gi");
  assert.equal(
    storageSignature(claimTemplates(app({ deploymentTier: "prod", webAppReplicas: 7 }))),
    sig("prod"),
  );
});

test("the Ingress routes the host name to the app Service", () => {
  const rule = desiredIngress(app()).spec?.rules?.[0];
  assert.equal(rule?.host, "app.acme.com");
  assert.equal(rule?.http?.paths[0]?.backend.service?.name, "shop");
});

test("credentials: random, read back unchanged, a missing key generated again", () => {
  const a = generateCredentials();
  const b = generateCredentials();
  assert.notEqual(a.password, b.password);
  assert.match(a.username, /^app_[0-9a-f]{8}$/);
  assert.ok(a.password.length >= 43);
  const secret = desiredSecret(app(), a);
  assert.deepEqual(credentialsFrom(secret), a);
  const { password: _, ...withoutPassword } = secret.data ?? {};
  const refilled = credentialsFrom({ ...secret, data: withoutPassword }, () => b);
  assert.deepEqual(refilled, { username: a.username, password: b.password });
});

test("spec checks: the seed's sample passes; a bad host, image or name is reported", () => {
  assert.deepEqual(specProblems(app()), []);
  assert.deepEqual(specProblems(app({ webAppHostname: "*.apps.acme.com" })), []);
  const bad = specProblems(
    app({ webAppHostname: "Not_A_Host!", webAppImage: "no spaces allowed" }, "9lives"),
  );
  assert.equal(bad.length, 3, bad.join("\n"));
  assert.match(bad.join("\n"), /metadata\.name/);
  assert.match(bad.join("\n"), /webAppHostname "Not_A_Host!"/);
  assert.match(bad.join("\n"), /webAppImage/);
  assert.equal(specProblems(app({}, "x".repeat(50))).length, 1);
  assert.deepEqual(specProblems(app({ webAppImage: "postgres@sha256:" + "a".repeat(64) })), []);
});
