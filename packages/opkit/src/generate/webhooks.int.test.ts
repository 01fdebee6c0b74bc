/**
 * Generated webhook manifests against the real API server and helm: every object of an operator with
 * validating, defaulting and conversion webhooks (opkit-generated certificate) passes a server-side dry
 * run, and the Helm chart renders the same objects as the kustomize base — also with cert-manager, whose
 * DNS names and CA-injection annotation follow `.Values.namespace`.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { DEFAULT_HEALTH_PORT, DEFAULT_METRICS_PORT } from "../manager/server.ts";
import { DEFAULT_WEBHOOK_PORT } from "../webhook/server.ts";

const PORTS = { metrics: DEFAULT_METRICS_PORT, health: DEFAULT_HEALTH_PORT, webhook: DEFAULT_WEBHOOK_PORT };
import { randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse, parseAllDocuments } from "yaml";
import * as Type from "typebox/type";
import {
  conversion,
  defaulter,
  defineKind,
  kindRef,
  validator,
  webhookConfigurations,
  type KubeObject,
} from "../index.ts";
import { ensureServingCertificate } from "../webhook/index.ts";
import { ensureHelm, helmTemplate } from "../testenv/helm.ts";
import { useTestEnv, type TestEnv } from "../testenv/index.ts";
import {
  crdsFor,
  manifestsFor,
  webhookDnsNames,
  webhookServiceRef,
  writeHelmChart,
  writeKustomize,
  type WebhookCertificates,
} from "./index.ts";

const GROUP = "webhook-gen.opkit.dev";
const V1 = defineKind({ group: GROUP, version: "v1", kind: "Shop", spec: Type.Object({ a: Type.String() }) });
const V2 = defineKind({
  group: GROUP,
  version: "v2",
  kind: "Shop",
  storage: true,
  spec: Type.Object({ b: Type.String() }),
});
const handlers = [
  validator(V2, { create: () => undefined, update: () => undefined }),
  defaulter(V2, () => undefined),
  conversion({
    hub: V2,
    spokes: [
      { kind: V1, toHub: (o) => ({ spec: { b: o.spec.a } }), fromHub: (h) => ({ spec: { a: h.spec.b } }) },
    ],
  }),
];

describe("generated webhook manifests", () => {
  let env: TestEnv;
  let dir: string;
  const name = `whgen-${randomBytes(3).toString("hex")}`;
  const namespace = `${name}-system`;
  before(async () => {
    env = await useTestEnv();
    dir = await mkdtemp(join(tmpdir(), "opkit-webhook-gen-"));
  });
  after(async () => {
    await env?.client.delete(kindRef("v1", "Namespace"), namespace).catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
    await env?.cleanup();
  });

  async function objects(certificates: WebhookCertificates): Promise<KubeObject[]> {
    const c = webhookConfigurations(handlers, {
      name,
      target: { service: webhookServiceRef(name, namespace) },
    });
    return manifestsFor({
      ports: PORTS,
      name,
      namespace,
      image: `${name}:1`,
      rbac: [],
      crds: crdsFor([V1, V2]),
      webhook: {
        configurations: [c.validating, c.mutating].filter((o): o is KubeObject => o !== undefined),
        conversions: c.conversions,
        certificates,
      },
    });
  }

  it("every object of the opkit-certificate layout passes a server-side dry run", async () => {
    const certs = await ensureServingCertificate(join(dir, "certs"), {
      hosts: webhookDnsNames(name, namespace),
    });
    const objs = await objects(certs);
    for (const o of objs.filter((x) => x.kind === "Namespace")) await env.client.apply(o, { force: true });
    for (const o of objs.filter((x) => x.kind !== "Namespace")) {
      const out = await env.client.apply(o, { force: true, dryRun: true });
      assert.equal(out.metadata.name, o.metadata.name);
    }
    const kinds = objs.map((o) => o.kind);
    for (const k of [
      "Secret",
      "ValidatingWebhookConfiguration",
      "MutatingWebhookConfiguration",
      "CustomResourceDefinition",
    ])
      assert.ok(kinds.includes(k), k);
  });

  for (const mode of ["opkit", "cert-manager"] as const) {
    it(
      `helm renders the kustomize objects (${mode} certificates), namespace from values`,
      { timeout: 900_000 },
      async (t) => {
        const helm = await ensureHelm({ onProgress: (l) => t.diagnostic(l) });
        const out = join(dir, mode);
        const objs = await objects(
          mode === "opkit"
            ? await ensureServingCertificate(join(dir, "certs"), { hosts: webhookDnsNames(name, namespace) })
            : "cert-manager",
        );
        await writeKustomize(join(out, "config"), objs);
        await writeHelmChart(join(out, "chart"), {
          name,
          version: "0.1.0",
          appVersion: "0.1.0",
          objects: objs,
        });
        const kustomization = parse(await readFile(join(out, "config", "kustomization.yaml"), "utf8")) as {
          resources: string[];
        };
        const fromKustomize: KubeObject[] = [];
        for (const f of kustomization.resources)
          for (const d of parseAllDocuments(await readFile(join(out, "config", f), "utf8")))
            fromKustomize.push(d.toJS() as KubeObject);
        const render = async (set?: Record<string, string>) =>
          parseAllDocuments(await helmTemplate(helm, join(out, "chart"), { release: "r", set }))
            .map((d) => d.toJS() as KubeObject | null)
            .filter((o): o is KubeObject => o !== null);
        const key = (o: KubeObject) => `${o.kind}/${o.metadata.namespace ?? ""}/${o.metadata.name}`;
        const sort = (l: KubeObject[]) =>
          [...l].sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
        assert.deepEqual(sort(await render()), sort(fromKustomize));
        if (mode === "cert-manager") {
          const prod = await render({ namespace: "prod" });
          const cert = prod.find((o) => o.kind === "Certificate") as KubeObject & {
            spec: { dnsNames: string[] };
          };
          assert.deepEqual(cert.spec.dnsNames, [
            `${name}-webhook.prod.svc`,
            `${name}-webhook.prod.svc.cluster.local`,
          ]);
          const vwc = prod.find((o) => o.kind === "ValidatingWebhookConfiguration") as KubeObject & {
            webhooks: { clientConfig: { service: { namespace: string } } }[];
          };
          assert.equal(
            vwc.metadata.annotations?.["cert-manager.io/inject-ca-from"],
            `prod/${name}-webhook-cert`,
          );
          assert.equal(vwc.webhooks[0]?.clientConfig.service.namespace, "prod");
        }
      },
    );
  }
});
