/**
 * Webhooks called by the real kube-apiserver of opkit env: the server runs in this process on
 * 127.0.0.1 (a free port, a generated CA), configurations point at it by URL. Each test registers its
 * own configuration under a unique name, for kinds of its own group (webhook-test.opkit.dev), and
 * removes it again, so nothing collides with other test files sharing the env.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { X509Certificate } from "node:crypto";
import { connect } from "node:tls";
import { join } from "node:path";
import * as Type from "typebox/type";
import { Manager, controller, defineKind, generationChanged, kindRef, type KubeObject } from "../index.ts";
import { crdFor } from "../generate/index.ts";
import { binDir, eventually, useTestEnv, type TestEnv } from "../testenv/index.ts";
import { createLogger } from "../logging/index.ts";
import { Metrics } from "../metrics/index.ts";
import {
  conversion,
  defaulter,
  deny,
  startLocalWebhooks,
  validator,
  webhookConfigurations,
  writeServingCertificate,
  ValidationError,
  LocalWebhooks,
  type RunningLocalWebhooks,
} from "./index.ts";

const GROUP = "webhook-test.opkit.dev";

const Watcher = defineKind({
  group: GROUP,
  version: "v1",
  kind: "Watcher",
  spec: Type.Object({
    jobNamePattern: Type.String({ description: "A regular expression for Job names." }),
    ttlSeconds: Type.Optional(Type.Integer({ minimum: 0 })),
    mode: Type.Optional(Type.String()),
  }),
});

// Two versions of one kind: v1 keeps "host:port" in one string, v2 (the hub and storage version) splits it.
const EndpointV1 = defineKind({
  group: GROUP,
  version: "v1",
  kind: "Endpoint",
  spec: Type.Object({ address: Type.String() }),
});
const EndpointV2 = defineKind({
  group: GROUP,
  version: "v2",
  kind: "Endpoint",
  storage: true,
  spec: Type.Object({ host: Type.String(), port: Type.Optional(Type.Integer()) }),
});

const Strict = defineKind({ group: GROUP, version: "v1", kind: "Strict", spec: Type.Object({}) });
const Lenient = defineKind({ group: GROUP, version: "v1", kind: "Lenient", spec: Type.Object({}) });
const Rotated = defineKind({ group: GROUP, version: "v1", kind: "Rotated", spec: Type.Object({}) });

const CRDS = [
  crdFor(Watcher),
  crdFor([EndpointV1, EndpointV2]),
  crdFor(Strict),
  crdFor(Lenient),
  crdFor(Rotated),
];

const watcherValidator = validator(Watcher, {
  create: (obj) => checkPattern(obj.spec.jobNamePattern),
  update: (_old, obj) => checkPattern(obj.spec.jobNamePattern),
});

function checkPattern(pattern: string): void {
  try {
    new RegExp(pattern);
  } catch (err) {
    throw new ValidationError(`is not a valid regular expression: ${(err as Error).message}`, {
      field: "spec.jobNamePattern",
    });
  }
}

const watcherDefaulter = defaulter(Watcher, (obj) => {
  obj.spec.ttlSeconds ??= 3600;
  obj.spec.mode ??= "delete";
  obj.metadata.labels = { ...obj.metadata.labels, "webhook-test.opkit.dev/defaulted": "true" };
});

const endpointConversion = conversion({
  hub: EndpointV2,
  spokes: [
    {
      kind: EndpointV1,
      toHub: (v1) => {
        const m = /^(.*):(\d+)$/.exec(v1.spec.address);
        return { spec: m ? { host: m[1] ?? "", port: Number(m[2]) } : { host: v1.spec.address } };
      },
      fromHub: (v2) => ({
        spec: { address: v2.spec.port === undefined ? v2.spec.host : `${v2.spec.host}:${v2.spec.port}` },
      }),
    },
  ],
});

function unique(prefix: string): string {
  return `${prefix}-${process.pid}-${Math.random().toString(36).slice(2, 7)}`;
}

describe("webhooks called by the kube-apiserver", () => {
  let env: TestEnv;
  let ns: string;
  const logger = createLogger({ name: "webhook-test", level: "silent" });
  before(async () => {
    env = await useTestEnv();
    await env.installCrds(CRDS);
    ns = await env.namespace("webhooks");
  });
  after(async () => {
    const Crds = kindRef("apiextensions.k8s.io/v1", "CustomResourceDefinition");
    for (const crd of CRDS) await env?.client.delete(Crds, crd.metadata.name ?? "").catch(() => undefined);
    await env?.cleanup();
  });

  async function start(handlers: Parameters<typeof startLocalWebhooks>[0]["handlers"], metrics?: Metrics) {
    const hooks = await startLocalWebhooks({
      client: env.client,
      name: unique("webhook-test"),
      handlers,
      logger,
      metrics,
    });
    return hooks;
  }

  /** Wait until the API server has picked up a configuration: a dry-run create gets denied. */
  async function untilEffective(probe: KubeObject, match: RegExp): Promise<void> {
    await eventually(
      "the API server calls the webhook",
      async () => {
        try {
          await env.client.create(probe, { dryRun: true });
          return false;
        } catch (err) {
          return match.test((err as Error).message);
        }
      },
      20_000,
    );
  }

  it("kubectl apply of an invalid pattern fails with the field named; only the webhook could know", async (t) => {
    const metrics = new Metrics({ processMetrics: false });
    const hooks = await start([watcherValidator], metrics);
    t.after(() => hooks.stop());
    const bad = Watcher.new("bad", { jobNamePattern: "job-(" }, { namespace: ns });
    await untilEffective(bad, /spec\.jobNamePattern/);

    // Asynchronously: the webhook server runs in this process and must keep answering meanwhile.
    const kubectl = (yaml: string) =>
      new Promise<{ status: number | null; stderr: string }>((resolve, reject) => {
        const p = spawn(join(binDir(), "kubectl"), ["--kubeconfig", env.kubeconfigPath, "apply", "-f", "-"]);
        let stderr = "";
        p.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
        p.on("error", reject);
        p.on("close", (status) => resolve({ status, stderr }));
        p.stdin.end(yaml);
      });
    const manifest = (name: string, pattern: string, extra = "") =>
      `apiVersion: ${GROUP}/v1\nkind: Watcher\nmetadata:\n  name: ${name}\n  namespace: ${ns}\nspec:\n  jobNamePattern: ${JSON.stringify(pattern)}\n${extra}`;

    // The regex is well-formed as far as OpenAPI goes; only the webhook can refuse it.
    const refused = await kubectl(manifest("bad", "job-("));
    assert.notEqual(refused.status, 0);
    assert.match(
      refused.stderr,
      /denied the request: spec\.jobNamePattern: is not a valid regular expression/,
    );

    // The CRD's own schema refuses first when it can (ttlSeconds minimum 0), also naming the field.
    const negative = await kubectl(manifest("neg", "job-.*", "  ttlSeconds: -1\n"));
    assert.notEqual(negative.status, 0);
    assert.match(negative.stderr, /spec\.ttlSeconds/);

    const ok = await kubectl(manifest("good", "job-.*"));
    assert.equal(ok.status, 0, ok.stderr);
    // An update to an invalid pattern is refused too.
    const update = await kubectl(manifest("good", "[z-a]"));
    assert.notEqual(update.status, 0);
    assert.match(update.stderr, /spec\.jobNamePattern/);

    const text = await metrics.text();
    assert.match(
      text,
      /controller_runtime_webhook_requests_total\{webhook="\/validate-webhook-test-opkit-dev-v1-watcher",code="200"\} [1-9]/,
    );
    assert.match(
      text,
      /controller_runtime_webhook_latency_seconds_count\{webhook="\/validate-webhook-test-opkit-dev-v1-watcher"\} [1-9]/,
    );
    assert.match(
      text,
      /controller_runtime_webhook_requests_in_flight\{webhook="\/validate-webhook-test-opkit-dev-v1-watcher"\} 0/,
    );
  });

  it("a defaulting webhook fills defaults visible in the stored object", async (t) => {
    const hooks = await start([watcherDefaulter]);
    t.after(() => hooks.stop());
    await eventually(
      "defaults applied",
      async () => {
        const dry = await env.client.create(
          Watcher.new(unique("probe"), { jobNamePattern: "x" }, { namespace: ns }),
          {
            dryRun: true,
          },
        );
        return dry.spec.ttlSeconds === 3600;
      },
      20_000,
    );
    await env.client.create(Watcher.new("defaulted", { jobNamePattern: "job-.*" }, { namespace: ns }));
    const stored = await env.client.get(Watcher, "defaulted", { namespace: ns });
    assert.equal(stored.spec.ttlSeconds, 3600);
    assert.equal(stored.spec.mode, "delete");
    assert.equal(stored.metadata.labels?.["webhook-test.opkit.dev/defaulted"], "true");
    // Fields the user set are left alone.
    await env.client.create(
      Watcher.new("explicit", { jobNamePattern: "a", ttlSeconds: 5 }, { namespace: ns }),
    );
    assert.equal((await env.client.get(Watcher, "explicit", { namespace: ns })).spec.ttlSeconds, 5);
  });

  it("a CRD served in two versions converts both ways through the webhook", async (t) => {
    const hooks = await start([endpointConversion]);
    t.after(() => hooks.stop());
    // Written as v1 (stored as v2, the storage version), read back in both versions.
    await eventually(
      "conversion webhook in use",
      async () => {
        await env.client.create(EndpointV1.new("from-v1", { address: "db.example:5432" }, { namespace: ns }));
        return true;
      },
      20_000,
    );
    const asV2 = await env.client.get(EndpointV2, "from-v1", { namespace: ns });
    assert.deepEqual(asV2.spec, { host: "db.example", port: 5432 });
    const asV1 = await env.client.get(EndpointV1, "from-v1", { namespace: ns });
    assert.deepEqual(asV1.spec, { address: "db.example:5432" });

    // Written as v2, read as v1; and without a port, which v1 writes without the colon.
    await env.client.create(EndpointV2.new("from-v2", { host: "cache", port: 6379 }, { namespace: ns }));
    await env.client.create(EndpointV2.new("no-port", { host: "plain" }, { namespace: ns }));
    assert.equal((await env.client.get(EndpointV1, "from-v2", { namespace: ns })).spec.address, "cache:6379");
    assert.equal((await env.client.get(EndpointV1, "no-port", { namespace: ns })).spec.address, "plain");
    // A list in v1 converts every item.
    const list = await env.client.list(EndpointV1, { namespace: ns });
    assert.deepEqual(list.items.map((i) => i.spec.address).sort(), [
      "cache:6379",
      "db.example:5432",
      "plain",
    ]);
    // An update through v1 lands in storage as v2.
    const v1 = await env.client.get(EndpointV1, "from-v2", { namespace: ns });
    v1.spec.address = "cache:6380";
    await env.client.update(v1);
    assert.deepEqual((await env.client.get(EndpointV2, "from-v2", { namespace: ns })).spec, {
      host: "cache",
      port: 6380,
    });
  });

  it("with the webhook down, failurePolicy Fail rejects and Ignore admits", async (t) => {
    const hooks = await start([
      validator(Strict, { create: () => deny("strict") }, { failurePolicy: "Fail", timeoutSeconds: 2 }),
      validator(Lenient, { create: () => deny("lenient") }, { failurePolicy: "Ignore", timeoutSeconds: 2 }),
    ]);
    t.after(() => hooks.stop());
    await untilEffective(Strict.new(unique("s"), {}, { namespace: ns }), /denied the request: strict/);
    await untilEffective(Lenient.new(unique("l"), {}, { namespace: ns }), /denied the request: lenient/);

    await hooks.server.stop(0);
    // Fail: the API server cannot call the webhook, so it refuses.
    await assert.rejects(
      env.client.create(Strict.new("s1", {}, { namespace: ns })),
      /failed calling webhook "vstrict-v1.webhook-test.opkit.dev"/,
    );
    // Ignore: the object is admitted without the (denying) webhook.
    const created = await env.client.create(Lenient.new("l1", {}, { namespace: ns }));
    assert.equal(created.metadata.name, "l1");
  });

  it("a new local registration removes the orphans of dead processes on this machine", async (t) => {
    const Validating = kindRef("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration");
    const hooks = await start([validator(Rotated, { create: () => undefined })]);
    t.after(() => hooks.stop());
    // A registration left by a process killed with SIGKILL: failurePolicy Fail, its server gone.
    const dead = spawn(process.execPath, ["-e", ""]);
    await new Promise((r) => dead.on("exit", r));
    const orphan = webhookConfigurations([validator(Strict, { create: () => deny("orphan") })], {
      name: unique("orphan"),
      target: { url: "https://127.0.0.1:1", caBundle: hooks.local.certificate.caPem },
      labels: {
        ...hooks.configurations.validating?.metadata.labels,
        "opkit.dev/local-pid": String(dead.pid),
      },
    }).validating as KubeObject;
    await env.client.apply(orphan, { force: true, fieldManager: "opkit-local-webhooks" });

    const again = await start([validator(Rotated, { create: () => undefined })]);
    t.after(() => again.stop());
    await assert.rejects(env.client.get(Validating, orphan.metadata.name ?? ""), /NotFound|not found/);
    // Registrations of live processes (this one) stay.
    assert.ok(await env.client.get(Validating, hooks.configurations.validating?.metadata.name ?? ""));
  });

  it("picks up a rotated certificate on disk without a restart", async (t) => {
    const hooks: RunningLocalWebhooks = await start([
      validator(Rotated, {
        create: (obj) => (obj.metadata.name === "refuse" ? deny("refused by name") : undefined),
      }),
    ]);
    t.after(() => hooks.stop());
    await untilEffective(Rotated.new("refuse", {}, { namespace: ns }), /refused by name/);
    const before = await servedCertificate(hooks.server.port);

    // A new CA and serving certificate on disk, and the configuration's caBundle switched to the new CA:
    // the API server's fresh connections verify against the new CA only, so admission works again only
    // if the server now presents the new certificate.
    const { local } = hooks;
    const next = await writeServingCertificate(local.certDir, { hosts: ["127.0.0.1", "localhost"] });
    const name = hooks.configurations.validating?.metadata.name ?? "";
    const updated = webhookConfigurations(
      [
        validator(Rotated, {
          create: (obj) => (obj.metadata.name === "refuse" ? deny("refused by name") : undefined),
        }),
      ],
      {
        name,
        target: { url: local.url, caBundle: next.caPem },
        labels: hooks.configurations.validating?.metadata.labels,
      },
    );
    await env.client.apply(updated.validating as KubeObject, {
      force: true,
      fieldManager: "opkit-local-webhooks",
    });

    const after = await servedCertificate(hooks.server.port);
    assert.notEqual(after.fingerprint256, before.fingerprint256);
    assert.ok(
      after.checkIssued(new X509Certificate(next.caPem)),
      "the served certificate is issued by the new CA",
    );
    assert.equal(hooks.server.certificateReloads, 1);
    await eventually(
      "the API server calls the webhook with the new CA",
      async () => {
        try {
          await env.client.create(Rotated.new("refuse", {}, { namespace: ns }), { dryRun: true });
          return false;
        } catch (err) {
          return /refused by name/.test((err as Error).message);
        }
      },
      20_000,
    );
    const ok = await env.client.create(Rotated.new("fine", {}, { namespace: ns }));
    assert.equal(ok.metadata.name, "fine");
  });

  it("the manager serves the webhooks, reports them in /readyz, and its controller refuses with the same validator", async (t) => {
    const local = await LocalWebhooks.prepare();
    t.after(() => local.dispose());
    const reconciled = new Map<string, number>();
    const refusals: string[] = [];
    const mgr = await Manager.create({
      kubeconfig: env.kubeconfigPath,
      name: "webhook-manager-test",
      metrics: { host: "127.0.0.1", port: 0 },
      health: { host: "127.0.0.1", port: 0 },
      leaderElection: false,
      logger,
      cache: { namespace: ns },
      webhook: { handlers: [watcherValidator], host: local.host, port: local.port, certDir: local.certDir },
    });
    // Seed 002: the webhook may not be installed, so the controller checks too — and refuses without
    // an error (an error would be retried with backoff forever); a fixed spec is a new generation.
    mgr.add(
      controller("watcher")
        .for(Watcher, { predicates: [generationChanged()] })
        .reconcile(async (req, ctx) => {
          reconciled.set(req.name, (reconciled.get(req.name) ?? 0) + 1);
          const obj = ctx.cache.get(Watcher, req.name, { namespace: req.namespace });
          if (!obj) return;
          const verdict = await watcherValidator.validate(obj);
          if (!verdict.allowed) refusals.push(`${req.name}: ${verdict.message}`);
        }),
    );
    await mgr.start();
    t.after(() => mgr.stop());
    assert.ok(mgr.ports.webhook, "the webhook port is reported");

    const ready = await fetch(`http://127.0.0.1:${mgr.ports.health}/readyz?verbose`);
    assert.match(await ready.text(), /\[\+\]webhook ok/);

    // Not registered yet: the invalid object gets in, and the controller refuses it once.
    await env.client.create(Watcher.new("sneaky", { jobNamePattern: "(" }, { namespace: ns }));
    await eventually("the controller refused it", () =>
      refusals.some((r) => r.startsWith("sneaky: spec.jobNamePattern")),
    );
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal(reconciled.get("sneaky"), 1, "no retry loop for an invalid object");

    // Registered: the API server calls the manager's server and refuses at the door.
    const name = unique("manager-webhooks");
    await local.register(env.client, name, [watcherValidator]);
    t.after(() => local.unregister(env.client, name, [watcherValidator]));
    await untilEffective(
      Watcher.new("door", { jobNamePattern: "[" }, { namespace: ns }),
      /spec\.jobNamePattern/,
    );
    const text = await (await fetch(`http://127.0.0.1:${mgr.ports.metrics}/metrics`)).text();
    assert.match(
      text,
      /controller_runtime_webhook_requests_total\{webhook="\/validate-webhook-test-opkit-dev-v1-watcher",code="200"\} [1-9]/,
    );
  });
});

function servedCertificate(port: number): Promise<X509Certificate> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: "127.0.0.1", port, rejectUnauthorized: false }, () => {
      const raw = socket.getPeerX509Certificate();
      socket.end();
      if (raw) resolve(raw);
      else reject(new Error("no peer certificate"));
    });
    socket.once("error", reject);
  });
}
