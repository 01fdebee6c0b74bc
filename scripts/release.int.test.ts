/**
 * `make test-release`: opkit installed as a user installs it. A real npm registry (Verdaccio, a
 * devDependency) on loopback serves opkit's packages from a temporary storage and proxies everything
 * else to the registry npm is configured with here. Every release tarball is published to it, then in
 * an empty folder outside the checkout (holding nothing but a copy of the tarballs) `npm create
 * opkit@latest` makes a project, which installs, passes its test against `opkit env`, builds, and
 * installs its runtime dependencies alone as its Dockerfile does.
 *
 * npm runs with a temporary userconfig and cache and no token of the machine's; before every publish the
 * registry it would publish to is checked to be on loopback.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { packPackage, readPackage } from "../packages/cli/src/scaffold/packages.ts";
import { checkTarball, RELEASE_PACKAGES } from "./release-lib.ts";

const root = join(import.meta.dirname, "..");
const verdaccioBin = join(root, "node_modules", "verdaccio", "bin", "verdaccio");

async function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const s = createServer();
    s.once("error", fail);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => done(port));
    });
  });
}

/** Only loopback: this test must never publish anywhere else. */
function assertLoopback(url: string): void {
  const host = new URL(url).hostname.replace(/^\[|\]$/g, "");
  assert.ok(
    /^127\.\d+\.\d+\.\d+$/.test(host) || host === "localhost" || host === "::1",
    `refusing to publish to ${url}: not a loopback address`,
  );
}

interface Run {
  status: number | null;
  stdout: string;
  stderr: string;
}

