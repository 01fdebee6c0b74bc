import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { PersistentVolume, PersistentVolumeClaim, StorageClass } from "../client/builtins.ts";
import { DEFAULT_STORAGE_CLASS, LOCAL_PROVISIONER, planVolumes, storageObjects } from "./storage.ts";

const dir = "/envs/unit/volumes";
const standard = storageObjects()[0] as StorageClass;
const other: StorageClass = {
  apiVersion: "storage.k8s.io/v1",
  kind: "StorageClass",
  metadata: { name: "csi" },
  provisioner: "csi.example.com",
};
const lazy: StorageClass = {
  ...standard,
  metadata: { name: "lazy" },
  volumeBindingMode: "WaitForFirstConsumer",
  reclaimPolicy: "Retain",
};

function claim(
  name: string,
  extra: Partial<PersistentVolumeClaim["spec"]> = {},
  phase: "Pending" | "Bound" | "Lost" = "Pending",
): PersistentVolumeClaim {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name, namespace: "ns", uid: `uid-${name}` },
    spec: {
      storageClassName: DEFAULT_STORAGE_CLASS,
      accessModes: ["ReadWriteOnce"],
      resources: { requests: { storage: "1Gi" } },
      ...extra,
    },
    status: { phase },
  };
}

describe("local provisioner plan", () => {
  it("installs a default StorageClass served by the local provisioner", () => {
    assert.equal(standard.metadata.annotations?.["storageclass.kubernetes.io/is-default-class"], "true");
    assert.equal(standard.provisioner, LOCAL_PROVISIONER);
    assert.equal(standard.reclaimPolicy, "Delete");
  });

  it("creates a hostPath volume under the env, pre-bound to each pending claim of its classes", () => {
    const actions = planVolumes(
      [claim("data-0"), claim("csi", { storageClassName: "csi" })],
      [],
      [standard, other],
      dir,
    );
    assert.equal(actions.length, 1);
    const a = actions[0];
    assert.ok(a?.type === "create");
    assert.equal(a.dir, `${dir}/pvc-uid-data-0`);
    assert.equal(a.volume.metadata.name, "pvc-uid-data-0");
    assert.deepEqual(a.volume.spec?.capacity, { storage: "1Gi" });
    assert.equal(a.volume.spec?.persistentVolumeReclaimPolicy, "Delete");
    assert.equal(a.volume.spec?.hostPath?.path, a.dir);
    assert.deepEqual(a.volume.spec?.claimRef, {
      apiVersion: "v1",
      kind: "PersistentVolumeClaim",
      namespace: "ns",
      name: "data-0",
      uid: "uid-data-0",
    });
    assert.equal(a.volume.metadata.annotations?.["pv.kubernetes.io/provisioned-by"], LOCAL_PROVISIONER);
  });

  it("leaves alone claims that are bound, deleted, selective, block, or already have a volume", () => {
    const existing: PersistentVolume = {
      apiVersion: "v1",
      kind: "PersistentVolume",
      metadata: { name: "pvc-uid-b" },
    };
    const deleting = claim("d");
    deleting.metadata.deletionTimestamp = "2026-01-01T00:00:00Z";
    const actions = planVolumes(
      [
        claim("bound", {}, "Bound"),
        claim("named", { volumeName: "pv-x" }),
        claim("sel", { selector: { matchLabels: { a: "b" } } }),
        claim("blk", { volumeMode: "Block" }),
        claim("b"),
        deleting,
      ],
      [existing],
      [standard],
      dir,
    );
    assert.deepEqual(actions, []);
  });

  it("waits for the scheduler's node choice with WaitForFirstConsumer, then pins the volume to it", () => {
    const waiting = claim("w", { storageClassName: "lazy" });
    assert.deepEqual(planVolumes([waiting], [], [lazy], dir), []);
    waiting.metadata.annotations = { "volume.kubernetes.io/selected-node": "opkit-node-1" };
    const [a] = planVolumes([waiting], [], [lazy], dir);
    assert.ok(a?.type === "create");
    assert.equal(a.volume.spec?.persistentVolumeReclaimPolicy, "Retain");
    assert.match(JSON.stringify(a.volume.spec?.nodeAffinity), /"values":\["opkit-node-1"\]/);
  });

  it("deletes its own Released volumes with policy Delete, and only directories inside the env", () => {
    const pv = (
      name: string,
      phase: NonNullable<NonNullable<PersistentVolume["status"]>["phase"]>,
      policy: NonNullable<NonNullable<PersistentVolume["spec"]>["persistentVolumeReclaimPolicy"]>,
      path: string,
      by = LOCAL_PROVISIONER,
    ): PersistentVolume => ({
      apiVersion: "v1",
      kind: "PersistentVolume",
      metadata: { name, annotations: { "pv.kubernetes.io/provisioned-by": by } },
      spec: { persistentVolumeReclaimPolicy: policy, hostPath: { path } },
      status: { phase },
    });
    const actions = planVolumes(
      [],
      [
        pv("gone", "Released", "Delete", `${dir}/gone`),
        pv("escape", "Released", "Delete", `${dir}/../../../etc`),
        pv("kept", "Released", "Retain", `${dir}/kept`),
        pv("bound", "Bound", "Delete", `${dir}/bound`),
        pv("foreign", "Released", "Delete", `${dir}/foreign`, "csi.example.com"),
      ],
      [standard],
      dir,
    );
    assert.deepEqual(actions, [
      { type: "delete", name: "gone", dir: `${dir}/gone` },
      { type: "delete", name: "escape", dir: undefined },
    ]);
  });
});
