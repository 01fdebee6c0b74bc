/**
 * Webhooks in a new project, as a user adds them, against opkit env: opkit init → create api →
 * create webhook --validation --defaulting → a second version by hand → create webhook --conversion →
 * generate (configurations, CRD conversion, Secret; idempotent) → the project's own `npm test` (its
 * generated webhook tests run with the real API server calling them) → `opkit run --install-crds
 * --local-webhooks` refuses a bad update through the operator process and removes its registration on
 * exit → `opkit deploy --dry-run` accepts every manifest.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parse, parseAllDocuments } from "yaml";
import { NotFoundError, kindRef, type KubeObject } from "opkit";
import { eventually, useTestEnv, type TestEnv } from "opkit/testenv";

const main = fileURLToPath(new URL("./main.ts", import.meta.url));
const DOMAIN = "webhook-scaffold.opkit.dev";
const GROUP = `apps.${DOMAIN}`;
const CRD = `guestbooks.${GROUP}`;
const Crds = kindRef<KubeObject & { spec: { conversion?: { strategy: string } } }>(
  "apiextensions.k8s.io/v1",
  "CustomResourceDefinition",
);
const Validating = kindRef("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration");
const Mutating = kindRef("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration");

/** What `opkit run --local-webhooks` registers; a run killed with SIGKILL cannot remove it. */
async function removeLocalRegistration(env: TestEnv): Promise<void> {
  for (const kind of [Validating, Mutating])
    await env.client.delete(kind, "guestbook-operator-local").catch(() => undefined);
}

function opkit(args: string[], cwd: string): { code: number; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, ["--conditions=opkit-source", main, ...args], {
    cwd,
    encoding: "utf8",
    timeout: 300_000,
  });
  return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

