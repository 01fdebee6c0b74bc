/** Cluster manifests for an operator with webhooks: Service, certificate (opkit Secret or cert-manager), caBundle, CRD conversion, mount. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { DEFAULT_HEALTH_PORT, DEFAULT_METRICS_PORT } from "../manager/server.ts";
import { DEFAULT_WEBHOOK_PORT } from "../webhook/server.ts";

const PORTS = { metrics: DEFAULT_METRICS_PORT, health: DEFAULT_HEALTH_PORT, webhook: DEFAULT_WEBHOOK_PORT };
import * as Type from "typebox/type";
import { conversion, defineKind, validator, webhookConfigurations, type KubeObject } from "../index.ts";
import {
  crdsFor,
  manifestsFor,
  webhookServiceRef,
  WEBHOOK_CERT_MOUNT,
  type WebhookCertificates,
} from "./index.ts";

const V1 = defineKind({
  group: "gen.opkit.dev",
  version: "v1",
  kind: "Site",
  spec: Type.Object({ a: Type.String() }),
});
const V2 = defineKind({
  group: "gen.opkit.dev",
  version: "v2",
  kind: "Site",
  storage: true,
  spec: Type.Object({ b: Type.String() }),
});
const handlers = [
  validator(V2, { create: () => undefined }),
  conversion({
    hub: V2,
    spokes: [
      { kind: V1, toHub: (o) => ({ spec: { b: o.spec.a } }), fromHub: (h) => ({ spec: { a: h.spec.b } }) },
    ],
  }),
];

function build(certificates: WebhookCertificates): KubeObject[] {
  const c = webhookConfigurations(handlers, {
    name: "site-op",
    target: { service: webhookServiceRef("site-op", "site-system") },
  });
  return manifestsFor({
    ports: PORTS,
    name: "site-op",
    namespace: "site-system",
    image: "site-op:1",
    rbac: [],
    crds: crdsFor([V1, V2]),
    webhook: { configurations: [c.validating as KubeObject], conversions: c.conversions, certificates },
  });
}

type Any = Record<string, unknown> & KubeObject;
const find = (objs: KubeObject[], kind: string) => objs.filter((o) => o.kind === kind) as Any[];

test("opkit certificates: a TLS Secret, the caBundle in every client config, the Secret mounted where the manager reads it", () => {
  const objs = build({ caPem: "CA", certPem: "CERT", keyPem: "KEY" });
  const ca = Buffer.from("CA").toString("base64");
  const [secret] = find(objs, "Secret");
  assert.equal(secret?.metadata.name, "site-op-webhook-cert");
  assert.equal(secret?.type, "kubernetes.io/tls");
  assert.deepEqual(secret?.data, {
    "ca.crt": ca,
    "tls.crt": Buffer.from("CERT").toString("base64"),
    "tls.key": Buffer.from("KEY").toString("base64"),
  });

  const [vwc] = find(objs, "ValidatingWebhookConfiguration") as (Any & {
    webhooks: { clientConfig: unknown }[];
  })[];
  assert.deepEqual(vwc?.webhooks[0]?.clientConfig, {
    service: {
      name: "site-op-webhook",
      namespace: "site-system",
      path: "/validate-gen-opkit-dev-v2-site",
      port: 443,
    },
    caBundle: ca,
  });
  const [crd] = find(objs, "CustomResourceDefinition") as (Any & { spec: { conversion: unknown } })[];
  assert.deepEqual(crd?.spec.conversion, {
    strategy: "Webhook",
    webhook: {
      clientConfig: {
        service: {
          name: "site-op-webhook",
          namespace: "site-system",
          path: "/convert-gen-opkit-dev-site",
          port: 443,
        },
        caBundle: ca,
      },
      conversionReviewVersions: ["v1"],
    },
  });
  const [svc] = find(objs, "Service").filter((s) => s.metadata.name === "site-op-webhook");
  assert.deepEqual((svc?.spec as { ports: unknown[] }).ports, [
    { name: "webhook", port: 443, targetPort: "webhook", protocol: "TCP" },
  ]);

  const [dep] = find(objs, "Deployment") as (Any & {
    spec: { template: { spec: { containers: Any[]; volumes: unknown[] } } };
  })[];
  const pod = dep?.spec.template.spec;
  const container = pod?.containers[0] as unknown as { volumeMounts: unknown[]; ports: unknown[] };
  assert.deepEqual(container.volumeMounts.at(-1), {
    name: "webhook-cert",
    mountPath: WEBHOOK_CERT_MOUNT,
    readOnly: true,
  });
  assert.deepEqual(pod?.volumes.at(-1), {
    name: "webhook-cert",
    secret: { secretName: "site-op-webhook-cert" },
  });
  assert.deepEqual(container.ports.at(-1), { name: "webhook", containerPort: 9443, protocol: "TCP" });
  // Webhook configurations come last: applied after the Service and certificate they point at.
  assert.equal(objs.at(-1)?.kind, "ValidatingWebhookConfiguration");
});

test("cert-manager: an Issuer and a Certificate for the Service's DNS names, CA injected by annotation", () => {
  const objs = build("cert-manager");
  assert.equal(find(objs, "Secret").length, 0);
  const [cert] = find(objs, "Certificate") as (Any & { spec: Record<string, unknown> })[];
  assert.equal(cert?.spec.secretName, "site-op-webhook-cert");
  assert.deepEqual(cert?.spec.dnsNames, [
    "site-op-webhook.site-system.svc",
    "site-op-webhook.site-system.svc.cluster.local",
  ]);
  assert.equal(find(objs, "Issuer")[0]?.metadata.name, "site-op-selfsigned");
  for (const o of [
    ...find(objs, "ValidatingWebhookConfiguration"),
    ...find(objs, "CustomResourceDefinition"),
  ])
    assert.equal(
      o.metadata.annotations?.["cert-manager.io/inject-ca-from"],
      "site-system/site-op-webhook-cert",
    );
  const [vwc] = find(objs, "ValidatingWebhookConfiguration") as (Any & {
    webhooks: { clientConfig: { caBundle?: string } }[];
  })[];
  assert.equal(vwc?.webhooks[0]?.clientConfig.caBundle, undefined);
});

test("refuses webhooks without a certificate, and a conversion for a CRD that is not there", () => {
  const c = webhookConfigurations(handlers, {
    name: "x",
    target: { service: webhookServiceRef("x", "x-system") },
  });
  const base = { name: "x", namespace: "x-system", image: "x:1", rbac: [], crds: crdsFor([V1, V2]) };
  assert.throws(
    () =>
      manifestsFor({
        ports: PORTS,
        ...base,
        webhook: { configurations: [c.validating as KubeObject] },
      }),
    /need a serving certificate/,
  );
  assert.throws(
    () =>
      manifestsFor({
        ports: PORTS,
        ...base,
        crds: [],
        webhook: { conversions: c.conversions, certificates: "cert-manager" },
      }),
    /sites.gen.opkit.dev, which is not among the CRDs/,
  );
});
