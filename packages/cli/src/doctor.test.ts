/**
 * `opkit doctor` as a user runs it: the launcher on this machine's system Node (too old here) and on the
 * Node running the tests, in a temporary HOME with no Go on PATH; the project checks on made-up
 * projects; which CLI errors point at the doctor.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  machineCaused,
  nodeIsNewEnough,
  runDoctor,
  satisfies,
  type DoctorReport,
} from "./commands/doctor.ts";

const launcher = fileURLToPath(new URL("../bin/opkit.js", import.meta.url));

function doctor(node: string, args: string[], env: NodeJS.ProcessEnv, cwd = tmpdir()) {
  const r = spawnSync(node, [launcher, "doctor", "--json", ...args], { env, cwd, encoding: "utf8" });
  return { status: r.status, report: JSON.parse(r.stdout) as DoctorReport, stderr: r.stderr };
}

/** A PATH holding only these commands (symlinked), so nothing else on the machine is found. */
async function onlyOnPath(dir: string, commands: Record<string, string>): Promise<string> {
  const bin = join(dir, "bin");
  await mkdir(bin, { recursive: true });
  for (const [name, target] of Object.entries(commands)) await symlink(target, join(bin, name));
  return bin;
}

const systemNode = spawnSync("sh", ["-c", "command -v node"], {
  env: { PATH: "/usr/local/bin:/usr/bin:/bin" },
  encoding: "utf8",
}).stdout.trim();
const systemVersion = systemNode
  ? spawnSync(systemNode, ["--version"], { encoding: "utf8" }).stdout.trim()
  : "";

test(
  "on the system Node (too old for opkit) the doctor still runs, fails it and names the cached Node as the fix",
  {
    skip:
      !systemNode || nodeIsNewEnough(systemVersion)
        ? `the system Node (${systemVersion}) is new enough`
        : false,
  },
  () => {
    const { status, report } = doctor(systemNode, ["--offline"], {
      ...process.env,
      PATH: dirname(systemNode),
    });
    assert.equal(status, 1);
    const self = report.checks.find((c) => c.id === "node" && c.summary.startsWith("this Node"));
    assert.equal(self?.status, "fail");
    assert.match(
      self.summary,
      new RegExp(`${systemVersion.replace(/\./g, "\\.")} at .* is too old: opkit needs Node 22\\.19`),
    );
    // The Node these tests run on is opkit's cached one when the system's is too old (the Makefile's).
    const cached = report.checks.find((c) => c.summary.startsWith("cached Node") && c.status === "ok");
    if (process.execPath.includes(join(".cache", "opkit", "node"))) {
      assert.ok(cached, "the cached Node is reported usable");
      assert.equal(
        self.fix,
        `put opkit's cached Node first on PATH: export PATH=${dirname(process.execPath)}:$PATH`,
      );
    }
    // Any other command on this Node says why it cannot run and what to do.
    const r = spawnSync(systemNode, [launcher, "init", "x", "--domain", "example.com"], {
      env: { ...process.env, PATH: dirname(systemNode) },
      cwd: tmpdir(),
      encoding: "utf8",
    });
    assert.equal(r.status, 1);
    assert.match(r.stderr, /opkit: needs Node 22\.19 or later .* this is v/);
    assert.match(r.stderr, /opkit doctor/);
  },
);

