/**
 * `opkit env` as a user runs it: up (idempotent, saying which requested settings a running env lacks),
 * node size and feature-gate flags, kubeconfig, status, kubectl, restart keeping the gates, bad input,
 * down leaving no process behind, and a clear message when Go is missing.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const main = fileURLToPath(new URL("./main.ts", import.meta.url));

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
    const gate = /kubernetes_feature_enabled\{name="ShardedListAndWatch",stage="ALPHA"\} 1/;
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