describe("the release tarballs, installed from a registry as a user would", { timeout: 40 * 60_000 }, () => {
  let work: string;
  let registry: string;
  let server: ChildProcess | undefined;
  let env: NodeJS.ProcessEnv;
  const tarballs: string[] = [];
  const versions: Record<string, string> = {};

  /** npm (or npx) with the test's userconfig, cache and registry, never the machine's. */
  const npm = (args: string[], cwd: string, cmd = "npm"): Run => {
    const r = spawnSync(cmd, args, { cwd, env, encoding: "utf8", timeout: 20 * 60_000 });
    return { status: r.status, stdout: r.stdout, stderr: r.stderr };
  };
  const ok = (r: Run, what: string): Run => {
    assert.equal(r.status, 0, `${what} failed:\n${r.stdout.slice(-3000)}\n${r.stderr.slice(-3000)}`);
    return r;
  };

  before(async () => {
    work = await mkdtemp(join(tmpdir(), "opkit-release-"));
    // The registry npm uses here: Verdaccio proxies everything but opkit's packages to it.
    const upstream = spawnSync("npm", ["config", "get", "registry"], { encoding: "utf8" }).stdout.trim();
    assert.match(upstream, /^https?:\/\//, "npm config get registry");

    // 1. The tarballs, as make release packs them, copied alone into a folder of their own.
    const only = join(work, "tarballs");
    await mkdir(only);
    for (const dir of RELEASE_PACKAGES) {
      const pkg = await readPackage(join(root, dir));
      versions[pkg.name] = pkg.version;
      const packed = await packPackage(pkg);
      await copyFile(packed.path, join(only, packed.filename));
      tarballs.push(join(only, packed.filename));
    }

    // 2. Verdaccio: storage in the temp folder; opkit's names local only, the rest proxied.
    const port = await freePort();
    registry = `http://127.0.0.1:${port}/`;
    const config = join(work, "verdaccio.yaml");
    await writeFile(
      config,
      [
        `storage: ${join(work, "storage")}`,
        "auth:",
        "  htpasswd:",
        `    file: ${join(work, "htpasswd")}`,
        "    max_users: 1",
        "uplinks:",
        "  upstream:",
        `    url: ${upstream}`,
        "    timeout: 60s",
        "packages:",
        ...["opkit", "'@opkit/*'", "create-opkit"].flatMap((p) => [
          `  ${p}:`,
          "    access: $all",
          "    publish: $authenticated",
        ]),
        "  '**':",
        "    access: $all",
        "    publish: $authenticated",
        "    proxy: upstream",
        `listen: 127.0.0.1:${port}`,
        "log: { type: stdout, format: pretty, level: warn }",
        "",
      ].join("\n"),
    );
    server = spawn(process.execPath, [verdaccioBin, "--config", config], {
      cwd: work,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let log = "";
    server.stdout?.on("data", (d: Buffer) => (log += d.toString()));
    server.stderr?.on("data", (d: Buffer) => (log += d.toString()));
    const deadline = Date.now() + 60_000;
    for (;;) {
      const up = await fetch(`${registry}-/ping`).then(
        (r) => r.ok,
        () => false,
      );
      if (up) break;
      assert.ok(Date.now() < deadline && server.exitCode === null, `Verdaccio did not start:\n${log}`);
      await new Promise((r) => setTimeout(r, 250));
    }

    // 3. A user of that registry only: a token of its own, in a userconfig of the test's.
    const user = await fetch(`${registry}-/user/org.couchdb.user:release-test`, {
      method: "PUT",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ name: "release-test", password: "release-test-password" }),
    });
    assert.ok(user.ok, `adding the registry's user: ${user.status} ${await user.clone().text()}`);
    const { token } = (await user.json()) as { token: string };
    const host = registry.replace(/^https?:/, "");
    await writeFile(
      join(work, "npmrc"),
      `registry=${registry}\n${host}:_authToken=${token}\naudit=false\nfund=false\nupdate-notifier=false\n`,
    );
    // Nothing of the machine's npm setup (tokens, registry, the checkout's bin folder) reaches npm.
    env = Object.fromEntries(
      Object.entries(process.env).filter(
        ([k]) =>
          !/^npm_|^NPM_CONFIG_|^NODE_OPTIONS$|^NODE_TEST_CONTEXT$|^INIT_CWD$|^OPKIT_TEST_ENV$/i.test(k),
      ),
    );
    env.PATH = (process.env.PATH ?? "")
      .split(":")
      .filter((p) => !p.startsWith(root))
      .join(":");
    env.NPM_CONFIG_USERCONFIG = join(work, "npmrc");
    env.NPM_CONFIG_GLOBALCONFIG = join(work, "npmrc-global");
    env.NPM_CONFIG_CACHE = join(work, "npm-cache");
    await writeFile(join(work, "npmrc-global"), "");
  });

  after(async () => {
    if (server && server.exitCode === null) {
      const exited = new Promise((r) => server!.once("exit", r));
      server.kill("SIGTERM");
      await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
      if (server.exitCode === null && server.signalCode === null) server.kill("SIGKILL");
    }
    if (work) await rm(work, { recursive: true, force: true });
  });

  it("every tarball holds LICENSE, NOTICE and a README, and only registry versions of its dependencies", () => {
    assert.equal(tarballs.length, RELEASE_PACKAGES.length);
    for (const t of tarballs) assert.deepEqual(checkTarball(t), [], t);
  });

  it("publishes every package to the loopback registry, with a clean dry run first", () => {
    for (const t of tarballs) {
      const configured = npm(["config", "get", "registry"], work).stdout.trim();
      assert.equal(configured, registry, "npm publishes to the test's registry");
      assertLoopback(configured);
      const dry = ok(npm(["publish", "--dry-run", t], work), `npm publish --dry-run ${t}`);
      assert.deepEqual(
        dry.stderr.split("\n").filter((l) => /npm (warn|error)/i.test(l)),
        [],
        `npm publish --dry-run ${t} warns`,
      );
      assertLoopback(npm(["config", "get", "registry"], work).stdout.trim());
      ok(npm(["publish", t], work), `npm publish ${t}`);
    }
    for (const [name, version] of Object.entries(versions)) {
      const view = ok(npm(["view", `${name}@${version}`, "version"], work), `npm view ${name}`);
      assert.equal(view.stdout.trim(), version);
    }
  });

  it("npm create opkit makes a project that installs, tests, builds and installs for production", async () => {
    const users = join(work, "user");
    await mkdir(users);
    ok(
      npm(["create", "opkit@latest", "my-operator", "--", "--domain", "example.com"], users),
      "npm create opkit@latest",
    );
    const project = join(users, "my-operator");
    const manifest = JSON.parse(await readFile(join(project, "package.json"), "utf8")) as {
      engines: { node: string };
      dependencies: Record<string, string>;
      devDependencies: Record<string, string>;
    };
    assert.equal(manifest.dependencies.opkit, `^${versions.opkit}`);
    assert.equal(manifest.devDependencies["@opkit/cli"], `^${versions["@opkit/cli"]}`);
    for (const spec of [...Object.values(manifest.dependencies), ...Object.values(manifest.devDependencies)])
      assert.match(spec, /^[\^~]?\d+\.\d+\.\d+$/, "only semver ranges in package.json");
    assert.match(manifest.engines.node, /^>=22/);
    assert.match(await readFile(join(project, ".node-version"), "utf8"), /^\d+\n$/);
    assert.ok(!existsSync(join(project, "vendor")), "nothing vendored");
    const lock = await readFile(join(project, "package-lock.json"), "utf8");
    assert.doesNotMatch(
      lock,
      /"resolved": "file:|\/work\/|packages\/opkit/,
      "no local paths in the lockfile",
    );

    const npx = (args: string[]) =>
      ok(npm(["opkit", ...args], project, "npx"), `npx opkit ${args.join(" ")}`);
    npx(["create", "api", "--group", "cache", "--version", "v1alpha1", "--kind", "Memcached"]);
    npx(["generate"]);
    ok(npm(["install"], project), "npm install");
    // The project's test against a real local control plane (opkit env, from the shared cache).
    const test = ok(npm(["test"], project), "npm test");
    assert.match(test.stdout, /^ℹ pass [1-9]/m, test.stdout + test.stderr);
    assert.match(test.stdout, /^ℹ fail 0/m);
    ok(npm(["run", "build"], project), "npm run build");
    // The installed CLI's doctor finds nothing missing in the project: versions match, generated files too.
    const doctor = JSON.parse(npx(["doctor", "--json", "--offline"]).stdout) as {
      ok: boolean;
      checks: { id: string; status: string; summary: string }[];
    };
    const projectChecks = doctor.checks.filter((c) => c.id === "project");
    assert.deepEqual(
      projectChecks.map((c) => c.status),
      ["ok", "ok", "ok"],
      JSON.stringify(projectChecks),
    );
    assert.match(projectChecks[2]?.summary ?? "", /generate --check/);
    assert.ok(existsSync(join(project, "dist", "main.js")), "opkit build wrote dist/main.js");
    // The Dockerfile's runtime stage: production dependencies only, and the operator still loads opkit.
    const dockerfile = await readFile(join(project, "Dockerfile"), "utf8");
    assert.match(dockerfile, /npm ci --omit=dev/);
    ok(npm(["ci", "--omit=dev"], project), "npm ci --omit=dev");
    assert.ok(!existsSync(join(project, "node_modules", "@opkit", "cli")), "the CLI is a dev dependency");
    const load = spawnSync(
      process.execPath,
      ["-e", "import('opkit').then(m => console.log(typeof m.defineOperator))"],
      {
        cwd: project,
        env,
        encoding: "utf8",
      },
    );
    assert.equal(load.stdout.trim(), "function", load.stderr);
  });

  it("a project vendored by opkit init from the checkout moves to the registry with the documented command", async () => {
    const users = join(work, "vendored-user");
    await mkdir(users);
    const cli = join(root, "packages", "cli", "bin", "opkit.js");
    const init = spawnSync(
      process.execPath,
      [cli, "init", "vendored", "--domain", "example.com", "--vendor"],
      {
        cwd: users,
        env,
        encoding: "utf8",
      },
    );
    assert.equal(init.status, 0, init.stderr);
    const project = join(users, "vendored");
    const before = JSON.parse(await readFile(join(project, "package.json"), "utf8")) as {
      dependencies: Record<string, string>;
    };
    assert.match(before.dependencies.opkit ?? "", /^file:vendor\//);
    // docs/install.md's command; its `npx opkit generate` rewrites generated files, and this project has none.
    const v = versions.opkit;
    ok(npm(["install", `opkit@^${v}`, `@opkit/cli@^${v}`], project), "npm install opkit @opkit/cli");
    await rm(join(project, "vendor"), { recursive: true, force: true });
    const after = JSON.parse(await readFile(join(project, "package.json"), "utf8")) as {
      dependencies: Record<string, string>;
      devDependencies: Record<string, string>;
    };
    assert.equal(after.dependencies.opkit, `^${v}`);
    assert.equal(after.devDependencies["@opkit/cli"], `^${v}`, "the CLI stays a devDependency");
    assert.equal(after.dependencies["@opkit/cli"], undefined);
    ok(npm(["ci"], project), "npm ci without vendor/");
    assert.doesNotMatch(await readFile(join(project, "package-lock.json"), "utf8"), /vendor\//);
  });
});