test("in a new HOME with no Go on PATH the doctor fails, naming what to install; the env build error points at it", async (t) => {
  const home = await mkdtemp(join(tmpdir(), "opkit-doctor-home-"));
  t.after(() => rm(home, { recursive: true, force: true }));
  const bin = await onlyOnPath(home, { node: process.execPath, df: "/bin/df" });
  const env: NodeJS.ProcessEnv = { HOME: home, PATH: bin };
  const { status, report } = doctor(process.execPath, ["--offline"], env);
  assert.equal(status, 1);
  assert.equal(report.ok, false);
  const go = report.checks.find((c) => c.id === "go");
  assert.equal(go?.status, "fail");
  assert.match(go.summary, /`go` is not on PATH/);
  assert.match(go.fix ?? "", /install Go 1\.26 or later/);
  const cache = report.checks.find((c) => c.id === "cache");
  assert.match(cache!.summary, new RegExp(`${join(home, ".cache", "opkit")} does not exist yet`));
  assert.equal(report.checks.find((c) => c.id === "kubeconfig")?.status, "warn");
  assert.ok(
    report.checks.some((c) => c.id === "disk" && c.status === "ok"),
    "free space read with df",
  );

  // The command that needs Go fails with its own message and the pointer to the doctor.
  const r = spawnSync(process.execPath, [launcher, "env", "build"], { env, cwd: home, encoding: "utf8" });
  assert.equal(r.status, 1);
  assert.match(r.stderr, /`go` is not on PATH/);
  assert.match(r.stderr, /opkit: `opkit doctor` .* checks this machine and says what to install/);
});

test("project: versions in package.json against node_modules, and the CLI's peer range", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "opkit-doctor-project-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const write = async (file: string, json: unknown) => {
    await mkdir(dirname(join(dir, file)), { recursive: true });
    await writeFile(join(dir, file), JSON.stringify(json));
  };
  await write("package.json", {
    dependencies: { opkit: "^0.2.0" },
    devDependencies: { "@opkit/cli": "^0.2.0" },
  });
  const project = async () =>
    (await runDoctor({ dir, network: false })).checks.filter((c) => c.id === "project");
  let checks = await project();
  assert.deepEqual(
    checks.map((c) => [c.status, c.fix]),
    [
      ["fail", `npm install (in ${dir})`],
      ["fail", `npm install (in ${dir})`],
    ],
  );
  await write("node_modules/opkit/package.json", { name: "opkit", version: "0.1.4" });
  await write("node_modules/@opkit/cli/package.json", {
    name: "@opkit/cli",
    version: "0.2.1",
    peerDependencies: { opkit: "^0.2.1" },
  });
  checks = await project();
  assert.match(checks[0]!.summary, /opkit: package\.json asks for \^0\.2\.0, node_modules has 0\.1\.4/);
  assert.equal(checks[1]!.status, "ok");
  assert.match(
    checks[2]!.summary,
    /@opkit\/cli 0\.2\.1 works with opkit \^0\.2\.1, but opkit 0\.1\.4 is installed/,
  );
  await write("node_modules/opkit/package.json", { name: "opkit", version: "0.2.3" });
  assert.deepEqual(
    (await project()).map((c) => c.status),
    ["ok", "ok"],
  );
  assert.ok(!existsSync(join(dir, "src")), "no operator: generate --check is not run");
});

test("semver ranges as npm reads them (the subset projects use)", () => {
  assert.equal(satisfies("0.1.5", "^0.1.0"), true);
  assert.equal(satisfies("0.2.0", "^0.1.0"), false);
  assert.equal(satisfies("1.4.0", "^1.2.3"), true);
  assert.equal(satisfies("2.0.0", "^1.2.3"), false);
  assert.equal(satisfies("1.2.9", "~1.2.3"), true);
  assert.equal(satisfies("1.3.0", "~1.2.3"), false);
  assert.equal(satisfies("0.1.0", "0.1.0"), true);
  assert.equal(satisfies("0.1.1", "0.1.0"), false);
  assert.equal(satisfies("3.0.0", ">=2.1"), true);
  assert.equal(satisfies("1.9.0", "1.x"), true);
  assert.equal(satisfies("1.0.0", "file:vendor/opkit-1.0.0.tgz"), undefined);
});

test("machine-caused errors point at the doctor; input errors do not", () => {
  const go = Object.assign(new Error("`go` is not on PATH"), { name: "GoNotFoundError" });
  assert.equal(machineCaused(go), true);
  assert.equal(machineCaused(Object.assign(new Error("write failed"), { code: "ENOSPC" })), true);
  assert.equal(machineCaused(new Error("x: no space left on device")), true);
  assert.equal(machineCaused(new Error('"Foo" is not a DNS domain')), false);
  assert.equal(machineCaused("a string"), false);
});
