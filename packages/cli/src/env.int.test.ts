/**
 * `opkit env` as a user runs it: up (idempotent, saying which requested settings a running env lacks),
 * node size and feature-gate flags, kubeconfig, status, kubectl, restart keeping the gates, bad input,
 * down leaving no process behind, and a clear message when Go is missing.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  KUBERNETES_VERSION_VARIABLE,
  SUPPORTED_KUBERNETES_VERSIONS,
  envsDir,
  missingBinaries,
  resolveKubernetesVersion,
} from "opkit/testenv";

const main = fileURLToPath(new URL("./main.ts", import.meta.url));
const repo = fileURLToPath(new URL("../../../", import.meta.url));
/** The seed operators' generated CRDs: each supported release must accept them. */
const seedCrdDirs = readdirSync(join(repo, "operators"))
  .map((o) => join(repo, "operators", o, "config", "crds"))
  .filter((d) => existsSync(d));

function opkit(
  args: string[],
  env: NodeJS.ProcessEnv = process.env,
): { code: number; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, ["--conditions=opkit-source", main, ...args], {
    env,
    encoding: "utf8",
    timeout: 300_000,
    // kube-apiserver's /metrics alone is over 1 MB, the default.
    maxBuffer: 64 * 1024 * 1024,
  });
  return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return !readFileSync(`/proc/${pid}/stat`, "utf8").includes(") Z ");
  } catch {
    return false;
  }
}

describe("opkit env (CLI)", () => {
  const name = `cli-${process.pid}`;

  it("up, up again, kubeconfig, status, kubectl, feature gates across a restart, down without leftovers", (t) => {
    t.after(() => opkit(["env", "down", "--name", name]));
    const up = opkit([
      "env",
      "up",
      "--name",
      name,
      "--nodes",
      "1",
      "--max-pods",
      "150",
      "--node-cpu",
      "4",
      "--feature-gates",
      "ShardedListAndWatch=true",
    ]);
    assert.equal(up.code, 0, up.stderr);
    const kubeconfig = up.stdout.trim();
    assert.match(kubeconfig, /kubeconfig$/);

    const again = opkit(["env", "up", "--name", name, "--nodes", "1", "--max-pods", "10"]);
    assert.equal(again.code, 0);
    assert.match(again.stderr, /already running/);
    assert.match(again.stderr, /--max-pods: running 150, requested 10/);
    if (!/left out/.test(up.stderr))
      assert.match(again.stderr, /--feature-gates: running ShardedListAndWatch=true, requested \(none\)/);
    assert.equal(opkit(["env", "kubeconfig", "--name", name]).stdout.trim(), kubeconfig);

    const status = opkit(["env", "status", "--name", name]);
    assert.equal(status.code, 0, status.stdout);
    const pids = [...status.stdout.matchAll(/^\S+\s+(\d+)\s+\d+\s+healthy$/gm)].map((m) => Number(m[1]));
    assert.equal(pids.length, 6, status.stdout);
    assert.match(status.stdout, /^local-provisioner\s+\d+/m);

    const kubectl = (...args: string[]): string =>
      opkit(["env", "kubectl", "--name", name, "--", ...args]).stdout;
    assert.match(kubectl("get", "nodes", "--no-headers"), /opkit-node-0\s+Ready/);
    assert.equal(
      kubectl(
        "get",
        "node",
        "opkit-node-0",
        "-o",
        "jsonpath={.status.allocatable.pods}/{.status.allocatable.cpu}",
      ),
      "150/4",
    );
    assert.match(
      kubectl("get", "storageclass", "--no-headers"),
      /^standard \(default\)\s+opkit\.dev\/local-volume/,
    );
    // Releases before 1.36 lack the gate: `up` leaves it out with a note instead of failing.
    const hasGate = !/feature gate ShardedListAndWatch=true left out/.test(up.stderr);
    const gate = hasGate
      ? /kubernetes_feature_enabled\{name="ShardedListAndWatch",stage="ALPHA"\} 1/
      : /kubernetes_feature_enabled\{name="APIResponseCompression",stage="BETA"\} 1/;
    if (!hasGate) {
      assert.ok(
        Number(resolveKubernetesVersion().split(".")[1]) < 36,
        `only releases before 1.36 lack it: ${up.stderr}`,
      );
      process.stderr.write(
        `Kubernetes ${resolveKubernetesVersion()} lacks ShardedListAndWatch: checked it is left out\n`,
      );
    }
    assert.match(kubectl("get", "--raw", "/metrics"), gate);
    const restart = opkit(["env", "restart", "kube-apiserver", "--name", name]);
    assert.equal(restart.code, 0, restart.stderr);
    assert.match(kubectl("get", "--raw", "/metrics"), gate, "the restarted apiserver keeps the gate");

    const bad = opkit(["env", "restart", "kube-apiservr", "--name", name]);
    assert.notEqual(bad.code, 0);
    assert.match(bad.stderr, /unknown component "kube-apiservr": choose one of etcd, kube-apiserver/);

    const down = opkit(["env", "down", "--name", name]);
    assert.equal(down.code, 0);
    assert.deepEqual(pids.filter(alive), [], "every process the env started is gone");
    const gone = opkit(["env", "status", "--name", name]);
    assert.notEqual(gone.code, 0);
    assert.match(gone.stderr, /no opkit env named/);
  });

  it("says what to do when go is not on PATH", () => {
    const cache = mkdtempSync(join(tmpdir(), "opkit-nogo-"));
    const r = opkit(["env", "build"], { ...process.env, OPKIT_CACHE_DIR: cache, PATH: "/nonexistent" });
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /`go` is not on PATH/);
  });

  it("rejects bad --nodes, --node-memory and --feature-gates values naming the flag", () => {
    for (const [flag, value] of [
      ["--nodes", "many"],
      ["--node-memory", "lots"],
      ["--feature-gates", "ShardedListAndWatch"],
    ] as const) {
      const r = opkit(["env", "up", "--name", `${name}-bad`, flag, value]);
      assert.notEqual(r.code, 0, `${flag} ${value}`);
      assert.match(r.stderr, new RegExp(flag), `${flag} ${value}: ${r.stderr}`);
    }
  });
});

