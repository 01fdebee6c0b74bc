/**
 * A new user's path, end to end against opkit env: opkit init (opkit vendored as packed tarballs) →
 * create api → generate (twice: the second run changes nothing; plain YAML that `kubectl kustomize` and
 * `helm lint` accept) → `opkit generate crd` with the project's own CLI → the project, copied elsewhere,
 * installs with `npm ci` and passes its own `npm test` → its Dockerfile, replayed without a container
 * engine, builds from the project directory alone and the image runs the operator as non-root →
 * `opkit run --install-crds` reconciles the sample → `opkit deploy --dry-run` validates every manifest
 * on the server. Plus the dev loop and the errors for bad input.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { chmod, cp, lstat, mkdir, mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { fileURLToPath } from "node:url";
import { isAlias, isNode, parse, parseAllDocuments, visit } from "yaml";
import { Namespaces, kindRef, type KubeObject } from "opkit";
import { NONROOT_UID } from "opkit/generate";
import {
  TEST_ENV_VARIABLE,
  binDir,
  ensureHelm,
  eventually,
  helmLint,
  useTestEnv,
  type TestEnv,
} from "opkit/testenv";
import { nonRootUser, replayDockerfile, startImage } from "./testing/dockerfile-replay.ts";

const main = fileURLToPath(new URL("./main.ts", import.meta.url));
const cliVersion = (
  JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string }
).version;

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

// Without NODE_TEST_CONTEXT: inherited from this runner, it would make a project's own test runner
// report to us in the runner's internal format instead of printing its results.
const { NODE_TEST_CONTEXT: _, ...outer } = process.env;

function sh(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = outer): string {
  const r = spawnSync(cmd, args, { cwd, env, encoding: "utf8", timeout: 600_000 });
  assert.equal(r.status, 0, `${cmd} ${args.join(" ")} in ${cwd} exited ${r.status}:\n${r.stdout}${r.stderr}`);
  return r.stdout;
}

/** Anchors and aliases in a YAML stream, as the yaml parser sees them. */
function anchorsAndAliases(text: string): string[] {
  const found: string[] = [];
  for (const doc of parseAllDocuments(text)) {
    visit(doc, (_key, node) => {
      if (isAlias(node)) found.push(`*${node.source}`);
      else if (isNode(node) && node.anchor) found.push(`&${node.anchor}`);
    });
  }
  return found;
}

type MemcachedObject = KubeObject & { status?: { conditions?: { type: string; status: string }[] } };
const Memcacheds = kindRef<MemcachedObject>("cache.scaffold.opkit.dev/v1alpha1", "Memcached");

function collect(child: ChildProcess): { text: () => string; exited: Promise<number | null> } {
  let out = "";
  child.stdout?.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr?.on("data", (d: Buffer) => (out += d.toString()));
  return { text: () => out, exited: new Promise((r) => child.on("exit", (c) => r(c))) };
}

