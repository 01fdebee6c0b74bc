/**
 * A new user's path, end to end against opkit env: opkit init → create api → generate (twice: the second
 * run changes nothing) → the project's own `npm test` passes → `opkit run --install-crds` reconciles the
 * sample → `opkit deploy --dry-run` validates every manifest on the server. Plus the errors for bad input.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parse } from "yaml";
import { kindRef, type KubeObject } from "opkit";
import { eventually, useTestEnv, type TestEnv } from "opkit/testenv";

const main = fileURLToPath(new URL("./main.ts", import.meta.url));

function opkit(
  args: string[],
  cwd: string,
  env: NodeJS.ProcessEnv = process.env,
): { code: number; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, ["--conditions=opkit-source", main, ...args], {
    cwd,
    env,
    encoding: "utf8",
    timeout: 300_000,
  });
  return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

describe("a new operator project, as a new user makes it", () => {
  let env: TestEnv;
  let work: string;
  let project: string;
  before(async () => {
    env = await useTestEnv();
    work = mkdtempSync(join(tmpdir(), "opkit-newuser-"));
    project = join(work, "memcached-operator");
  });
  after(async () => {
    await env?.client
      .delete(kindRef("apiextensions.k8s.io/v1", "CustomResourceDefinition"), "memcacheds.cache.example.com")
      .catch(() => undefined);
    await env?.cleanup();
  });

  it("init, create api, generate (idempotent), npm test, run, deploy --dry-run", async (t) => {
    const init = opkit(["init", "memcached-operator", "--domain", "example.com"], work);
    assert.equal(init.code, 0, init.stderr);
    const api = opkit(
      ["create", "api", "--group", "cache", "--version", "v1alpha1", "--kind", "Memcached"],
      project,
    );
    assert.equal(api.code, 0, api.stderr);
    assert.match(api.stdout, /wrote src\/api\/v1alpha1\/memcached.ts/);

    const gen = opkit(["generate"], project);
    assert.equal(gen.code, 0, gen.stderr);
    assert.match(gen.stdout, /wrote config\/crds\/memcacheds.cache.example.com.yaml/);
    assert.equal(opkit(["generate"], project).stdout.trim(), "up to date: nothing changed");
    const crd = parse(
      readFileSync(join(project, "config/crds/memcacheds.cache.example.com.yaml"), "utf8"),
    ) as {
      spec: {
        versions: {
          schema: {
            openAPIV3Schema: { properties: { spec: { properties: { size: { minimum: number } } } } };
          };
        }[];
      };
    };
    assert.equal(crd.spec.versions[0]?.schema.openAPIV3Schema.properties.spec.properties.size.minimum, 1);

    // The project's own tests, against the same control plane.
    const typecheck = spawnSync("npm", ["run", "typecheck"], { cwd: project, encoding: "utf8" });
    assert.equal(typecheck.status, 0, typecheck.stdout + typecheck.stderr);
    // Without NODE_TEST_CONTEXT: inherited from this runner, it would make the project's own runner
    // report to us in the runner's internal format instead of printing its results.
    const { NODE_TEST_CONTEXT: _, ...outer } = process.env;
    const test = spawnSync("npm", ["test"], {
      cwd: project,
      encoding: "utf8",
      env: { ...outer, OPKIT_TEST_ENV: env.name },
    });
    assert.equal(test.status, 0, test.stdout + test.stderr);
    assert.match(test.stdout, /pass 1/);

    // opkit run --install-crds reconciles the sample.
    const ns = await env.namespace("sample");
    const run = spawn(
      process.execPath,
      ["--conditions=opkit-source", main, "run", "--install-crds", "--kubeconfig", env.kubeconfigPath],
      {
        cwd: project,
        env: { ...process.env, OPKIT_METRICS_PORT: "0", OPKIT_HEALTH_PORT: "0" },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    const out: string[] = [];
    run.stdout?.on("data", (d: Buffer) => out.push(d.toString()));
    run.stderr?.on("data", (d: Buffer) => out.push(d.toString()));
    const exited = new Promise<number | null>((r) => run.on("exit", (c) => r(c)));
    t.after(() => {
      if (run.exitCode === null) run.kill("SIGKILL");
    });
    const Memcacheds = kindRef<KubeObject & { status?: { conditions?: { type: string; status: string }[] } }>(
      "cache.example.com/v1alpha1",
      "Memcached",
    );
    const sample = parse(
      readFileSync(join(project, "config/samples/cache_v1alpha1_memcached.yaml"), "utf8"),
    ) as KubeObject;
    sample.metadata.namespace = ns;
    await eventually("the CRD is installed", async () => {
      await env.client.create(sample);
      return true;
    });
    await eventually(
      "the sample is Ready",
      async () => {
        const live = await env.client.get(Memcacheds, sample.metadata.name ?? "", { namespace: ns });
        return live.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True");
      },
      60_000,
    );
    run.kill("SIGTERM");
    assert.equal(await exited, 0, out.join(""));

    const deploy = opkit(["deploy", "--dry-run", "--kubeconfig", env.kubeconfigPath], project);
    assert.equal(deploy.code, 0, deploy.stderr);
    assert.match(deploy.stdout, /deployment\/memcached-operator valid \(server dry-run\)/);
    assert.match(deploy.stdout, /clusterrole\/memcached-operator valid/);
  });

  it("dev: runs the operator on the env and restarts it when a source file changes", async (t) => {
    const dev = spawn(process.execPath, ["--conditions=opkit-source", main, "dev", "--name", env.name], {
      cwd: project,
      env: { ...process.env, OPKIT_METRICS_PORT: "0", OPKIT_HEALTH_PORT: "0" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    dev.stdout?.on("data", (d: Buffer) => (out += d.toString()));
    dev.stderr?.on("data", (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((r) => dev.on("exit", (c) => r(c)));
    t.after(() => {
      if (dev.exitCode === null) dev.kill("SIGKILL");
    });
    await eventually("the operator started", () => out.includes("caches synced"), 60_000);
    const file = join(project, "src/controllers/memcached.ts");
    writeFileSync(file, readFileSync(file, "utf8") + "\n// touched by the dev-loop test\n");
    await eventually("a restart", () => out.includes("source changed: restarting the operator"), 30_000);
    await eventually("the operator started again", () => out.split("caches synced").length > 2, 60_000);
    dev.kill("SIGINT");
    assert.equal(await exited, 0, out);
    assert.match(out, /keeps running/);
  });

  it("refuses bad input with messages that name the flag or file and say what to do", () => {
    const badVersion = opkit(
      ["create", "api", "--group", "cache", "--version", "1", "--kind", "Thing"],
      project,
    );
    assert.notEqual(badVersion.code, 0);
    assert.match(badVersion.stderr, /"1" is not a Kubernetes API version: use v1, v1alpha1/);
    const badKind = opkit(
      ["create", "api", "--group", "cache", "--version", "v1", "--kind", "thing"],
      project,
    );
    assert.match(badKind.stderr, /"thing" is not a valid kind: use UpperCamelCase/);
    const badDomain = opkit(["init", "x", "--domain", "Example_COM"], work);
    assert.match(badDomain.stderr, /"Example_COM" is not a DNS domain/);
    const notEmpty = opkit(["init", "memcached-operator", "--domain", "example.com", "--no-install"], work);
    assert.notEqual(notEmpty.code, 0);
    assert.match(notEmpty.stderr, /is not empty: opkit init needs a new or empty directory/);
    const outside = opkit(["create", "api", "--group", "a", "--version", "v1", "--kind", "A"], work);
    assert.match(outside.stderr, /is not an opkit project \(no src\/operator.ts\): run opkit init first/);
    const noKubeconfig = opkit(["install"], project, {
      ...process.env,
      KUBECONFIG: join(work, "missing-kubeconfig"),
      HOME: work,
    });
    assert.notEqual(noKubeconfig.code, 0);
    writeFileSync(join(work, "note"), noKubeconfig.stderr);
    assert.match(noKubeconfig.stderr, /missing-kubeconfig|no Kubernetes cluster configured/);
  });
});