/**
 * Every supported release as a user starts it: `opkit env up --kubernetes-version X` gives Ready nodes, a
 * Deployment runs, a Job completes, the seed operators' CRDs are accepted, and `down` leaves nothing. With
 * OPKIT_KUBERNETES_VERSION set (as `make test-compat` does) only that release; otherwise every built one. A
 * release that is not built is skipped with the command that builds it.
 */
describe("opkit env per Kubernetes version", () => {
  const chosen = process.env[KUBERNETES_VERSION_VARIABLE]
    ? [resolveKubernetesVersion()]
    : [...SUPPORTED_KUBERNETES_VERSIONS];
  for (const version of chosen) {
    const minor = version.replace(/^v(\d+\.\d+)\..*$/, "$1");
    it(`${version}: nodes Ready, a Deployment runs, a Job completes, seed CRDs accepted, down leaves nothing`, (t) => {
      const missing = missingBinaries(version);
      if (missing.length > 0) {
        const why = `Kubernetes ${version} is not built (missing ${missing.join(", ")}): run \`opkit env build --kubernetes-version ${minor}\``;
        process.stderr.write(`skipped: ${why}\n`);
        t.skip(why);
        return;
      }
      const name = `ver-${minor.replace(".", "-")}-${process.pid}`;
      t.after(() => opkit(["env", "down", "--name", name]));
      const up = opkit(["env", "up", "--name", name, "--nodes", "2", "--kubernetes-version", minor]);
      assert.equal(up.code, 0, up.stderr);
      assert.match(up.stderr, new RegExp(`Kubernetes ${version.replace(/\./g, "\\.")}\\) is up`));
      const kubectl = (...args: string[]): { code: number; stdout: string; stderr: string } =>
        opkit(["env", "kubectl", "--name", name, "--", ...args]);
      const ok = (...args: string[]): string => {
        const r = kubectl(...args);
        assert.equal(r.code, 0, `kubectl ${args.join(" ")}: ${r.stderr}`);
        return r.stdout;
      };

      const versions = JSON.parse(ok("version", "-o", "json")) as Record<string, { gitVersion: string }>;
      assert.equal(versions.serverVersion?.gitVersion, version, "the API server of that release");
      assert.equal(
        versions.clientVersion?.gitVersion,
        version,
        "`opkit env kubectl` runs that release's kubectl",
      );
      ok("wait", "--for=condition=Ready", "node", "--all", "--timeout=60s");
      assert.equal(ok("get", "nodes", "--no-headers").trim().split("\n").length, 2);

      ok("create", "deployment", "web", "--image=registry.example/web:1", "--replicas=3");
      ok("wait", "--for=condition=Available", "deployment/web", "--timeout=120s");
      assert.equal(ok("get", "deployment", "web", "-o", "jsonpath={.status.readyReplicas}"), "3");
      ok("create", "job", "once", "--image=registry.example/once:1");
      ok("wait", "--for=condition=Complete", "job/once", "--timeout=120s");
      assert.equal(ok("get", "job", "once", "-o", "jsonpath={.status.succeeded}"), "1");

      for (const dir of seedCrdDirs) ok("apply", "--server-side", "-f", dir);
      ok("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s");
      const crds = ok("get", "crd", "-o", "name").trim().split("\n");
      const files = seedCrdDirs.flatMap((d) => readdirSync(d).filter((f) => f.endsWith(".yaml")));
      assert.equal(crds.length, files.length, `every seed CRD is served: ${crds.join(", ")}`);

      const status = opkit(["env", "status", "--name", name]);
      assert.equal(status.code, 0, status.stdout);
      const pids = [...status.stdout.matchAll(/^\S+\s+(\d+)\s+\d+\s+healthy$/gm)].map((m) => Number(m[1]));
      assert.equal(pids.length, 6, status.stdout);
      const down = opkit(["env", "down", "--name", name]);
      assert.equal(down.code, 0, down.stderr);
      assert.deepEqual(pids.filter(alive), [], "every process the env started is gone");
      assert.equal(existsSync(join(envsDir(), name)), false, "the env's directory is gone");
    });
  }

  it("rejects an unsupported --kubernetes-version naming the flag and the supported list", () => {
    for (const bad of ["1.33", "1.38", "banana"]) {
      for (const cmd of ["up", "build"]) {
        const r = opkit(
          ["env", cmd, "--name", `bad-${process.pid}`, "--kubernetes-version", bad].filter(
            (a, i) => cmd === "up" || (i !== 2 && i !== 3),
          ),
        );
        assert.notEqual(r.code, 0, `${cmd} ${bad}`);
        assert.match(r.stderr, /--kubernetes-version: .*supported: 1\.34, 1\.35, 1\.36, 1\.37/, r.stderr);
      }
    }
    const r = opkit(["env", "up", "--name", `bad-${process.pid}`], {
      ...process.env,
      [KUBERNETES_VERSION_VARIABLE]: "1.20",
    });
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /OPKIT_KUBERNETES_VERSION: Kubernetes 1\.20 is not supported/);
    assert.equal(existsSync(join(envsDir(), `bad-${process.pid}`)), false, "nothing was started");
  });
});
