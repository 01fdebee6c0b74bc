import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { KubeObject } from "../client/types.ts";
import { registerKind } from "../client/scopes.ts";
import {
  AlreadyOwnedError,
  OwnerReferenceError,
  getControllerOf,
  isControlledBy,
  setControllerReference,
} from "./ownerrefs.ts";

const app = (ns: string | undefined, uid = "uid-app"): KubeObject => ({
  apiVersion: "example.com/v1",
  kind: "App",
  metadata: { name: "web", namespace: ns, uid },
});
const cm = (ns: string | undefined, extra: Partial<KubeObject["metadata"]> = {}): KubeObject => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { name: "cfg", namespace: ns, ...extra },
});

const NS = { ownerNamespaced: true, childNamespaced: true };

describe("setControllerReference", () => {
  it("sets a controller reference that blocks owner deletion by default", () => {
    const child = setControllerReference(app("a"), cm("a"), NS);
    assert.deepEqual(child.metadata.ownerReferences, [
      {
        apiVersion: "example.com/v1",
        kind: "App",
        name: "web",
        uid: "uid-app",
        controller: true,
        blockOwnerDeletion: true,
      },
    ]);
    assert.equal(getControllerOf(child)?.uid, "uid-app");
    assert.equal(isControlledBy(child, app("a")), true);
    assert.equal(isControlledBy(child, app("a", "other")), false);
    const unblocked = setControllerReference(app("a"), cm("a"), { ...NS, blockOwnerDeletion: false });
    assert.equal(unblocked.metadata.ownerReferences?.[0]?.blockOwnerDeletion, false);
  });

  it("requires the owner's uid", () => {
    const owner = app("a");
    delete owner.metadata.uid;
    assert.throws(() => setControllerReference(owner, cm("a"), NS), OwnerReferenceError);
  });

  it("refuses a cross-namespace reference, naming both objects and the rule", () => {
    assert.throws(
      () => setControllerReference(app("a"), cm("b"), NS),
      (err: unknown) =>
        err instanceof OwnerReferenceError &&
        err.message.includes("App a/web") &&
        err.message.includes("ConfigMap b/cfg") &&
        err.message.includes("cross-namespace"),
    );
    assert.throws(() => setControllerReference(app("a"), cm(undefined), NS), OwnerReferenceError);
  });

  it("refuses a namespaced owner for a cluster-scoped child", () => {
    const ns: KubeObject = { apiVersion: "v1", kind: "Namespace", metadata: { name: "team" } };
    assert.throws(
      () => setControllerReference(app("a"), ns, { ownerNamespaced: true, childNamespaced: false }),
      /namespaced owner cannot own a cluster-scoped object/,
    );
  });

  it("lets a cluster-scoped owner own namespaced and cluster-scoped children", () => {
    const owner = app(undefined);
    const namespaced = setControllerReference(owner, cm("any"), {
      ownerNamespaced: false,
      childNamespaced: true,
    });
    assert.equal(getControllerOf(namespaced)?.uid, "uid-app");
    const ns: KubeObject = { apiVersion: "v1", kind: "Namespace", metadata: { name: "team" } };
    const cluster = setControllerReference(owner, ns, { ownerNamespaced: false, childNamespaced: false });
    assert.equal(getControllerOf(cluster)?.uid, "uid-app");
  });

  it("refuses a child controlled by another owner with AlreadyOwnedError", () => {
    const child = cm("a", {
      ownerReferences: [
        { apiVersion: "apps/v1", kind: "Deployment", name: "other", uid: "uid-other", controller: true },
      ],
    });
    assert.throws(
      () => setControllerReference(app("a"), child, NS),
      (err: unknown) =>
        err instanceof AlreadyOwnedError &&
        err.existing.uid === "uid-other" &&
        err instanceof OwnerReferenceError,
    );
  });

  it("replaces a reference to the same owner (recreated owner, other version) and keeps other owners", () => {
    const child = cm("a", {
      ownerReferences: [
        { apiVersion: "example.com/v1beta1", kind: "App", name: "web", uid: "old-uid", controller: true },
        { apiVersion: "v1", kind: "Secret", name: "s", uid: "uid-secret" },
      ],
    });
    setControllerReference(app("a"), child, NS);
    assert.deepEqual(
      child.metadata.ownerReferences?.map((r) => [r.kind, r.uid, r.controller ?? false]),
      [
        ["Secret", "uid-secret", false],
        ["App", "uid-app", true],
      ],
    );
    // Idempotent: setting again changes nothing.
    const again = structuredClone(child);
    setControllerReference(app("a"), again, NS);
    assert.deepEqual(again, child);
  });

  it("getControllerOf ignores non-controller references", () => {
    const child = cm("a", { ownerReferences: [{ apiVersion: "v1", kind: "Secret", name: "s", uid: "u" }] });
    assert.equal(getControllerOf(child), undefined);
    assert.equal(isControlledBy(child, app("a", "u")), false);
  });
});

describe("setControllerReference without options (as controller-runtime users call it)", () => {
  it("takes scopes from built-in kinds, never a TypeError", () => {
    const ns = { apiVersion: "v1", kind: "Namespace", metadata: { name: "team-a", uid: "uid-ns" } };
    const quota: KubeObject = {
      apiVersion: "v1",
      kind: "ResourceQuota",
      metadata: { name: "q", namespace: "team-a" },
    };
    assert.equal(setControllerReference(ns, quota).metadata.ownerReferences?.[0]?.uid, "uid-ns");
    const pod = { apiVersion: "v1", kind: "Pod", metadata: { name: "p", namespace: "a", uid: "uid-pod" } };
    const node: KubeObject = { apiVersion: "v1", kind: "Node", metadata: { name: "n1" } };
    assert.throws(
      () => setControllerReference(pod, node),
      OwnerReferenceError,
      "a namespaced owner of a Node",
    );
    assert.throws(
      () => setControllerReference(app("a"), cm("b")),
      /cross-namespace/,
      "an unknown owner kind read from the server carries its namespace",
    );
  });

  it("takes scopes from kinds registered by defineKind or discovery", () => {
    registerKind(
      { apiVersion: "tenancy.example.com/v1", kind: "Tenant" },
      { resource: "tenants", scope: "Cluster" },
    );
    const tenant = {
      apiVersion: "tenancy.example.com/v1",
      kind: "Tenant",
      metadata: { name: "t", uid: "uid-t" },
    };
    const child = setControllerReference(tenant, cm("x"));
    assert.equal(
      child.metadata.ownerReferences?.[0]?.kind,
      "Tenant",
      "a cluster-scoped owner may own namespaced objects",
    );
  });
});
