/**
 * `opkit env` as a user runs it: up (idempotent), kubeconfig, status, kubectl, bad input, down leaving
 * no process behind, and a clear message when Go is missing.
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

  it("up, up again, kubeconfig, status, kubectl, bad component, down without leftovers", (t) => {
    t.after(() => opkit(["env", "down", "--name", name]));
    const up = opkit(["env", "up", "--name", name, "--nodes", "1"]);
    assert.equal(up.code, 0, up.stderr);
    const kubeconfig = up.stdout.trim();
    assert.match(kubeconfig, /kubeconfig$/);

    const again = opkit(["env", "up", "--name", name]);
    assert.equal(again.code, 0);
    assert.match(again.stderr, /already running/);
    assert.equal(opkit(["env", "kubeconfig", "--name", name]).stdout.trim(), kubeconfig);

    const status = opkit(["env", "status", "--name", name]);
    assert.equal(status.code, 0, status.stdout);
    const pids = [...status.stdout.matchAll(/^\S+\s+(\d+)\s+\d+\s+healthy$/gm)].map((m) => Number(m[1]));
    assert.equal(pids.length, 5, status.stdout);

    const nodes = opkit(["env", "kubectl", "--name", name, "--", "get", "nodes", "--no-headers"]);
    assert.match(nodes.stdout, /opkit-node-0\s+Ready/);

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

  it("rejects a bad --nodes value naming the flag", () => {
    const r = opkit(["env", "up", "--name", name, "--nodes", "many"]);
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /--nodes/);
  });
});
