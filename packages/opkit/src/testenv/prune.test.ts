import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BUILDING_FILE, pruneBuilds } from "./prune.ts";
import { KUBERNETES_VERSION, binDir, envsDir, releaseDir, sharedBuildDir } from "./versions.ts";

function withCache<T>(fn: () => Promise<T>): Promise<T> {
  const before = process.env.OPKIT_CACHE_DIR;
  process.env.OPKIT_CACHE_DIR = mkdtempSync(join(tmpdir(), "opkit-prune-"));
  return fn().finally(() => {
    if (before === undefined) delete process.env.OPKIT_CACHE_DIR;
    else process.env.OPKIT_CACHE_DIR = before;
  });
}

function fakeBuild(dir: string, file = "kube-apiserver"): void {
  mkdirSync(join(dir, "bin"), { recursive: true });
  writeFileSync(join(dir, "bin", file), "x".repeat(1000));
}

describe("opkit env prune", () => {
  it("removes builds no env uses, keeps the used ones, the default, a build in progress and shared tools", () =>
    withCache(async () => {
      const used = releaseDir("v1.34.4");
      const unused = releaseDir("v1.35.4");
      const stale = join(releaseDir("v1.36.3"), "..", "k8s-v1.36.3_etcd-v3.6.8_kwok-v0.8.0_r1");
      const building = releaseDir("v1.37.2");
      for (const d of [used, unused, stale, building, releaseDir(KUBERNETES_VERSION)]) fakeBuild(d);
      fakeBuild(sharedBuildDir("etcd"), "etcd");
      fakeBuild(sharedBuildDir("kwok"), "kwok");
      writeFileSync(join(building, BUILDING_FILE), String(process.pid));
      const env = join(envsDir(), "old");
      mkdirSync(env, { recursive: true });
      writeFileSync(
        join(env, "state.json"),
        JSON.stringify({
          name: "old",
          kubernetesVersion: "v1.34.4",
          components: { etcd: { exe: join(binDir("v1.34.4"), "etcd") } },
          settings: { featureGates: {}, nodeCapacity: {} },
        }),
      );

      const dry = await pruneBuilds({ dryRun: true });
      assert.deepEqual(dry.removed.map((r) => r.path).sort(), [stale, unused].sort());
      assert.ok(existsSync(unused), "a dry run removes nothing");

      const r = await pruneBuilds();
      assert.deepEqual(r.removed.map((x) => x.path).sort(), [stale, unused].sort());
      assert.ok(r.removed.every((x) => x.bytes >= 1000));
      assert.equal(existsSync(unused) || existsSync(stale), false);
      const kept = new Map(r.kept.map((k) => [k.path, k.reason]));
      assert.match(kept.get(used) ?? "", /env "old" runs it/);
      assert.match(kept.get(releaseDir(KUBERNETES_VERSION)) ?? "", /default release/);
      assert.match(kept.get(building) ?? "", /build is writing it now/);
      assert.match(kept.get(sharedBuildDir("etcd")) ?? "", /kept releases link to it/);

      const all = await pruneBuilds({ all: true });
      assert.deepEqual(
        all.removed.map((x) => x.path),
        [releaseDir(KUBERNETES_VERSION)],
      );
    }));

  it("with --all and no env, removes the shared etcd and kwok builds too", () =>
    withCache(async () => {
      fakeBuild(releaseDir(KUBERNETES_VERSION));
      fakeBuild(sharedBuildDir("etcd"), "etcd");
      const r = await pruneBuilds({ all: true });
      assert.deepEqual(
        r.removed.map((x) => x.path).sort(),
        [releaseDir(KUBERNETES_VERSION), sharedBuildDir("etcd")].sort(),
      );
      assert.deepEqual(r.kept, []);
    }));
});
