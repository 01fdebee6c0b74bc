import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { componentArgs } from "./flags.ts";
import { EnvFiles, InvalidEnvNameError } from "./state.ts";

describe("env state files", () => {
  it("rejects names that cannot be a directory and context name", () => {
    for (const bad of ["", "UPPER", "-x", "a/b", "x".repeat(41), "../up"]) {
      assert.throws(() => new EnvFiles(bad), InvalidEnvNameError, bad);
    }
  });

  it("reads a state written before settings were recorded with the flags that env started with", async () => {
    const previous = process.env.OPKIT_CACHE_DIR;
    process.env.OPKIT_CACHE_DIR = mkdtempSync(join(tmpdir(), "opkit-state-"));
    try {
      const files = new EnvFiles("old");
      assert.equal(await files.read(), undefined, "no state, no env");
      mkdirSync(files.dir, { recursive: true });
      writeFileSync(files.statePath, "{ not json");
      assert.equal(await files.read(), undefined, "an unreadable state is no env, not a crash");
      const ports = {
        etcd: 1,
        etcdPeer: 2,
        "kube-apiserver": 3,
        "kube-controller-manager": 4,
        "kube-scheduler": 5,
        kwok: 6,
      };
      writeFileSync(files.statePath, JSON.stringify({ name: "old", dir: files.dir, ports, components: {} }));
      const s = await files.read();
      assert.ok(s);
      assert.equal(s.settings.serviceClusterIPRange, "10.0.0.0/24");
      assert.ok(componentArgs(s, "kube-apiserver").includes("--service-cluster-ip-range=10.0.0.0/24"));
      assert.equal(s.settings.nodeCapacity.pods, "110");
    } finally {
      if (previous === undefined) delete process.env.OPKIT_CACHE_DIR;
      else process.env.OPKIT_CACHE_DIR = previous;
    }
  });
});