describe("webhooks in a new project", () => {
  let env: TestEnv;
  let project: string;
  before(async () => {
    env = await useTestEnv();
    await removeLocalRegistration(env);
    project = join(mkdtempSync(join(tmpdir(), "opkit-webhooks-")), "guestbook-operator");
  });
  after(async () => {
    if (env) await removeLocalRegistration(env);
    if (project) rmSync(join(project, ".."), { recursive: true, force: true });
    await env?.client.delete(Crds, CRD).catch(() => undefined);
    await env?.client.delete(kindRef("v1", "Namespace"), "guestbook-operator-system").catch(() => undefined);
    await env?.cleanup();
  });

  it("create webhook, generate, npm test, run --local-webhooks, deploy --dry-run", async (t) => {
    assert.equal(opkit(["init", "guestbook-operator", "--domain", DOMAIN], join(project, "..")).code, 0);
    const api = opkit(
      ["create", "api", "--group", "apps", "--version", "v1alpha1", "--kind", "Guestbook"],
      project,
    );
    assert.equal(api.code, 0, api.stderr);

    const hooks = opkit(
      ["create", "webhook", "--kind", "Guestbook", "--programmatic-validation", "--defaulting"],
      project,
    );
    assert.equal(hooks.code, 0, hooks.stderr);
    assert.match(hooks.stdout, /wrote src\/webhooks\/guestbook.ts/);
    assert.match(hooks.stdout, /wrote test\/guestbook-webhook.int.test.ts/);
    const operatorFile = join(project, "src/operator.ts");
    assert.match(
      readFileSync(operatorFile, "utf8"),
      /webhooks: \[\s*guestbookValidator,\s*guestbookDefaulter,/,
    );

    // A second version; the user marks it as the storage version (the hub), as the CLI says.
    const v2 = opkit(
      ["create", "api", "--group", "apps", "--version", "v1beta1", "--kind", "Guestbook"],
      project,
    );
    assert.equal(v2.code, 0, v2.stderr);
    assert.match(v2.stdout, /Guestbook now has versions v1alpha1, v1beta1: set storage: true/);
    const early = opkit(["create", "webhook", "--kind", "Guestbook", "--conversion"], project);
    assert.match(early.stderr, /no version of Guestbook says storage: true/);
    const v1beta1 = join(project, "src/api/v1beta1/guestbook.ts");
    writeFileSync(
      v1beta1,
      readFileSync(v1beta1, "utf8").replace('version: "v1beta1",', 'version: "v1beta1",\n  storage: true,'),
    );
    const conv = opkit(["create", "webhook", "--kind", "Guestbook", "--conversion"], project);
    assert.equal(conv.code, 0, conv.stderr);
    assert.match(conv.stdout, /wrote src\/webhooks\/guestbook-conversion.ts/);
    assert.match(conv.stdout, /wrote test\/guestbook-conversion.test.ts/);
    assert.match(
      conv.stdout,
      /wrote package.json\n.*next: npm install && /s,
      "fast-check added for the conversion test",
    );
    const install = spawnSync("npm", ["install", "--no-audit", "--no-fund"], {
      cwd: project,
      encoding: "utf8",
    });
    assert.equal(install.status, 0, install.stdout + install.stderr);
    const again = opkit(["create", "webhook", "--kind", "Guestbook", "--conversion"], project);
    assert.match(again.stderr, /guestbook-conversion.ts exists already/);
    const none = opkit(["create", "webhook", "--kind", "Guestbook"], project);
    assert.match(
      none.stderr,
      /say which webhooks to add: --programmatic-validation, --defaulting and\/or --conversion/,
    );

    const gen = opkit(["generate"], project);
    assert.equal(gen.code, 0, gen.stderr);
    assert.match(gen.stdout, /wrote config\/webhook.yaml/);
    assert.match(gen.stdout, /wrote config\/webhook-secret.yaml/);
    assert.equal(opkit(["generate"], project).stdout.trim(), "up to date: nothing changed");
    const webhookYaml = parseAllDocuments(readFileSync(join(project, "config/webhook.yaml"), "utf8")).map(
      (d) =>
        d.toJS() as {
          kind: string;
          webhooks: { clientConfig: { service: { path: string }; caBundle: string } }[];
        },
    );
    assert.deepEqual(webhookYaml.map((d) => d.kind).sort(), [
      "MutatingWebhookConfiguration",
      "ValidatingWebhookConfiguration",
    ]);
    const vwc = webhookYaml.find((d) => d.kind === "ValidatingWebhookConfiguration");
    assert.equal(
      vwc?.webhooks[0]?.clientConfig.service.path,
      `/validate-apps-webhook-scaffold-opkit-dev-v1alpha1-guestbook`,
    );
    assert.ok(vwc?.webhooks[0]?.clientConfig.caBundle);
    const crd = parse(readFileSync(join(project, `config/crds/${CRD}.yaml`), "utf8")) as {
      spec: { conversion: { strategy: string; webhook: { clientConfig: { service: { name: string } } } } };
    };
    assert.equal(crd.spec.conversion.strategy, "Webhook");
    assert.equal(crd.spec.conversion.webhook.clientConfig.service.name, "guestbook-operator-webhook");
    assert.match(readFileSync(join(project, ".gitignore"), "utf8"), /config\/webhook-secret.yaml/);

    const typecheck = spawnSync("npm", ["run", "typecheck"], { cwd: project, encoding: "utf8" });
    assert.equal(typecheck.status, 0, typecheck.stdout + typecheck.stderr);
    const { NODE_TEST_CONTEXT: _, ...outer } = process.env;
    const test = spawnSync("npm", ["test"], {
      cwd: project,
      encoding: "utf8",
      env: { ...outer, OPKIT_TEST_ENV: env.name },
    });
    assert.equal(test.status, 0, test.stdout + test.stderr);
    // The kind's test, the admission webhooks' two tests, the conversion test and its property test.
    assert.match(test.stdout, /pass 5/);

    // opkit run --local-webhooks: the operator process serves, the API server calls it.
    const ns = await env.namespace("guestbook");
    const run = spawn(
      process.execPath,
      [
        "--conditions=opkit-source",
        main,
        "run",
        "--install-crds",
        "--local-webhooks",
        "--kubeconfig",
        env.kubeconfigPath,
      ],
      {
        cwd: project,
        env: { ...process.env, OPKIT_METRICS_PORT: "0", OPKIT_HEALTH_PORT: "0" },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let out = "";
    run.stdout?.on("data", (d: Buffer) => (out += d.toString()));
    run.stderr?.on("data", (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((r) => run.on("exit", (c) => r(c)));
    t.after(async () => {
      // SIGTERM first: opkit run passes it on to the operator and removes the registration; SIGKILL
      // only if that hangs (it would leave the operator process behind).
      if (run.exitCode !== null) return;
      run.kill("SIGTERM");
      const timer = setTimeout(() => run.kill("SIGKILL"), 15_000);
      await exited;
      clearTimeout(timer);
    });
    // Synced first: a SIGTERM while the manager is still starting exits non-zero (a manager matter).
    await eventually("the operator started", () => out.includes("caches synced"), 60_000);
    await eventually(
      "webhooks registered",
      () => out.includes("webhooks registered as guestbook-operator-local"),
      60_000,
    );
    const live = (await env.client.get(Validating, "guestbook-operator-local")) as KubeObject & {
      webhooks: { clientConfig: { url: string } }[];
    };
    assert.match(live.webhooks[0]?.clientConfig.url ?? "", /^https:\/\/127\.0\.0\.1:\d+\/validate-/);
    assert.equal((await env.client.get(Crds, CRD)).spec.conversion?.strategy, "Webhook");

    const Guestbooks = kindRef<
      KubeObject & { spec: { size: number }; metadata: { labels?: Record<string, string> } }
    >(`${GROUP}/v1alpha1`, "Guestbook");
    const sample: KubeObject = {
      apiVersion: `${GROUP}/v1alpha1`,
      kind: "Guestbook",
      metadata: { name: "gb", namespace: ns },
      spec: { size: 2 },
    } as KubeObject;
    const created = await eventually("created through the webhooks", () => env.client.create(sample), 60_000);
    assert.equal(created.metadata.labels?.[`${GROUP}/tier`], "small", "defaulted by the operator process");
    // A patch, not an update: the controller writes status meanwhile (no resourceVersion to conflict on).
    await assert.rejects(
      env.client.patch(Guestbooks, "gb", { spec: { size: 90 } }, { type: "merge", namespace: ns }),
      /denied the request: spec\.size: may change by at most 10/,
    );

    run.kill("SIGTERM");
    assert.equal(await exited, 0, out);
    assert.match(out, /webhook configurations guestbook-operator-local removed/);
    await assert.rejects(env.client.get(Validating, "guestbook-operator-local"), NotFoundError);
    assert.equal((await env.client.get(Crds, CRD)).spec.conversion?.strategy, "None");

    // Objects in a namespace that does not exist yet cannot be dry-run: create it, then all are checked.
    await env.client.create({
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: "guestbook-operator-system" },
    });
    const deploy = opkit(["deploy", "--dry-run", "--strict", "--kubeconfig", env.kubeconfigPath], project);
    assert.equal(deploy.code, 0, deploy.stderr);
    assert.match(
      deploy.stdout,
      /validatingwebhookconfiguration\/guestbook-operator valid \(server dry-run\)/,
    );
    assert.match(deploy.stdout, /secret\/guestbook-operator-webhook-cert valid/);
    assert.ok(existsSync(join(project, ".opkit/webhook-certs/tls.key")));
  });

  it("dev registers the webhooks against the operator it runs, and removes them on Ctrl-C", async (t) => {
    const dev = spawn(process.execPath, ["--conditions=opkit-source", main, "dev", "--name", env.name], {
      cwd: project,
      env: { ...process.env, OPKIT_METRICS_PORT: "0", OPKIT_HEALTH_PORT: "0" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    dev.stdout?.on("data", (d: Buffer) => (out += d.toString()));
    dev.stderr?.on("data", (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((r) => dev.on("exit", (c) => r(c)));
    t.after(async () => {
      if (dev.exitCode !== null) return;
      dev.kill("SIGINT");
      const timer = setTimeout(() => dev.kill("SIGKILL"), 15_000);
      await exited;
      clearTimeout(timer);
    });
    await eventually("the operator started", () => out.includes("caches synced"), 90_000);
    await eventually("webhooks registered", () =>
      out.includes("webhooks registered as guestbook-operator-local"),
    );
    const live = (await env.client.get(Mutating, "guestbook-operator-local")) as KubeObject & {
      webhooks: { clientConfig: { url: string } }[];
    };
    const port = /127\.0\.0\.1:(\d+)/.exec(live.webhooks[0]?.clientConfig.url ?? "")?.[1];
    assert.match(out, new RegExp(`"port":${port},.*webhook server listening`));
    dev.kill("SIGINT");
    assert.equal(await exited, 0, out);
    assert.match(out, /webhook configurations guestbook-operator-local removed/);
    await assert.rejects(env.client.get(Mutating, "guestbook-operator-local"), NotFoundError);
  });
});