describe("a new operator project, as a new user makes it", () => {
  let env: TestEnv;
  let work: string;
  let project: string;
  let elsewhere: string;
  const scratch: string[] = [];
  before(async () => {
    env = await useTestEnv();
    work = mkdtempSync(join(tmpdir(), "opkit-newuser-"));
    project = join(work, "memcached-operator");
    scratch.push(work);
  });
  after(async () => {
    await env?.client
      .delete(
        kindRef("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
        "memcacheds.cache.scaffold.opkit.dev",
      )
      .catch(() => undefined);
    await env?.cleanup();
    await Promise.all(scratch.map((d) => rm(d, { recursive: true, force: true })));
  });

  it("init vendors the packed opkit; create api; generate is idempotent and writes plain YAML", () => {
    const init = opkit(["init", "memcached-operator", "--domain", "scaffold.opkit.dev"], work);
    assert.equal(init.code, 0, init.stderr);
    // opkit is not in the registry: the packed packages are vendored (and init says so).
    assert.match(init.stderr, /vendored opkit-[\d.]+\.tgz and opkit-cli-[\d.]+\.tgz into vendor\//);
    const pkg = JSON.parse(readFileSync(join(project, "package.json"), "utf8")) as {
      dependencies: Record<string, string>;
      devDependencies: Record<string, string>;
    };
    assert.equal(pkg.dependencies.opkit, `file:vendor/opkit-${cliVersion}.tgz`);
    assert.equal(pkg.devDependencies["@opkit/cli"], `file:vendor/opkit-cli-${cliVersion}.tgz`);
    assert.ok(existsSync(join(project, "vendor", `opkit-${cliVersion}.tgz`)));
    assert.doesNotMatch(readFileSync(join(project, "package-lock.json"), "utf8"), /"resolved": "file:\//);

    const api = opkit(
      ["create", "api", "--group", "cache", "--version", "v1alpha1", "--kind", "Memcached"],
      project,
    );
    assert.equal(api.code, 0, api.stderr);
    assert.match(api.stdout, /wrote src\/api\/v1alpha1\/memcached.ts/);

    const gen = opkit(["generate"], project);
    assert.equal(gen.code, 0, gen.stderr);
    assert.match(gen.stdout, /wrote config\/crds\/memcacheds.cache.scaffold.opkit.dev.yaml/);
    assert.equal(opkit(["generate"], project).stdout.trim(), "up to date: nothing changed");
    // --check (for CI) names a stale file, fails, and leaves the project as it was.
    // Nothing is released yet, so there is no API to compare with (opkit api freeze writes it).
    assert.equal(
      opkit(["generate", "--check"], project).stdout.trim(),
      "up to date: nothing would change\nno released API to compare with (config/crds/released): run `opkit api freeze` when you release",
    );
    const rbacFile = join(project, "config/rbac.yaml");
    const stale = readFileSync(rbacFile, "utf8") + "# edited by hand\n";
    writeFileSync(rbacFile, stale);
    const check = opkit(["generate", "--check"], project);
    assert.equal(check.code, 1);
    assert.match(check.stderr, /out of date with src\/operator.ts: config\/rbac.yaml; run `opkit generate`/);
    assert.equal(readFileSync(rbacFile, "utf8"), stale, "--check writes nothing");
    assert.match(opkit(["generate"], project).stdout, /wrote config\/rbac.yaml/);
    const crd = parse(
      readFileSync(join(project, "config/crds/memcacheds.cache.scaffold.opkit.dev.yaml"), "utf8"),
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
    const yamlFiles = gen.stdout
      .split("\n")
      .map((l) => l.replace(/^wrote /, ""))
      .filter((f) => f.endsWith(".yaml"));
    assert.ok(yamlFiles.length >= 10, yamlFiles.join(", "));
    for (const f of yamlFiles)
      assert.deepEqual(anchorsAndAliases(readFileSync(join(project, f), "utf8")), [], f);
  });

  it("kubectl kustomize config and helm lint chart run clean", async (t) => {
    const kustomize = spawnSync(join(binDir(), "kubectl"), ["kustomize", "config"], {
      cwd: project,
      encoding: "utf8",
    });
    assert.equal(kustomize.status, 0, kustomize.stderr);
    assert.equal(kustomize.stderr, "", "no warnings");
    const kinds = parseAllDocuments(kustomize.stdout).map((d) => (d.toJS() as KubeObject).kind);
    for (const k of [
      "Namespace",
      "CustomResourceDefinition",
      "ServiceAccount",
      "ClusterRole",
      "Deployment",
      "Service",
    ])
      assert.ok(kinds.includes(k), `${k} in kubectl kustomize's output (${kinds.join(", ")})`);

    const helm = await ensureHelm({ onProgress: (l) => t.diagnostic(l) });
    const report = await helmLint(helm, join(project, "chart"));
    assert.match(report, /1 chart\(s\) linted, 0 chart\(s\) failed/);
    assert.doesNotMatch(report, /\[(WARNING|ERROR)\]/);
  });

  it("opkit generate crd prints the kind's CRD with the project's own (vendored) CLI", () => {
    const out = sh(
      "npx",
      ["--no-install", "opkit", "generate", "crd", "src/api/v1alpha1/memcached.ts"],
      project,
    );
    const generated = readFileSync(
      join(project, "config/crds/memcacheds.cache.scaffold.opkit.dev.yaml"),
      "utf8",
    );
    assert.deepEqual(
      parseAllDocuments(out).map((d) => d.toJS() as unknown),
      [parse(generated) as unknown],
    );
    const versions = sh("npx", ["--no-install", "opkit", "--version"], project).trim();
    assert.match(
      versions,
      new RegExp(`^opkit CLI ${cliVersion.replace(/\./g, "\\.")}\nopkit library \\d+\\.\\d+\\.\\d+$`),
    );
  });

  it("copied elsewhere, the project installs with npm ci and passes its own tests", async () => {
    elsewhere = join(await mkdtemp(join(tmpdir(), "opkit-elsewhere-")), "memcached-operator");
    scratch.push(join(elsewhere, ".."));
    // As a clone would have it: everything but node_modules.
    await cp(project, elsewhere, { recursive: true, filter: (src) => basename(src) !== "node_modules" });
    sh("npm", ["ci", "--no-audit", "--no-fund"], elsewhere);
    // opkit is the packed tarball's copy (built JavaScript), not a link to this checkout.
    const installed = join(elsewhere, "node_modules", "opkit");
    assert.equal((await lstat(installed)).isSymbolicLink(), false);
    assert.ok(existsSync(join(installed, "dist", "testenv", "index.js")));
    assert.equal(existsSync(join(installed, "dist", "api", "kind.test.js")), false, "no tests shipped");
    sh("npm", ["run", "typecheck"], elsewhere);
    const test = spawnSync("npm", ["test"], {
      cwd: elsewhere,
      encoding: "utf8",
      env: { ...outer, OPKIT_TEST_ENV: env.name },
    });
    assert.equal(test.status, 0, test.stdout + test.stderr);
    assert.match(test.stdout, /pass 1/);
    // As a new user runs it, with no env up: the tarball's opkit/testenv finds the control-plane
    // binaries in the cache, starts a private control plane (kwok stages and all) and stops it.
    const { [TEST_ENV_VARIABLE]: _shared, ...noEnv } = outer;
    const alone = spawnSync("npm", ["test"], { cwd: elsewhere, encoding: "utf8", env: noEnv });
    assert.equal(alone.status, 0, alone.stdout + alone.stderr);
    assert.match(alone.stdout, /pass 1/);
  });

  it("the Dockerfile builds from the project directory alone; the image runs the operator as non-root", async (t) => {
    const scratchDir = await mkdtemp(join(tmpdir(), "opkit-image-"));
    scratch.push(scratchDir);
    await chmod(scratchDir, 0o755); // the image's user must reach its files, as in an image
    const home = join(scratchDir, "home");
    const registry = sh("npm", ["config", "get", "registry"], elsewhere).trim();
    // A fresh HOME as in a fresh image: its own npm cache (the runtime stage cleans it), no user .npmrc;
    // the registry is the one the project uses.
    const replay = await replayDockerfile({
      context: elsewhere,
      work: join(scratchDir, "build"),
      env: {
        // The machine's network settings (proxies, extra CAs) stay, as a build on this machine gets them;
        // npm settings go (an inherited npm_config_cache would let `npm cache clean` wipe the real one).
        ...Object.fromEntries(Object.entries(outer).filter(([k]) => !/^npm_/i.test(k))),
        HOME: home,
        npm_config_cache: join(home, ".npm"),
        npm_config_registry: registry,
        npm_config_update_notifier: "false",
      },
      onStep: (s) => t.diagnostic(s),
    });
    for (const s of replay.stages) assert.match(s.image, /^node:24(-|$)/, "a Node 24 base");
    assert.deepEqual(nonRootUser(replay.final.user), { uid: NONROOT_UID, gid: NONROOT_UID });
    assert.ok(
      !replay.contextFiles.some((f) => f.startsWith("node_modules/")),
      "node_modules stays out of the context",
    );
    const app = join(replay.final.root, "app");
    // The runtime stage carries the bundle of `opkit build`, not the TypeScript.
    assert.deepEqual((await readdir(app)).sort(), [
      "dist",
      "node_modules",
      "package-lock.json",
      "package.json",
      "vendor",
    ]);
    assert.ok(existsSync(join(app, "dist", "main.js")), "the image runs dist/main.js");
    for (const dev of ["typescript", "@opkit/cli"])
      assert.ok(!existsSync(join(app, "node_modules", dev)), `${dev} is a dev dependency: not in the image`);

    // Run the image's command as the Deployment would: its kubeconfig mounted readable, /tmp writable.
    const mounts = join(scratchDir, "mounts");
    await cp(env.kubeconfigPath, join(mounts, "kubeconfig"));
    await chmod(mounts, 0o755);
    await chmod(join(mounts, "kubeconfig"), 0o644);
    const tmp = join(scratchDir, "tmp");
    await mkdir(tmp);
    await chmod(tmp, 0o1777);
    const crd = parse(
      readFileSync(join(elsewhere, "config/crds/memcacheds.cache.scaffold.opkit.dev.yaml"), "utf8"),
    ) as KubeObject;
    await env.installCrds([crd]);
    const ns = await env.namespace("image");
    const child = await startImage(replay, {
      PATH: process.env.PATH,
      HOME: "/",
      TMPDIR: tmp,
      KUBECONFIG: join(mounts, "kubeconfig"),
      POD_NAMESPACE: ns,
      OPKIT_METRICS_PORT: "0",
      OPKIT_HEALTH_PORT: "0",
    });
    t.after(() => {
      if (child.exitCode === null) child.kill("SIGKILL");
    });
    const out = collect(child);
    await eventually("the image's operator started", () => out.text().includes("caches synced"), 60_000);
    await env.client.create({
      apiVersion: "cache.scaffold.opkit.dev/v1alpha1",
      kind: "Memcached",
      metadata: { name: "from-image", namespace: ns },
      spec: { size: 1 },
    } as KubeObject);
    await eventually(
      "the image's operator made the sample Ready",
      async () => {
        const live = await env.client.get(Memcacheds, "from-image", { namespace: ns });
        return live.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True");
      },
      60_000,
    );
    child.kill("SIGTERM");
    assert.equal(await out.exited, 0, out.text());
  });

  it("opkit run --install-crds reconciles the sample; deploy --dry-run validates every manifest", async (t) => {
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
    const out = collect(run);
    t.after(() => {
      if (run.exitCode === null) run.kill("SIGKILL");
    });
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
    assert.equal(await out.exited, 0, out.text());

    // A dry run changes nothing, so objects in a namespace that does not exist yet cannot be checked:
    // with the namespace there, every object is.
    await env.client.create({
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: "memcached-operator-system" },
    });
    t.after(() => env.client.delete(Namespaces, "memcached-operator-system").catch(() => {}));
    const deploy = opkit(["deploy", "--dry-run", "--strict", "--kubeconfig", env.kubeconfigPath], project);
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
    const notEmpty = opkit(
      ["init", "memcached-operator", "--domain", "scaffold.opkit.dev", "--no-install"],
      work,
    );
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
