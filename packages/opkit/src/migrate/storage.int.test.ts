/**
 * Storage version migration on a real control plane: objects stored in v1, the storage version moved to v2,
 * `migrateStorage` while a writer keeps changing objects and the API server restarts once; then every object
 * is stored in v2 (read straight from etcd), none is lost, storedVersions holds v2 alone, and v1 can be
 * dropped from the CRD, which the API server refused before.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as Type from "typebox/type";
import { defineKind, defineKindVersions } from "../api/kind.ts";
import { crdFor } from "../generate/crd.ts";
import { InvalidError } from "../client/errors.ts";
import { kindRef, type KubeObject } from "../client/types.ts";
import { useTestEnv, type TestEnv } from "../testenv/testing.ts";
import { createLogger } from "../logging/index.ts";
import { Manager } from "../manager/index.ts";
import { eventually } from "../testenv/index.ts";
import { migrateStorage, type MigrationProgress } from "./storage.ts";

const group = "migrate.opkit.dev";
const spec = Type.Object({ size: Type.Integer(), note: Type.Optional(Type.String()) });
const V1 = defineKind({ group, version: "v1", kind: "Shelf", spec, storage: true });
const V1Old = defineKind({ group, version: "v1", kind: "Shelf", spec, storage: false });
const V2 = defineKind({ group, version: "v2", kind: "Shelf", spec, storage: true });
const CRD_NAME = `${V1.plural}.${group}`;
const Crds = kindRef<KubeObject & { status?: { storedVersions?: string[] } }>(
  "apiextensions.k8s.io/v1",
  "CustomResourceDefinition",
);
const COUNT = 1000;
// A kind of its own for the manager's test, so each test starts from a CRD that stores v1.
const CrateV1 = defineKind({ group, version: "v1", kind: "Crate", spec, storage: true });
const CrateV1Old = defineKind({ group, version: "v1", kind: "Crate", spec, storage: false });
const CrateV2 = defineKind({ group, version: "v2", kind: "Crate", spec, storage: true });
const CRATES = `${CrateV1.plural}.${group}`;
// And one for the in-tree migrator's test.
const BinV1 = defineKind({ group, version: "v1", kind: "Bin", spec, storage: true });
const BinV1Old = defineKind({ group, version: "v1", kind: "Bin", spec, storage: false });
const BinV2 = defineKind({ group, version: "v2", kind: "Bin", spec, storage: true });
const BINS = `${BinV1.plural}.${group}`;

describe("migrateStorage", () => {
  let env: TestEnv;
  before(async () => {
    env = await useTestEnv();
  });
  after(async () => {
    await env.client.delete(Crds, CRD_NAME).catch(() => undefined);
    await env.client.delete(Crds, CRATES).catch(() => undefined);
    await env.client.delete(Crds, BINS).catch(() => undefined);
    await env.cleanup();
  });

  it(`moves ${COUNT} objects to the new storage version under writes and an API server restart, then trims storedVersions`, async (t) => {
    const client = env.client;
    const ns = await env.namespace("migrate");
    await env.installCrds([crdFor(V1)]);
    for (let i = 0; i < COUNT; i += 50)
      await Promise.all(
        Array.from({ length: Math.min(50, COUNT - i) }, (_, j) =>
          client.create(V1.new(`s-${i + j}`, { size: i + j }, { namespace: ns })),
        ),
      );
    await env.installCrds([crdFor(defineKindVersions([V1Old, V2]))]);
    const storedIn = async (): Promise<Map<string, string>> => {
      const entries = await env.controlPlane.stored(`/registry/${group}/${V1.plural}/${ns}/`);
      return new Map(
        entries.map((e) => [e.key.split("/").pop() ?? "", (e.value as KubeObject).apiVersion ?? ""]),
      );
    };
    assert.equal(
      [...(await storedIn()).values()].filter((v) => v === `${group}/v1`).length,
      COUNT,
      "all stored in v1 before",
    );
    assert.deepEqual((await client.get(Crds, CRD_NAME)).status?.storedVersions, ["v1", "v2"]);
    await assert.rejects(
      env.installCrds([crdFor(V2)]),
      (err: unknown) => err instanceof InvalidError && /storedVersions/.test(err.message),
      "the API server refuses to drop a stored version",
    );

    // A writer changes objects through v1 all along; every write it makes must survive.
    const written = new Map<string, number>();
    let writing = true;
    const writer = (async () => {
      for (let n = 0; writing; n++) {
        const name = `s-${(n * 37) % COUNT}`;
        try {
          await client.patch(V1Old, name, { spec: { note: `w${n}` } }, { type: "merge", namespace: ns });
          written.set(name, n);
        } catch {
          // a write during the API server restart: not acknowledged, so not counted
        }
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    const progress: MigrationProgress[] = [];
    let restarted: Promise<void> | undefined;
    const result = await migrateStorage(client, CRD_NAME, {
      qps: 400,
      pageSize: 100,
      inTree: "never",
      onProgress: (p) => {
        progress.push(p);
        if (!restarted && p.migrated >= COUNT / 3) restarted = env.restart("kube-apiserver");
      },
    }).finally(async () => {
      await restarted;
      writing = false;
      await writer;
    });

    t.diagnostic(
      `migrated ${result.migrated} (conflicts ${result.conflicts}, restarts ${result.restarts}) in ${(result.elapsedMs / 1000).toFixed(1)} s: ${result.rate.toFixed(0)} objects/s`,
    );
    assert.ok(restarted, "the API server was restarted mid-migration");
    assert.equal(result.needed, true);
    assert.deepEqual(result.storedVersionsBefore, ["v1", "v2"]);
    assert.equal(
      result.migrated + result.conflicts + result.gone,
      COUNT,
      "every object was rewritten or rewritten by someone else",
    );
    assert.ok(progress.length >= COUNT / 100, "progress after every page");
    const stored = await storedIn();
    assert.equal(stored.size, COUNT, "no object lost");
    assert.deepEqual([...new Set(stored.values())], [`${group}/v2`], "every object stored in v2");
    assert.deepEqual((await client.get(Crds, CRD_NAME)).status?.storedVersions, ["v2"]);
    for (const [name, n] of written) {
      const live = await client.get(V2, name, { namespace: ns });
      const last = Number((live.spec.note ?? "w-1").slice(1));
      assert.ok(last >= n, `${name}: the writer's acknowledged write w${n} survived (has ${live.spec.note})`);
    }

    await env.installCrds([crdFor(V2)]);
    assert.equal(
      (await client.list(V2, { namespace: ns })).items.length,
      COUNT,
      "v1 dropped; every object still reads",
    );
    const again = await migrateStorage(client, CRD_NAME);
    assert.equal(again.needed, false, "a second run finds nothing to do");
  });
  it("runs on the leader with the manager's storageMigration option, beside the controllers", async (t) => {
    const client = env.client;
    const ns = await env.namespace("migrate-mgr");
    await env.installCrds([crdFor(CrateV1)]);
    await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        client.create(CrateV1.new(`m-${i}`, { size: i }, { namespace: ns })),
      ),
    );
    await env.installCrds([crdFor(defineKindVersions([CrateV1Old, CrateV2]))]);
    assert.deepEqual((await client.get(Crds, CRATES)).status?.storedVersions, ["v1", "v2"]);
    const mgr = await Manager.create({
      kubeconfig: env.kubeconfigPath,
      name: "migrate-test",
      metrics: { host: "127.0.0.1", port: 0 },
      health: { host: "127.0.0.1", port: 0 },
      cache: { namespace: ns },
      leaderElection: false,
      storageMigration: { crds: [CRATES], inTree: "never" },
      logger: createLogger({ level: "silent" }),
    });
    t.after(() => mgr.stop());
    await mgr.start();
    await eventually("storedVersions trimmed by the manager", async () => {
      const crd = await client.get(Crds, CRATES);
      return JSON.stringify(crd.status?.storedVersions) === JSON.stringify(["v2"]);
    });
    const stored = await env.controlPlane.stored(`/registry/${group}/${CrateV1.plural}/${ns}/`);
    assert.equal(stored.length, 20);
    assert.deepEqual([...new Set(stored.map((e) => (e.value as KubeObject).apiVersion))], [`${group}/v2`]);
  });
  it("uses the cluster's StorageVersionMigration where the release serves it (GA in 1.37)", async (t) => {
    if (!env.requires(t, { minVersion: "1.37", what: "storagemigration.k8s.io/v1, on by default" })) return;
    const client = env.client;
    const ns = await env.namespace("migrate-svm");
    await env.installCrds([crdFor(BinV1)]);
    await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        client.create(BinV1.new(`b-${i}`, { size: i }, { namespace: ns })),
      ),
    );
    await env.installCrds([crdFor(defineKindVersions([BinV1Old, BinV2]))]);
    // The migrator starts once the garbage collector watches the new resource: up to a few minutes after the CRD.
    const result = await migrateStorage(client, BINS, { inTreeTimeoutMs: 300_000 });
    t.diagnostic(`in-tree migration: ${result.method}, ${(result.elapsedMs / 1000).toFixed(1)} s`);
    assert.equal(result.method, "in-tree", "the cluster's migrator did the work");
    assert.deepEqual((await client.get(Crds, BINS)).status?.storedVersions, ["v2"]);
    const stored = await env.controlPlane.stored(`/registry/${group}/${BinV1.plural}/${ns}/`);
    assert.equal(stored.length, 20);
    assert.deepEqual([...new Set(stored.map((e) => (e.value as KubeObject).apiVersion))], [`${group}/v2`]);
  });
});
