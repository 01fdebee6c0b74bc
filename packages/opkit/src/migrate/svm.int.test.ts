/**
 * On Kubernetes 1.36 the in-tree StorageVersionMigration API is beta and off: an env started with the
 * StorageVersionMigrator gate and `--runtime-config storagemigration.k8s.io/v1beta1=true` serves it, and
 * `migrateStorage` uses it there (1.37 serves it by default: storage.int.test.ts covers that on 1.37).
 * This file starts that env of its own, and stops it, also on failure.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as Type from "typebox/type";
import { defineKind, defineKindVersions } from "../api/kind.ts";
import { KubeClient } from "../client/client.ts";
import { kindRef, type KubeObject } from "../client/types.ts";
import { crdFor } from "../generate/crd.ts";
import { installCrds } from "../client/crds.ts";
import type { ControlPlane } from "../testenv/index.ts";
import { KUBERNETES_VERSION, startOwnedEnv } from "../testenv/index.ts";
import { migrateStorage } from "./storage.ts";

const group = "svm.opkit.dev";
const spec = Type.Object({ size: Type.Integer() });
const V1 = defineKind({ group, version: "v1", kind: "Box", spec, storage: true });
const V1Old = defineKind({ group, version: "v1", kind: "Box", spec, storage: false });
const V2 = defineKind({ group, version: "v2", kind: "Box", spec, storage: true });
const Crds = kindRef<KubeObject & { status?: { storedVersions?: string[] } }>(
  "apiextensions.k8s.io/v1",
  "CustomResourceDefinition",
);
const release = process.env.OPKIT_KUBERNETES_VERSION ?? KUBERNETES_VERSION;

describe(
  "the in-tree StorageVersionMigration on 1.36, switched on with a feature gate and --runtime-config",
  {
    skip:
      !/^v?1\.36(\.|$)/.test(release) &&
      `the env of this run is ${release}; the gate and runtime-config are 1.36's`,
  },
  () => {
    let cp: ControlPlane;
    let client: KubeClient;
    before(async () => {
      cp = await startOwnedEnv(`svm-${process.pid}`, {
        nodes: 0,
        featureGates: { StorageVersionMigrator: true },
        runtimeConfig: "storagemigration.k8s.io/v1beta1=true",
      });
      client = await KubeClient.load({ kubeconfig: cp.kubeconfigPath });
    });
    after(async () => {
      await client?.close();
      await cp?.down();
    });

    it("migrates through a StorageVersionMigration", async (t) => {
      const state = await cp.state();
      assert.deepEqual(
        state?.settings.runtimeConfig,
        { "storagemigration.k8s.io/v1beta1": true },
        "the env records it",
      );
      await installCrds(client, [crdFor(V1)]);
      await client.create({ apiVersion: "v1", kind: "Namespace", metadata: { name: "svm" } });
      await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          client.create(V1.new(`b-${i}`, { size: i }, { namespace: "svm" })),
        ),
      );
      await installCrds(client, [crdFor(defineKindVersions([V1Old, V2]))]);
      // The migrator starts once the garbage collector watches the new resource: up to a few minutes after the CRD.
      const result = await migrateStorage(client, `${V1.plural}.${group}`, { inTreeTimeoutMs: 300_000 });
      t.diagnostic(`${result.method}: ${(result.elapsedMs / 1000).toFixed(1)} s`);
      assert.equal(result.method, "in-tree");
      assert.deepEqual((await client.get(Crds, `${V1.plural}.${group}`)).status?.storedVersions, ["v2"]);
      const stored = await cp.stored(`/registry/${group}/${V1.plural}/svm/`);
      assert.equal(stored.length, 10);
      assert.deepEqual([...new Set(stored.map((e) => (e.value as KubeObject).apiVersion))], [`${group}/v2`]);
    });
  },
);
